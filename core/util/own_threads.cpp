#include "util/own_threads.h"

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace fp8scope {

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
