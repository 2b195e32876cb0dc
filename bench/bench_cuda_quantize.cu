// The FP8 and FP4 casts of the CUDA backend against the device-to-device copy bandwidth measured
// in the same run: x (R, C) BF16 (activations) and float32 (weights), normal data with a
// few outliers and no zeros, cast to the rowwise and the columnwise copy at once. Bytes
// counted are those a cast must move: every read of x (current scaling reads it twice),
// both code copies, the scale_inv grids (and E8M0 grids for MX); the copy moves 2 bytes
// per byte copied (read + write). Times: CUDA events, median of the runs after warm-up;
// under each recipe the kernels it ran (CUPTI). FP4 codes are packed two to a byte;
// NVFP4 reads x twice (its tensor amax first; with rht the same pass also takes the
// transformed columnwise copy's amax), MXFP4 once.
//
// Last, the FP4 training cast (cast_fp4_copies, what CudaBackend::cast runs for nvfp4 and
// mxfp4): both BF16 GEMM copies (2 bytes per element each) with the amax fused, RHT on
// the columnwise copy where the quantizer has it; the goal is 80% of the copy bandwidth
// for BF16 input. Before it, the same access pattern without the cast's arithmetic: how
// far the cast is from what its reads and writes allow.
//
//   bench_cuda_quantize [--rows R] [--cols C] [--runs N] [--breakdown 0]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "cuda/cast/fp4.h"
#include "cuda/cast/fp4_train.h"
#include "cuda/cast/quantize.h"
#include "cuda/runtime/check.h"
#include "cuda_bench.cuh"
#include "kernel_breakdown.h"

namespace {

using namespace fp8scope;
using namespace fp8scope::bench;

// The FP4 training cast's access pattern without its arithmetic: x (BF16) copied to a
// straight and a transposed copy in the cast's 32 x 128 tiles, one per short-lived CTA,
// the columns through shared memory. What the cast could reach at best.
__global__ void __launch_bounds__(256) copy_straight_and_transposed(const std::uint16_t* __restrict__ x, std::int64_t rows,
                                                                    std::int64_t cols, std::uint16_t* __restrict__ straight,
                                                                    std::uint16_t* __restrict__ transposed) {
    __shared__ std::uint16_t tile[32][128 + 8];
    const int t = threadIdx.x;
    const unsigned tiles_x = unsigned(cols / 128);
    const std::int64_t r0 = blockIdx.x / tiles_x * 32, c0 = blockIdx.x % tiles_x * 128;
    uint4 v[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) v[h] = *reinterpret_cast<const uint4*>(x + (r0 + t / 16 + 16 * h) * cols + c0 + t % 16 * 8);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        *reinterpret_cast<uint4*>(&tile[t / 16 + 16 * h][t % 16 * 8]) = v[h];
        *reinterpret_cast<uint4*>(straight + (r0 + t / 16 + 16 * h) * cols + c0 + t % 16 * 8) = v[h];
    }
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int c = (t + 256 * h) / 4, r = t % 4 * 8;
        std::uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) w[j] = std::uint32_t(tile[r + 2 * j][c]) | std::uint32_t(tile[r + 2 * j + 1][c]) << 16;
        *reinterpret_cast<uint4*>(transposed + (c0 + c) * rows + r0 + r) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

struct Case {
    const char* name;
    Recipe recipe;
    int reads;  // passes over x
};

}  // namespace

