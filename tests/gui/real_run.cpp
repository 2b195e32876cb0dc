// Real runs recorded for the GUI tests and the screenshots.
#include "real_run.h"

#include "engine/trainer.h"
#include "train_recorder.h"
#include "trace_writer.h"

namespace fp8scope::testing {

std::vector<fp8scope::StepRecord> train_and_record(const std::string& path, const TrainConfig& config,
                                                   std::int64_t blockmap_every) {
    Trainer trainer(config);
    const trace::TraceMeta meta = trace::make_trace_meta(config, trainer.model(0).linears(), "test", blockmap_every);
    struct Keep : TrainObserver {
        std::vector<fp8scope::StepRecord> seen;
        void on_step(const fp8scope::StepRecord& r) override { seen.push_back(r); }
    } keep;
    trace::TraceWriter writer(path, meta);
    trace::TrainRecorder recorder(meta, writer);
    trainer.add_observer(&recorder);
    trainer.add_observer(&keep);
    for (int r = 0; r < trainer.replicas(); ++r) trainer.set_capture_sink(r, recorder.sink(r));
    trainer.run();
    writer.close();
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
