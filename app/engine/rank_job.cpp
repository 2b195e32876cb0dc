#include "rank_job.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "backends.h"
#include "engine/memory_estimate.h"
#include "engine/rank_health.h"
#include "gemm_probe.h"
#include "local_ranks.h"
#include "renamed_option.h"
#include "util/json_input.h"
#include "util/host_name.h"

namespace fp8scope::cli {

void add_rank_options(CLI::App& cmd, RankOptions& o) {
    cmd.add_option("--nproc-per-node", o.nproc_per_node,
                   "start this many ranks on this machine (this process is rank 0), as torchrun would")
        ->check(CLI::Range(1, 1024));
    const CLI::Range timeout(0.1, 86400.0);
    cmd.add_option("--rank-timeout-s", o.timeout_s,
                   "seconds a rank waits for the others (joining, and within a step) before it gives up (default 300)")
        ->check(timeout);
    add_renamed_option<double>(cmd, "--rank-timeout", "--rank-timeout-s", o.timeout_s)->check(timeout);
    cmd.add_option("--bucket-mb", o.bucket_mb, "gradient bucket size in MiB (of the type the sums travel in; default 25)")
        ->check(CLI::Range(0.01, 65536.0));
    cmd.add_option("--grad-dtype", o.grad_dtype,
                   "gradient sums in f32 (default), bf16 (half the bytes) or e4m3/e5m2 (a quarter: FP8 codes with a "
                   "scale per chunk, added in float32); the trace records the bytes and the error added")
        ->check(CLI::IsMember({"f32", "bf16", "e4m3", "e5m2"}));
    cmd.add_option("--grad-measure-every", o.measure_every,
                   "steps between measurements of the error bf16, e4m3 or e5m2 gradient sums add (0: first step only; "
                   "default 100)")
        ->check(CLI::Range(0, 1000000000));
    cmd.add_option("--straggler-margin", o.straggler_margin,
                   "a rank whose step compute is slower than the median by more than this fraction is slow (default 0.1)")
        ->check(CLI::Range(0.0, 100.0));
    cmd.add_option("--straggler-steps", o.straggler_steps, "slow this many steps in a row: a straggler (default 3)")
        ->check(CLI::Range(1, 1000000));
    cmd.add_flag("--preflight", o.preflight, "time a GEMM on every rank and an all-reduce before training");
    cmd.add_option("--preflight-size", o.preflight_size, "pre-flight GEMM size n (0: 8192 on a GPU, 256 on a CPU)")
        ->check(CLI::Range(0, 32768));
    cmd.add_option("--preflight-margin", o.preflight_margin,
                   "pre-flight: a rank slower than the median GEMM time by more than this fraction is slow (default 0.1)")
        ->check(CLI::Range(0.0, 100.0));
    cmd.add_flag("--exclude-slow", o.exclude_slow, "pre-flight: slow ranks (not rank 0) leave; the others train");
    cmd.add_flag("--elastic", o.elastic,
                 "a rank that dies or hangs (not rank 0) is left behind: the others restore the last snapshot they all "
                 "hold and go on with the same global batch (off by default; docs/elastic.md)");
    cmd.add_option("--inject-slow-rank", o.slow_rank,
                   "drill: this rank's steps (and pre-flight GEMM) take --inject-delay-ms longer");
    cmd.add_option("--inject-delay-ms", o.slow_ms, "drill: the injected delay per step")->check(CLI::Range(0.0, 3.6e6));
    cmd.add_option("--inject-crash-rank", o.crash_rank, "drill: this rank dies (SIGKILL) at --inject-crash-step");
    cmd.add_option("--inject-crash-step", o.crash_step, "drill: the step the rank dies in");
    cmd.add_option("--inject-hang-rank", o.hang_rank, "drill: this rank stops responding at --inject-hang-step");
    cmd.add_option("--inject-hang-step", o.hang_step, "drill: the step the rank hangs in");
    cmd.add_option("--inject-stop-rank", o.stop_rank, "drill: this rank stops itself (SIGSTOP) at --inject-stop-step");
    cmd.add_option("--inject-stop-step", o.stop_step, "drill: the step the rank stops in");
    cmd.add_option("--inject-recovery-crash-rank", o.recovery_crash_rank,
                   "drill: this rank dies (SIGKILL) once an elastic recovery agreed on the new world");
    cmd.add_option("--inject-join-crash-rank", o.join_crash_rank,
                   "drill: a replacement of this rank joining an elastic job dies (SIGKILL) once it holds the job's "
                   "state, before it joins");
    cmd.add_option("--restart-lost-ranks", o.restart_lost,
                   "with --nproc-per-node and --elastic: start a rank the job lost (or whose replacement failed to "
                   "join) again, up to this many times per rank; it joins at a step boundary (docs/elastic.md)")
        ->check(CLI::Range(0, 1000));
}

std::vector<std::string> rank_overrides(const RankOptions& o) {
    std::vector<std::string> sets;
    auto set = [&](const char* field, const std::string& value) { sets.push_back(std::string("data_parallel.") + field + "=" + value); };
    auto number = [](double v) { return dump_json(nlohmann::json(v)); };
    if (o.timeout_s) set("rank_timeout_s", number(*o.timeout_s));
    if (o.bucket_mb) set("bucket_mb", number(*o.bucket_mb));
    if (o.grad_dtype) set("grad_dtype", *o.grad_dtype);
    if (o.measure_every) set("grad_measure_every", std::to_string(*o.measure_every));
    if (o.straggler_margin) set("straggler_margin", number(*o.straggler_margin));
    if (o.straggler_steps) set("straggler_steps", std::to_string(*o.straggler_steps));
    if (o.preflight) set("preflight", "true");
    if (o.preflight_size) set("preflight_size", std::to_string(*o.preflight_size));
    if (o.preflight_margin) set("preflight_margin", number(*o.preflight_margin));
    if (o.exclude_slow) set("exclude_slow", "true");
    if (o.elastic) set("elastic", "true");
    return sets;
}

RankJob::RankJob(const RankOptions& o, const DataParallelConfig& config)
    : options_(o), config_(config), env_(launch_env()) {
    dp_options_.bucket_bytes = std::size_t(config.bucket_mb * 1024 * 1024);
    for (DType t : {DType::F32, DType::BF16, DType::E4M3, DType::E5M2})
        if (config.grad_dtype == dtype_name(t)) dp_options_.grad_dtype = t;
    dp_options_.measure_every = config.grad_measure_every;
    dp_options_.straggler_margin = config.straggler_margin;
    dp_options_.straggler_steps = config.straggler_steps;
}

RankJob::~RankJob() = default;

namespace {

// The ranks of one machine share it: CPU ranks take turns on its cores, and together they
// must fit the machine's memory, which each rank's trainer compares with its own estimate
// alone.
void check_local_ranks(const LaunchEnv& env, Backend& backend, const TrainConfig& config) {
    const int n = env.local_world_size;
    if (n <= 1) return;
    const bool cpu = backend.device() == Device::CPU;
    if (const std::string why = cpu ? cpu_ranks_refused(n) : std::string(); !why.empty())
        throw std::invalid_argument(why);
    require_memory(estimate_memory(config, dtype_size(backend.activation_dtype())), available_memory(), !cpu, n);
}

}  // namespace

StepSync* RankJob::join(Backend& backend, const TrainConfig& config) {
    if (!distributed()) return nullptr;
    check_local_ranks(env_, backend, config);
    const std::string& device = config.device;
    const auto timeout = std::chrono::milliseconds(static_cast<long long>(config_.rank_timeout_s * 1000));
    rendezvous_ = std::make_unique<Rendezvous>(env_, timeout);
    if (rendezvous_->late()) join_late(config);
    else check_same_config(config);
    if (config_.preflight && !joined_state_) preflight_gemm(backend, device);
    if (excluded_) return nullptr;
    env_ = rendezvous_->env();  // renumbered when a rank was excluded
    comm_ = make_communicator(backend, *rendezvous_);
    if (config_.preflight && !joined_state_) preflight_allreduce(backend);
    const std::string where = device == "cuda" ? "cuda:" + std::to_string(env_.local_rank) : device;
    dp_ = std::make_unique<DataParallel>(*rendezvous_, *comm_, where, dp_options_);
    step_ = std::make_unique<DataParallelStep>(*dp_, config.recipe_book());
    current_ = comm_.get();
    if (config_.elastic) {
        if (!config.rewind.enabled)
            throw std::invalid_argument("data_parallel.elastic needs rewind.enabled: the ranks go on from a rewind "
                                        "snapshot");
        if (config.checkpoint.dir.empty())
            throw std::invalid_argument("data_parallel.elastic needs checkpoint.dir (--checkpoint-dir): a second "
                                        "failure during a recovery ends the job with a checkpoint there");
        make_elastic(backend);
    }
    return step_.get();
}

// A process started after the job (a lost rank's replacement) that rank 0 answered "late":
// it waits for the job's state at the next step boundary, which must be of the settings it
// was started with, and joins.
void RankJob::join_late(const TrainConfig& config) {
    const std::string blob = rendezvous_->late_state();
    const auto* bytes = reinterpret_cast<const std::uint8_t*>(blob.data());
    TrainState state = deserialize_checkpoint({bytes, blob.size()}, "the job's state from rank 0");
    if (env_.rank == options_.join_crash_rank) std::raise(SIGKILL);
    TrainConfig rank0 = train_config_from_json(state.config_json, "rank 0's config");
    rank0.capture_every = config.capture_every;  // a live change, not a setting of the job's
    if (const auto d = first_difference(config, rank0)) {
        const std::string why = "rank " + std::to_string(env_.rank) + " was started with " + d->field + " " + d->a +
                                ", the job trains " + d->b + " (start it as the job's ranks were started)";
        rendezvous_->late_refuse(why);
        throw RendezvousError(why);
    }
    joined_state_ = std::move(state);
    joined_as_ = env_.rank;
    rendezvous_->late_ready();
    std::fprintf(stderr, "fp8scope-engine: rank %d joined the job at step %lld; now rank %d of %d\n", env_.rank,
                 static_cast<long long>(joined_state_->step), rendezvous_->rank(), rendezvous_->world_size());
    env_ = rendezvous_->env();
}

// Rank 0: a rank (as launched) the job lost, or whose replacement failed to join.
void RankJob::out_of_job(int rank) {
    if (restart_ && env_.rank == 0) restart_(rank);
}

void RankJob::make_elastic(Backend& backend) {
    rendezvous_->set_elastic(true);
    // Every rank of the job at its start learns where the others can be met again should
    // rank 0 be lost (a late joiner cannot: the others are training).
    if (!joined_state_) rendezvous_->share_roster();
    members_ = rendezvous_->launch_ranks();
    DataParallelStep::Elastic e;
    e.recovering = [this] {
        if (watchdog_) watchdog_->disarm();
        ++recoveries_;
    };
    e.join_failed = [this](int rank) { out_of_job(rank); };
    e.new_communicator = [this, &backend]() -> Communicator& {
        const std::vector<int>& now = rendezvous_->launch_ranks();
        auto in = [](const std::vector<int>& v, int r) { return std::find(v.begin(), v.end(), r) != v.end(); };
        std::erase_if(lost_, [&](int r) { return in(now, r); });  // joined again
        std::vector<int> newly;
        for (int r : members_)
            if (!in(now, r)) newly.push_back(r);
        lost_.insert(lost_.end(), newly.begin(), newly.end());
        members_ = now;
        const bool late = bool(joined_state_);
        if (!late && members_.at(std::size_t(rendezvous_->rank())) == options_.recovery_crash_rank) std::raise(SIGKILL);
        for (int r : newly) out_of_job(r);
        // Rank 0 lost while it was this rank's launcher (--nproc-per-node): a stopped or hung
        // one would never exit, and holds the job's output open.
        if (std::find(newly.begin(), newly.end(), 0) != newly.end()) stop_lost_launcher();
        env_ = rendezvous_->env();
        // The old one stays alive: the watchdog's thread may be aborting it.
        retired_.push_back(std::move(comm_));
        comm_ = make_communicator(backend, *rendezvous_);
        current_ = comm_.get();
        return *comm_;
    };
    step_->set_elastic(std::move(e));
}

void RankJob::stop_lost_launcher() {
    const char* launcher = std::getenv(kLauncherPidVar);
    if (launcher && std::atoll(launcher) == ::getppid()) ::kill(::getppid(), SIGKILL);
}

// Ranks train as one only with the same settings: another lr, seed, recipe or step count
// on one rank would train another model there or leave the others waiting. The whole
// effective config travels (a few KB), so the error names the field.
void RankJob::check_same_config(const TrainConfig& config) {
    const std::vector<std::string> all = rendezvous_->all_gather(train_config_to_json(config));
    const TrainConfig rank0 = train_config_from_json(all[0], "rank 0's config");
    for (std::size_t r = 1; r < all.size(); ++r) {
        if (all[r] == all[0]) continue;
        const auto d = first_difference(train_config_from_json(all[r], "rank " + std::to_string(r) + "'s config"), rank0);
        if (!d) continue;  // the same settings written otherwise
        throw RendezvousError("rank " + std::to_string(r) + " was started with " + d->field + " " + d->a +
                              ", rank 0 with " + d->b + " (every rank of a job trains the same settings)");
    }
}

void RankJob::preflight_gemm(Backend& backend, const std::string& device) {
    const int n = config_.preflight_size > 0 ? config_.preflight_size : backend.device() == Device::CPU ? 256 : 8192;
    double ms = time_gemm(backend, n, 5);
    if (env_.rank == options_.slow_rank && options_.slow_ms > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(options_.slow_ms));
        ms += options_.slow_ms;
    }
    const std::string where = device == "cuda" ? "cuda:" + std::to_string(env_.local_rank) : device;
    const RankTimings all = judge_rank_timings(rendezvous_->all_gather(encode_rank_timing({ms, host_name(), where})),
                                               config_.preflight_margin);
    const auto name = [&](int rank) {
        const RankTiming& t = all.ranks[std::size_t(rank)];
        return t.host + " " + t.device;
    };
    char line[256];
    std::snprintf(line, sizeof line, "pre-flight: %d ranks, GEMM %d^3 median %.2f ms%s", int(all.ranks.size()), n,
                  all.median_ms, all.slow.empty() ? ", every rank within the margin" : "");
    findings_.push_back(line);
    std::vector<int> leave;
    for (const SlowRank& s : all.slow) {
        const bool excluded = config_.exclude_slow && s.rank != 0;
        std::snprintf(line, sizeof line, "pre-flight: rank %d (%s) %.2f ms, %+.0f%% over the median%s", s.rank,
                      name(s.rank).c_str(), s.ms, 100 * (s.ratio() - 1),
                      excluded ? "; excluded" : config_.exclude_slow ? "; rank 0 cannot be excluded" : "");
        findings_.push_back(line);
        if (excluded) leave.push_back(s.rank);
    }
    std::sort(leave.begin(), leave.end());
    if (!rendezvous_->exclude(leave)) {
        excluded_ = true;
        std::fprintf(stderr, "fp8scope-engine: rank %d (%s) is slower than the others and leaves the job "
                             "(--exclude-slow): %.2f ms against a median of %.2f ms\n",
                     env_.rank, name(env_.rank).c_str(), ms, all.median_ms);
    }
}