int main(int argc, char** argv) {
    std::int64_t rows = 8192, cols = 8192;
    int runs = 30;
    shape_options(argc, argv, rows, cols, runs, 20);
    bool breakdowns = true;  // --breakdown 0: times only (no CUPTI)
    for (int i = 1; i + 1 < argc; ++i)
        if (!std::strcmp(argv[i], "--breakdown")) breakdowns = std::atoi(argv[i + 1]) != 0;
    int device = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
        std::printf("bench_cuda_quantize: no CUDA device\n");
        return 1;
    }
    const std::int64_t n = rows * cols;
    std::printf("gpu: %s, %d SMs\nx: %lld x %lld, %d runs (median)\n", prop.name, prop.multiProcessorCount,
                (long long)rows, (long long)cols, runs);

    cudaStream_t stream;
    FP8SCOPE_CUDA_CHECK(cudaStreamCreate(&stream));
    void *x, *copy_dst;
    std::uint8_t *row, *col, *row_e8m0, *col_e8m0;
    float *row_sinv, *col_sinv;
    cuda::CastStats* stats;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&x, n * 4));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&copy_dst, n * 4));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&row, n));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&col, n));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&row_sinv, n / 8 + 64));  // grids of blocks >= 32 elements
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&col_sinv, n / 8 + 64));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&row_e8m0, n / 16 + 64));  // NVFP4: a code per 16
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&col_e8m0, n / 16 + 64));
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&stats, sizeof(cuda::CastStats)));

    // The copy ceiling: 4 bytes per element of x copied, read + write.
    const double copy_ms = median_ms(stream, runs, [&] {
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(copy_dst, x, n * 4, cudaMemcpyDeviceToDevice, stream));
    });
    const double copy_gbs = 2.0 * n * 4 / copy_ms * 1e-6;
    std::printf("device-to-device copy: %.3f ms for %.0f MB, %.0f GB/s\n", copy_ms, 2.0 * n * 4 * 1e-6, copy_gbs);
    if (rows % 32 == 0 && cols % 128 == 0) {
        const double ms = median_ms(stream, runs, [&] {
            copy_straight_and_transposed<<<unsigned(n / (32 * 128)), 256, 0, stream>>>(
                static_cast<const std::uint16_t*>(x), rows, cols, static_cast<std::uint16_t*>(copy_dst), static_cast<std::uint16_t*>(copy_dst) + n);
        });
        const double gbs = 6.0 * double(n) / ms * 1e-6;
        std::printf("BF16 copy to a straight and a transposed copy (the training cast's access pattern): %.3f ms, "
                    "%.0f GB/s, %.1f%% copy\n\n", ms, gbs, 100.0 * gbs / copy_gbs);
    }

    const DelayedScaling delayed{Format::E4M3, 1024, AmaxAlgo::Max, 0};
    void* state;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&state, cuda::delayed_state_bytes(delayed)));
    DelayedState host(delayed);
    host.push(40.0f);
    cuda::delayed_state_write(state, host, stream);

    const std::vector<Case> cases = {
        {"current e4m3", CurrentScaling{Format::E4M3}, 2},
        {"delayed e4m3 (+push)", delayed, 1},
        {"block 1x128", BlockScaling{Format::E4M3, 1, 128, false}, 1},
        {"block 128x128", BlockScaling{Format::E4M3, 128, 128, true}, 1},
        {"mxfp8 e4m3 rceil", MXScaling{Format::E4M3, MXRule::RCeil, 32}, 1},
    };
    KernelBreakdown breakdown;
    // x as normal data of type `in` (the same values for every section).
    auto fill = [&](DType in) {
        FP8SCOPE_CUDA_CHECK(cudaMemset(x, 0, n * 4));
        fill_normal<<<prop.multiProcessorCount * 8, 256, 0, stream>>>(x, in == DType::BF16, n, 12345u);
        FP8SCOPE_CUDA_LAUNCHED();
    };
    for (DType in : {DType::BF16, DType::F32}) {
        fill(in);
        const double in_bytes = double(n) * dtype_size(in);
        std::printf("%s input, rowwise + columnwise + amax\n", dtype_name(in));
        std::printf("  %-22s %10s %10s %10s %8s\n", "recipe", "ms", "MB moved", "GB/s", "% copy");
        for (const Case& c : cases) {
            const cuda::ScaleGrid rg = cuda::scale_grid(c.recipe, rows, cols), cg = cuda::scale_grid(c.recipe, cols, rows);
            const bool mx = std::holds_alternative<MXScaling>(c.recipe);
            const cuda::CastTarget t{row, row_sinv, mx ? row_e8m0 : nullptr, col, col_sinv, mx ? col_e8m0 : nullptr, stats};
            const cuda::CastInput xi{x, in, rows, cols};
            const bool is_delayed = std::holds_alternative<DelayedScaling>(c.recipe);
            auto call = [&] { cuda::cast(xi, c.recipe, t, stream, is_delayed ? state : nullptr, true); };
            const double ms = median_ms(stream, runs, call);
            const double bytes = c.reads * in_bytes + 2.0 * n + 4.0 * (rg.size() + cg.size()) +
                                 (mx ? double(rg.size() + cg.size()) : 0.0);
            const double gbs = bytes / ms * 1e-6;
            std::printf("  %-22s %10.3f %10.1f %10.0f %7.1f%%\n", c.name, ms, bytes * 1e-6, gbs, 100.0 * gbs / copy_gbs);
            if (breakdowns && breakdown.record(3, call)) breakdown.print();
        }
        std::printf("\n");
    }

    // FP4: rowwise + columnwise packed codes and block scale codes.
    {
        float *amax, *sdec;
        unsigned long long* overflow;
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&amax, 8));  // [1]: the columnwise copy's (rht)
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&sdec, 8));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&overflow, 16));
        for (DType in : {DType::BF16, DType::F32}) {
            fill(in);
            std::printf("%s input, FP4 rowwise + columnwise\n", dtype_name(in));
            std::printf("  %-22s %10s %10s %10s %8s\n", "quantizer", "ms", "MB moved", "GB/s", "% copy");
            for (const char* name : {"nvfp4", "nvfp4:rht=1", "nvfp4_2d", "mxfp4_rceil"}) {
                const Recipe r = parse_recipe(name);
                const int block = cuda::fp4_block(r) * cuda::fp4_block_rows(r), reads = std::holds_alternative<NVFP4Scaling>(r) ? 2 : 1;
                const cuda::Fp4Target t{row, row_e8m0, col, col_e8m0, amax, sdec, overflow, amax + 1, sdec + 1};
                const cuda::CastInput xi{x, in, rows, cols};
                auto call = [&] { cuda::cast_fp4(xi, r, t, stream); };
                const double ms = median_ms(stream, runs, call);
                const double bytes = reads * double(n) * dtype_size(in) + 2.0 * (n / 2.0) + 2.0 * double(n) / block;
                const double gbs = bytes / ms * 1e-6;
                std::printf("  %-22s %10.3f %10.1f %10.0f %7.1f%%\n", name, ms, bytes * 1e-6, gbs, 100.0 * gbs / copy_gbs);
                if (breakdowns && breakdown.record(3, call)) breakdown.print();
            }
            std::printf("\n");
        }
        for (void* p : {static_cast<void*>(amax), static_cast<void*>(sdec), static_cast<void*>(overflow)}) cudaFree(p);
    }

    // The MXFP8 GEMM path on Hopper: codes + scale_inv -> BF16.
    {
        const cuda::ScaleGrid g = cuda::scale_grid(MXScaling{}, rows, cols);
        const cuda::QuantizedInput q{row, row_sinv, Format::E4M3, rows, cols, g.block_rows, g.block_cols, g.transposed};
        const double ms = median_ms(stream, runs, [&] { cuda::dequantize(q, copy_dst, DType::BF16, stream); });
        const double bytes = double(n) + 2.0 * n + 4.0 * g.size();
        const double gbs = bytes / ms * 1e-6;
        std::printf("dequantize mxfp8 -> bf16: %.3f ms, %.0f GB/s, %.1f%% copy\n", ms, gbs, 100.0 * gbs / copy_gbs);
    }

    // FP4 training cast: rowwise + columnwise BF16 copies, amax fused, RHT where asked.
    {
        std::uint16_t *row16, *col16;
        cuda::Fp4Scalars* scalars;
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&row16, n * 2));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&col16, n * 2));
        FP8SCOPE_CUDA_CHECK(cudaMalloc(&scalars, sizeof(cuda::Fp4Scalars)));
        const cast::RoundingKey key{1234, 1, 2};
        for (DType in : {DType::BF16, DType::F32}) {
            fill(in);
            std::printf("\n%s input, FP4 training cast: BF16 rowwise + columnwise copies, amax fused\n", dtype_name(in));
            std::printf("  %-22s %10s %10s %10s %8s\n", "quantizer", "ms", "MB moved", "GB/s", "% copy");
            for (const char* name : {"nvfp4", "nvfp4:rht=1", "nvfp4_2d", "nvfp4:sr=1", "nvfp4:rht=1:sr=1", "mxfp4_rceil",
                                     "mxfp4_rceil:rht=1", "mxfp4_rceil:rht=1:sr=1"}) {
                const Recipe r = parse_recipe(name);
                const int reads = std::holds_alternative<NVFP4Scaling>(r) ? 2 : 1;
                const cuda::Fp4Copies t{row16, col16, stats, scalars};
                const cuda::CastInput xi{x, in, rows, cols};
                auto call = [&] { cuda::cast_fp4_copies(xi, r, key, t, stream); };
                const double ms = median_ms(stream, runs, call);
                const double bytes = reads * double(n) * dtype_size(in) + 2.0 * 2.0 * double(n);
                const double gbs = bytes / ms * 1e-6;
                std::printf("  %-22s %10.3f %10.1f %10.0f %7.1f%%\n", name, ms, bytes * 1e-6, gbs, 100.0 * gbs / copy_gbs);
                if (in == DType::BF16 && breakdowns && breakdown.record(3, call)) breakdown.print();
            }
        }
        std::printf("(goal: the FP4 casts of BF16 input, RHT included where the recipe has it, at >= 80%% of the copy)\n");
        for (void* p : {static_cast<void*>(row16), static_cast<void*>(col16), static_cast<void*>(scalars)}) cudaFree(p);
    }

    cuda::CastStats st{};
    FP8SCOPE_CUDA_CHECK(cudaMemcpy(&st, stats, sizeof st, cudaMemcpyDeviceToHost));
    std::printf("(last cast: amax %g, overflow %llu / %llu)\n", st.amax, st.overflow_rowwise, st.overflow_columnwise);
    for (void* p : {x, copy_dst, static_cast<void*>(row), static_cast<void*>(col), static_cast<void*>(row_sinv),
                    static_cast<void*>(col_sinv), static_cast<void*>(row_e8m0), static_cast<void*>(col_e8m0),
                    static_cast<void*>(stats), state})
        cudaFree(p);
    cudaStreamDestroy(stream);
    return 0;
}
