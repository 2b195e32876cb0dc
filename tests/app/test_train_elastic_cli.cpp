// `train --elastic` as a user runs it: a 4-rank CPU job whose rank dies (SIGKILL) or stops
// (SIGSTOP) goes on with the 3 others from the last snapshot they all hold, and its losses
// from there are, bit for bit, those of an independent 3-rank job resumed from that
// snapshot's checkpoint with the same global batch (the oracle); a second failure during
// the recovery ends the job with a checkpoint of the good state. A replacement of the lost
// rank, started again by the launcher (--restart-lost-ranks), joins at a step boundary and
// from there the job trains as a 4-rank job resumed from that step's checkpoint, bit for
// bit; a replacement that dies while it joins, a process without the job's secret, and a
// late rank of a job that is not elastic leave the job as it was. Rank 0 itself, killed or
// stopped, is replaced as the hub by rank 1, and the job trains on as above.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>

#include "app/run_engine.h"
#include "comm/rendezvous.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const fs::path kConfigs = fs::path(FP8SCOPE_SOURCE_DIR) / "resources" / "configs";
constexpr int kSteps = 24;
constexpr int kRestored = 8;  // the ranks fail in step 10; snapshots every 4 steps

fs::path scratch() { return fp8scope::testing::scratch_dir("fp8scope_train_elastic_cli"); }

