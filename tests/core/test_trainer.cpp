// The training loop end to end on a tiny model: the loss falls, runs are bitwise
// reproducible, lock-step runs under one recipe stay identical, a resumed checkpoint
// continues bit for bit, an injected NaN is rewound, and control requests from another
// thread arrive between steps.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/trainer.h"
#include "support/cpu_engine.h"
#include "support/tiny_config.h"
#include "support/train_recorder.h"

using namespace fp8scope;
namespace fs = std::filesystem;

namespace {

using fp8scope::testing::CpuModel;
using fp8scope::testing::CpuTrainer;
using fp8scope::testing::Recorder;

// The tiny run on one layer and two threads, with what these tests count on: warmup of 5
// steps (the first step's learning rate), eval every 20 steps, snapshots every 10 (the
// steps rewinds go back to).
TrainConfig tiny(int steps = 40) {
    TrainConfig c = fp8scope::testing::tiny_config(steps);
    c.model.n_layer = 1;
    c.schedule.warmup_steps = 5;
    c.schedule.min_lr = 1e-3f;
    c.eval.every = 20;
    c.threads = 2;
    c.rewind.snapshot_every = 10;
    c.seed = 11;
    return c;
}

std::vector<float> params_of(Trainer& t, int run = 0) {
    auto p = t.model(run).params();
    return {p.begin(), p.end()};
}

fs::path temp_dir(const std::string& name) {
    fs::path d = fs::temp_directory_path() / ("fp8scope_trainer_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(d);
    return d;
}

}  // namespace

TEST(Trainer, LossFallsAndEvalLossIsReported) {
    TrainConfig c = tiny(60);
    CpuTrainer t(c);
    float before = t.evaluate()[0];
    Recorder rec;
    t.add_observer(&rec);
    TrainSummary s = t.run();
    EXPECT_EQ(s.steps, 60);
    EXPECT_TRUE(s.error.empty()) << s.error;
    ASSERT_EQ(rec.steps.size(), 60u);
    ASSERT_TRUE(s.runs[0].eval_loss.has_value());
    EXPECT_LT(*s.runs[0].eval_loss, before - 1.0f) << "eval loss " << before << " -> " << *s.runs[0].eval_loss;
    EXPECT_NEAR(before, std::log(256.0f), 0.5f);  // an untrained byte-level model is near uniform
    // eval losses at steps 20, 40, 60 only
    int evals = 0;
    for (auto& r : rec.steps) evals += r.eval_loss.has_value();
    EXPECT_EQ(evals, 3);
    EXPECT_TRUE(rec.steps[19].eval_loss.has_value());
    EXPECT_EQ(rec.steps[0].step, 1);
    EXPECT_GT(rec.steps[0].tokens_per_s, 0.0);
    EXPECT_FLOAT_EQ(rec.steps[0].lr, 1e-2f / 5);  // warmup
}

TEST(Trainer, SameSeedSameThreadsGivesBitwiseIdenticalRuns) {
    CpuTrainer a(tiny(15)), b(tiny(15));
    a.run();
    b.run();
    EXPECT_EQ(params_of(a), params_of(b));
    TrainConfig other = tiny(15);
    other.seed = 12;
    CpuTrainer c(other);
    c.run();
    EXPECT_NE(params_of(a), params_of(c));
}

TEST(Trainer, LockStepReplicasUnderTheSameRecipeStayIdentical) {
    TrainConfig c = tiny(20);
    c.compare = {"baseline", "baseline", "delayed"};
    CpuTrainer t(c);
    EXPECT_EQ(params_of(t, 0), params_of(t, 2));  // identical initial weights, any recipe
    Recorder rec;
    t.add_observer(&rec);
    TrainSummary s = t.run();
    ASSERT_EQ(s.runs.size(), 3u);
    EXPECT_EQ(rec.losses(0), rec.losses(1));
    EXPECT_EQ(params_of(t, 0), params_of(t, 1));
    EXPECT_EQ(s.runs[2].recipe, "delayed");
    for (auto& r : rec.steps) EXPECT_EQ(r.batch, static_cast<std::uint64_t>(r.step - 1));  // one batch per step
}

TEST(Trainer, ResumedCheckpointContinuesBitForBit) {
    fs::path dir = temp_dir("resume");
    TrainConfig c = tiny(30);
    c.compare = {"baseline", "delayed"};
    CpuTrainer whole(c);
    Recorder whole_rec;
    whole.add_observer(&whole_rec);
    whole.run();

    CpuTrainer first(c);
    for (int i = 0; i < 13; ++i) first.step();
    std::string path = (dir / "mid.ckpt").string();
    first.save_checkpoint(path);

    TrainConfig resumed_config = c;
    resumed_config.checkpoint.resume = path;
    CpuTrainer second(resumed_config);
    EXPECT_EQ(second.steps_done(), 13);
    Recorder second_rec;
    second.add_observer(&second_rec);
    second.run();
    for (int r = 0; r < 2; ++r) EXPECT_EQ(params_of(second, r), params_of(whole, r)) << "run " << r;
    auto tail = whole_rec.losses(1);
    tail.erase(tail.begin(), tail.begin() + 13);
    EXPECT_EQ(second_rec.losses(1), tail);
    fs::remove_all(dir);
}

TEST(Trainer, CheckpointsAreWrittenInTheBackgroundAndTheLastIsCheckedOnLanding) {
    fs::path dir = temp_dir("landing");
    TrainConfig c = tiny(12);
    c.compare = {"baseline", "delayed"};
    c.checkpoint.dir = dir.string();
    c.checkpoint.every = 5;
    CpuTrainer t(c);
    Recorder rec;
    t.add_observer(&rec);
    t.run();
    // Each write is reported once it is on disk: steps 5 and 10, and the final one.
    std::vector<std::string> written;
    for (const std::string& path : rec.details(EventKind::Checkpoint))
        written.push_back(fs::path(path).filename().string());
    EXPECT_EQ(written, (std::vector<std::string>{"step_5.ckpt", "step_10.ckpt", "step_12.ckpt"}));
    // The step-5 file holds step 5 although training went on while it was written.
    EXPECT_EQ(load_checkpoint((dir / "step_5.ckpt").string()).step, 5);
    const TrainState last = load_checkpoint((dir / "step_12.ckpt").string());
    EXPECT_EQ(last.runs[1].params, t.state().runs[1].params);
    ASSERT_EQ(rec.count(EventKind::Health), 1);
    const TrainEvent& landing = rec.events.back();
    EXPECT_EQ(landing.kind, EventKind::Health);
    EXPECT_NE(landing.detail.find("step_12.ckpt reads back intact"), std::string::npos) << landing.detail;
    EXPECT_NE(landing.detail.find("final eval loss " + std::to_string(*t.summary().runs[0].eval_loss)),
              std::string::npos) << landing.detail;
    EXPECT_EQ(rec.count(EventKind::Error), 0);
    fs::remove_all(dir);
}

TEST(Trainer, ACheckpointThatCannotBeWrittenIsReportedAndFailsTheLandingCheck) {
    fs::path dir = temp_dir("unwritable");
    fs::create_directories(dir);
    std::ofstream(dir / "file") << "not a directory";
    TrainConfig c = tiny(3);
    c.checkpoint.dir = (dir / "file").string();
    CpuTrainer t(c);
    Recorder rec;
    t.add_observer(&rec);
    t.run();
    ASSERT_EQ(rec.count(EventKind::Error), 2) << "the write, then the landing check";
    const std::vector<std::string> errors = rec.details(EventKind::Error);
    EXPECT_EQ(errors[0].rfind("checkpoint " + (dir / "file" / "step_3.ckpt").string() + ": ", 0), 0u) << errors[0];
    EXPECT_NE(errors[1].find("is not the trained state"), std::string::npos) << errors[1];
    fs::remove_all(dir);
}

TEST(Trainer, ResumeIntoADifferentModelIsAClearError) {
    fs::path dir = temp_dir("mismatch");
    CpuTrainer t(tiny(2));
    std::string path = (dir / "a.ckpt").string();
    t.save_checkpoint(path);
    TrainConfig other = tiny(2);
    other.model.d_model = 64;
    other.checkpoint.resume = path;
    try {
        CpuTrainer u(other);
        FAIL();
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("parameters"), std::string::npos) << e.what();
    }
    fs::remove_all(dir);
}

