// `fp8scope-engine preflight` as a launcher runs it: one engine process per rank, started
// with the variables torchrun sets, meeting over the TCP rendezvous on this machine.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "app/run_engine.h"
#include "comm/rendezvous.h"

namespace fp8scope {
namespace {

using testing::EngineResult;

// Runs the ranks given by their extra arguments at once; results in rank order. `world`
// may exceed the ranks started (a missing rank).
std::vector<EngineResult> run_ranks(int world, const std::vector<std::string>& extra, const std::string& flags) {
    const int port = free_loopback_port();
    std::vector<EngineResult> out(extra.size());
    std::vector<std::thread> ranks;
    for (std::size_t r = 0; r < extra.size(); ++r)
        ranks.emplace_back([&, r] {
            const std::string env = "RANK=" + std::to_string(r) + " WORLD_SIZE=" + std::to_string(world) +
                                    " FP8SCOPE_JOB_SECRET=00112233445566778899aabbccddeeff MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " ";
            // run_engine puts the binary first: the variables go through env(1).
            out[r] = testing::run_engine("preflight " + flags + " " + extra[r],
                                         testing::scratch_dir("preflight_rank" + std::to_string(r)), env);
        });
    for (auto& t : ranks) t.join();
    return out;
}

// A tiny GEMM (well under a millisecond) and a wide margin (20 x the median) keep a busy
// machine's noise out; the injected delay is far beyond both.
const std::string kFlags = "--size 64 --reps 1 --threads 1 --margin 20 --timeout-s 20";

TEST(PreflightCli, HealthyRanksAgree) {
    const auto r = run_ranks(3, {"", "", ""}, kFlags);
    for (std::size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r[i].status, 0) << i << ": " << r[i].out << r[i].err;
        EXPECT_NE(r[i].out.find("preflight rank " + std::to_string(i) + ": healthy"), std::string::npos) << r[i].out;
    }
    EXPECT_NE(r[0].out.find("preflight: 3 rank(s) (torchrun)"), std::string::npos) << r[0].out;
    EXPECT_NE(r[0].out.find("\n2     "), std::string::npos) << "a row per rank: " << r[0].out;
}

TEST(PreflightCli, ASlowRankIsNamedOnEveryRank) {
    const auto r = run_ranks(3, {"", "", "--delay-ms 3000"}, kFlags);
    for (std::size_t i = 0; i < r.size(); ++i) {
        EXPECT_EQ(r[i].status, 3) << i << ": " << r[i].out << r[i].err;
        EXPECT_NE(r[i].out.find("slow rank(s) 2 ("), std::string::npos) << r[i].out;
    }
    EXPECT_NE(r[0].out.find("SLOW"), std::string::npos) << r[0].out;
}

TEST(PreflightCli, AMissingRankEndsTheCheckWithItsName) {
    // The old spelling of --timeout-s still sets the timeout, with a notice.
    const auto r = run_ranks(3, {"", ""}, "--size 64 --reps 1 --threads 1 --timeout 2");
    EXPECT_EQ(r[0].status, 1);
    EXPECT_NE(r[0].err.find("rank(s) 2 of 3 did not join"), std::string::npos) << r[0].err;
    EXPECT_NE(r[0].err.find("--timeout is deprecated, use --timeout-s"), std::string::npos) << r[0].err;
    EXPECT_EQ(r[1].status, 1);
    EXPECT_NE(r[1].err.find("preflight rank 1"), std::string::npos) << r[1].err;
}

TEST(PreflightCli, OneCommandStartsEveryRankOfThisMachine) {
    const auto r = testing::run_engine("preflight --nproc-per-node 3 " + kFlags, testing::scratch_dir("preflight_local"));
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    for (int i = 0; i < 3; ++i)
        EXPECT_NE(r.out.find("preflight rank " + std::to_string(i) + ": healthy"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("preflight: 3 rank(s)"), std::string::npos) << r.out;
}

TEST(PreflightCli, ABadLauncherVariableIsNamed) {
    const auto r = testing::run_engine("preflight", testing::scratch_dir("preflight_bad"), "RANK=3 WORLD_SIZE=2 ");
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("RANK=3"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fp8scope
