// The thread pool: workers wait on a generation counter and take tasks from a shared
// counter; a pool that cannot start all its workers stops the ones it has and throws.
#include "util/parallel.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

namespace fp8scope {
namespace {
std::atomic<int> g_default_threads{0};

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }
}  // namespace

void set_default_threads(int threads) { g_default_threads = threads > 0 ? threads : 0; }

int default_threads() {
    const int t = g_default_threads;
    return t > 0 ? t : hardware_threads();
}

ThreadPool::ThreadPool(int threads) {
    if (threads <= 0) threads = hardware_threads();
    for (int i = 1; i < threads; ++i) {
        try {
            workers_.emplace_back([this] { work(); });
        } catch (const std::exception& e) {
            // Out of threads or address space: the workers started so far must be joined
            // here (no destructor runs for a constructor that throws), then say why.
            stop_workers();
            throw std::runtime_error("cannot start worker thread " + std::to_string(i) + " of " +
                                     std::to_string(threads) + " (" + e.what() +
                                     "); ask for fewer threads (--threads)");
        }
    }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
}

// Takes tasks until none are left; called by workers and by the caller of run().
void ThreadPool::drain() {
    std::unique_lock lock(mu_);
    while (next_ < tasks_) {
        std::int64_t task = next_++;
        const auto* job = job_;
        lock.unlock();
        (*job)(task);
        lock.lock();
        if (++finished_ == tasks_) done_.notify_all();
    }
}

void ThreadPool::work() {
    std::uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock lock(mu_);
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
        }
        drain();
    }
}

void ThreadPool::run(std::int64_t tasks, const std::function<void(std::int64_t)>& f) {
    if (tasks <= 0) return;
    if (workers_.empty() || tasks == 1) {
        for (std::int64_t t = 0; t < tasks; ++t) f(t);
        return;
    }
    std::lock_guard turn(run_mu_);
    {
        std::lock_guard lock(mu_);
        job_ = &f;
        tasks_ = tasks;
        next_ = 0;
        finished_ = 0;
        ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return finished_ == tasks_; });
    job_ = nullptr;
    tasks_ = 0;
}

ThreadPool& ThreadPool::shared(int threads) {
    if (threads <= 0) threads = default_threads();
    static std::mutex mu;
    static std::map<int, std::unique_ptr<ThreadPool>> pools;
    std::lock_guard lock(mu);
    auto& pool = pools[threads];
    if (!pool) pool = std::make_unique<ThreadPool>(threads);
    return *pool;
}

void parallel_for(std::int64_t n, std::int64_t grain, int threads,
                  const std::function<void(std::int64_t, std::int64_t)>& f) {
    if (n <= 0) return;
    ThreadPool& pool = ThreadPool::shared(threads);
    grain = std::max<std::int64_t>(1, grain);
    std::int64_t chunks = std::min<std::int64_t>((n + grain - 1) / grain, 4 * pool.size());
    std::int64_t step = (n + chunks - 1) / chunks;
    pool.run(chunks, [&](std::int64_t c) {
        std::int64_t b = c * step, e = std::min(n, b + step);
        if (b < e) f(b, e);
    });
}

}  // namespace fp8scope