void RankJob::preflight_allreduce(Backend& backend) {
    // 64 MiB of float32 on GPUs (NCCL's bandwidth regime); 4 MiB through a CPU job's TCP.
    const std::int64_t n = backend.device() == Device::CPU ? std::int64_t(1) << 20 : std::int64_t(16) << 20;
    DeviceBuffer<float> buf(backend, std::size_t(n));
    comm_->all_reduce(buf.data(), n, ReduceOp::Sum);  // warm-up: connections, buffers
    comm_->synchronize();
    rendezvous_->barrier();
    const int reps = 5;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) comm_->all_reduce(buf.data(), n, ReduceOp::Sum);
    comm_->synchronize();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / reps;
    const int w = comm_->world_size();
    const double busbw = double(n) * 4 / (ms * 1e-3) / 1e9 * 2.0 * (w - 1) / w;
    char line[256];
    std::snprintf(line, sizeof line, "pre-flight: all-reduce of %lld MiB in %.2f ms, bus bandwidth %.1f GB/s (%s)",
                  static_cast<long long>(n >> 18), ms, busbw, comm_->describe().c_str());
    findings_.push_back(line);
}

void RankJob::watch(Trainer& trainer) {
    trainer_ = &trainer;
    if (env_.rank == options_.slow_rank) trainer.delay_steps(options_.slow_ms);
    if (!dp_) return;  // a job of one from the start (a job the pre-flight check left alone still reports it)
    trainer.add_observer(this);
    watchdog_ = std::make_unique<Watchdog>([this](const std::string& phase) { on_watchdog(phase); });
}