TEST(Trainer, InjectedNanRewindsToTheLastGoodStateAndSkipsTheBatch) {
    TrainConfig c = tiny(30);
    CpuTrainer poisoned(c);
    poisoned.corrupt_params_at_batch(17, NAN);  // snapshots every 10 steps: rewinds to step 10
    Recorder rec;
    poisoned.add_observer(&rec);
    TrainSummary s = poisoned.run();
    EXPECT_TRUE(s.error.empty()) << s.error;
    EXPECT_EQ(s.steps, 30);
    EXPECT_EQ(s.rewinds, 1);
    ASSERT_EQ(rec.count(EventKind::NonFinite), 1);
    ASSERT_EQ(rec.count(EventKind::Rewind), 1);
    for (auto& e : rec.events) {
        if (e.kind == EventKind::NonFinite) {
            EXPECT_EQ(e.step, 17);  // 17 steps done when batch 17 failed
        }
        if (e.kind == EventKind::Rewind) {
            EXPECT_EQ(e.step, 10);
            EXPECT_NE(e.detail.find("skipping batch 17"), std::string::npos) << e.detail;
        }
    }
    for (auto& r : rec.steps) EXPECT_TRUE(std::isfinite(r.loss));
    for (float p : params_of(poisoned)) ASSERT_TRUE(std::isfinite(p));

    // The rewound run is exactly a run that never saw batch 17.
    CpuTrainer clean(c);
    clean.skip_batch(17);
    clean.run();
    EXPECT_EQ(params_of(poisoned), params_of(clean));
}

