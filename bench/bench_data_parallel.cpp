// Data parallel on the GPUs of one machine (ranks as threads of this process, NCCL between
// them), in one run:
// 1. all-reduce of float32 buffers from 4 MiB to 1 GiB through the engine's communicator:
//    time, algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2 (n-1) / n, the
//    figure nccl-tests' all_reduce_perf prints, so the two compare directly);
// 2. training steps of the same model (per-rank batch fixed) on 1 GPU and on all of them:
//    ms per step, tokens/s, weak-scaling efficiency (t_1 / t_n), where each rank's step
//    went (compute, and waiting for the gradient sums after backward) and the bytes each rank
//    sent into the sums (with --grad-dtype bf16 also the relative error they added).
//
// usage: bench_data_parallel [--ranks N] [--steps 20] [--allreduce 0|1] [--train 0|1]
//                            [--grad-dtype f32|bf16] [key=value ...]   (TrainConfig overrides)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/devices.h"
#include "engine/train_config.h"
#include "support/data_parallel_job.h"

using namespace fp8scope;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

void bench_allreduce(int world) {
    std::printf("all-reduce (sum, float32), %d ranks: size, time, algbw, busbw\n", world);
    TrainConfig tiny;  // the job's trainers are the default small model; only the communicators work
    tiny.device = "cuda";
    testing::run_job(world, "cuda", tiny, [&](testing::Rank& r) {
        const std::size_t max_elems = std::size_t(256) << 20;  // 1 GiB
        DeviceBuffer<float> buf(*r.backend, max_elems);
        for (std::size_t n = std::size_t(1) << 20; n <= max_elems; n *= 4) {
            const int reps = n >= (std::size_t(64) << 20) ? 5 : 20;
            for (int i = 0; i < 3; ++i) r.comm->all_reduce(buf.data(), std::int64_t(n), ReduceOp::Sum);
            r.comm->synchronize();
            r.rendezvous->barrier();
            const auto t0 = clock_type::now();
            for (int i = 0; i < reps; ++i) r.comm->all_reduce(buf.data(), std::int64_t(n), ReduceOp::Sum);
            r.comm->synchronize();
            const double ms = ms_since(t0) / reps;
            if (r.env.rank == 0) {
                const double bytes = double(n) * 4, algbw = bytes / (ms * 1e-3) / 1e9;
                std::printf("  %8.1f MiB  %8.3f ms  algbw %7.1f GB/s  busbw %7.1f GB/s\n", bytes / (1 << 20), ms, algbw,
                            algbw * 2.0 * (world - 1) / world);
            }
        }
    });
}

struct StepTimes : TrainObserver {
    std::vector<RankStepRecord> ranks;
    void on_rank_step(const RankStepRecord& r) override { ranks.push_back(r); }
};

// Median step time of rank 0 over `steps` steps after 3 warm-up steps.
double bench_training(int world, const TrainConfig& config, int steps, const DataParallelOptions& options) {
    std::vector<double> ms;
    std::vector<StepTimes> seen(static_cast<std::size_t>(world));
    auto body = [&](Trainer& t, int rank) {
        for (int i = 0; i < 3; ++i) t.step();
        if (rank >= 0) t.add_observer(&seen[std::size_t(rank)]);
        for (int i = 0; i < steps; ++i) {
            const auto t0 = clock_type::now();
            t.step();
            if (rank <= 0) ms.push_back(ms_since(t0));
        }
    };
    if (world == 1) {
        auto backend = make_backend("cuda", 0, 0);
        Trainer t(config, *backend);
        body(t, -1);
    } else {
        testing::run_job(
            world, "cuda", config, [&](testing::Rank& r) { body(*r.trainer, r.env.rank); }, options);
    }
    const double step = median(ms);
    const double tokens = double(config.batch_size) * config.seq_len * world;
    std::printf("  %d GPU%s: %8.2f ms/step (median of %d)  %10.0f tokens/s", world, world == 1 ? " " : "s", step,
                steps, tokens / (step * 1e-3));
    if (world > 1) {
        std::printf("\n");
        for (int r = 0; r < world; ++r) {
            std::vector<double> compute, comm;
            for (const RankStepRecord& rec : seen[0].ranks)
                if (rec.rank == r) compute.push_back(rec.compute_ms), comm.push_back(rec.comm_ms);
            std::printf("      rank %d: compute %8.2f ms, waiting for the gradient sums %7.2f ms (medians)\n", r,
                        median(compute), median(comm));
        }
        double bytes = 0, error = NAN;
        for (const RankStepRecord& rec : seen[0].ranks) {
            bytes = rec.grad_bytes;
            if (!std::isnan(rec.grad_error)) error = rec.grad_error;
        }
        std::printf("      gradient sums in %s: %.1f MB per rank per step", dtype_name(options.grad_dtype), bytes / 1e6);
        if (!std::isnan(error)) std::printf(", relative error added %.2e (sampled)", error);
        std::printf("\n");
    } else {
        std::printf("\n");
    }
    return step;
}

}  // namespace

int main(int argc, char** argv) {
    int world = int(cuda::devices().size()), steps = 20;
    bool allreduce = true, train = true;
    DataParallelOptions options;
    options.measure_every = 5;
    std::vector<std::string> overrides;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
        if (a == "--ranks") world = next();
        else if (a == "--steps") steps = next();
        else if (a == "--allreduce") allreduce = next() != 0;
        else if (a == "--train") train = next() != 0;
        else if (a == "--grad-dtype" && i + 1 < argc) options.grad_dtype = std::string(argv[++i]) == "bf16" ? DType::BF16 : DType::F32;
        else overrides.push_back(a);
    }
    if (world < 2) {
        std::fprintf(stderr, "bench_data_parallel: needs 2 or more GPUs (%d found)\n", world);
        return 2;
    }
    TrainConfig config;
    config.device = "cuda";
    config.recipe = "current";
    config.eval.every = 0;
    config.capture_every = 0;
    config.rewind.enabled = false;
    try {
        apply_overrides(config, overrides);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_data_parallel: %s\n", e.what());
        return 2;
    }
    config.steps = steps + 3;
    try {
        if (allreduce) bench_allreduce(world);
        if (train) {
            std::printf("training: recipe %s, %d layers x %d, T %d, batch %d per rank, vocab %d\n", config.recipe.c_str(),
                        config.model.n_layer, config.model.d_model, config.seq_len, config.batch_size,
                        config.model.vocab_size);
            const double t1 = bench_training(1, config, steps, options);
            const double tn = bench_training(world, config, steps, options);
            std::printf("  weak-scaling efficiency 1 -> %d GPUs: %.1f%% (t_1 / t_%d)\n", world, 100.0 * t1 / tn, world);
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_data_parallel: %s\n", e.what());
        return 1;
    }
    return 0;
}
