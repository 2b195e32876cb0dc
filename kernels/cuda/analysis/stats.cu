// Pass 2 of the device analysis when no recipe is asked for (statistics only): one block
// of threads per 128 x 128 tile of the view, as in tiles.cu, but the tile stays in
// registers. Every thread issues its 16-byte runs of the stored layout at once and works
// on them as they arrive, so a block waits for memory once instead of loading shared
// memory, meeting at a barrier and reading it back.
#include "cuda/analysis/internal.h"
#include "cuda/analysis/kernels.cuh"
#include "cuda/analysis/stats.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::an {
namespace {

// The count beyond the threshold of an unchecked BF16 run, two values to a word: a
// magnitude's bits plus `bias` (per 16-bit half) reach 2^15 when |x| is beyond it (|x| >
// threshold is |x|'s bits above the threshold's upper half). Most runs have none: their
// largest magnitude tells.
__device__ __forceinline__ unsigned beyond_bias(unsigned threshold) {
    return (0x7FFFu - (threshold >> 16)) * 0x00010001u;
}

// Thread t takes the runs at stored row t / kRunsPerRow + kRowsPerPass i, elements from
// (t % kRunsPerRow) kV: a stored tile's columns stay the thread's own (their maxima in
// registers), a transposed tile's run is one column of the view (the lanes that share it
// meet by shuffles).
template <class T, bool kTransposed, bool kChecked>
__device__ __forceinline__ void tile_sums(const TileInput& in, const TileAt& at, const StatsParams& p, Sums& s,
                                          unsigned& smax, unsigned* channel_max) {
    constexpr int kV = 16 / sizeof(T), kRunsPerRow = kTile / kV, kRowsPerPass = kThreads / kRunsPerRow;
    constexpr int kRuns = kTile / kRowsPerPass, kBatch = 4;  // runs in flight per thread
    const StoredTile st = stored_tile<T, kTransposed>(in, at);
    const int a_first = threadIdx.x / kRunsPerRow, b = (threadIdx.x % kRunsPerRow) * kV;
    // A stored tile's column maxima: BF16 ones as 16x2 integer maxima of the magnitudes'
    // bits (column pairs), float32 ones one by one.
    constexpr bool kPacked = !kTransposed && sizeof(T) == 2;
    unsigned col_max[kPacked ? kV / 2 : kV] = {};
    constexpr bool kPairs = !kChecked && sizeof(T) == 2;  // BF16 words, two values at once
    const unsigned bias = beyond_bias(p.threshold);
#pragma unroll
    for (int base = 0; base < kRuns; base += kBatch) {
        uint4 q[kBatch];
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
            const int a = a_first + (base + i) * kRowsPerPass;
            q[i] = load_run<T>(in, st, a, b);
        }
#pragma unroll
        for (int i = 0; i < kBatch; ++i) {
            const int a = a_first + (base + i) * kRowsPerPass;
            unsigned run_max = 0;
            if constexpr (kPairs) {
                const unsigned w[4] = {q[i].x, q[i].y, q[i].z, q[i].w};
                unsigned m2 = 0;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const unsigned a2 = w[k] & 0x7FFF7FFFu;
                    m2 = __vmaxu2(m2, a2);
                    if (!kTransposed) col_max[k] = __vmaxu2(col_max[k], a2);
                    add_power_sums(s, deviation(p, __uint_as_float(w[k] << 16)));
                    add_power_sums(s, deviation(p, __uint_as_float(w[k] & 0xFFFF0000u)));
                }
                if ((m2 + bias) & 0x80008000u)  // a value of the run is beyond the threshold
#pragma unroll
                    for (int k = 0; k < 4; ++k) {
                        const unsigned t = (w[k] & 0x7FFF7FFFu) + bias;
                        s.beyond += ((t >> 15) & 1u) + (t >> 31);
                    }
                run_max = __vmaxu2(m2, __funnelshift_l(m2, m2, 16)) << 16;
            } else {
                T raw[kV];
                memcpy(raw, &q[i], 16);
#pragma unroll
                for (int k = 0; k < kV; ++k) {
                    if (kChecked && (a >= st.na || b + k >= st.nb)) continue;
                    const unsigned m = add_value<kChecked, false>(s, p, as_float(raw[k]));
                    if (kTransposed) run_max = max(run_max, m);
                    else if (!kPacked) col_max[k] = max(col_max[k], m);
                    else col_max[k / 2] = __vmaxu2(col_max[k / 2], k % 2 ? m & 0xFFFF0000u : m >> 16);
                }
            }
            if (kTransposed) {  // the view's column a: the lanes holding its runs meet
#pragma unroll
                for (int o = kRunsPerRow / 2; o > 0; o >>= 1)
                    run_max = max(run_max, __shfl_xor_sync(0xffffffffu, run_max, o));
                if (threadIdx.x % kRunsPerRow == 0 && run_max) atomicMax(&channel_max[a], run_max);
                smax = max(smax, run_max);
            }
        }
    }
    if (!kTransposed)
#pragma unroll
        for (int k = 0; k < kV; ++k) {
            const unsigned m = !kPacked ? col_max[k] : k % 2 ? col_max[k / 2] & 0xFFFF0000u : col_max[k / 2] << 16;
            if (m) {
                atomicMax(&channel_max[b + k], m);
                smax = max(smax, m);
            }
        }
}

}  // namespace

template <class T, bool kTransposed>
__global__ void __launch_bounds__(kThreads, 4) stats_kernel(TileInput in, const Params* params, TileStats* tile_stats,
                                                         unsigned* channel) {
    __shared__ unsigned channel_max[kTile];
    __shared__ TileStats parts[kWarps];
    const std::int64_t tile = blockIdx.x;
    const TileAt at = tile_at(in, tile);
    if (threadIdx.x < kTile) channel_max[threadIdx.x] = 0u;
    __syncthreads();
    const Params& q = *params;
    const StatsParams p = stats_params(q);
    Sums s;
    unsigned smax = 0;
    if (unchecked(at, q))
        tile_sums<T, kTransposed, false>(in, at, p, s, smax, channel_max);
    else
        tile_sums<T, kTransposed, true>(in, at, p, s, smax, channel_max);
    const TileStats st = block_combine(s.tile(smax), parts);  // (its least |x|: none kept)
    if (threadIdx.x == 0) tile_stats[tile] = st;
    __syncthreads();  // the channel maxima are complete
    if (int(threadIdx.x) < at.nc && channel_max[threadIdx.x])
        atomicMax(&channel[at.c0 + threadIdx.x], channel_max[threadIdx.x]);
}

void launch_stats(const TileInput& in, const Params* params, TileStats* tile_stats, unsigned* channel,
                  cudaStream_t stream) {
    auto go = [&](auto kernel) {
        kernel<<<unsigned(in.tiles()), kThreads, 0, stream>>>(in, params, tile_stats, channel);
        FP8SCOPE_CUDA_LAUNCHED();
    };
    const bool bf16 = in.dtype == DType::BF16;
    if (bf16 && in.transposed) go(stats_kernel<std::uint16_t, true>);
    else if (bf16) go(stats_kernel<std::uint16_t, false>);
    else if (in.transposed) go(stats_kernel<float, true>);
    else go(stats_kernel<float, false>);
}

}  // namespace fp8scope::cuda::an
