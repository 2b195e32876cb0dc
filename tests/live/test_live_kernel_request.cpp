// "Record the next N steps": a live client's RecordKernels command reaches a training
// run (apply_command -> Trainer::record_kernels), which applies it between steps: a
// kernel_timing event names the steps, and the recorder keeps every kernel record of
// exactly those N steps. The CPU backend has no kernels, so each step feeds the recorder
// one synthetic kernel, as a GPU tracer would.
#include <gtest/gtest.h>

#include <set>

#include "engine/train_config.h"
#include "engine/trainer.h"
#include "kernel_recorder.h"
#include "live_control.h"
#include "capture/vector_sink.h"
#include "live_test_util.h"
#include "support/cpu_engine.h"

namespace fp8scope::live::test {
namespace {

using fp8scope::testing::CpuTrainer;

// Stands in for the trace recorder's kernel side: a kernel per step, the requests passed on.
struct KernelFeed : TrainObserver {
    trace::VectorSink sink;
    trace::OpNames names{{"fprop"}};
    trace::KernelRecorder recorder{sink, names, trace::KernelPolicy::parse("capture", 0)};
    std::vector<TrainEvent> events;

    void on_step_begin(std::int64_t step, bool capture) override {
        recorder.begin_step(step, capture);
        const KernelTiming t{KernelTiming::Kind::Kernel, "gemm", 0, 0, step * 100, step * 100 + 10, 0, 0};
        recorder.on_kernels(&t, 1);
    }
    void on_kernel_request(std::int64_t steps) override { recorder.request(steps); }
    void on_event(const TrainEvent& e) override { events.push_back(e); }
};

TEST(LiveKernelRequest, TheNextNStepsKeepTheirRecords) {
    TempDir dir;
    TrainConfig config = load_train_config(std::string(FP8SCOPE_CONFIGS) + "/tiny.json");
    apply_overrides(config, {"steps=6", "capture_every=0", "threads=1"});
    CpuTrainer trainer(config);
    KernelFeed feed;
    trainer.add_observer(&feed);
    LiveServer server(parse_endpoint("unix:" + (dir / "engine.sock")), "", trace::TraceMeta{},
                      [&](const Command& c) { return apply_command(trainer, c); });
    Collected got;
    LiveClient client(server.endpoint(), "", got.handlers());
    const CommandReply refused = client.send({CommandKind::RecordKernels, -1, "", 0});
    EXPECT_FALSE(refused.ok);
    EXPECT_NE(refused.error.find("kernel records of 0 steps"), std::string::npos) << refused.error;
    const CommandReply ok = client.send({CommandKind::RecordKernels, -1, "", 3});
    ASSERT_TRUE(ok.ok) << ok.error;
    client.close();
    EXPECT_EQ(trainer.run().steps, 6);
    feed.recorder.flush();

    std::set<std::int64_t> kept;
    for (const trace::OpRecord& r : feed.sink.all<trace::OpRecord>()) kept.insert(r.step);
    EXPECT_EQ(kept, (std::set<std::int64_t>{1, 2, 3}));  // asked before step 1
    EXPECT_EQ(feed.sink.all<trace::KernelStepRecord>().size(), 6u);  // every step's sum
    bool said = false;
    for (const TrainEvent& e : feed.events)
        said = said || (e.kind == EventKind::KernelTiming && e.detail == "recording every kernel of steps 1 to 3 (asked live)");
    EXPECT_TRUE(said);
}

}  // namespace
}  // namespace fp8scope::live::test
