#include "rank_job.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "backends.h"

namespace fp8scope::cli {

void add_rank_options(CLI::App& cmd, RankOptions& o) {
    cmd.add_option("--nproc-per-node", o.nproc_per_node,
                   "start this many ranks on this machine (this process is rank 0), as torchrun would")
        ->check(CLI::Range(1, 1024));
    cmd.add_option("--rank-timeout", o.timeout_s,
                   "seconds a rank waits for the others (joining, and within a step) before it gives up")
        ->check(CLI::Range(0.1, 86400.0));
    cmd.add_option("--bucket-mb", o.bucket_mb, "gradient all-reduce bucket size in MiB")->check(CLI::Range(0.01, 65536.0));
    cmd.add_option("--straggler-margin", o.dp.straggler_margin,
                   "a rank whose step compute is slower than the median by more than this fraction is slow")
        ->check(CLI::Range(0.0, 100.0));
    cmd.add_option("--straggler-steps", o.dp.straggler_steps, "slow this many steps in a row: a straggler")
        ->check(CLI::Range(1, 1000000));
    cmd.add_option("--inject-slow-rank", o.slow_rank, "drill: this rank's steps take --inject-delay-ms longer");
    cmd.add_option("--inject-delay-ms", o.slow_ms, "drill: the injected delay per step")->check(CLI::Range(0.0, 3.6e6));
    cmd.add_option("--inject-crash-rank", o.crash_rank, "drill: this rank dies (SIGKILL) at --inject-crash-step");
    cmd.add_option("--inject-crash-step", o.crash_step, "drill: the step the rank dies in");
}

RankJob::RankJob(const RankOptions& o) : options_(o), env_(launch_env()) {
    options_.dp.bucket_bytes = std::size_t(o.bucket_mb * 1024 * 1024);
}

RankJob::~RankJob() = default;

DataParallel* RankJob::join(Backend& backend, const std::string& device) {
    if (!distributed()) return nullptr;
    const auto timeout = std::chrono::milliseconds(static_cast<long long>(options_.timeout_s * 1000));
    rendezvous_ = std::make_unique<Rendezvous>(env_, timeout);
    comm_ = make_communicator(backend, *rendezvous_);
    const std::string where = device == "cuda" ? "cuda:" + std::to_string(env_.local_rank) : device;
    dp_ = std::make_unique<DataParallel>(*rendezvous_, *comm_, where, options_.dp);
    return dp_.get();
}

void RankJob::watch(Trainer& trainer) {
    if (env_.rank == options_.slow_rank) trainer.delay_steps(options_.slow_ms);
    if (!distributed()) return;
    trainer.add_observer(this);
    Communicator* comm = comm_.get();
    const int rank = env_.rank;
    watchdog_ = std::make_unique<Watchdog>([comm, rank, t = options_.timeout_s](const std::string& phase) {
        std::fprintf(stderr,
                     "fp8scope-engine: error: rank %d: %s did not finish within %.0f s (--rank-timeout): another "
                     "rank died or hangs; aborting\n",
                     rank, phase.c_str(), t);
        comm->abort();
        // The training thread now fails out of its wait and ends the trace; if it cannot
        // (a wait nothing interrupts), the process ends anyway.
        std::this_thread::sleep_for(std::chrono::seconds(30));
        std::fprintf(stderr, "fp8scope-engine: error: rank %d: still stuck after the abort; exiting\n", rank);
        std::_Exit(1);
    });
}

void RankJob::on_step_begin(std::int64_t step, bool) {
    if (env_.rank == options_.crash_rank && step == options_.crash_step) std::raise(SIGKILL);
    if (watchdog_)
        watchdog_->arm("step " + std::to_string(step),
                       std::chrono::milliseconds(static_cast<long long>(options_.timeout_s * 1000)));
}

void RankJob::on_step(const StepRecord&) {
    // Disarmed when the step is agreed (the next step re-arms); a hang after on_step, in the
    // agreement, is bounded by the rendezvous' own timeout.
    if (watchdog_) watchdog_->disarm();
}

std::string RankJob::rank_path(const std::string& path) const {
    if (env_.rank == 0 || path.empty()) return path;
    const std::filesystem::path p(path);
    return (p.parent_path() / (p.stem().string() + ".rank" + std::to_string(env_.rank) + p.extension().string()))
        .string();
}

}  // namespace fp8scope::cli
