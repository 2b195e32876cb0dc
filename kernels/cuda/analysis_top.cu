// Pass 3 of the device analysis (analysis.h): the top_k largest finite |x|, ties broken by
// position. A value ranks by its key, |x| bits above the complemented row-major index, so
// keys are distinct and "larger key" is "ranks first". The k tiles with the largest
// maxima hold k values at least as large as their smallest maximum T, so every top value
// lies in a tile whose maximum reaches T: only those tiles are read again.
#include "cuda/analysis_internal.h"
#include "cuda/analysis_kernels.cuh"
#include "cuda/check.h"

namespace fp8scope::cuda::an {
namespace {

constexpr int kMergeThreads = 1024;
constexpr unsigned kAbs = ~qk::kSignBit;

// The k-th largest tile maximum, counting ties (0 when there are fewer than k tiles).
__global__ void __launch_bounds__(kMergeThreads) threshold_kernel(const TileStats* tiles, std::int64_t n, int k,
                                                                   Summary* out) {
    __shared__ unsigned long long scratch[kMergeThreads / 32];
    __shared__ unsigned long long bound_s;
    __shared__ bool done;
    unsigned long long bound = 1ull << 32;  // values below it are still to be counted
    long long counted = 0;
    for (;;) {
        unsigned m = 0;
        bool any = false;
        for (std::int64_t t = threadIdx.x; t < n; t += blockDim.x) {
            if (tiles[t].smax < bound) {
                m = max(m, tiles[t].smax);
                any = true;
            }
        }
        const unsigned long long top =
            block_reduce(any ? (1ull << 32) | m : 0ull, Max{}, reinterpret_cast<unsigned long long*>(scratch));
        if (threadIdx.x == 0) bound_s = top;
        __syncthreads();
        const unsigned long long found = bound_s;
        if (!found) {  // every tile counted
            if (threadIdx.x == 0) out->top_threshold = 0;
            return;
        }
        const unsigned value = unsigned(found);
        unsigned long long c = 0;
        for (std::int64_t t = threadIdx.x; t < n; t += blockDim.x) c += tiles[t].smax == value;
        c = block_reduce(c, Add{}, scratch);
        if (threadIdx.x == 0) {
            counted += static_cast<long long>(c);
            done = counted >= k || value == 0;
            if (done) out->top_threshold = value;
        }
        __syncthreads();
        if (done) return;
        bound = value;
    }
}

// The largest key below `bound` among this thread's elements of the tile (0: none).
template <class T>
__device__ unsigned long long best_below(const T* tile, int nr, int nc, std::int64_t r0, std::int64_t c0,
                                         std::int64_t cols, unsigned long long bound, float& value) {
    unsigned long long best = 0;
    for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
        const int r = i / kTile, c = i % kTile;
        if (r >= nr || c >= nc) continue;
        const float v = as_float(tile[r * kPad + c]);
        const unsigned a = __float_as_uint(v) & kAbs;
        if (a >= qk::kInfBits) continue;
        const std::uint64_t index = std::uint64_t(r0 + r) * std::uint64_t(cols) + std::uint64_t(c0 + c);
        const unsigned long long key = (static_cast<unsigned long long>(a) << kIndexBits) | (kIndexMask - index);
        if (key < bound && key > best) {
            best = key;
            value = v;
        }
    }
    return best;
}

// Each tile whose maximum reaches the threshold appends its own top values that reach it:
// its elements at or above the threshold are gathered in shared memory first (usually a
// few), and the k rounds pick from them; a tile with more of them (ties at the threshold)
// picks from all its elements.
constexpr int kGathered = 1024;

template <class T, bool kTransposed>
__global__ void __launch_bounds__(kThreads) tile_top_kernel(TileInput in, int k, const TileStats* tiles,
                                                            Candidate* candidates, Summary* out) {
    extern __shared__ __align__(16) unsigned char smem[];
    T* tile = reinterpret_cast<T*>(smem);
    __shared__ unsigned long long scratch[kWarps];
    __shared__ unsigned long long best_s, keys[kGathered];
    __shared__ float values[kGathered];
    __shared__ unsigned gathered;
    const unsigned threshold = out->top_threshold;
    if (tiles[blockIdx.x].smax < threshold) return;  // the whole block leaves together
    const TileAt at = tile_at(in, blockIdx.x);
    if (threadIdx.x == 0) gathered = 0;
    load_tile<T, kTransposed>(in, at.r0, at.c0, at.nr, at.nc, tile);
    __syncthreads();
    for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
        const int r = i / kTile, c = i % kTile;
        const float v = as_float(tile[r * kPad + c]);
        const unsigned a = __float_as_uint(v) & kAbs;
        if (r >= at.nr || c >= at.nc || a >= qk::kInfBits || a < threshold) continue;
        const unsigned slot = atomicAdd(&gathered, 1u);
        if (slot < kGathered) {
            const std::uint64_t index = std::uint64_t(at.r0 + r) * std::uint64_t(in.cols) + std::uint64_t(at.c0 + c);
            keys[slot] = (static_cast<unsigned long long>(a) << kIndexBits) | (kIndexMask - index);
            values[slot] = v;
        }
    }
    __syncthreads();
    const unsigned n = gathered;
    unsigned long long bound = ~0ull;
    for (int round = 0; round < k; ++round) {
        float value = 0;
        unsigned long long mine = 0;
        if (n <= kGathered) {
            for (unsigned i = threadIdx.x; i < n; i += blockDim.x)
                if (keys[i] < bound && keys[i] > mine) mine = keys[i], value = values[i];
        } else {
            mine = best_below(tile, at.nr, at.nc, at.r0, at.c0, in.cols, bound, value);
        }
        const unsigned long long best = block_reduce(mine, Max{}, scratch);
        if (threadIdx.x == 0) best_s = best;
        __syncthreads();
        bound = best_s;
        if (bound == 0 || unsigned(bound >> kIndexBits) < threshold) return;
        if (mine == bound) candidates[atomicAdd(&out->candidates, 1u)] = Candidate{bound, value};
    }
}

// The top k of the candidates, in rank order, into out->top.
__global__ void __launch_bounds__(kMergeThreads) merge_kernel(const Candidate* candidates, int k, Summary* out) {
    __shared__ unsigned long long scratch[kMergeThreads / 32];
    __shared__ unsigned long long best_s;
    const unsigned n = out->candidates;
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

void launch_top_values(const TileInput& in, int top_k, const TileStats* tile_stats, void* candidates,
                       Summary* summary, cudaStream_t stream) {
    auto* cand = static_cast<Candidate*>(candidates);
    threshold_kernel<<<1, kMergeThreads, 0, stream>>>(tile_stats, in.tiles(), top_k, summary);
    FP8SCOPE_CUDA_LAUNCHED();
    const std::size_t shared = (in.dtype == DType::BF16 ? 2 : 4) * kTile * kPad;
    auto go = [&](auto kernel) {
        FP8SCOPE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(shared)));
        kernel<<<unsigned(in.tiles()), kThreads, shared, stream>>>(in, top_k, tile_stats, cand, summary);
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
