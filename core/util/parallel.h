// A persistent pool of worker threads for data-parallel loops. Work is split into
// contiguous index ranges; callers that need deterministic reductions keep one partial
// result per task and combine them in task order.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace fp8scope {

class ThreadPool {
public:
    // threads <= 0: hardware concurrency. Throws std::runtime_error naming the thread that
    // could not be started (process or address-space limits).
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }  // the caller works too
    // Calls f(task) for task in [0, tasks), spread over the pool; returns when all are done.
    // Callers from several threads take turns; f must not call run() on the same pool.
    void run(std::int64_t tasks, const std::function<void(std::int64_t)>& f);

    // The shared pool for a thread count (0: default_threads()).
    static ThreadPool& shared(int threads = 0);

private:
    void work();
    void drain();
    void stop_workers();

    std::vector<std::thread> workers_;
    std::mutex run_mu_;  // one run() at a time when several threads share the pool
    std::mutex mu_;
    std::condition_variable wake_, done_;
    const std::function<void(std::int64_t)>* job_ = nullptr;
    std::int64_t tasks_ = 0, next_ = 0, finished_ = 0;
    std::uint64_t generation_ = 0;
    bool stop_ = false;
};

// The most threads any setting may ask for (train's `threads`, analyze's --threads): more
// would only exhaust the process table.
constexpr int kMaxThreads = 4096;

// The thread count that `threads = 0` means everywhere: hardware concurrency unless a
// run asked for fewer (TrainConfig::threads), so one setting bounds the whole process.
void set_default_threads(int threads);  // <= 0: back to hardware concurrency
int default_threads();

// parallel_for over [0, n) in chunks of at least `grain`; f(begin, end).
void parallel_for(std::int64_t n, std::int64_t grain, int threads,
                  const std::function<void(std::int64_t, std::int64_t)>& f);

}  // namespace fp8scope
