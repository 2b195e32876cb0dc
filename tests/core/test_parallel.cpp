#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
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

// Under an address-space limit that leaves room for a few thread stacks, a pool of 400
// used to hang in its constructor; it must throw naming the thread instead. Run in a
// child process so the limit stays there; ASan reserves terabytes of address space, so
// the limit cannot be applied under it.
#if defined(__SANITIZE_ADDRESS__)
#define FP8SCOPE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FP8SCOPE_ASAN 1
#endif
#endif
#ifndef FP8SCOPE_ASAN
TEST(Parallel, AThreadThatCannotStartIsAnErrorNotAHang) {
    const pid_t child = ::fork();
    if (child == 0) {
        ::alarm(20);  // a hang ends the child with SIGALRM
        std::ifstream statm("/proc/self/statm");
        std::uint64_t pages = 0;
        statm >> pages;
        const rlim_t room = pages * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + (64u << 20);
        rlimit lim{room, room};
        if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(3);
        try {
            ThreadPool pool(400);  // 8 MiB stacks: a handful fit
            ::_exit(2);
        } catch (const std::runtime_error& e) {
            ::_exit(std::string(e.what()).find("cannot start worker thread") == 0 ? 0 : 4);
        }
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << "the child was killed (signal " << WTERMSIG(status) << "): a hang";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "2: the pool started, 3: no limit, 4: another message";
}
#endif
