// A data-parallel job inside one test process: each rank a thread with its own backend,
// rendezvous (loopback, a free port), communicator and (run_job) Trainer, as the engine
// builds them in one process per rank.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends.h"
#include "engine/data_parallel.h"
#include "engine/data_parallel_step.h"
#include "comm/rendezvous.h"
#include "engine/trainer.h"

namespace fp8scope::testing {

struct Rank {
    LaunchEnv env;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Rendezvous> rendezvous;
    std::unique_ptr<Communicator> comm;
    std::unique_ptr<DataParallel> dp;
    std::unique_ptr<DataParallelStep> step;
    std::unique_ptr<Trainer> trainer;
};

// Runs `body` on every rank of a `world`-rank job on `device` (rank r on GPU r), each with
// its backend, rendezvous and communicator, and rethrows the first exception a rank
// threw. Every rank's state outlives the job, so a test compares them afterwards.
inline std::vector<std::unique_ptr<Rank>> run_ranks(int world, const std::string& device, int threads_per_rank,
                                                    const std::function<void(Rank&)>& body) {
    const int port = free_loopback_port();
    std::vector<std::unique_ptr<Rank>> ranks;
    for (int r = 0; r < world; ++r) {
        ranks.push_back(std::make_unique<Rank>());
        ranks.back()->env = LaunchEnv{r, world, r, world, "127.0.0.1", port, "test", "test job secret!"};
    }
    std::mutex mu;
    std::exception_ptr failure;
    std::vector<std::thread> threads;
    for (auto& rank : ranks) {
        threads.emplace_back([&, &rank = *rank] {
            try {
                rank.backend = make_backend(device, threads_per_rank, rank.env.local_rank);
                rank.rendezvous = std::make_unique<Rendezvous>(rank.env, std::chrono::seconds(60));
                rank.comm = make_communicator(*rank.backend, *rank.rendezvous);
                body(rank);
            } catch (...) {
                std::lock_guard lock(mu);
                if (!failure) failure = std::current_exception();
            }
        });
    }
    for (auto& t : threads) t.join();
    if (failure) std::rethrow_exception(failure);
    return ranks;
}

// run_ranks with a DataParallel, its step and a Trainer of `config` on every rank.
inline std::vector<std::unique_ptr<Rank>> run_job(int world, const std::string& device, const TrainConfig& config,
                                                  const std::function<void(Rank&)>& body,
                                                  DataParallelOptions options = {}) {
    return run_ranks(world, device, config.threads, [&](Rank& rank) {
        rank.dp = std::make_unique<DataParallel>(*rank.rendezvous, *rank.comm,
                                                 device + ":" + std::to_string(rank.env.local_rank), options);
        rank.step = std::make_unique<DataParallelStep>(*rank.dp, config.recipe_book());
        rank.trainer = std::make_unique<Trainer>(config, *rank.backend, rank.step.get());
        body(rank);
    });
}

// A job of seen.size() ranks that each train `config` to the end, seen[r] observing rank r.
template <class Observer>
std::vector<std::unique_ptr<Rank>> train_job(const std::string& device, const TrainConfig& config,
                                             std::vector<Observer>& seen, const DataParallelOptions& options = {}) {
    return run_job(
        int(seen.size()), device, config,
        [&](Rank& r) {
            r.trainer->add_observer(&seen[std::size_t(r.env.rank)]);
            r.trainer->run();
        },
        options);
}

}  // namespace fp8scope::testing
