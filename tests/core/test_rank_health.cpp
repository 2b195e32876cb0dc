// Health rules of a data-parallel job (slow ranks against the median, stragglers over
// consecutive steps) on hand-computed cases, and the watchdog with real time limits.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/rank_health.h"
#include "engine/watchdog.h"

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
