// Kernel timing through CUPTI on a real training step: every kernel is attributed to the
// op it was launched in, and the kernels of a step account for the device's busy time
// within the step (no gaps hidden by missing records).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "engine/trainer.h"
#include "gpu_test.h"
#include "util/clock.h"

namespace fp8scope {
namespace {

struct Kernel {
    std::string name;
    KernelTiming::Kind kind;
    std::int64_t start, end;
    std::uint64_t scope;
};

struct Collect : KernelListener, CaptureSink {
    void on_kernels(const KernelTiming* t, std::size_t n) override {
        std::lock_guard lock(mu);
        for (std::size_t i = 0; i < n; ++i)
            kernels.push_back({std::string(t[i].name), t[i].kind, t[i].start_ns, t[i].end_ns, t[i].scope});
    }
    void on_operand(const OperandCapture&) override {}
    void on_op(const OpTiming& t) override { ops[t.scope] = std::string(t.op); }
    std::mutex mu;
    std::vector<Kernel> kernels;
    std::map<std::uint64_t, std::string> ops;  // scope -> op name
};

// Host time of each step, and a flush of the kernels after it.
struct Steps : TrainObserver {
    explicit Steps(Backend& b) : backend(b) {}
    void on_step_begin(std::int64_t, bool) override { begin.push_back(now_ns()); }
    void on_step(const StepRecord&) override {
        backend.flush_kernels();
        end.push_back(now_ns());
    }
    Backend& backend;
    std::vector<std::int64_t> begin, end;
};

TEST(CudaKernelTiming, AStepsKernelsAreAttributedAndAccountForItsDeviceTime) {
    FP8SCOPE_REQUIRE_GPU();
    TrainConfig c;
    c.device = "cuda";
    c.recipe = "current";
    // Large enough that the device, not the host, sets the pace (8 layers of 2048).
    c.model.n_layer = 8, c.model.d_model = 2048, c.model.n_head = 16, c.model.max_seq = 1024;
    c.seq_len = 1024, c.batch_size = 8, c.steps = 3;
    c.data.corpus_bytes = 1 << 22;
    c.eval.every = 0;
    CudaBackend gpu;
    Collect collect;
    const std::string why = gpu.trace_kernels(&collect);
    ASSERT_EQ(why, "") << "CUPTI works on the GPU machine";
    Trainer t(c, gpu);
    t.set_capture_sink(0, &collect);
    Steps steps(gpu);
    t.add_observer(&steps);
    const TrainSummary s = t.run();
    gpu.trace_kernels(nullptr);
    ASSERT_TRUE(s.error.empty()) << s.error;
    ASSERT_EQ(steps.end.size(), 3u);

    // The second step (the first creates GEMM plans; the last evaluates): kernels that
    // ran within its host window.
    const std::int64_t b = steps.begin[1], e = steps.end[1];
    std::vector<Kernel> step;
    for (const Kernel& k : collect.kernels)
        if (k.start >= b && k.end <= e) step.push_back(k);
    ASSERT_GT(step.size(), 50u);
    std::set<std::string> parents;
    std::size_t scoped = 0;
    for (const Kernel& k : step) {
        EXPECT_LE(k.start, k.end) << k.name;
        auto it = collect.ops.find(k.scope);
        if (it == collect.ops.end()) continue;
        ++scoped;
        parents.insert(it->second);
    }
    EXPECT_GE(double(scoped) / double(step.size()), 0.95) << "kernels outside any op";
    for (const char* op : {"fprop", "dgrad", "wgrad", "quantize", "attention", "optimizer", "head", "softmax_ce"})
        EXPECT_TRUE(parents.count(op)) << op << " has no kernels";

    // Busy time: the union of the kernel intervals over the span from the first kernel's
    // start to the last one's end. One stream: kernels do not overlap.
    std::sort(step.begin(), step.end(), [](const Kernel& x, const Kernel& y) { return x.start < y.start; });
    std::int64_t busy = 0, sum = 0, reach = step.front().start;
    for (const Kernel& k : step) {
        sum += k.end - k.start;
        const std::int64_t from = std::max(reach, k.start);
        if (k.end > from) busy += k.end - from;
        reach = std::max(reach, k.end);
    }
    const double span = double(step.back().end - step.front().start);
    const double host = double(e - b);
    std::printf("[ kernels  ] step 2: %zu records, kernels %.2f ms busy of %.2f ms span (%.1f%%), host step %.2f ms\n",
                step.size(), busy * 1e-6, span * 1e-6, 100.0 * busy / span, host * 1e-6);
    EXPECT_LE(busy, sum);
    EXPECT_LE(span, host);
    // The device idles only where the host waits for a number (the loss, the gradient
    // norm) and launches again: 85% busy on an H200 at this size. A missing record would
    // show as a larger gap.
    EXPECT_GE(busy / span, 0.80) << "the device idles, or records are missing";
}

}  // namespace
}  // namespace fp8scope
