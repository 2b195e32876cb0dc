// The device analysis (kernels/cuda/analysis/analysis.h) against the device-to-device copy
// bandwidth measured in the same run: x (R, C) BF16 (activations and gradients), as
// stored and as a transposed view, with no recipe (statistics only), one, and the
// default `analyze` recipes. Bytes counted are those the analysis reads: x twice (pass 1
// and pass 2; pass 3 re-reads a few tiles). Two times per analyze() call: the host's wall
// time, the figures read back and finished included (what a capture step pays per
// operand), and the device time of its kernels (CUPTI), which the bandwidth is reckoned
// on; under each case the kernels it ran.
//
//   bench_cuda_analysis [--rows R] [--cols C] [--runs N]
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/analysis/analysis.h"
#include "cuda/runtime/check.h"
#include "cuda_bench.cuh"
#include "kernel_breakdown.h"

using namespace fp8scope;
using namespace fp8scope::bench;

namespace {

double median_wall_ms(int runs, const std::function<void()>& f) {
    for (int i = 0; i < 2; ++i) f();
    std::vector<double> ms;
    for (int i = 0; i < runs; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    std::int64_t rows = 8192, cols = 8192;
    int runs = 10;
    shape_options(argc, argv, rows, cols, runs, 3);
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
        std::printf("bench_cuda_analysis: no CUDA device\n");
        return 1;
    }
    const std::int64_t n = rows * cols;
    std::printf("gpu: %s, %d SMs\nx: %lld x %lld bf16, %d runs (median)\n", prop.name, prop.multiProcessorCount,
                (long long)rows, (long long)cols, runs);
    cudaStream_t stream;
    FP8SCOPE_CUDA_CHECK(cudaStreamCreate(&stream));
    void *x, *copy_dst;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&x, n * 2));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&copy_dst, n * 2));
    fill_normal<<<prop.multiProcessorCount * 8, 256, 0, stream>>>(x, true, n, 12345u);
    FP8SCOPE_CUDA_LAUNCHED();
    const double copy_ms = median_ms(stream, 20, [&] {
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(copy_dst, x, n * 2, cudaMemcpyDeviceToDevice, stream));
    });
    const double copy_gbs = 2.0 * n * 2 / copy_ms * 1e-6;
    std::printf("device-to-device copy: %.3f ms, %.0f GB/s\n\n", copy_ms, copy_gbs);

    struct Case {
        const char* name;
        std::vector<Recipe> recipes;
    };
    const std::vector<Case> cases = {
        {"statistics only", {}},
        {"+ current e4m3", {CurrentScaling{}}},
        {"+ block 1x128", {BlockScaling{}}},
        {"+ mxfp8 e4m3", {MXScaling{}}},
        {"+ 11 analyze recipes", default_analysis_recipes()},
    };
    cuda::Analyzer analyzer;
    KernelBreakdown breakdown;
    std::printf("  %-22s %-10s %9s %10s %9s %8s  %s\n", "recipes", "layout", "wall ms", "kernel ms", "GB/s", "% copy",
                "check");
    for (const Case& c : cases) {
        for (bool transposed : {false, true}) {
            const cuda::AnalysisInput in{x, DType::BF16, transposed ? cols : rows, transposed ? rows : cols, transposed};
            AnalysisExtras extras;
            Analysis a;
            auto call = [&] { a = analyzer.analyze(in, c.recipes, {}, extras, stream); };
            const double ms = median_wall_ms(runs, call);
            const bool traced = breakdown.record(3, call);
            const double kms = traced ? breakdown.total_ms() : ms;
            const double gbs = 2.0 * n * 2 / kms * 1e-6;
            std::printf("  %-22s %-10s %9.3f %10.3f %9.0f %7.1f%%  amax %g, rms %.4f%s%s\n", c.name,
                        transposed ? "transposed" : "stored", ms, kms, gbs, 100.0 * gbs / copy_gbs, a.tensor.amax,
                        a.tensor.rms, a.errors.empty() ? "" : ", sqnr ",
                        a.errors.empty() ? "" : std::to_string(a.errors.back().sqnr_db).c_str());
            if (traced) breakdown.print();
        }
    }
    // With the per-tile maps of every recipe (block-map steps).
    {
        const cuda::AnalysisInput in{x, DType::BF16, rows, cols, false};
        AnalysisExtras extras;
        extras.tile_maps = true;
        const std::vector<Recipe> r = default_analysis_recipes();
        auto call = [&] { analyzer.analyze(in, r, {}, extras, stream); };
        const double ms = median_wall_ms(runs, call);
        const double kms = breakdown.record(3, call) ? breakdown.total_ms() : ms;
        std::printf("  %-22s %-10s %9.3f %10.3f %9.0f %7.1f%%\n", "11 recipes + maps", "stored", ms, kms,
                    2.0 * n * 2 / kms * 1e-6, 100.0 * (2.0 * n * 2 / kms * 1e-6) / copy_gbs);
    }
    cudaFree(x);
    cudaFree(copy_dst);
    cudaStreamDestroy(stream);
    return 0;
}
