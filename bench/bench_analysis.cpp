// Throughput of the numerics core on one large float32 tensor: per recipe quantize(),
// quantize() + error_stats(), fake_quantize(); tensor_stats(); and the fused analyze() of
// tensor_stats plus the default recipes, on one thread and on all. Prints elements/s and
// the peak RSS.
//   bench_analysis [elements (default 64M)] [cols (default 8192)] [repeats (default 3)] [fused]
// "fused" skips the per-recipe quantize figures.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "cpu/analysis.h"
#include "cpu/quantize.h"
#include "fp8/recipe.h"
#include "cpu/stats.h"

using namespace fp8scope;

namespace {

double peak_rss_mib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss / 1024.0;  // ru_maxrss is in KiB on Linux
}

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

// Best of `repeats` wall times, in seconds; `cpu` gets the process CPU seconds of that
// run (all threads): on a machine shared with other work it shows the cost that wall
// time hides.
double last_cpu = 0;
template <typename F>
double best_time(int repeats, F&& f) {
    double best = 1e30;
    for (int i = 0; i < repeats; ++i) {
        const double c0 = cpu_seconds();
        const auto t0 = std::chrono::steady_clock::now();
        f();
        const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (t < best) {
            best = t;
            last_cpu = cpu_seconds() - c0;
        }
    }
    return best;
}

// Gaussian-like data (sum of uniforms) with a few outlier columns, quick to make.
std::vector<float> make_data(std::int64_t n, std::int64_t cols) {
    std::vector<float> x(n);
    std::uint64_t s = 0x9E3779B97F4A7C15ull;
    auto next = [&] {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return static_cast<double>(s >> 11) * 0x1p-53;
    };
    for (std::int64_t i = 0; i < n; ++i) {
        const double g = (next() + next() + next() + next() - 2.0) * 1.7320508;
        x[i] = static_cast<float>(g * ((i % cols) % 997 == 5 ? 100.0 : 1.0));
    }
    return x;
}

}  // namespace

int main(int argc, char** argv) {
    const std::int64_t n = argc > 1 ? std::atoll(argv[1]) : (64ll << 20);
    const std::int64_t cols = argc > 2 ? std::atoll(argv[2]) : 8192;
    const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
    const std::int64_t rows = std::max<std::int64_t>(1, n / cols);
    const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::vector<float> data = make_data(rows * cols, cols);
    const MatrixView x{data.data(), rows, cols};
    const double el = static_cast<double>(x.size());
    std::printf("tensor %lldx%lld (%.1f M elements, %.0f MiB), %d hardware threads\n", (long long)rows,
                (long long)cols, el / 1e6, el * 4 / (1 << 20), hw);

    const std::vector<Recipe> recipes = default_analysis_recipes();
    const bool fused_only = argc > 4 && std::string(argv[4]) == "fused";
    std::vector<float> out(fused_only ? 0 : x.size());
    if (!fused_only) std::printf("\n%-22s %8s %14s %14s %14s\n", "recipe", "threads", "quantize", "quant+errstat", "fake_quantize");
    for (int threads : {1, hw}) {
        if (fused_only) break;
        for (const Recipe& r : recipes) {
            const double tq = best_time(repeats, [&] { quantize(x, r, nullptr, threads); });
            QuantizedTensor q = quantize(x, r, nullptr, threads);
            const double te = best_time(repeats, [&] { error_stats(x, q, recipe_name(r)); });
            const double tf = best_time(repeats, [&] { fake_quantize(x, r, out.data(), nullptr, threads); });
            std::printf("%-22s %8d %11.0f M/s %11.0f M/s %11.0f M/s\n", recipe_name(r).c_str(), threads,
                        el / tq / 1e6, el / (tq + te) / 1e6, el / tf / 1e6);
        }
    }

    std::printf("\n%-40s %8s %10s %12s %12s\n", "fused", "threads", "seconds", "elements/s", "cpu seconds");
    for (int threads : {1, hw}) {
        StatsOptions opt;
        opt.threads = threads;
        const double ts = best_time(repeats, [&] { tensor_stats(x, opt); });
        std::printf("%-40s %8d %10.3f %9.0f M/s %12.3f\n", "tensor_stats", threads, ts, el / ts / 1e6, last_cpu);
        for (const Recipe& r : recipes) {
            const double t1 = best_time(repeats, [&] { analyze(x, {r}, opt); });
            std::printf("%-40s %8d %10.3f %9.0f M/s %12.3f\n", ("analyze tensor_stats + " + recipe_name(r)).c_str(),
                        threads, t1, el / t1 / 1e6, last_cpu);
        }
        const double ta = best_time(repeats, [&] { analyze(x, recipes, opt); });
        std::printf("%-40s %8d %10.3f %9.0f M/s %12.3f\n", "analyze tensor_stats + 11 recipes", threads, ta, el / ta / 1e6,
                    last_cpu);
    }
    if (fused_only) {
        std::printf("\npeak RSS %.0f MiB (input %.0f MiB)\n", peak_rss_mib(), el * 4 / (1 << 20));
    } else {
        std::printf("\npeak RSS %.0f MiB (input %.0f MiB + fake_quantize output %.0f MiB + codes %.0f MiB)\n",
                    peak_rss_mib(), el * 4 / (1 << 20), el * 4 / (1 << 20), el / (1 << 20));
    }
    return 0;
}