TEST(Trainer, LossSpikeOverTheMovingAverageIsRewound) {
    TrainConfig c = tiny(30);
    c.rewind.window = 5;
    c.rewind.spike_factor = 2.0f;
    CpuTrainer spiked(c);
    spiked.corrupt_params_at_batch(23, 50.0f);  // huge logits: a finite loss far above the average
    Recorder rec;
    spiked.add_observer(&rec);
    TrainSummary s = spiked.run();
    EXPECT_TRUE(s.error.empty()) << s.error;
    EXPECT_EQ(s.rewinds, 1);
    ASSERT_EQ(rec.count(EventKind::LossSpike), 1);
    EXPECT_EQ(rec.count(EventKind::NonFinite), 0);
    for (auto& e : rec.events) {
        if (e.kind == EventKind::Rewind) {
            EXPECT_EQ(e.step, 20);
        }
    }
    CpuTrainer clean(c);
    clean.skip_batch(23);
    clean.run();
    EXPECT_EQ(params_of(spiked), params_of(clean));
}

TEST(Trainer, NanWithoutRewindStopsWithAnError) {
    TrainConfig c = tiny(10);
    c.rewind.enabled = false;
    CpuTrainer t(c);
    t.corrupt_params_at_batch(4, NAN);
    TrainSummary s = t.run();
    EXPECT_EQ(s.steps, 4);
    EXPECT_NE(s.error.find("rewind disabled"), std::string::npos) << s.error;
}

