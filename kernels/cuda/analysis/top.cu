// Pass 3 of the device analysis (analysis.h): the top_k largest finite |x|, ties broken by
// position. A value ranks by its key, |x| bits above the complemented row-major index, so
// keys are distinct and "larger key" is "ranks first". The top_k blocks of pass 1 with the
// largest maxima hold top_k values at least as large as their smallest maximum T, so every
// top value lies in a tile whose maximum reaches T: only those tiles are read again.
#include <algorithm>

#include "cuda/analysis/internal.h"
#include "cuda/analysis/kernels.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda::an {
namespace {

constexpr int kMergeThreads = 1024;
constexpr unsigned kAbs = ~qk::kSignBit;

// The rank of `key` among keys[0, n) (distinct): how many are larger.
__device__ __forceinline__ unsigned rank_of(unsigned long long key, const unsigned long long* keys, unsigned n) {
    unsigned rank = 0;
    for (unsigned j = 0; j < n; ++j) rank += keys[j] > key;
    return rank;
}

// A slice of a listed tile: kSliceRows rows of its stored layout, a 16-byte run of them
// per thread (kRunsPerThread), read straight from memory.
constexpr int kSliceRows = kTile / kSlices;

template <class T>
struct SliceRuns {
    static constexpr int kV = 16 / sizeof(T);
    static constexpr int kRunsPerThread = kSliceRows * kTile / kV / kThreads;
    T v[kRunsPerThread][kV];
    int a[kRunsPerThread], b[kRunsPerThread];  // stored row and first element in the tile
};

// The key of the element at (a, b + k) of the stored layout, or 0 when it is outside the
// tensor or not finite.
template <bool kTransposed>
__device__ __forceinline__ unsigned long long key_at(const TileInput& in, const TileAt& at, int a, int b, float v) {
    const int r = kTransposed ? b : a, c = kTransposed ? a : b;
    const unsigned abs = __float_as_uint(v) & kAbs;
    if (r >= at.nr || c >= at.nc || abs >= qk::kInfBits) return 0;
    const std::uint64_t index = std::uint64_t(at.r0 + r) * std::uint64_t(in.cols) + std::uint64_t(at.c0 + c);
    return (static_cast<unsigned long long>(abs) << kIndexBits) | (kIndexMask - index);
}

// Each slice of a listed tile (its maximum reaches the threshold) appends its own top
// values that reach it: its elements at or above the threshold are gathered in shared
// memory first (usually a few), and ranked; a slice with more of them (ties at the
// threshold) takes k rounds, each picking the largest key left. Every top value of the
// tensor is among its slice's top k.
constexpr int kGathered = 1024;

template <class T, bool kTransposed>
__global__ void __launch_bounds__(kThreads) tile_top_kernel(TileInput in, int k, const unsigned* tile_list,
                                                            Candidate* candidates, Summary* out) {
    __shared__ unsigned long long scratch[kWarps];
    __shared__ unsigned long long best_s, keys[kGathered];
    __shared__ float values[kGathered];
    __shared__ unsigned gathered;
    using Runs = SliceRuns<T>;
    constexpr int kV = Runs::kV;
    const unsigned threshold = out->top_threshold, items = out->top_tiles * kSlices;
    for (unsigned item = blockIdx.x; item < items; item += gridDim.x) {
        const TileAt at = tile_at(in, tile_list[item / kSlices]);
        const int slice = int(item % kSlices);
        const StoredTile st = stored_tile<T, kTransposed>(in, at);
        if (threadIdx.x == 0) gathered = 0;
        Runs runs;
#pragma unroll
        for (int i = 0; i < Runs::kRunsPerThread; ++i) {
            const int run = threadIdx.x + i * kThreads;
            runs.a[i] = slice * kSliceRows + run / (kTile / kV);
            runs.b[i] = (run % (kTile / kV)) * kV;
            const uint4 q = load_run<T>(in, st, runs.a[i], runs.b[i]);
            memcpy(runs.v[i], &q, 16);
        }
        // f(key, value) for each of this thread's values (key 0: outside the tensor or not finite)
        auto each = [&](auto&& f) {
#pragma unroll
            for (int i = 0; i < Runs::kRunsPerThread; ++i)
#pragma unroll
                for (int e = 0; e < kV; ++e) {
                    const float v = as_float(runs.v[i][e]);
                    f(key_at<kTransposed>(in, at, runs.a[i], runs.b[i] + e, v), v);
                }
        };
        __syncthreads();
        each([&](unsigned long long key, float v) {
            if (key == 0 || unsigned(key >> kIndexBits) < threshold) return;
            const unsigned slot = atomicAdd(&gathered, 1u);
            if (slot < kGathered) keys[slot] = key, values[slot] = v;
        });
        __syncthreads();
        const unsigned n = gathered;
        if (n <= kGathered) {  // the usual case: rank the gathered keys, keep the first k
            for (unsigned i = threadIdx.x; i < n; i += blockDim.x)
                if (rank_of(keys[i], keys, n) < unsigned(k))
                    candidates[atomicAdd(&out->candidates, 1u)] = {keys[i], values[i]};
        } else {
            unsigned long long bound = ~0ull;
            for (int round = 0; round < k; ++round) {
                unsigned long long mine = 0;
                float value = 0;
                each([&](unsigned long long key, float v) {
                    if (key < bound && key > mine) mine = key, value = v;
                });
                const unsigned long long best = block_reduce(mine, Max{}, scratch);
                if (threadIdx.x == 0) best_s = best;
                __syncthreads();
                bound = best_s;
                if (bound == 0 || unsigned(bound >> kIndexBits) < threshold) break;
                if (mine == bound) candidates[atomicAdd(&out->candidates, 1u)] = Candidate{bound, value};
            }
        }
        __syncthreads();  // the next slice reuses the shared buffers
    }
}

// The top k of the candidates, in rank order, into out->top: each candidate's rank among
// them (they fit in shared memory in all but tie-heavy tensors), else k rounds.
constexpr int kRanked = 4096;

__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const Candidate* candidates, int k, Summary* out) {
    __shared__ unsigned long long scratch[kMergeThreads / 32];
    __shared__ unsigned long long best_s, keys[kRanked];
    const unsigned n = out->candidates;
    if (n <= unsigned(kRanked)) {
        for (unsigned i = threadIdx.x; i < n; i += blockDim.x) keys[i] = candidates[i].key;
        __syncthreads();
        for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
            const unsigned rank = rank_of(keys[i], keys, n);
            if (rank < unsigned(k)) out->top[rank] = candidates[i];
        }
        if (threadIdx.x == 0) out->top_count = min(n, unsigned(k));
        return;
    }
    unsigned long long bound = ~0ull;
    for (int round = 0; round < k; ++round) {
        unsigned long long mine = 0;
        unsigned at = 0;
        for (unsigned i = threadIdx.x; i < n; i += blockDim.x) {
            const unsigned long long key = candidates[i].key;
            if (key < bound && key > mine) mine = key, at = i;
        }
        const unsigned long long best = block_reduce(mine, Max{}, scratch);
        if (threadIdx.x == 0) best_s = best;
        __syncthreads();
        bound = best_s;
        if (bound == 0) {
            if (threadIdx.x == 0) out->top_count = unsigned(round);
            return;
        }
        if (mine == bound) out->top[round] = candidates[at];
    }
    if (threadIdx.x == 0) out->top_count = unsigned(k);
}

}  // namespace

void launch_top_values(const TileInput& in, int top_k, const unsigned* tile_list, void* candidates, Summary* summary,
                       cudaStream_t stream) {
    auto* cand = static_cast<Candidate*>(candidates);
    // Usually about top_k tiles are listed (more with ties): a block for each slice of
    // those, up to a bound.
    const unsigned blocks = unsigned(std::min<std::int64_t>(in.tiles() * kSlices, kSlices * std::max(64, 4 * top_k)));
    auto go = [&](auto kernel) {
        kernel<<<blocks, kThreads, 0, stream>>>(in, top_k, tile_list, cand, summary);
        FP8SCOPE_CUDA_LAUNCHED();
    };
    const bool bf16 = in.dtype == DType::BF16;
    if (bf16 && in.transposed) go(tile_top_kernel<std::uint16_t, true>);
    else if (bf16) go(tile_top_kernel<std::uint16_t, false>);
    else if (in.transposed) go(tile_top_kernel<float, true>);
    else go(tile_top_kernel<float, false>);
    merge_kernel<<<1, kMergeThreads, 0, stream>>>(cand, top_k, summary);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::an