// 2 rows a rank: 8 rows a step on 4 ranks, which 3 ranks split 2, 3, 3.
// `env`: the launcher's variables of a rank started by hand; `dir`: where its stderr goes
// (two engines at once need two).
fp8scope::testing::EngineResult train(const std::string& args, const std::string& env = "",
                                      const fs::path& dir = scratch(), bool elastic = true) {
    return fp8scope::testing::run_engine("train --config " + (kConfigs / "tiny.json").string() +
                                             " --threads 1 --steps " + std::to_string(kSteps) +
                                             " --recipe delayed --batch 2 --eval-every 12 --json" +
                                             (elastic ? " --elastic" : "") +
                                             " --rank-timeout-s 2 --set rewind.snapshot_every=4 " + args,
                                         dir, env);
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

// The checkpoint of step kRestored of a 4-rank job that loses no rank: the state every
// recovery restores (the jobs are deterministic). A job whose rank 0 is killed or stopped
// may not have finished its own: rank 0 writes checkpoints on a thread of its own, and one
// cut short is absent, never torn.
fs::path clean_checkpoint() {
    static const fs::path path = [] {
        const fs::path dir = scratch() / "clean_ckpt";
        fs::remove_all(dir);
        const auto r = train("--nproc-per-node 4 --checkpoint-every 4 --checkpoint-dir " + dir.string());
        EXPECT_EQ(r.status, 0) << r.err;
        return restored(dir);
    }();
    return path;
}

// A 4-rank job whose rank 0 (the hub and the launcher) is killed or stopped (`drill`:
// "crash" or "stop") in step 10: the others meet again at rank 1, which goes on as rank 0
// (it prints the job's summary into the launcher's output, which its ranks share) and
// trains as the resumed 3-rank job does. Returns the events of rank 1's trace.
std::string lose_rank_zero(const std::string& name, const std::string& drill) {
    const fs::path ckpt = scratch() / (name + "_ckpt");
    fs::remove_all(ckpt);
    const std::string inject = " --inject-" + drill;
    const auto r = train("--nproc-per-node 4 --checkpoint-every 4 --checkpoint-dir " + ckpt.string() + inject +
                         "-rank 0" + inject + "-step 10 --out " + (scratch() / (name + ".h5")).string());
    EXPECT_FALSE(r.out.empty()) << r.err;
    const json got = json::parse(r.out.empty() ? "{}" : r.out);
    EXPECT_EQ(got["error"], "") << r.err;
    expect_oracle_losses(got, clean_checkpoint());
    // The new rank 0 wrote the checkpoints after the recovery, as rank 0 did before it.
    EXPECT_TRUE(fs::exists(ckpt / ("step_" + std::to_string(kSteps) + ".ckpt")));
    const std::string events = inspect(scratch() / (name + ".rank1.h5"));
    EXPECT_NE(events.find("lost rank 0; world 4 -> 3; failed in step 10, restored step 8 (2 steps lost); "),
              std::string::npos)
        << events;
    EXPECT_NE(events.find("; rank 1 is the hub now"), std::string::npos) << events;
    return events;
}

TEST(TrainElasticCli, AKilledRankZeroIsReplacedAsTheHubAndTheOthersTrainAsTheResumedThreeRankJob) {
    lose_rank_zero("hub_killed", "crash");
}

// A stopped rank 0 is given up on after twice the timeout; the ranks it launched stop it
// for good (else the job's output would never end).
TEST(TrainElasticCli, AStoppedRankZeroIsReplacedAsTheHubAfterTheRankTimeout) {
    const std::string events = lose_rank_zero("hub_stopped", "stop");
    EXPECT_NE(events.find("rank 0 sent nothing within the rendezvous timeout"), std::string::npos) << events;
}

// A 4-rank job that loses rank `crash` in step 10 and rank `then` once the survivors agreed
// on the new world: it ends saying so, with a checkpoint of the good state of step 8,
// which resumed on 3 ranks trains as the oracle does. Returns what the job said.
fp8scope::testing::EngineResult second_failure(const std::string& name, int crash, int then) {
    const fs::path ckpt = scratch() / (name + "_ckpt");
    fs::remove_all(ckpt);
    // No periodic checkpoint: the one written is the recovery's.
    const auto r = train("--nproc-per-node 4 --checkpoint-dir " + ckpt.string() +
                         " --checkpoint-every 0 --inject-crash-rank " + std::to_string(crash) +
                         " --inject-crash-step 10 --inject-recovery-crash-rank " + std::to_string(then));
    EXPECT_NE(r.err.find("and could not go on: a second failure during the recovery (rank " + std::to_string(then) +
                         " as launched)"),
              std::string::npos)
        << r.err;
    const fs::path written = restored(ckpt), again = scratch() / (name + "_again");
    EXPECT_TRUE(fs::exists(written)) << r.err;
    fs::remove_all(again);
    const auto resumed = train("--nproc-per-node 3 --checkpoint-dir " + again.string() + " --resume " + written.string());
    EXPECT_EQ(resumed.status, 0) << resumed.err;
    if (resumed.status == 0) {
        EXPECT_EQ(json::parse(resumed.out)["runs"][0]["losses"], oracle(written)["runs"][0]["losses"]);
    }
    return r;
}

TEST(TrainElasticCli, ASecondFailureDuringTheRecoveryEndsTheJobWithACheckpoint) {
    EXPECT_EQ(second_failure("second", 2, 3).status, 1);
}

// Rank 0 lost, then rank 2 while the survivors form their new communicator: the job ends,
// and the checkpoint of the good state is the new rank 0's (rank 1 as launched).
TEST(TrainElasticCli, ASecondFailureAfterRankZeroIsLostEndsTheJobWithTheNewHubsCheckpoint) {
    const auto r = second_failure("hub_second", 0, 2);
    const json got = json::parse(r.out.empty() ? "{}" : r.out);  // the new rank 0's summary
    EXPECT_NE(got.value("error", "").find("a second failure during the recovery"), std::string::npos) << r.out;
}

// Rank 0's steps take 100 ms longer (the losses do not change): a replacement started at
// the recovery has time to join before the job ends.
const std::string kSlow = " --inject-slow-rank 0 --inject-delay-ms 100";

TEST(TrainElasticCli, AReplacementRankJoinsAndTheJobTrainsAsTheResumedFourRankJob) {
    const fs::path out = scratch() / "joined.h5", ckpt = scratch() / "joined_ckpt";
    fs::remove_all(ckpt);
    const auto r = train("--nproc-per-node 4 --checkpoint-every 1 --checkpoint-dir " + ckpt.string() +
                         " --inject-crash-rank 2 --inject-crash-step 10 --restart-lost-ranks 1" + kSlow + " --out " +
                         out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string events = inspect(out);
    EXPECT_NE(events.find("lost rank 2; world 4 -> 3; failed in step 10, restored step 8"), std::string::npos)
        << events;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(events, m, std::regex("rank 2 joined; world 3 -> 4 at step (\\d+)"))) << events;
    const int joined = std::stoi(m[1]);
    ASSERT_GE(joined, kRestored);
    ASSERT_LT(joined, kSteps - 1) << "the replacement joined too late to compare steps";
    // The replacement wrote a trace of its own, beside the one of the rank it replaced.
    EXPECT_TRUE(fs::exists(scratch() / ("joined.rank2.joined" + std::to_string(joined) + ".h5")));
    // The oracle: a 4-rank job resumed from the checkpoint of the step the rank joined at.
    const fs::path again = scratch() / "joined_again";
    fs::remove_all(again);
    const auto four = train("--nproc-per-node 4 --checkpoint-dir " + again.string() + " --resume " +
                            (ckpt / ("step_" + std::to_string(joined) + ".ckpt")).string());
    ASSERT_EQ(four.status, 0) << four.err;
    const json want = json::parse(four.out)["runs"][0], got = json::parse(r.out)["runs"][0];
    ASSERT_EQ(want["losses"].size(), std::size_t(kSteps - joined));
    const std::size_t from = got["losses"].size() - want["losses"].size();
    for (std::size_t i = 0; i < want["losses"].size(); ++i)
        EXPECT_EQ(got["losses"][from + i].get<float>(), want["losses"][i].get<float>()) << "step " << joined + 1 + int(i);
    EXPECT_EQ(got["eval_loss"].get<float>(), want["eval_loss"].get<float>());
    // Every rank held the same delayed-scaling state after the join.
    EXPECT_EQ(events.find("scaling_mismatch"), std::string::npos) << events;
}

TEST(TrainElasticCli, AReplacementThatDiesWhileItJoinsLeavesTheJobAsItWas) {
    const fs::path out = scratch() / "join_died.h5", ckpt = scratch() / "join_died_ckpt";
    fs::remove_all(ckpt);
    const auto r = train("--nproc-per-node 4 --checkpoint-every 4 --checkpoint-dir " + ckpt.string() +
                         " --inject-crash-rank 2 --inject-crash-step 10 --restart-lost-ranks 1"
                         " --inject-join-crash-rank 2" + kSlow + " --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    const std::string events = inspect(out);
    EXPECT_NE(events.find("rank 2 could not join at step"), std::string::npos) << events;
    EXPECT_NE(events.find("the job goes on with 3 rank(s) as it was"), std::string::npos) << events;
    EXPECT_EQ(events.find("joined;"), std::string::npos) << events;
    // The 3 ranks trained on as the 3-rank job resumed from step 8 does.
    expect_oracle_losses(json::parse(r.out), restored(ckpt));
}

// A 2-rank job of known rendezvous and secret, and a process started meanwhile with the
// launcher variables of its rank 1 and `secret`: what the job and the process said.
struct Intruded {
    fp8scope::testing::EngineResult job, intruder;
};
Intruded intrude(const std::string& name, const std::string& secret, bool elastic) {
    const fs::path ckpt = scratch() / (name + "_ckpt"), late = scratch() / (name + "_late");
    fs::remove_all(ckpt);
    fs::create_directories(late);
    const std::string port = std::to_string(fp8scope::free_loopback_port());
    const std::string job_secret = std::string(32, 'a');
    auto job = std::async(std::launch::async, [&] {
        return train("--nproc-per-node 2 --checkpoint-every 1 --checkpoint-dir " + ckpt.string() + kSlow,
                     "MASTER_PORT=" + port + " FP8SCOPE_JOB_SECRET=" + job_secret, scratch(), elastic);
    });
    // It comes once the job trains.
    for (int i = 0; i < 400 && !fs::exists(ckpt / "step_2.ckpt"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(25));
    Intruded out;
    out.intruder = train("--checkpoint-dir " + (late / "ckpt").string() + kSlow,
                         "RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + port +
                             " FP8SCOPE_JOB_SECRET=" + (secret.empty() ? job_secret : secret),
                         late, elastic);
    out.job = job.get();
    return out;
}

TEST(TrainElasticCli, AProcessWithoutTheJobSecretIsRefusedAndTheJobGoesOnUnchanged) {
    const Intruded r = intrude("stranger", std::string(32, 'b'), true);
    EXPECT_EQ(r.intruder.status, 1);
    EXPECT_NE(r.intruder.err.find("refused rank 1: error: the hello does not prove the job's secret"), std::string::npos)
        << r.intruder.err;
    ASSERT_EQ(r.job.status, 0) << r.job.err;
    // Unchanged: the losses of the same job that nobody tried to join, bit for bit.
    const fs::path ckpt = scratch() / "undisturbed_ckpt";
    fs::remove_all(ckpt);
    const auto alone = train("--nproc-per-node 2 --checkpoint-dir " + ckpt.string());
    ASSERT_EQ(alone.status, 0) << alone.err;
    EXPECT_EQ(json::parse(r.job.out)["runs"], json::parse(alone.out)["runs"]);
}

TEST(TrainElasticCli, AJobThatIsNotElasticRefusesALateRankSayingSo) {
    const Intruded r = intrude("not_elastic", "", false);
    EXPECT_EQ(r.intruder.status, 1);
    EXPECT_NE(r.intruder.err.find("the job is under way and is not elastic: a rank cannot join it now"),
              std::string::npos)
        << r.intruder.err;
    EXPECT_EQ(r.job.status, 0) << r.job.err;
}

TEST(TrainElasticCli, ElasticNeedsACheckpointDirectory) {
    const auto r = train("--nproc-per-node 2");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("data_parallel.elastic needs checkpoint.dir (--checkpoint-dir)"), std::string::npos) << r.err;
}

}  // namespace
