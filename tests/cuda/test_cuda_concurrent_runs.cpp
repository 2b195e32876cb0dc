// The runs of a step at once (Trainer on the CUDA backend's lanes) against the same runs
// one after another: the same losses, gradient norms, events, parameters, moments and
// scaling state bit for bit, the capture sinks told the same things in the same order,
// and every kernel attributed to the run and op that launched it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "engine/trainer.h"
#include "gpu_test.h"

namespace fp8scope {
namespace {

std::uint32_t bits(float x) {
    std::uint32_t b;
    std::memcpy(&b, &x, sizeof b);
    return b;
}

// Three recipes x 4 seeds of a small model, with evaluations and snapshots between steps.
TrainConfig seeded() {
    TrainConfig c;
    c.device = "cuda";
    c.compare = {"baseline", "current", "delayed"};
    c.seeds = 4;
    c.model.n_layer = 2, c.model.d_model = 64, c.model.n_head = 4, c.model.max_seq = 32;
    c.seq_len = 32, c.batch_size = 8, c.steps = 9;
    c.data.corpus_bytes = 1 << 18;
    c.eval.every = 4, c.eval.batches = 2;
    c.rewind.snapshot_every = 3;
    return c;
}

// Everything the sinks of all runs hear, in order, one line per call.
struct Heard {
    std::mutex mu;
    std::vector<std::string> lines;
    std::map<std::uint64_t, std::pair<int, std::string>> scopes;  // op scope -> run, op
    void add(std::string line) {
        std::lock_guard lock(mu);
        lines.push_back(std::move(line));
    }
};

struct RunSink : CaptureSink {
    RunSink(Heard& h, int r) : heard(h), run(r) {}
    void on_operand(const OperandCapture& o) override {
        heard.add(std::to_string(run) + " operand " + std::to_string(o.linear) + " " + std::string(gemm_name(o.gemm)) +
                  " " + std::string(operand_name(o.operand)));
    }
    void on_scaling(const OperandScaling& s) override {
        heard.add(std::to_string(run) + " scaling " + std::to_string(s.linear) + " " +
                  std::string(operand_name(s.operand)) + " " + std::to_string(bits(s.cast.amax)) + " " +
                  std::to_string(bits(s.cast.scale)) + " " + std::to_string(s.cast.overflow));
    }
    void on_op(const OpTiming& t) override {
        heard.add(std::to_string(run) + " op " + std::string(t.op) + " " + std::to_string(t.layer) + " " +
                  std::to_string(t.linear) + " " + std::to_string(t.operand));
        std::lock_guard lock(heard.mu);
        heard.scopes[t.scope] = {run, std::string(t.op)};
    }
    Heard& heard;
    int run;
};

struct Observed : TrainObserver {
    void on_step(const StepRecord& r) override {
        char line[160];
        std::snprintf(line, sizeof line, "step %lld run %d loss %08x norm %.17g eval %08x", (long long)r.step, r.run,
                      bits(r.loss), r.grad_norm, r.eval_loss ? bits(*r.eval_loss) : 0u);
        lines.push_back(line);
    }
    void on_event(const TrainEvent& e) override {
        lines.push_back("event " + std::to_string(int(e.kind)) + " step " + std::to_string(e.step) + " run " +
                        std::to_string(e.run) + ": " + e.detail);
    }
    std::vector<std::string> lines;
};

struct Kernels : KernelListener {
    void on_kernels(const KernelTiming* t, std::size_t n) override {
        std::lock_guard lock(mu);
        for (std::size_t i = 0; i < n; ++i)
            if (t[i].kind == KernelTiming::Kind::Kernel) list.push_back({std::string(t[i].name), t[i].scope});
    }
    std::mutex mu;
    std::vector<std::pair<std::string, std::uint64_t>> list;  // name, scope
};

// Step beginnings and events among the sinks' calls: where a difference lies.
struct Marks : TrainObserver {
    explicit Marks(Heard& h) : heard(h) {}
    void on_step_begin(std::int64_t step, bool capture) override {
        heard.add("begin step " + std::to_string(step) + (capture ? " (capture)" : ""));
    }
    void on_event(const TrainEvent& e) override {
        heard.add("event " + std::to_string(int(e.kind)) + " run " + std::to_string(e.run) + ": " + e.detail);
    }
    Heard& heard;
};

struct Flush : TrainObserver {
    explicit Flush(Backend& b) : backend(b) {}
    void on_step(const StepRecord&) override { backend.flush_kernels(); }
    Backend& backend;
};

struct Trained {
    std::vector<std::string> observed, heard;
    TrainState state;
    TrainSummary summary;
    int lanes = 0;
    // Per run: "op kernel" of every kernel of its ops, sorted; kernels of no run's op apart.
    std::map<int, std::vector<std::string>> kernels;
    std::size_t unattributed = 0;
    bool traced = false;
};

Trained train(TrainConfig c, bool concurrent, const std::function<void(Trainer&)>& setup = {}, bool sinks = true,
              bool trace = false) {
    c.concurrent_runs = concurrent;
    CudaBackend gpu;
    Trained out;
    Kernels kernels;
    if (trace) out.traced = gpu.trace_kernels(&kernels).empty();
    Heard heard;
    std::vector<std::unique_ptr<RunSink>> run_sinks;
    {
        Trainer t(c, gpu);
        Observed observed;
        Flush flush(gpu);
        Marks marks(heard);
        t.add_observer(&observed);
        t.add_observer(&marks);
        if (out.traced) t.add_observer(&flush);
        for (int r = 0; sinks && r < t.runs(); ++r) {
            run_sinks.push_back(std::make_unique<RunSink>(heard, r));
            t.set_capture_sink(r, run_sinks.back().get());
        }
        if (setup) setup(t);
        out.summary = t.run();
        out.state = t.state();
        out.observed = observed.lines;
    }
    if (out.traced) {
        gpu.flush_kernels();
        gpu.trace_kernels(nullptr);
        for (const auto& [name, scope] : kernels.list) {
            auto it = heard.scopes.find(scope);
            if (it == heard.scopes.end()) ++out.unattributed;
            else out.kernels[it->second.first].push_back(it->second.second + " " + name);
        }
        for (auto& [run, list] : out.kernels) std::sort(list.begin(), list.end());
    }
    out.heard = heard.lines;
    out.lanes = gpu.lanes_made();
    return out;
}

void expect_same(const Trained& together, const Trained& apart) {
    ASSERT_EQ(together.summary.error, apart.summary.error);
    EXPECT_EQ(together.summary.steps, apart.summary.steps);
    EXPECT_EQ(together.summary.rewinds, apart.summary.rewinds);
    EXPECT_EQ(together.observed, apart.observed);  // losses, norms, eval losses, events, in order
    // Op timings and cast figures, in order; the first difference shown with what led to it.
    EXPECT_EQ(together.heard.size(), apart.heard.size());
    const auto [t, a] = std::mismatch(together.heard.begin(), together.heard.end(), apart.heard.begin(), apart.heard.end());
    if (t != together.heard.end() || a != apart.heard.end()) {
        const auto at = std::size_t(t - together.heard.begin());
        std::string context;
        for (std::size_t k = at > 40 ? at - 40 : 0; k < at + 30; ++k)
            context += "\n  " + std::to_string(k) + ": " + (k < together.heard.size() ? together.heard[k] : "-") +
                       "  |  " + (k < apart.heard.size() ? apart.heard[k] : "-");
        // The marks before it in each: which step, after which events.
        for (const auto* list : {&together.heard, &apart.heard}) {
            context += "\n marks before it in " + std::string(list == &apart.heard ? "one after another" : "at once") + ":";
            for (std::size_t k = 0; k < std::min(at, list->size()); ++k)
                if ((*list)[k].rfind("begin", 0) == 0 || (*list)[k].rfind("event", 0) == 0) context += "\n  " + std::to_string(k) + ": " + (*list)[k];
        }
        ADD_FAILURE() << "the sinks heard different calls from call " << at << " on (at once | one after another):"
                      << context;
    }
    ASSERT_EQ(together.state.runs.size(), apart.state.runs.size());
    for (std::size_t r = 0; r < apart.state.runs.size(); ++r) {
        const RunState &a = together.state.runs[r], &b = apart.state.runs[r];
        EXPECT_TRUE(a.params == b.params) << "run " << r << "'s parameters";
        EXPECT_TRUE(a.m == b.m && a.v == b.v) << "run " << r << "'s AdamW moments";
        EXPECT_EQ(a.adam_steps, b.adam_steps) << "run " << r;
        EXPECT_EQ(a.recipe_state, b.recipe_state) << "run " << r << "'s scaling state";
    }
}

TEST(CudaConcurrentRuns, SeedsAtOnceTrainBitForBitAsOneAfterAnother) {
    FP8SCOPE_REQUIRE_GPU();
    const TrainConfig c = seeded();
    const Trained apart = train(c, false), together = train(c, true);
    ASSERT_TRUE(apart.summary.error.empty()) << apart.summary.error;
    EXPECT_EQ(apart.lanes, 0) << "off: no lanes";
    EXPECT_GT(together.lanes, 1) << "on: the runs went in lanes";
    const auto step_records = std::count_if(apart.observed.begin(), apart.observed.end(),
                                            [](const std::string& line) { return line.rfind("step ", 0) == 0; });
    EXPECT_EQ(step_records, c.steps * 12) << "a record per run and step";
    expect_same(together, apart);
    // Different seeds train differently: the comparison is not of twelve copies of one run.
    EXPECT_NE(apart.state.runs[0].params, apart.state.runs[1].params);
}

TEST(CudaConcurrentRuns, RewindsAndCaptureStepsKeepTheOrderOfOneAfterAnother) {
    FP8SCOPE_REQUIRE_GPU();
    TrainConfig c = seeded();
    c.steps = 12;
    c.capture_every = 4;  // steps 1, 5, 9 capture: their runs go one after another
    c.rewind.window = 3;
    auto faults = [](Trainer& t) {
        t.corrupt_params_at_batch(6, std::nanf(""));  // every run's loss is NaN: run 0 rewinds
        t.corrupt_params_at_batch(10, 40.0f);         // a loss spike
    };
    const Trained apart = train(c, false, faults), together = train(c, true, faults);
    ASSERT_TRUE(apart.summary.error.empty()) << apart.summary.error;
    EXPECT_GE(apart.summary.rewinds, 1);
    const auto operand = [](const std::string& line) { return line.find(" operand ") != std::string::npos; };
    EXPECT_TRUE(std::any_of(apart.heard.begin(), apart.heard.end(), operand)) << "capture steps captured";
    EXPECT_GT(together.lanes, 1);
    expect_same(together, apart);
}

TEST(CudaConcurrentRuns, KernelsAreAttributedToTheRunAndOpThatLaunchedThem) {
    FP8SCOPE_REQUIRE_GPU();
    TrainConfig c = seeded();
    c.steps = 4;
    const Trained apart = train(c, false, {}, true, true);
    if (!apart.traced) GTEST_SKIP() << "CUPTI kernel tracing is not available here";
    const Trained together = train(c, true, {}, true, true);
    ASSERT_TRUE(together.traced);
    EXPECT_GT(together.lanes, 1);
    ASSERT_EQ(apart.kernels.size(), 12u) << "every run's ops launched kernels";
    // The same kernels under each run's ops, whichever thread and stream launched them.
    EXPECT_EQ(together.kernels, apart.kernels);
    EXPECT_EQ(together.unattributed, apart.unattributed);
}

}  // namespace
}  // namespace fp8scope
