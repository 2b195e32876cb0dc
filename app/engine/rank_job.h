// `train` as one rank of a data-parallel job: started by a launcher (torchrun, mpirun,
// srun: comm/launch_env.h) or by `--nproc-per-node N` on one machine. The rank trains
// on the GPU numbered LOCAL_RANK, joins the others over the TCP rendezvous, reduces over
// NCCL (TCP on CPUs) and writes its own trace (`run.h5` on rank 0, `run.rank1.h5` ...);
// rank 0 alone prints progress, serves --listen and writes checkpoints. A watchdog bounds
// every step: when a peer died or hangs, the rank aborts its communicator and ends with a
// message naming the step instead of waiting for ever.
//
// With --preflight the ranks first time a GEMM on their devices (gemm_probe.h) and compare
// with the median; --exclude-slow drops a slow rank (never rank 0) before the communicator
// exists, and the others train without it. Then an all-reduce is timed over the job's
// communicator. The findings open the trace as health events.
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "engine/data_parallel.h"
#include "engine/data_parallel_step.h"
#include "comm/launch_env.h"
#include "comm/rendezvous.h"
#include "engine/train_config.h"
#include "engine/trainer.h"
#include "engine/watchdog.h"

namespace fp8scope::cli {

// The flags of a rank. The job's settings are the config's data_parallel section
// (train_config.h); a flag given overrides its field (rank_overrides).
struct RankOptions {
    int nproc_per_node = 0;
    std::optional<double> timeout_s, bucket_mb, straggler_margin, preflight_margin;
    std::optional<std::string> grad_dtype;
    std::optional<long long> measure_every, straggler_steps, preflight_size;
    bool preflight = false, exclude_slow = false, elastic = false;  // given: true
    // Faults on purpose, to see the health checks catch them.
    int slow_rank = -1;
    double slow_ms = 0;
    int crash_rank = -1;
    long long crash_step = 0;
    int hang_rank = -1;
    long long hang_step = 0;
    int stop_rank = -1;             // stops itself (SIGSTOP) at stop_step
    long long stop_step = 0;
    int recovery_crash_rank = -1;   // dies (SIGKILL) once an elastic recovery agreed on the new world
    int join_crash_rank = -1;       // a late joiner of this rank dies (SIGKILL) once it holds the job's state
    int restart_lost = 0;           // --nproc-per-node: times rank 0 restarts each rank the job lost
};
void add_rank_options(CLI::App& cmd, RankOptions& o);
// The flags given, as config overrides ("data_parallel.bucket_mb=4").
std::vector<std::string> rank_overrides(const RankOptions& o);

class RankJob : public TrainObserver {
public:
    // This process's place in the job (launch_env()) with the settings of `config`; throws
    // std::invalid_argument on bad launcher variables.
    RankJob(const RankOptions& o, const DataParallelConfig& config);
    ~RankJob() override;

    const LaunchEnv& env() const { return env_; }
    bool distributed() const { return env_.distributed(); }
    // Joins the job on `backend` (collective): the step the trainer meets the other ranks
    // at; null for a job of one, or when the pre-flight check excluded this rank (then
    // excluded() says so and the process should leave). Every rank must train `config`
    // as rank 0 does: the first field where a rank's differs is an error on every rank.
    StepSync* join(Backend& backend, const TrainConfig& config);
    // The job's communicator (null before join() or in a job of one).
    const Communicator* communicator() const { return comm_.get(); }
    bool excluded() const { return excluded_; }
    // Arms the watchdog per step and injects the faults asked for.
    void watch(Trainer& trainer);
    // The ranks (as launched) an elastic job went on without and that did not join again.
    const std::vector<int>& lost_ranks() const { return lost_; }
    // A rank started after the job (a lost rank's replacement) that joined an elastic job at
    // a step boundary: the job's state then, for the trainer to start from (else null).
    // Such a rank does not repeat the drills (it would die again where its predecessor did).
    const TrainState* joined_state() const { return joined_state_ ? &*joined_state_ : nullptr; }
    // Rank 0 of an elastic job started with --nproc-per-node: `restart` (the launcher's)
    // starts a rank (as launched) again after the job lost it or it failed to join.
    void set_restart(std::function<void(int)> restart) { restart_ = std::move(restart); }
    // The trace path of this rank: `path` on rank 0, stem.rankN.ext elsewhere
    // (stem.rankN.joinedS.ext for a rank that joined late, at step S).
    std::string rank_path(const std::string& path) const;

    void on_step_begin(std::int64_t step, bool capture) override;
    void on_step(const StepRecord& record) override;

private:
    void check_same_config(const TrainConfig& config);
    void preflight_gemm(Backend& backend, const std::string& device);
    void preflight_allreduce(Backend& backend);
    void make_elastic(Backend& backend);
    void join_late(const TrainConfig& config);
    void out_of_job(int rank);
    // Kills this rank's parent when it is the launcher that was rank 0 (now lost).
    static void stop_lost_launcher();
    void on_watchdog(const std::string& phase);

    RankOptions options_;     // the drills
    DataParallelConfig config_;
    DataParallelOptions dp_options_;
    bool excluded_ = false;
    Trainer* trainer_ = nullptr;
    std::vector<std::string> findings_;  // pre-flight health events, recorded at the first step
    LaunchEnv env_;
    std::unique_ptr<Rendezvous> rendezvous_;
    std::unique_ptr<Communicator> comm_;
    // Elastic: the communicators of worlds left behind (a watchdog may still hold one), the
    // one in use for the watchdog's thread, the recoveries begun, the ranks lost.
    std::vector<std::unique_ptr<Communicator>> retired_;
    std::atomic<Communicator*> current_{nullptr};
    std::atomic<int> recoveries_{0};
    std::vector<int> lost_, members_;  // members_: the launch rank of each rank now
    std::unique_ptr<DataParallel> dp_;
    std::unique_ptr<DataParallelStep> step_;
    std::unique_ptr<Watchdog> watchdog_;
    std::optional<TrainState> joined_state_;
    int joined_as_ = -1;  // a late joiner's rank as launched
    std::function<void(int)> restart_;
};

}  // namespace fp8scope::cli
