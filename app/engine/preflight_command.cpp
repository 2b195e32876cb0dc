// `fp8scope-engine preflight`: the pre-flight health check of a data-parallel job. Every
// rank runs it as the job's launcher starts them (torchrun, mpirun, srun; a lone process
// checks itself): each times a float32 GEMM workload on its device (the median of --reps
// runs of --size^3, through the backend as training runs it), the ranks meet over the TCP
// rendezvous (comm/rendezvous.h) and rank 0 compares every rank with the median
// (engine/rank_health.h). A rank slower than the median by more than --margin is named
// with its host and device, on every rank. Exit status: 0 healthy, 3 a slow rank, 1 the
// job could not meet (a rank missing, hung or dead: the message names it).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "backends.h"
#include "commands.h"
#include "local_ranks.h"
#include "renamed_option.h"
#include "comm/launch_env.h"
#include "engine/rank_health.h"
#include "comm/rendezvous.h"
#include "gemm_probe.h"
#include "util/host_name.h"

namespace fp8scope::cli {
namespace {

struct PreflightOptions {
    std::string device = "cpu";
    int size = 1024, reps = 5, threads = 0;
    double margin = 0.10;
    double timeout_s = 300;
    int delay_ms = 0;
    int nproc_per_node = 0;
};

int run_preflight(const PreflightOptions& o) {
    LaunchEnv env;
    try {
        env = launch_env();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: %s\n", e.what());
        return 1;
    }
    std::string device_line;
    double ms = 0;
    try {
        auto backend = make_backend(o.device, o.threads, env.local_rank);
        device_line = backend->describe();
        ms = time_gemm(*backend, o.size, o.reps);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "fp8scope-engine: error: rank %d: %s\n", env.rank, e.what());
        return 1;
    }
    if (o.delay_ms > 0) {  // a slow rank on purpose, to see the check catch it
        std::this_thread::sleep_for(std::chrono::milliseconds(o.delay_ms));
        ms += o.delay_ms;
    }
    try {
        Rendezvous rv(env, std::chrono::milliseconds(static_cast<long long>(o.timeout_s * 1000)));
        const RankTimings all =
            judge_rank_timings(rv.all_gather(encode_rank_timing({ms, host_name(), device_line})), o.margin);
        const std::vector<SlowRank>& slow = all.slow;
        const double median = all.median_ms;
        if (env.rank == 0) {
            std::printf("preflight: %d rank(s) (%s), GEMM %d^3 float32 on %s, median of %d\n", env.world_size,
                        env.launcher.c_str(), o.size, o.device.c_str(), o.reps);
            std::printf("%-5s %-20s %10s %9s  %s\n", "rank", "host", "ms", "x median", "device");
            for (int r = 0; r < env.world_size; ++r) {
                const RankTiming& t = all.ranks[std::size_t(r)];
                std::printf("%-5d %-20s %10.3f %9.2f  %s%s\n", r, t.host.c_str(), t.ms, t.ms / median,
                            t.device.c_str(), all.is_slow(r) ? "  SLOW" : "");
            }
        }
        if (slow.empty()) {
            std::printf("preflight rank %d: healthy: every rank within %.0f%% of the median (%.3f ms)\n", env.rank,
                        100 * o.margin, median);
            return 0;
        }
        std::string names;
        for (const SlowRank& s : slow) {
            char ratio[32];
            std::snprintf(ratio, sizeof ratio, "%.2fx", s.ratio());
            names += (names.empty() ? "" : ", ") + std::to_string(s.rank) + " (" + all.ranks[std::size_t(s.rank)].host +
                     ", " + ratio + ")";
        }
        std::printf("preflight rank %d: slow rank(s) %s: more than %.0f%% over the median (%.3f ms)\n", env.rank,
                    names.c_str(), 100 * o.margin, median);
        return 3;
    } catch (const std::exception& e) {  // a rank missing, hung or dead, or a record of another version
        std::fprintf(stderr, "fp8scope-engine: error: preflight rank %d: %s\n", env.rank, e.what());
        return 1;
    }
}

}  // namespace

void add_preflight(CLI::App& app, int& exit_code) {
    auto opts = std::make_shared<PreflightOptions>();
    auto* cmd = app.add_subcommand(
        "preflight",
        "Health check of a data-parallel job before training: every rank (started by torchrun, mpirun, ...) times a "
        "GEMM on its device and slow ranks are named");
    cmd->add_option("--device", opts->device, "cpu or cuda (the rank's GPU is LOCAL_RANK)")->check(CLI::IsMember(built_devices()));
    cmd->add_option("--size", opts->size, "GEMM size n (n x n x n)")->check(CLI::Range(16, 16384));
    cmd->add_option("--reps", opts->reps, "timed GEMMs; the median counts")->check(CLI::Range(1, 1000));
    cmd->add_option("--threads", opts->threads, "CPU threads (0: all)")->check(CLI::Range(0, 4096));
    cmd->add_option("--margin", opts->margin, "a rank slower than the median by more than this fraction is slow")
        ->check(CLI::Range(0.0, 100.0));
    const CLI::Range timeout(0.1, 86400.0);
    cmd->add_option("--timeout-s", opts->timeout_s, "seconds to wait for every rank")->check(timeout);
    add_renamed_option<double>(*cmd, "--timeout", "--timeout-s", opts->timeout_s)->check(timeout);
    cmd->add_option("--delay-ms", opts->delay_ms, "adds this much to this rank's time (to see the check catch a slow rank)")
        ->check(CLI::Range(0, 3600000));
    cmd->add_option("--nproc-per-node", opts->nproc_per_node,
                    "start this many ranks on this machine (this process is rank 0), as torchrun would")
        ->check(CLI::Range(1, 1024));
    cmd->callback([opts, &exit_code] {
        if (opts->nproc_per_node < 1) {
            exit_code = run_preflight(*opts);
            return;
        }
        if (const std::string why = opts->device == "cpu" ? cpu_ranks_refused(opts->nproc_per_node) : "";
            !why.empty()) {
            std::fprintf(stderr, "fp8scope-engine: error: --nproc-per-node: %s\n", why.c_str());
            exit_code = 2;
            return;
        }
        try {
            LocalRanks ranks(opts->nproc_per_node);
            const int mine = run_preflight(*opts);
            exit_code = mine == 1 ? 1 : ranks.wait(mine);  // a failed rank 0 stops the others
        } catch (const std::exception& e) {
            std::fprintf(stderr, "fp8scope-engine: error: %s\n", e.what());
            exit_code = 1;
        }
    });
}

}  // namespace fp8scope::cli