void RankJob::on_watchdog(const std::string& phase) {
    const double t = config_.rank_timeout_s;
    const int rank = env_.rank, recoveries = recoveries_;
    std::fprintf(stderr,
                 "fp8scope-engine: error: rank %d: %s did not finish within %.0f s (1.5 x --rank-timeout-s + 1): "
                 "this or another rank hangs, or one died; aborting%s\n",
                 rank, phase.c_str(), 1.5 * t + 1, config_.elastic ? " the step (elastic: the ranks recover)" : "");
    current_.load()->abort();
    // The training thread now fails out of its wait and ends the trace, or (elastic) begins
    // a recovery; if it cannot (a wait nothing interrupts), the process ends anyway.
    const auto grace = std::chrono::duration<double>(config_.elastic ? 3 * t + 1 : std::clamp(t, 1.0, 30.0));
    const auto until = std::chrono::steady_clock::now() + grace;
    while (std::chrono::steady_clock::now() < until) {
        if (recoveries_ != recoveries) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::fprintf(stderr, "fp8scope-engine: error: rank %d: still stuck after the abort; exiting\n", rank);
    std::_Exit(1);
}

void RankJob::on_step_begin(std::int64_t step, bool) {
    for (std::string& f : findings_) trainer_->note(EventKind::Health, std::move(f));  // now the trace is open
    findings_.clear();
    // Half as long again as the rendezvous' own bound, so a peer lost during an exchange is
    // named by the exchange; the watchdog catches what waits elsewhere (a gradient sum).
    if (watchdog_)
        watchdog_->arm("step " + std::to_string(step),
                       std::chrono::milliseconds(static_cast<long long>(config_.rank_timeout_s * 1500 + 1000)));
    // Drills name ranks as launched (an elastic job renumbers them); a replacement that
    // joined late does not repeat them.
    if (joined_state_) return;
    const int rank = rendezvous_ ? rendezvous_->launch_ranks().at(std::size_t(rendezvous_->rank())) : env_.rank;
    if (rank == options_.crash_rank && step == options_.crash_step) std::raise(SIGKILL);
    if (rank == options_.stop_rank && step == options_.stop_step) std::raise(SIGSTOP);
    if (rank == options_.hang_rank && step == options_.hang_step)
        for (;;) std::this_thread::sleep_for(std::chrono::hours(1));  // only the watchdog ends this
}

void RankJob::on_step(const StepRecord&) {
    // Disarmed when the step is agreed (the next step re-arms); a hang after on_step, in the
    // agreement, is bounded by the rendezvous' own timeout.
    if (watchdog_) watchdog_->disarm();
}

std::string RankJob::rank_path(const std::string& path) const {
    if (env_.rank == 0 || path.empty()) return path;
    const std::filesystem::path p(path);
    // A rank that joined late keeps the trace of the rank it replaces: its own name says
    // the rank as launched and the step it joined at.
    const std::string rank = joined_state_ ? std::to_string(joined_as_) + ".joined" + std::to_string(joined_state_->step)
                                           : std::to_string(env_.rank);
    return (p.parent_path() / (p.stem().string() + ".rank" + rank + p.extension().string())).string();
}

}  // namespace fp8scope::cli
