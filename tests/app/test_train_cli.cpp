// `fp8scope-engine train` run as a user runs it: a short run whose loss falls, lock-step
// runs, overrides, checkpoint resume through the CLI, and clear errors for bad input.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>

#include "app/run_engine.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kConfigs = fs::path(FP8SCOPE_SOURCE_DIR) / "resources" / "configs";

using Result = fp8scope::testing::EngineResult;

fs::path scratch() { return fp8scope::testing::scratch_dir("fp8scope_train_cli"); }

Result run(const std::string& args) { return fp8scope::testing::run_engine("train " + args, scratch()); }

std::string tiny() { return "--config " + (kConfigs / "tiny.json").string() + " --threads 2"; }

double mean(const json& a, std::size_t from, std::size_t to) {
    double s = 0;
    for (std::size_t i = from; i < to; ++i) s += a[i].get<double>();
    return s / double(to - from);
}

}  // namespace

TEST(TrainCli, ShortRunLossFallsAndProgressIsPrinted) {
    Result r = run(tiny() + " --json");
    ASSERT_EQ(r.status, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["steps"], 40);
    const json& losses = j["runs"][0]["losses"];
    ASSERT_EQ(losses.size(), 40u);
    EXPECT_LT(mean(losses, 35, 40), mean(losses, 0, 5) - 0.5) << losses.dump();
    EXPECT_EQ(j["runs"][0]["eval"].size(), 2u);  // steps 20 and 40
    EXPECT_TRUE(j["runs"][0]["eval_loss"].is_number());
    // stderr is not a terminal here: plain progress lines
    EXPECT_NE(r.err.find("step 10/40  loss "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("step 40/40"), std::string::npos) << r.err;
}

TEST(TrainCli, CompareTrainsLockStepReplicas) {
    Result r = run(tiny() + " --steps 12 --compare baseline,baseline --json --quiet");
    ASSERT_EQ(r.status, 0) << r.err;
    json j = json::parse(r.out);
    ASSERT_EQ(j["runs"].size(), 2u);
    EXPECT_EQ(j["runs"][0]["losses"], j["runs"][1]["losses"]);
    Result table = run(tiny() + " --steps 4 --compare baseline,baseline --quiet");
    ASSERT_EQ(table.status, 0) << table.err;
    EXPECT_NE(table.out.find("eval_vs_base"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("+0.000%"), std::string::npos) << table.out;
}

// --seeds 3: every recipe three times, named by seed; the summary's gap to the baseline is
// the mean of the per-seed final eval-loss differences with a Student t interval (t_{0.975,2}
// = 4.30265), recomputed here from the runs' own eval losses; inspect prints the same table.
TEST(TrainCli, SeedsPairTheRecipesAndJudgeTheGapAgainstTheSeedsNoise) {
    const fs::path trace = scratch() / "seeds.h5";
    Result r = run(tiny() + " --steps 8 --eval-every 4 --compare baseline,current --seeds 3 --json --quiet --out " +
                   trace.string());
    ASSERT_EQ(r.status, 0) << r.err;
    json j = json::parse(r.out);
    ASSERT_EQ(j["runs"].size(), 6u);
    EXPECT_EQ(j["runs"][0]["name"], "baseline s1");
    EXPECT_EQ(j["runs"][5]["name"], "current s3");
    EXPECT_NE(j["runs"][0]["losses"][0], j["runs"][1]["losses"][0]);  // seeds differ
    const json& gap = j["seeds"]["recipes"][0];
    EXPECT_EQ(j["seeds"]["series"], "eval loss");
    EXPECT_EQ(gap["recipe"], "current");
    double d[3], mean = 0, ss = 0;
    for (int i = 0; i < 3; ++i) mean += (d[i] = j["runs"][3 + i]["eval_loss"].get<double>() - j["runs"][i]["eval_loss"].get<double>()) / 3;
    for (double x : d) ss += (x - mean) * (x - mean);
    const double half = 4.30265272974946 * std::sqrt(ss / 2) / std::sqrt(3.0);
    EXPECT_NEAR(gap["mean_gap"].get<double>(), mean, 1e-7);
    EXPECT_NEAR(gap["ci"][0].get<double>(), mean - half, 1e-7);
    EXPECT_NEAR(gap["ci"][1].get<double>(), mean + half, 1e-7);
    EXPECT_EQ(gap["significant"], mean - half > 0 || mean + half < 0);
    ASSERT_EQ(gap["curve"].size(), 2u);  // evaluations at steps 4 and 8
    EXPECT_EQ(gap["curve"][1]["step"], 8);

    Result inspect = fp8scope::testing::run_engine("inspect " + trace.string(), scratch());
    ASSERT_EQ(inspect.status, 0) << inspect.err;
    char mean_text[32];
    std::snprintf(mean_text, sizeof mean_text, "%+.5f", gap["mean_gap"].get<double>());
    EXPECT_NE(inspect.out.find("seeds 1..3"), std::string::npos) << inspect.out;
    EXPECT_NE(inspect.out.find("current"), std::string::npos);
    EXPECT_NE(inspect.out.find(mean_text), std::string::npos) << mean_text << "\n" << inspect.out;
}

TEST(TrainCli, FlagsAndSetOverrideTheConfigFile) {
    Result r = run(tiny() + " --steps 7 --set model.d_model=48 --set model.n_head=3 --recipe delayed --print-config");
    ASSERT_EQ(r.status, 0) << r.err;
    json j = json::parse(r.out);
    EXPECT_EQ(j["steps"], 7);
    EXPECT_EQ(j["model"]["d_model"], 48);
    EXPECT_EQ(j["model"]["n_layer"], 1);  // from tiny.json
    EXPECT_EQ(j["recipe"], "delayed");
}

TEST(TrainCli, ALlamaStyleModelTrains) {
    Result r = run(tiny() + " --set model.arch=llama --set model.n_head=4 --set model.n_kv_head=2 --json");
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    const json& losses = j["runs"][0]["losses"];
    EXPECT_LT(mean(losses, 35, 40), mean(losses, 0, 5) - 0.5) << losses.dump();
    EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

TEST(TrainCli, PresetsAreListedAndLoaded) {
    Result help = run("--preset help");
    ASSERT_EQ(help.status, 0) << help.err;
    for (const char* name : {"gpt2-124m\n", "gpt2-350m\n", "llama-1b\n", "gpt-8x4096\n", "llama-8x4096\n"})
        EXPECT_NE(help.out.find(name), std::string::npos) << help.out;
    Result r = run("--preset llama-1b --steps 3 --print-config");
    ASSERT_EQ(r.status, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["model"]["n_kv_head"], 8);
    EXPECT_EQ(j["model"]["pos"], "rope");
    EXPECT_EQ(j["optimizer"]["lr_rule"], "width");
    EXPECT_EQ(j["steps"], 3);
    Result bad = run("--preset gpt5");
    EXPECT_EQ(bad.status, 2);
    EXPECT_NE(bad.err.find("preset 'gpt5' is not one of gpt-8x4096, gpt2-124m"), std::string::npos) << bad.err;
}

// 0.1 at width 512 is 50x the width rule's 2e-3 * 256/512 = 1e-3.
TEST(TrainCli, AnLrLikelyToBlowUpAtItsWidthIsWarnedAbout) {
    Result r = run(tiny() + " --steps 1 --set model.d_model=512 --set model.n_head=8 --lr 0.1");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("warning: peak learning rate 0.1 is above 4x the width rule's 0.001 for d_model 512"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("suggested: --lr 0.001"), std::string::npos) << r.err;
}

TEST(TrainCli, ResumeFromACheckpointContinuesTheSameRun) {
    fs::path dir = scratch() / "ck";
    fs::remove_all(dir);
    Result whole = run(tiny() + " --steps 20 --checkpoint-dir " + dir.string() + " --checkpoint-every 10 --json --quiet");
    ASSERT_EQ(whole.status, 0) << whole.err;
    ASSERT_TRUE(fs::exists(dir / "step_10.ckpt"));
    ASSERT_TRUE(fs::exists(dir / "step_20.ckpt"));
    Result rest = run("--resume " + (dir / "step_10.ckpt").string() + " --json --quiet");
    ASSERT_EQ(rest.status, 0) << rest.err;
    json a = json::parse(whole.out), b = json::parse(rest.out);
    EXPECT_EQ(b["steps"], 20);
    json tail = json::array();
    for (std::size_t i = 10; i < 20; ++i) tail.push_back(a["runs"][0]["losses"][i]);
    EXPECT_EQ(b["runs"][0]["losses"], tail);
    EXPECT_EQ(b["runs"][0]["eval_loss"], a["runs"][0]["eval_loss"]);
    fs::remove_all(dir);
}

// A Llama-style model under the width rule: the checkpoint keeps its fields (no position
// table, grouped-query heads, the rule), and the resumed run is the same run.
TEST(TrainCli, ALlamaStyleRunResumesBitForBit) {
    fs::path dir = scratch() / "ck_llama";
    fs::remove_all(dir);
    const std::string llama = tiny() + " --set model.arch=llama --set model.n_head=4 --set model.n_kv_head=1" +
                              " --set optimizer.lr_rule=width --set optimizer.base_width=32";
    Result whole = run(llama + " --steps 20 --checkpoint-dir " + dir.string() + " --checkpoint-every 10 --json --quiet");
    ASSERT_EQ(whole.status, 0) << whole.err;
    Result rest = run("--resume " + (dir / "step_10.ckpt").string() + " --json --quiet");
    ASSERT_EQ(rest.status, 0) << rest.err;
    json a = json::parse(whole.out), b = json::parse(rest.out);
    json tail = json::array();
    for (std::size_t i = 10; i < 20; ++i) tail.push_back(a["runs"][0]["losses"][i]);
    EXPECT_EQ(b["runs"][0]["losses"], tail);
    Result shown = run("--resume " + (dir / "step_10.ckpt").string() + " --print-config");
    ASSERT_EQ(shown.status, 0) << shown.err;
    const json c = json::parse(shown.out);
    EXPECT_EQ(c["model"]["pos"], "rope");
    EXPECT_EQ(c["model"]["n_kv_head"], 1);
    EXPECT_EQ(c["optimizer"]["lr_rule"], "width");
    fs::remove_all(dir);
}

TEST(TrainCli, AResumeWithNoStepsLeftIsRefusedAndLeavesTheCheckpoint) {
    fs::path dir = scratch() / "ck_done";
    fs::remove_all(dir);
    Result whole = run(tiny() + " --steps 10 --checkpoint-dir " + dir.string() + " --checkpoint-every 10 --quiet");
    ASSERT_EQ(whole.status, 0) << whole.err;
    const fs::path ck = dir / "step_10.ckpt";
    std::ifstream in(ck, std::ios::binary);
    const std::string before((std::istreambuf_iterator<char>(in)), {});
    ASSERT_FALSE(before.empty());
    for (const std::string steps : {" --steps 5", " --steps 10", ""}) {  // fewer, as many, the checkpoint's own
        Result r = run("--resume " + ck.string() + steps + " --quiet");
        EXPECT_EQ(r.status, 2) << steps;
        EXPECT_NE(r.err.find("fp8scope-engine: error: --resume " + ck.string() + ": the checkpoint is at step 10 and steps=" +
                             (steps == " --steps 5" ? "5" : "10") + ": nothing to train (steps must be more than 10)"),
                  std::string::npos)
            << r.err;
    }
    std::ifstream again(ck, std::ios::binary);
    EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), {}), before);  // not rewritten
    EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);  // nothing else written
    fs::remove_all(dir);
}

