// `train --elastic` as a user runs it: a 4-rank CPU job whose rank dies (SIGKILL) or stops
// (SIGSTOP) goes on with the 3 others from the last snapshot they all hold, and its losses
// from there are, bit for bit, those of an independent 3-rank job resumed from that
// snapshot's checkpoint with the same global batch (the oracle); a second failure during
// the recovery ends the job with a checkpoint of the good state.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "app/run_engine.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kConfigs = fs::path(FP8SCOPE_SOURCE_DIR) / "resources" / "configs";
constexpr int kSteps = 24;
constexpr int kRestored = 8;  // the ranks fail in step 10; snapshots every 4 steps

fs::path scratch() { return fp8scope::testing::scratch_dir("fp8scope_train_elastic_cli"); }

// 2 rows a rank: 8 rows a step on 4 ranks, which 3 ranks split 2, 3, 3.
fp8scope::testing::EngineResult train(const std::string& args) {
    return fp8scope::testing::run_engine("train --config " + (kConfigs / "tiny.json").string() +
                                             " --threads 1 --steps " + std::to_string(kSteps) +
                                             " --recipe delayed --batch 2 --eval-every 12 --json --elastic"
                                             " --rank-timeout-s 2 --set rewind.snapshot_every=4 " + args,
                                         scratch());
}

// The 3-rank job resumed from `ckpt`, the checkpoint of step kRestored that a 4-rank job
// wrote before its rank failed (the first test's; the jobs are deterministic, so every
// test's is the same state).
const json& oracle(const fs::path& ckpt) {
    static const json out = [&] {
        const fs::path again = scratch() / "oracle";
        fs::remove_all(again);
        const auto three = train("--nproc-per-node 3 --checkpoint-dir " + again.string() + " --resume " + ckpt.string());
        EXPECT_EQ(three.status, 0) << three.err;
        // The checkpoint's 8 rows a step are kept: said before training.
        EXPECT_NE(three.err.find("trained on 4 ranks x batch 2 = 8 rows a step, now split over 3 rank(s)"),
                  std::string::npos)
            << three.err;
        return json::parse(three.out);
    }();
    return out;
}

fs::path restored(const fs::path& dir) { return dir / ("step_" + std::to_string(kRestored) + ".ckpt"); }

// The losses after the recovery, as many as the oracle has, equal its own bit for bit.
void expect_oracle_losses(const json& got, const fs::path& ckpt) {
    ASSERT_TRUE(fs::exists(ckpt));
    const json& want = oracle(ckpt)["runs"][0]["losses"];
    const json& losses = got["runs"][0]["losses"];
    ASSERT_EQ(want.size(), std::size_t(kSteps - kRestored));
    ASSERT_GT(losses.size(), want.size());
    const std::size_t from = losses.size() - want.size();
    for (std::size_t i = 0; i < want.size(); ++i)
        EXPECT_EQ(losses[from + i].get<float>(), want[i].get<float>()) << "step " << kRestored + 1 + int(i);
    EXPECT_EQ(got["runs"][0]["eval_loss"].get<float>(), oracle(ckpt)["runs"][0]["eval_loss"].get<float>());
    EXPECT_EQ(got["steps"], kSteps);
}

std::string inspect(const fs::path& trace) {
    const auto r = fp8scope::testing::run_engine("inspect " + trace.string(), scratch());
    EXPECT_EQ(r.status, 0) << r.err;
    return r.out;
}

TEST(TrainElasticCli, AKilledRankIsLeftBehindAndTheOthersTrainAsTheResumedThreeRankJob) {
    const fs::path out = scratch() / "killed.h5", ckpt = scratch() / "killed_ckpt";
    fs::remove_all(ckpt);
    const auto r = train("--nproc-per-node 4 --checkpoint-every 4 --checkpoint-dir " + ckpt.string() +
                         " --inject-crash-rank 2 --inject-crash-step 10 --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    expect_oracle_losses(json::parse(r.out), restored(ckpt));
    // Rank 0's trace records the change: the lost rank, the new world, the steps lost.
    const std::string events = inspect(out);
    EXPECT_NE(events.find("world_changed"), std::string::npos) << events;
    EXPECT_NE(events.find("lost rank 2; world 4 -> 3; failed in step 10, restored step 8 (2 steps lost)"),
              std::string::npos)
        << events;
}

TEST(TrainElasticCli, AStoppedRankIsLeftBehindAfterTheRankTimeout) {
    const fs::path out = scratch() / "stopped.h5", ckpt = scratch() / "stopped_ckpt";
    fs::remove_all(ckpt);
    const auto r = train("--nproc-per-node 4 --checkpoint-every 4 --checkpoint-dir " + ckpt.string() +
                         " --inject-stop-rank 1 --inject-stop-step 10 --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    expect_oracle_losses(json::parse(r.out), restored(ckpt));
    const std::string events = inspect(out);
    EXPECT_NE(events.find("lost rank 1; world 4 -> 3; failed in step 10, restored step 8"), std::string::npos)
        << events;
    EXPECT_NE(events.find("sent nothing within the rendezvous timeout"), std::string::npos) << events;
}

TEST(TrainElasticCli, ASecondFailureDuringTheRecoveryEndsTheJobWithACheckpoint) {
    const fs::path ckpt = scratch() / "second_ckpt";
    fs::remove_all(ckpt);
    // No periodic checkpoint: the one written is the recovery's.
    const auto r = train("--nproc-per-node 4 --checkpoint-dir " + ckpt.string() +
                         " --checkpoint-every 0 --inject-crash-rank 2 --inject-crash-step 10"
                         " --inject-recovery-crash-rank 3");
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("and could not go on: a second failure during the recovery (rank 3 as launched)"),
              std::string::npos)
        << r.err;
    const fs::path written = restored(ckpt);
    ASSERT_TRUE(fs::exists(written)) << r.err;
    // It is the good state of step 8: resumed on 3 ranks it trains as the oracle does.
    const fs::path again = scratch() / "second_again";
    fs::remove_all(again);
    const auto resumed = train("--nproc-per-node 3 --checkpoint-dir " + again.string() + " --resume " + written.string());
    ASSERT_EQ(resumed.status, 0) << resumed.err;
    EXPECT_EQ(json::parse(resumed.out)["runs"][0]["losses"], oracle(written)["runs"][0]["losses"]);
}

TEST(TrainElasticCli, ElasticNeedsACheckpointDirectory) {
    const auto r = train("--nproc-per-node 2");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("data_parallel.elastic needs checkpoint.dir (--checkpoint-dir)"), std::string::npos) << r.err;
}

}  // namespace
