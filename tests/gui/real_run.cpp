// Real runs recorded for the GUI tests and the screenshots.
#include "real_run.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "engine/trainer.h"
#include "trace_records.h"
#include "train_recorder.h"
#include "trace_writer.h"
#include "support/cpu_engine.h"

namespace fp8scope::testing {

namespace {
// Passes captures on to the recorder and notes each operand's amax on the way.
struct AmaxTee : CaptureSink {
    AmaxTee(CaptureSink* next, int run, const std::int64_t* step) : next(next), run(run), step(step) {}
    void on_operand(const OperandCapture& o) override {
        float m = 0;
        const float* v = static_cast<const float*>(o.values.data);  // the CPU trainer's float32
        for (std::int64_t i = 0; i < o.values.numel(); ++i) m = std::max(m, std::fabs(v[i]));
        seen.push_back({run, *step, trace::operand_slot(o.linear, o.gemm, o.operand), m});
        next->on_operand(o);
    }
    void on_scaling(const OperandScaling& s) override { next->on_scaling(s); }
    void on_op(const OpTiming& t) override { next->on_op(t); }
    CaptureSink* next;
    int run;
    const std::int64_t* step;
    std::vector<CapturedAmax> seen;  // one tee per run: no lock across run threads
};
}  // namespace

std::vector<fp8scope::StepRecord> train_and_record(const std::string& path, const TrainConfig& config,
                                                   std::int64_t blockmap_every, std::vector<CapturedAmax>* amax) {
    CpuTrainer trainer(config);
    const trace::TraceMeta meta = trace::make_trace_meta(config, trainer.model(0).linears(), "test", blockmap_every);
    struct Keep : TrainObserver {
        std::vector<fp8scope::StepRecord> seen;
        std::int64_t step = 0;
        void on_step_begin(std::int64_t s, bool) override { step = s; }
        void on_step(const fp8scope::StepRecord& r) override { seen.push_back(r); }
    } keep;
    trace::TraceWriter writer(path, meta);
    trace::TrainRecorder recorder(meta, writer);
    trainer.add_observer(&recorder);
    trainer.add_observer(&keep);
    std::vector<std::unique_ptr<AmaxTee>> tees;
    for (int r = 0; r < trainer.runs(); ++r) {
        tees.push_back(std::make_unique<AmaxTee>(recorder.sink(r), r, &keep.step));
        trainer.set_capture_sink(r, amax ? tees.back().get() : recorder.sink(r));
    }
    trainer.run();
    writer.close();
    if (amax)
        for (const auto& t : tees) amax->insert(amax->end(), t->seen.begin(), t->seen.end());
    return keep.seen;
}

TrainConfig tiny_compare_config(std::int64_t steps) {
    TrainConfig c;
    c.model.n_layer = 2;
    c.model.d_model = 64;
    c.model.n_head = 2;
    c.model.max_seq = 32;
    c.compare = {"baseline", "delayed", "blockwise", "mxfp8"};
    c.steps = steps;
    c.batch_size = 4;
    c.seq_len = 32;
    c.capture_every = 10;
    c.eval.every = 20;
    c.eval.batches = 2;
    c.schedule.warmup_steps = 10;
    c.data.corpus_bytes = 1 << 16;
    return c;
}

}  // namespace fp8scope::testing
