// Health rules of a data-parallel job (slow ranks against the median, the pre-flight
// records ranks exchange, stragglers over consecutive steps) on hand-computed cases, and
// the watchdog with real time limits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/rank_health.h"
#include "engine/watchdog.h"
#include "support/error_of.h"

namespace fp8scope {
namespace {

using namespace std::chrono_literals;

TEST(RankHealth, Median) {
    EXPECT_TRUE(std::isnan(median_ms({})));
    EXPECT_EQ(median_ms(std::vector<double>{3}), 3);
    EXPECT_EQ(median_ms(std::vector<double>{5, 1, 3}), 3);
    EXPECT_EQ(median_ms(std::vector<double>{4, 1, 3, 2}), 2.5);
}

TEST(RankHealth, SlowRanksAgainstTheMedian) {
    // Finite times 99, 100, 100, 100, 101, 115, 130: median 100; a 10% margin flags
    // 115 and 130, and the rank that reported no time at all comes first.
    const std::vector<double> ms = {100, 101, 99, 130, 100, 115, NAN, 100};
    const auto slow = slow_ranks(ms, 0.10);
    ASSERT_EQ(slow.size(), 3u);
    EXPECT_EQ(slow[0].rank, 6);
    EXPECT_EQ(slow[1].rank, 3);
    EXPECT_DOUBLE_EQ(slow[1].ratio(), 1.30);
    EXPECT_EQ(slow[2].rank, 5);
    EXPECT_EQ(slow[2].median_ms, 100);
    EXPECT_TRUE(slow_ranks(std::vector<double>{200, 200, 200}, 0.10).empty());  // uniformly slow: nothing stands out
    EXPECT_TRUE(slow_ranks(std::vector<double>{100, 110}, 0.10).empty());       // median 105: 110 is 4.8% over
    EXPECT_EQ(slow_ranks(std::vector<double>{100, 100, 111}, 0.10).size(), 1u);
}

TEST(RankHealth, PreflightRecordsAreDecodedAndJudgedAgainstTheMedian) {
    // 1.25, 1.5, 1.5, 2.0: median 1.5; a 10% margin flags rank 2 alone (2.0 > 1.65).
    const std::vector<std::string> records = {
        encode_rank_timing({1.5, "node-a", "cuda:0"}),
        encode_rank_timing({1.25, "node-a", "cuda:1"}),
        encode_rank_timing({2.0, "node-b", "NVIDIA H200 (cuda:0, 139 GiB)"}),  // a description with spaces
        "1.5\nnode-b\ncpu",                                                   // the wire format as written
    };
    const RankTimings t = judge_rank_timings(records, 0.10);
    ASSERT_EQ(t.ranks.size(), 4u);
    EXPECT_EQ(t.ranks[0].host, "node-a");
    EXPECT_EQ(t.ranks[1].device, "cuda:1");
    EXPECT_EQ(t.ranks[2].host, "node-b");
    EXPECT_EQ(t.ranks[2].device, "NVIDIA H200 (cuda:0, 139 GiB)");
    EXPECT_EQ(t.ranks[3].ms, 1.5);
    EXPECT_EQ(t.ranks[3].device, "cpu");
    EXPECT_EQ(t.ms, (std::vector<double>{1.5, 1.25, 2.0, 1.5}));
    EXPECT_EQ(t.median_ms, 1.5);
    ASSERT_EQ(t.slow.size(), 1u);
    EXPECT_EQ(t.slow[0].rank, 2);
    EXPECT_EQ(t.slow[0].ms, 2.0);
    EXPECT_DOUBLE_EQ(t.slow[0].ratio(), 4.0 / 3.0);
    EXPECT_TRUE(t.is_slow(2));
    EXPECT_FALSE(t.is_slow(0));
    EXPECT_FALSE(t.is_slow(3));
    // A time travels exactly (0.1 + 0.2 is not 0.3), and an empty host or device is kept.
    const RankTimings exact = judge_rank_timings(std::vector<std::string>{encode_rank_timing({0.1 + 0.2, "", ""})}, 0.10);
    EXPECT_EQ(exact.ranks[0].ms, 0.1 + 0.2);
    EXPECT_EQ(exact.ranks[0].host, "");
    EXPECT_TRUE(exact.slow.empty());
}

TEST(RankHealth, AMalformedPreflightRecordNamesTheRankAndItsText) {
    const auto error = [](const std::string& bad) {
        return testing::error_of([&] { judge_rank_timings(std::vector<std::string>{"1\nh\ncpu", bad}, 0.10); });
    };
    EXPECT_EQ(error("fast\nh\ncpu"),
              "rank 1 sent the pre-flight record \"fast\\nh\\ncpu\", not \"ms\\nhost\\ndevice\" (ranks of "
              "different engine versions?)");
    FP8SCOPE_EXPECT_CONTAINS(error("1.5 h cpu"), "rank 1 sent the pre-flight record \"1.5 h cpu\"");  // one line
    FP8SCOPE_EXPECT_CONTAINS(error("1.5\nh"), "rank 1 sent the pre-flight record \"1.5\\nh\"");
    FP8SCOPE_EXPECT_CONTAINS(error("1.5\nh\ncpu\nmore"), "\"1.5\\nh\\ncpu\\nmore\"");
    FP8SCOPE_EXPECT_CONTAINS(error("1.5ms\nh\ncpu"), "\"1.5ms\\nh\\ncpu\"");  // more than a number
    FP8SCOPE_EXPECT_CONTAINS(error("\nh\ncpu"), "rank 1 sent");                      // no number
    FP8SCOPE_EXPECT_CONTAINS(error(""), "rank 1 sent the pre-flight record \"\"");
}

TEST(RankHealth, AStragglerIsReportedOnceAndWhenItRecovers) {
    // Ranks 0 and 3 take 100 ms; with ranks 1 and 2 both at 150 the median is 125 and
    // both are still more than 10% over it.
    StragglerMonitor m(4, 0.10, 3);
    auto step = [&](std::int64_t s, double r1, double r2) { return m.observe(s, std::vector<double>{100, r1, r2, 100}); };
    EXPECT_TRUE(step(1, 100, 150).empty());
    EXPECT_TRUE(step(2, 150, 150).empty());  // rank 1 slow once: no alert
    const auto a = step(3, 100, 150);         // rank 2's third slow step in a row
    ASSERT_EQ(a.size(), 1u);
    EXPECT_EQ(a[0].rank, 2);
    EXPECT_TRUE(a[0].straggling);
    EXPECT_EQ(a[0].step, 3);
    EXPECT_EQ(a[0].ms, 150);
    EXPECT_EQ(a[0].median_ms, 100);  // 100, 100, 100, 150
    EXPECT_TRUE(m.straggling(2));
    EXPECT_TRUE(step(4, 100, 150).empty());  // still straggling: no repeat
    EXPECT_TRUE(step(5, 100, 100).empty());
    EXPECT_TRUE(step(6, 100, 100).empty());
    const auto b = step(7, 100, 100);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_FALSE(b[0].straggling);
    EXPECT_FALSE(m.straggling(2));
    EXPECT_THROW(m.observe(8, std::vector<double>{1, 2, 3}), std::invalid_argument);
}

struct Expiries {
    std::mutex mu;
    std::vector<std::string> phases;
    void operator()(const std::string& p) {
        std::lock_guard lock(mu);
        phases.push_back(p);
    }
    std::vector<std::string> get() {
        std::lock_guard lock(mu);
        return phases;
    }
};

TEST(Watchdog, APhasePastItsLimitExpiresOnce) {
    Expiries seen;
    Watchdog w([&](const std::string& p) { seen(p); });
    w.arm("all-reduce of step 7", 50ms);
    std::this_thread::sleep_for(400ms);
    EXPECT_EQ(seen.get(), std::vector<std::string>{"all-reduce of step 7"});
}

TEST(Watchdog, DisarmedOrReArmedInTimeNothingExpires) {
    Expiries seen;
    Watchdog w([&](const std::string& p) { seen(p); });
    w.arm("step 1", 300ms);
    std::this_thread::sleep_for(50ms);
    w.disarm();
    for (int i = 0; i < 4; ++i) {  // each phase ends well inside its limit
        w.arm("step " + std::to_string(i + 2), 300ms);
        std::this_thread::sleep_for(100ms);
    }
    w.disarm();
    std::this_thread::sleep_for(400ms);
    EXPECT_TRUE(seen.get().empty());
}

}  // namespace
}  // namespace fp8scope
