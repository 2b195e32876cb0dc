#include "util/background_thread.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace fp8scope {

void lower_thread_priority() {
#if defined(__linux__)
    constexpr int kNice = 10;  // still ahead of idle work; behind the training thread
    const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
    const int now = ::getpriority(PRIO_PROCESS, tid);
    if (now < kNice) (void)::setpriority(PRIO_PROCESS, tid, kNice);
#endif
}

void run_on_own_threads(std::size_t tasks, std::size_t threads, const std::function<void(std::size_t)>& f) {
    std::atomic<std::size_t> next{0};
    auto work = [&] {
        for (std::size_t i; (i = next++) < tasks;) f(i);
    };
    std::vector<std::thread> helpers;
    for (std::size_t t = 1; t < std::min(tasks, threads); ++t) {
        try {
            helpers.emplace_back(work);
        } catch (const std::system_error&) {  // no more threads: the ones there finish the tasks
            break;
        }
    }
    work();
    for (std::thread& t : helpers) t.join();
}

}  // namespace fp8scope