TEST(TrainCli, AResumeWithAnotherModelShapeIsRefusedEvenWithTheSameParameterCount) {
    fs::path dir = scratch() / "ck_heads";
    fs::remove_all(dir);
    Result whole = run(tiny() + " --steps 2 --checkpoint-dir " + dir.string() + " --quiet");
    ASSERT_EQ(whole.status, 0) << whole.err;
    const std::string ck = (dir / "step_2.ckpt").string();
    // tiny.json has 2 heads of 16; 4 heads of 8 hold the same parameters.
    Result r = run("--resume " + ck + " --steps 4 --set model.n_head=4 --quiet");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("fp8scope-engine: error: --resume " + ck +
                         ": model.n_head is 2 in the checkpoint, 4 now (a checkpoint resumes the model it trained)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(run("--resume " + ck + " --steps 4 --set model.n_head=2 --quiet").status, 0);
    fs::remove_all(dir);
}

TEST(TrainCli, ACheckpointThatCannotBeWrittenFailsTheRunWithItsReason) {
    const fs::path file = scratch() / "not_a_dir";
    std::ofstream(file) << "x";
    const std::pair<std::string, std::string> cases[] = {
        {file.string(), file.string()},                  // the checkpoint dir is a file
        {"/proc/fp8scope_ck", "/proc/fp8scope_ck"},       // a directory nobody may create
    };
    for (const auto& [dir, named] : cases) {
        Result r = run(tiny() + " --steps 2 --checkpoint-dir " + dir + " --json --quiet");
        EXPECT_EQ(r.status, 1) << dir;
        const json j = json::parse(r.out);
        const std::string error = j["error"];
        EXPECT_EQ(error.rfind("checkpoint " + dir + "/step_2.ckpt: ", 0), 0u) << error;
        EXPECT_NE(error.find(named), std::string::npos) << error;
        EXPECT_NE(r.err.find("fp8scope-engine: error: " + error), std::string::npos) << r.err;
        EXPECT_EQ(j["steps"], 2);  // the training itself went through
    }
}

// A trace that outgrows its disk (here a file size limit: the write fails with EFBIG, as
// with ENOSPC) stops recording, not the run: by default training stops cleanly at the next
// step with its checkpoint, or goes on with --on-trace-error continue; the trace keeps the
// steps of its last flush and the exit status says the output is incomplete.
TEST(TrainCli, ATraceThatCannotBeWrittenStopsRecordingAndTheRunEndsCleanly) {
    // The tiny model's trace starts near 460 KB (step 0's capture under 20 quantizers,
    // compressed) and grows by about 0.6 KB a step at a flush a millisecond; its checkpoint
    // is about 360 KB, so only the trace meets the limit.
    constexpr long kLimitBytes = 600 * 1024;
    constexpr int kSteps = 800;
    for (const std::string policy : {"stop", "continue"}) {
        const fs::path dir = scratch() / ("full_disk_" + policy);
        fs::remove_all(dir);
        fs::create_directories(dir);
        const fs::path trace = dir / "t.h5";
        Result r = fp8scope::testing::run_engine_with_file_limit(
            "train " + tiny() + " --steps " + std::to_string(kSteps) + " --flush-ms 1 --out " + trace.string() +
                " --checkpoint-dir " + (dir / "ck").string() + " --on-trace-error " + policy + " --json --quiet",
            dir, kLimitBytes);
        ASSERT_EQ(r.status, 1) << policy << "\n" << r.err;
        const json j = json::parse(r.out);
        const std::string trace_error = j["trace_error"];
        EXPECT_NE(trace_error.find("File too large"), std::string::npos) << trace_error;
        EXPECT_EQ(j["error"], "");
        EXPECT_NE(r.err.find("fp8scope-engine: error: " + trace.string() + " stopped recording after step "),
                  std::string::npos)
            << r.err;
        EXPECT_EQ(r.err.find("HDF5-DIAG"), std::string::npos) << r.err;  // one line, not HDF5's stack
        const int steps = j["steps"];
        if (policy == "stop") {
            EXPECT_TRUE(j["stopped"].get<bool>());
            EXPECT_LT(steps, kSteps);
        } else {
            EXPECT_FALSE(j["stopped"].get<bool>());
            EXPECT_EQ(steps, kSteps);
        }
        // The checkpoint of the last trained step is there and resumable.
        EXPECT_TRUE(fs::exists(dir / "ck" / ("step_" + std::to_string(steps) + ".ckpt"))) << policy;
        // The trace reads, up to its last flush before the failure.
        Result inspect = fp8scope::testing::run_engine("inspect " + trace.string(), dir);
        ASSERT_EQ(inspect.status, 0) << inspect.err;
        const auto at = inspect.out.find("run 0 baseline");
        ASSERT_NE(at, std::string::npos) << inspect.out;
        const int recorded = std::stoi(inspect.out.substr(inspect.out.find("steps ", at) + 6));
        EXPECT_GT(recorded, 20) << inspect.out;
        EXPECT_LT(recorded, steps) << inspect.out;
    }
}

TEST(TrainCli, BadInputIsAClearError) {
    fs::path bad = scratch() / "bad.json";
    std::ofstream(bad) << R"({"model": {"d_model": 64, "layers": 2}})";
    Result r = run("--config " + bad.string());
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("fp8scope-engine: error: " + bad.string() + ": unknown field 'model.layers'"),
              std::string::npos) << r.err;

    r = run(tiny() + " --set optimizer.beta2=1.5");
    EXPECT_EQ(r.status, 2);  // bad usage
    EXPECT_NE(r.err.find("field 'optimizer.beta2': out of range [0, 1), got 1.5"), std::string::npos) << r.err;

    r = run(tiny() + " --recipe fp4");
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("fp4"), std::string::npos) << r.err;

    fs::path tokens = scratch() / "tokens.bin";
    std::ofstream(tokens, std::ios::binary) << std::string(2048, '\0');
    r = run(tiny() + " --data " + tokens.string());
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find(tokens.string() + ": token file header has magic 0"), std::string::npos) << r.err;

    r = run("--resume " + bad.string());
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("not an fp8scope checkpoint"), std::string::npos) << r.err;
    for (const char* kept : {"every=0", "sometimes"}) {
        r = run(tiny() + " --kernel-timings " + kept);
        EXPECT_EQ(r.status, 2);
        EXPECT_NE(r.err.find(std::string("kernel timings '") + kept + "': expected all, capture, every=N (N >= 1) or off"),
                  std::string::npos) << r.err;
    }
}

// A CPU run has no device kernels: its trace says kernel timing is off, whatever is asked.
TEST(TrainCli, KernelTimingsAreSaidInTheTrace) {
    const fs::path trace = scratch() / "kernels.h5";
    Result r = run(tiny() + " --steps 2 --out " + trace.string() + " --kernel-timings every=5 --kernel-window 3");
    ASSERT_EQ(r.status, 0) << r.err;
    Result inspect = fp8scope::testing::run_engine("inspect " + trace.string(), scratch());
    EXPECT_NE(inspect.out.find("kernel timings: off"), std::string::npos) << inspect.out;
    r = run(tiny() + " --steps 2 --no-kernel-timings --out " + trace.string());
    EXPECT_EQ(r.status, 0) << r.err;  // the old flag stays, as --kernel-timings off
}
