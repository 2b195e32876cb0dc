#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "util/parallel.h"

using namespace fp8scope;

TEST(Parallel, EveryIndexExactlyOnce) {
    for (std::int64_t n : {1, 7, 1000, 100003}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        parallel_for(n, 13, 0, [&](std::int64_t b, std::int64_t e) {
            for (std::int64_t i = b; i < e; ++i) hits[static_cast<std::size_t>(i)]++;
        });
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<std::size_t>(i)], 1) << "n=" << n << " i=" << i;
    }
}

TEST(Parallel, DefaultThreadsBoundsTheSharedPool) {
    set_default_threads(1);
    EXPECT_EQ(default_threads(), 1);
    EXPECT_EQ(ThreadPool::shared(0).size(), 1);
    set_default_threads(0);
    EXPECT_EQ(default_threads(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

TEST(Parallel, CallersFromSeveralThreadsTakeTurns) {
    std::atomic<std::int64_t> total{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t)
        callers.emplace_back([&] {
            for (int rep = 0; rep < 50; ++rep)
                parallel_for(1000, 10, 2, [&](std::int64_t b, std::int64_t e) { total += e - b; });
        });
    for (auto& c : callers) c.join();
    EXPECT_EQ(total, 4 * 50 * 1000);
}