// The requests come from the trainer's own callbacks at fixed steps (pause after step 3,
// stop after step 6), so where each lands does not depend on timing; the test thread
// waits for the Pause event and for run() to return, each with a deadline that fails the
// test saying what did not come.
TEST(Trainer, ControlRequestsFromAnotherThreadApplyBetweenSteps) {
    constexpr std::int64_t kPauseAfter = 3, kStopAfter = 6;
    constexpr auto kDeadline = std::chrono::seconds(60);
    fs::path dir = temp_dir("control");
    TrainConfig c = tiny(100000);
    c.compare = {"baseline", "baseline"};
    CpuTrainer t(c);

    struct Driver : Recorder {
        Trainer* trainer = nullptr;
        std::mutex m;
        std::condition_variable cv;
        std::atomic<std::int64_t> last_step{0};
        bool paused = false, asked_pause = false, asked_stop = false;
        void on_step(const StepRecord& r) override {
            Recorder::on_step(r);
            last_step = r.step;
            std::lock_guard lock(m);
            if (r.step == kPauseAfter && !asked_pause) asked_pause = true, trainer->pause();
            if (r.step == kStopAfter && !asked_stop) asked_stop = true, trainer->stop();
        }
        void on_event(const TrainEvent& e) override {
            Recorder::on_event(e);
            std::lock_guard lock(m);
            if (e.kind == EventKind::Pause) paused = true;
            cv.notify_all();
        }
    } rec;
    rec.trainer = &t;
    t.add_observer(&rec);
    auto run = std::async(std::launch::async, [&] { return t.run(); });
    // On a deadline: stop the trainer so that the test ends, and say what never came.
    const auto give_up = [&](const std::string& what) {
        t.resume();
        t.stop();
        run.wait();
        fs::remove_all(dir);
        return what + " within " + std::to_string(kDeadline.count()) + " s; last step " +
               std::to_string(rec.last_step.load());
    };
    {
        std::unique_lock lock(rec.m);
        if (!rec.cv.wait_for(lock, kDeadline, [&] { return rec.paused; })) {
            lock.unlock();
            FAIL() << give_up("no Pause event after pause() at step " + std::to_string(kPauseAfter));
        }
    }
    const std::int64_t paused_at = rec.last_step;
    EXPECT_EQ(paused_at, kPauseAfter);  // the step the request came in finished; none after
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(rec.last_step, paused_at);  // no step while paused
    t.switch_recipe(1, "delayed");
    t.checkpoint_now((dir / "now.ckpt").string());
    t.resume();
    if (run.wait_for(kDeadline) != std::future_status::ready)
        FAIL() << give_up("run() did not return after stop() at step " + std::to_string(kStopAfter));
    const TrainSummary summary = run.get();

    EXPECT_TRUE(summary.stopped);
    EXPECT_EQ(rec.last_step, kStopAfter);
    EXPECT_EQ(summary.runs[1].recipe, "delayed");
    EXPECT_EQ(rec.count(EventKind::Pause), 1);
    EXPECT_EQ(rec.count(EventKind::Resume), 1);
    EXPECT_EQ(rec.count(EventKind::RecipeSwitch), 1);
    EXPECT_EQ(rec.count(EventKind::Checkpoint), 1);
    EXPECT_EQ(rec.count(EventKind::Stop), 1);
    EXPECT_TRUE(fs::exists(dir / "now.ckpt"));
    EXPECT_EQ(load_checkpoint((dir / "now.ckpt").string()).step, paused_at);
    int run1_steps = 0;
    for (auto& r : rec.steps)
        if (r.run == 1) {
            ++run1_steps;
            EXPECT_EQ(r.recipe, r.step <= paused_at ? "baseline" : "delayed");
        }
    EXPECT_EQ(run1_steps, kStopAfter);
    EXPECT_THROW(t.switch_recipe(5, "delayed"), std::invalid_argument);
    EXPECT_THROW(t.switch_recipe(0, "nonsense"), std::invalid_argument);
    fs::remove_all(dir);
}

TEST(Trainer, CaptureSinkSeesOperandsOnlyOnCaptureSteps) {
    struct Sink : CaptureSink {
        int operands = 0, ops = 0;
        void on_operand(const OperandCapture&) override { ++operands; }
        void on_op(const OpTiming&) override { ++ops; }
    } sink;
    struct Steps : TrainObserver {
        std::vector<bool> capture;
        void on_step_begin(std::int64_t, bool c) override { capture.push_back(c); }
    } steps;
    TrainConfig c = tiny(6);
    c.capture_every = 3;
    c.recipe = "delayed";
    CpuTrainer t(c);
    t.set_capture_sink(0, &sink);
    t.add_observer(&steps);
    t.run();
    EXPECT_EQ(steps.capture, (std::vector<bool>{true, false, false, true, false, false}));
    // 2 capture steps x linears x 3 GEMMs x 2 operands
    EXPECT_EQ(sink.operands, 2 * static_cast<int>(t.model(0).linears().size()) * 6);
}
