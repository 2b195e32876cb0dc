// Data parallel on the GPUs of one machine (ranks as threads of this process, NCCL between
// them), in one run:
// 1. all-reduce of float32 buffers from 4 MiB to 1 GiB through the engine's communicator:
//    time, algorithm bandwidth (bytes / time) and bus bandwidth (algbw * 2 (n-1) / n, the
//    figure nccl-tests' all_reduce_perf prints, so the two compare directly);
// 2. gradient sums of --sums million gradients in 25 MiB buckets, as the trainer takes
//    them, in float32, BF16 and the FP8 type of --grad-dtype (e4m3 unless it names e5m2):
//    the bytes of each rank's wire form, the time from the first bucket to the last
//    summed gradient, and what FP8 saves against BF16;
// 3. training steps of the same model (per-rank batch fixed) on 1 GPU and on all of them:
//    ms per step, tokens/s, weak-scaling efficiency (t_1 / t_n), where each rank's step
//    went (compute, and waiting for the gradient sums after backward) and the bytes each
//    rank sent into the sums in the --grad-dtype type (and the relative error a type other
//    than f32 added).
//
// usage: bench_data_parallel [--ranks N] [--steps 20] [--allreduce 0|1] [--sums 256] [--train 0|1]
//                            [--grad-dtype f32|bf16|e4m3|e5m2] [key=value ...]   (TrainConfig overrides)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cuda/runtime/devices.h"
#include "engine/fp8_grad_sum.h"
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
    testing::run_ranks(world, "cuda", 0, [&](testing::Rank& r) {
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

// What one rank's sums of `n` gradients in `bucket_bytes` buckets (of the wire type) cost:
// the bytes of its wire form and the median time from the first bucket issued to the
// last gradient summed.
struct SumCost {
    double bytes = 0, ms = 0;
};

SumCost bench_sums(int world, DType type, std::int64_t n, std::size_t bucket_bytes) {
    SumCost cost;
    testing::run_ranks(world, "cuda", 0, [&](testing::Rank& r) {
        Backend& b = *r.backend;
        Communicator& comm = *r.comm;
        const std::int64_t bucket = std::int64_t(bucket_bytes / dtype_size(type));
        DeviceBuffer<float> grads(b, std::size_t(n));
        std::vector<float> host(static_cast<std::size_t>(n));
        std::uint32_t h = 12345u + std::uint32_t(r.env.rank);
        for (float& g : host) {  // random, never zero, of a gradient's size
            h = h * 1664525u + 1013904223u;
            g = (float(h >> 8) - 8388607.5f) * 1e-10f;
        }
        b.copy_from_host(grads.data(), host.data(), host.size() * sizeof(float));
        DeviceBuffer<std::uint16_t> low(b, type == DType::BF16 ? std::size_t(n) : 0);
        std::unique_ptr<Fp8GradSum> fp8;
        if (type == DType::E4M3 || type == DType::E5M2)
            fp8 = std::make_unique<Fp8GradSum>(b, comm, type == DType::E4M3 ? Format::E4M3 : Format::E5M2,
                                               std::size_t(bucket));
        // As DataParallel sums them: a collective per bucket, BF16 widened once at the end.
        auto sum_all = [&] {
            double bytes = 0;
            for (std::int64_t at = 0; at < n; at += bucket) {
                const std::int64_t count = std::min(bucket, n - at);
                if (fp8) {
                    bytes += double(fp8->sum(grads.data() + at, count));
                } else if (type == DType::BF16) {
                    b.convert(low.data() + at, DType::BF16, grads.data() + at, DType::F32, count);
                    comm.all_reduce(low.data() + at, DType::BF16, count, ReduceOp::Sum);
                    bytes += double(count) * 2;
                } else {
                    comm.all_reduce(grads.data() + at, count, ReduceOp::Sum);
                    bytes += double(count) * 4;
                }
            }
            comm.join();
            if (type == DType::BF16) b.convert(grads.data(), DType::F32, low.data(), DType::BF16, n);
            b.synchronize();
            return bytes;
        };
        for (int i = 0; i < 2; ++i) sum_all();  // warm-up: NCCL's connections and buffers
        std::vector<double> ms;
        double bytes = 0;
        for (int i = 0; i < 5; ++i) {
            r.rendezvous->barrier();
            const auto t0 = clock_type::now();
            bytes = sum_all();
            ms.push_back(ms_since(t0));
        }
        if (r.env.rank == 0) cost = {bytes, median(ms)};
    });
    return cost;
}

void report_sums(int world, DType fp8, std::int64_t millions) {
    const std::int64_t n = millions << 20;
    const std::size_t bucket_bytes = DataParallelOptions{}.bucket_bytes;
    std::printf("gradient sums of %lld Mi gradients in %zu MiB buckets, %d ranks: bytes of a rank's wire form, "
                "time (median of 5)\n",
                static_cast<long long>(millions), bucket_bytes >> 20, world);
    SumCost cost[3];
    const DType types[3] = {DType::F32, DType::BF16, fp8};
    for (int k = 0; k < 3; ++k) {
        cost[k] = bench_sums(world, types[k], n, bucket_bytes);
        std::printf("  %-5s %9.1f MB  %9.3f ms  %7.1f GB/s of float32 gradients\n", dtype_name(types[k]),
                    cost[k].bytes / 1e6, cost[k].ms, double(n) * 4 / (cost[k].ms * 1e-3) / 1e9);
    }
    std::printf("  %s against bf16: %.1f%% of the bytes (%.1f MB saved per rank), %.1f%% of the time "
                "(%.3f ms saved)\n",
                dtype_name(fp8), 100 * cost[2].bytes / cost[1].bytes, (cost[1].bytes - cost[2].bytes) / 1e6,
                100 * cost[2].ms / cost[1].ms, cost[1].ms - cost[2].ms);
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
        std::printf("      gradient sums in %s: %.1f MB per rank per step", dtype_name(options.grad_dtype),
                    bytes / 1e6);
        if (!std::isnan(error)) std::printf(", relative error added %.2e (sampled)", error);
        std::printf("\n");
    } else {
        std::printf("\n");
    }
    return step;
}

}  // namespace

int main(int argc, char** argv) {
    int world = int(cuda::devices().size()), steps = 20, sums = 256;
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
        else if (a == "--sums") sums = next();
        else if (a == "--train") train = next() != 0;
        else if (a == "--grad-dtype" && i + 1 < argc) {
            const std::string type = argv[++i];
            bool known = false;
            for (DType t : {DType::F32, DType::BF16, DType::E4M3, DType::E5M2})
                if (type == dtype_name(t)) options.grad_dtype = t, known = true;
            if (!known) {
                std::fprintf(stderr, "bench_data_parallel: --grad-dtype %s: not one of f32, bf16, e4m3, e5m2\n",
                             type.c_str());
                return 2;
            }
        } else {
            overrides.push_back(a);
        }
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
        if (sums > 0) report_sums(world, options.grad_dtype == DType::E5M2 ? DType::E5M2 : DType::E4M3, sums);
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
