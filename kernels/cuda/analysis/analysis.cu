// The device analysis (analysis.h): pass 1 and the combining kernels here, pass 2 in
// tiles.cu (stats.cu without recipes), pass 3 in top.cu; the
// host side turns the sums read back into the figures with the same finish_* functions as
// the CPU (fp8/analysis.h).
#include "cuda/analysis/analysis.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <variant>

#include "cuda/analysis/internal.h"
#include "cuda/analysis/kernels.cuh"
#include "cuda/analysis/select.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {
namespace an {
namespace {

constexpr int kFinishThreads = 1024;
static_assert(kMomentBlocks <= kFinishThreads, "a thread of the finishing block per pass 1 block");

// The histogram bin of a finite nonzero |x| (bits): floor(log2 |x|) - kHistMinExp.
__device__ __forceinline__ int hist_bin(unsigned a) {
    const unsigned e = a >> 23;
    return e ? int(e) - 127 - kHistMinExp : (31 - __clz(int(a))) - 149 - kHistMinExp;
}

// Pass 1's log2 histogram (fp8/stats.h). A lane counts a window of kWindow bins in counters
// of its own in shared memory (all in its own bank), chosen from its first run holding a
// normal number: from 24 binades below that run's largest |x| to 8 above. Values outside
// the window add to the row after it; a run holding nonzero ones (subnormals, far
// outliers: rare) then adds those to the block's bins one by one, so the zeros are what
// that row holds besides them.
constexpr int kWindow = 32;
constexpr unsigned kNoWindow = 255;  // none chosen yet: every value falls outside

struct alignas(16) Counts {
    unsigned lanes[kWarps][kWindow + 1][32];  // row kWindow: the values outside the window
    unsigned block_bins[kHistBins];
};

struct ExpHistogram {
    unsigned* counts;        // the lane's row 0; row r at counts[32 r]
    unsigned counts_shared;  // the same as a shared-memory address
    unsigned* block_bins;
    unsigned window = kNoWindow;  // biased exponent of the window's first bin
    unsigned rare = 0;            // nonzero values outside the window

    // run_max: the bits of the largest finite |x| of the run about to be added.
    __device__ __forceinline__ void choose(unsigned run_max) {
        const unsigned e = run_max >> 23;
        if (window == kNoWindow && e != 0u) window = min(max(e, 25u) - 24u, 255u - kWindow);
    }
    // Finite values, run_max the bits of their largest |x|; returns their least nonzero
    // |x| - 1 (bits; all zero: ~0).
    template <int kV>
    __device__ __forceinline__ unsigned add(const float (&v)[kV], unsigned run_max) {
        choose(run_max);
        unsigned run_min1 = ~0u;
#pragma unroll
        for (int k = 0; k < kV; ++k) {
            const unsigned a = __float_as_uint(v[k]) & ~qk::kSignBit;
            run_min1 = min(run_min1, a - 1u);
            const unsigned row = min((a >> 23) - window, unsigned(kWindow));
            // ++counts[32 row], its address one multiply-add from the lane's (the compiler
            // would rebuild it from the warp and lane each time)
            asm volatile("{ .reg .u32 c; ld.shared.u32 c, [%0]; add.u32 c, c, 1; st.shared.u32 [%0], c; }" ::"r"(
                             counts_shared + (row << 7))
                         : "memory");
        }
        if (run_min1 < (window << 23) - 1u || (run_max >> 23) >= window + kWindow) {
#pragma unroll
            for (int k = 0; k < kV; ++k) {
                const unsigned a = __float_as_uint(v[k]) & ~qk::kSignBit;
                if (a != 0u && (a >> 23) - window >= unsigned(kWindow)) {
                    ++rare;
                    atomicAdd(&block_bins[hist_bin(a)], 1u);
                }
            }
        }
        return run_min1;
    }
    // The values added as zeros (nonfinite ones among them).
    __device__ __forceinline__ unsigned zeros() const { return counts[32 * kWindow] - rare; }
    // The lanes' counts into the block's bins: one atomic per bin and warp when the warp's
    // lanes share their window (the usual case). The whole warp calls it.
    __device__ __forceinline__ void flush() const {
        const unsigned w0 = __shfl_sync(0xffffffffu, window, 0);
        const int first = int(window) - 127 - kHistMinExp;
        if (__all_sync(0xffffffffu, window == w0)) {
            if (w0 == kNoWindow) return;
            for (int r = 0; r < kWindow; ++r) {
                const unsigned c = __reduce_add_sync(0xffffffffu, counts[32 * r]);
                if (threadIdx.x % 32 == 0 && c) atomicAdd(&block_bins[first + r], c);
            }
        } else if (window != kNoWindow) {
            for (int r = 0; r < kWindow; ++r)
                if (counts[32 * r]) atomicAdd(&block_bins[first + r], counts[32 * r]);
        }
    }
};

// Pass 1's sums per thread. A 16-byte run's sums are formed in float32 and added in
// float64 when its largest |x| lies in [2^-60, 2^60) (no square overflows or is lost);
// other runs go element by element in float64. Non-finite values add 0 to the sums.
struct MomentAcc {
    double sum = 0, sum2 = 0;
    unsigned amax = 0, amax_finite = 0, nan = 0, inf = 0;
    unsigned min_nz1 = qk::kInfBits - 1u;  // the least nonzero finite |x| - 1 (0 wraps)
    ExpHistogram hist;

    // Values every one of which is finite, run_max the bits of their largest |x|.
    template <int kV>
    __device__ __forceinline__ void add_finite(const float (&v)[kV], unsigned run_max) {
        min_nz1 = min(min_nz1, hist.add(v, run_max));
        constexpr unsigned kLow = 0x21800000u, kHigh = 0x5D800000u;  // 2^-60, 2^60
        if (run_max - kLow < kHigh - kLow || run_max == 0) {
            float fs = 0, fs2 = 0;
#pragma unroll
            for (int k = 0; k < kV; ++k) {
                fs += v[k];
                fs2 = fmaf(v[k], v[k], fs2);
            }
            sum += fs;
            sum2 += fs2;
        } else {
#pragma unroll
            for (int k = 0; k < kV; ++k) {
                const double d = v[k];
                sum += d;
                sum2 += d * d;
            }
        }
    }

    // A run of values, `special` when some may be NaN or Inf (else run_max is the bits of
    // their largest |x|): those are counted and left out (0 in the sums, not zeros).
    template <int kV>
    __device__ __forceinline__ void add(float (&v)[kV], unsigned run_max, bool special) {
        unsigned nonfinite = 0;
        if (special) {
            run_max = 0;
#pragma unroll
            for (int k = 0; k < kV; ++k) {
                const unsigned a = __float_as_uint(v[k]) & ~qk::kSignBit;
                const bool fin = a < qk::kInfBits;
                amax = max(amax, a <= qk::kInfBits ? a : 0u);
                run_max = max(run_max, fin ? a : 0u);
                nan += a > qk::kInfBits;
                inf += a == qk::kInfBits;
                nonfinite += !fin;
                v[k] = fin ? v[k] : 0.0f;
            }
        } else {
            amax = max(amax, run_max);
        }
        amax_finite = max(amax_finite, run_max);
        add_finite(v, run_max);
    }
};

// A 16-byte run of x as float32 values. Runs whose values are all finite (the usual case)
// skip the per-value tests, BF16 ones with their largest |x| from 16x2 integer maxima of
// the magnitudes' bits.
template <class T>
__device__ __forceinline__ void add_run(MomentAcc& acc, const uint4& q) {
    constexpr int kV = 16 / sizeof(T);
    float v[kV];
    unsigned run_max = 0;
    if constexpr (sizeof(T) == 2) {
        const std::uint32_t w[4] = {q.x, q.y, q.z, q.w};
        std::uint32_t m = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            m = __vmaxu2(m, w[k] & 0x7FFF7FFFu);
            v[2 * k] = __uint_as_float(w[k] << 16);
            v[2 * k + 1] = __uint_as_float(w[k] & 0xFFFF0000u);
        }
        run_max = __vmaxu2(m, __funnelshift_l(m, m, 16)) << 16;
    } else {
        memcpy(v, &q, 16);
#pragma unroll
        for (int k = 0; k < kV; ++k) run_max = max(run_max, __float_as_uint(v[k]) & ~qk::kSignBit);
    }
    acc.add(v, run_max, run_max >= qk::kInfBits);
}

// Elements of x that are neither NaN nor Inf.
__device__ __forceinline__ std::int64_t n_finite(const Moments& m, std::int64_t n) {
    return n - std::int64_t(m.nan) - std::int64_t(m.inf);
}

// A partial written by another block of this grid (read through L2).
__device__ __forceinline__ Moments load_partial(const Moments* p) {
    Moments m;
    m.sum = __ldcg(&p->sum);
    m.sum2 = __ldcg(&p->sum2);
    m.amax = __ldcg(&p->amax);
    m.amax_finite = __ldcg(&p->amax_finite);
    m.min_nz = __ldcg(&p->min_nz);
    m.nan = __ldcg(&p->nan);
    m.inf = __ldcg(&p->inf);
    m.zero = __ldcg(&p->zero);
    return m;
}

// Combines pass 1 (the partials in a fixed order) and derives what pass 2 needs: the mean,
// the outlier threshold and the per-tensor scales (finish_moments and the CPU's
// plan_recipe, in the same arithmetic). Run by the last block of pass 1 to finish.
__device__ void finish_moments(const Moments* partials, int count, std::int64_t n, const Plans& plans, double k,
                               Summary* out, Moments* parts) {
    Moments m{};
    m.min_nz = qk::kInfBits;
    for (int i = threadIdx.x; i < count; i += blockDim.x) m = combine(m, load_partial(partials + i));
    m = block_combine(m, parts);
    if (threadIdx.x != 0) return;
    out->moments = m;
    const std::int64_t finite = n_finite(m, n);
    const double nf = double(finite);
    out->params.mean = finite ? m.sum / nf : 0.0;
    const double rms = finite ? sqrt(m.sum2 / nf) : nan("");
    out->params.threshold = k * rms;
    Params& q = out->params;
    q.threshold_f = __double2float_rd(q.threshold);
    const double spread = double(qk::float_of(m.amax_finite)) + fabs(q.mean);  // >= |x - mean|
    q.dev_exp = spread > 0 ? ilogb(spread) + 1 : 0;
    q.dev_norm_d = ldexp(1.0, -q.dev_exp);
    q.dev_norm = q.dev_exp >= kMinDevExp ? float(q.dev_norm_d) : 0.0f;
    q.all_finite = m.nan == 0 && m.inf == 0;
    q.pivot = float(q.mean * q.dev_norm_d);
    q.delta = q.mean * q.dev_norm_d - double(q.pivot);
    const float amax = qk::float_of(m.amax);
    for (int i = 0; i < plans.count; ++i) {
        const RecipePlan& p = plans.r[i];
        float s = 1.0f;
        if (p.kind == kCurrent) s = qk::compute_scale(amax, p.format, p.eps, p.pow2);
        if (p.kind == kDelayed && !qk::is_nan(p.delayed_scale)) s = p.delayed_scale;
        if (p.kind == kFP4 && p.fp4_nv && !p.rht) s = cast::nvfp4_tensor_scale(amax);  // rht: fp4.cu sets it
        out->params.s[i] = s;
        out->params.si[i] = __fdiv_rn(1.0f, s);
    }
}

// Pass 1: grid-stride over 16-byte runs (when x is aligned), the tail as runs of one; the
// last block to finish combines the blocks' partials.
template <class T>
__global__ void __launch_bounds__(kThreads, 4) moments_kernel(const T* x, std::int64_t n, bool aligned, Plans plans,
                                                              double k, Moments* partials, Summary* out) {
    __shared__ Moments parts[kWarps];
    __shared__ Counts counts;
    for (int w = threadIdx.x; w < int(sizeof(counts.lanes) / 16); w += blockDim.x)
        reinterpret_cast<uint4*>(counts.lanes)[w] = uint4{};
    for (int b = threadIdx.x; b < kHistBins; b += blockDim.x) counts.block_bins[b] = 0u;
    __syncthreads();
    constexpr int kV = 16 / sizeof(T);
    MomentAcc acc;
    acc.hist.counts = &counts.lanes[threadIdx.x / 32][0][threadIdx.x % 32];
    acc.hist.counts_shared = unsigned(__cvta_generic_to_shared(acc.hist.counts));
    acc.hist.block_bins = counts.block_bins;
    const std::int64_t threads = std::int64_t(gridDim.x) * blockDim.x;
    const std::int64_t first = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x;
    const std::int64_t runs = aligned ? n / kV : 0;
    // Two runs per trip while they last, their loads issued together and a trip ahead.
    constexpr int kTrip = 2;
    const uint4* runs_x = reinterpret_cast<const uint4*>(x);
    std::int64_t i = first;
    if (i + (kTrip - 1) * threads < runs) {
        uint4 q[kTrip];
#pragma unroll
        for (int t = 0; t < kTrip; ++t) q[t] = __ldg(runs_x + i + t * threads);
        for (;;) {
            const std::int64_t next = i + kTrip * threads;
            const bool more = next + (kTrip - 1) * threads < runs;
            uint4 p[kTrip];
            if (more)
#pragma unroll
                for (int t = 0; t < kTrip; ++t) p[t] = __ldg(runs_x + next + t * threads);
#pragma unroll
            for (int t = 0; t < kTrip; ++t) add_run<T>(acc, q[t]);
            i = next;
            if (!more) break;
#pragma unroll
            for (int t = 0; t < kTrip; ++t) q[t] = p[t];
        }
    }
    for (; i < runs; i += threads) add_run<T>(acc, __ldg(runs_x + i));
    for (std::int64_t e = runs * kV + first; e < n; e += threads) {
        float v[1] = {as_float(x[e])};
        acc.add(v, 0u, true);
    }
    acc.hist.flush();
    const Moments m = block_combine(Moments{acc.sum, acc.sum2, acc.amax, acc.amax_finite, acc.min_nz1 + 1u, acc.nan,
                                            acc.inf, acc.hist.zeros() - acc.nan - acc.inf},
                                    parts);
    __shared__ bool last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = m;
        __threadfence();  // the partial before the count that tells the last block to read it
        last = atomicAdd(&out->moments_done, 1u) == gridDim.x - 1;
    }
    __syncthreads();  // also: the block's bins are complete
    for (int b = threadIdx.x; b < kHistBins; b += blockDim.x)
        if (counts.block_bins[b]) atomicAdd(&out->hist[b], static_cast<unsigned long long>(counts.block_bins[b]));
    if (last) {
        __syncthreads();  // parts is free again
        finish_moments(partials, gridDim.x, n, plans, k, out, parts);
    }
}

// Block b < recipes adds recipe b's tile sums in tile order; block `recipes` the central
// statistics; block `recipes` + 1 (when top_k > 0) lists pass 3's tiles: those whose
// largest |x| reaches the top_k-th largest of pass 1's block maxima (top_k values, one in
// each of those blocks, reach it, so every top value lies in such a tile).
__global__ void __launch_bounds__(kFinishThreads) finish_tiles_kernel(const TileStats* stats, const TileError* errors,
                                                                      std::int64_t tiles, std::int64_t n, int recipes,
                                                                      const Moments* partials, int blocks, int top_k,
                                                                      unsigned* tile_list, Summary* out) {
    if (int(blockIdx.x) == recipes + 1) {
        const bool has = int(threadIdx.x) < blocks;
        const unsigned threshold = kth_largest(has ? partials[threadIdx.x].amax_finite : 0u, has, top_k);
        if (threadIdx.x == 0) out->top_threshold = threshold;
        for (std::int64_t t = threadIdx.x; t < tiles; t += blockDim.x)
            if (stats[t].smax >= threshold) tile_list[atomicAdd(&out->top_tiles, 1u)] = unsigned(t);
        return;
    }
    if (int(blockIdx.x) == recipes) {
        __shared__ CentralSums parts[kFinishThreads / 32];
        CentralSums t{};
#pragma unroll 4
        for (std::int64_t i = threadIdx.x; i < tiles; i += blockDim.x)
            t = combine(t, CentralSums{stats[i].s1, stats[i].s2, stats[i].s3, stats[i].s4, stats[i].beyond});
        t = block_combine(t, parts);
        const double s1 = t.s1, s2 = t.s2, s3 = t.s3, s4 = t.s4;
        CentralTotalsDev c;
        c.beyond = t.beyond;
        if (threadIdx.x == 0) {
            // Sums about the pivot -> sums about the mean (d - delta), then back to x's scale.
            const Params& q = out->params;
            const double e = q.delta, nf = double(n_finite(out->moments, n));
            const double m2 = s2 - 2 * e * s1 + nf * e * e;
            const double m4 = s4 - 4 * e * s3 + 6 * e * e * s2 - 4 * e * e * e * s1 + nf * e * e * e * e;
            const double back2 = ldexp(1.0, 2 * q.dev_exp);
            c.m2 = fmax(0.0, m2) * back2;
            c.m4 = fmax(0.0, m4) * back2 * back2;
            out->central = c;
        }
        return;
    }
    __shared__ Totals parts[kFinishThreads / 32];
    const int k = blockIdx.x;
    Totals r{0, 0, 0, 0, 0, 0, 0, 0, INFINITY, -INFINITY};
#pragma unroll 4
    for (std::int64_t t = threadIdx.x; t < tiles; t += blockDim.x) {
        const TileError& e = errors[t * recipes + k];
        r = combine(r, Totals{e.sxx, e.sdd, e.sqq, e.sxq, e.max_err, e.underflow, e.overflow, e.nonfinite, e.si_min,
                              e.si_max});
    }
    r = block_combine(r, parts);
    if (threadIdx.x == 0) out->errors[k] = r;
}

bool pow2_in(int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }
int log2_of(int v) { return __builtin_ctz(static_cast<unsigned>(v)); }

float float_bits(unsigned u) { return qk::float_of(u); }

RecipePlan plan_of(const Recipe& r, float delayed_scale) {
    RecipePlan p{};
    if (const auto* nv = std::get_if<NVFP4Scaling>(&r)) {
        p.kind = kFP4;
        p.fp4_nv = 1;
        p.block_rows_log2 = nv->two_d ? 4 : 0;
        p.block_cols_log2 = 4;
        p.rht = nv->rht;
        p.sr = nv->sr;
        return p;
    }
    if (const auto* mx = std::get_if<MXFP4Scaling>(&r)) {
        p.kind = kFP4;
        p.block_cols_log2 = 5;
        p.rule = mx->rule;
        p.rht = mx->rht;
        p.sr = mx->sr;
        return p;
    }
    p.format = recipe_format(r);
    p.delayed_scale = delayed_scale;
    p.block_cols_log2 = 7;
    if (const auto* c = std::get_if<CurrentScaling>(&r)) {
        p.kind = kCurrent;
        p.eps = c->eps;
        p.pow2 = c->pow2;
    } else if (std::holds_alternative<DelayedScaling>(r)) {
        p.kind = kDelayed;
    } else if (const auto* b = std::get_if<BlockScaling>(&r)) {
        p.kind = kBlock;
        p.block_rows_log2 = log2_of(b->block_rows);
        p.block_cols_log2 = log2_of(b->block_cols);
        p.pow2 = b->pow2;
    } else {
        const auto& m = std::get<MXScaling>(r);
        p.kind = kMX;
        p.block_cols_log2 = log2_of(m.block);
        p.rule = m.rule;
    }
    return p;
}

template <class T>
void grow(T*& p, std::size_t& have, std::size_t n) {
    if (n <= have) return;
    if (p) FP8SCOPE_CUDA_CHECK(cudaFree(p));
    p = nullptr;
    have = 0;
    FP8SCOPE_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
    have = n;
}

template <class T>
void grow_host(T*& p, std::size_t& have, std::size_t n) {
    if (n <= have) return;
    if (p) FP8SCOPE_CUDA_CHECK(cudaFreeHost(p));
    p = nullptr;
    have = 0;
    FP8SCOPE_CUDA_CHECK(cudaMallocHost(&p, n * sizeof(T)));
    have = n;
}

}  // namespace
}  // namespace an

bool device_analysis_supports(const std::vector<Recipe>& recipes, const StatsOptions& opt, std::int64_t numel) {
    if (numel <= 0 || numel > std::int64_t(an::kIndexMask) || recipes.size() > std::size_t(an::kMaxRecipes) ||
        opt.top_k > an::kMaxTopK)
        return false;
    for (const Recipe& r : recipes) {
        if (const auto* b = std::get_if<BlockScaling>(&r)) {
            if (!an::pow2_in(b->block_rows, 1, 128) || !an::pow2_in(b->block_cols, 32, 128)) return false;
        } else if (const auto* m = std::get_if<MXScaling>(&r)) {
            if (!an::pow2_in(m->block, 32, 128)) return false;
        }
    }
    return true;
}

struct Analyzer::Buffers {
    an::Moments* partials = nullptr;
    an::TileStats* tile_stats = nullptr;
    an::TileError* tile_errors = nullptr;
    an::Candidate* candidates = nullptr;
    unsigned* top_tiles = nullptr;
    an::Summary* summary = nullptr;
    std::size_t n_partials = 0, n_tile_stats = 0, n_tile_errors = 0, n_candidates = 0, n_top_tiles = 0,
                n_summary = 0;
    // pinned host copies
    an::Summary* h_summary = nullptr;
    an::TileStats* h_tile_stats = nullptr;
    an::TileError* h_tile_errors = nullptr;
    std::size_t nh_summary = 0, nh_tile_stats = 0, nh_tile_errors = 0;

    ~Buffers() {
        for (void* p : {static_cast<void*>(partials), static_cast<void*>(tile_stats), static_cast<void*>(tile_errors),
                        static_cast<void*>(candidates), static_cast<void*>(top_tiles),
                        static_cast<void*>(summary)})
            if (p) cudaFree(p);
        for (void* p : {static_cast<void*>(h_summary), static_cast<void*>(h_tile_stats),
                        static_cast<void*>(h_tile_errors)})
            if (p) cudaFreeHost(p);
    }
};

Analyzer::Analyzer() : buffers_(std::make_unique<Buffers>()) {}
Analyzer::~Analyzer() = default;

Analysis Analyzer::analyze(const AnalysisInput& x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                           const AnalysisExtras& extras, cudaStream_t stream) {
    const std::int64_t n = x.rows * x.cols;
    if (!device_analysis_supports(recipes, opt, n)) throw std::logic_error("device analysis: unsupported request");
    const bool aligned = reinterpret_cast<std::uintptr_t>(x.data) % 16 == 0;
    an::TileInput in{x.data, x.dtype, x.rows, x.cols, x.transposed, aligned, (x.rows + an::kTile - 1) / an::kTile,
                     (x.cols + an::kTile - 1) / an::kTile};
    const std::size_t tiles = std::size_t(in.tiles()), nrec = recipes.size();
    const int top_k = std::max(0, opt.top_k);
    an::Plans plans{};
    plans.count = int(nrec);
    for (std::size_t k = 0; k < nrec; ++k) {
        const float delayed = k < extras.delayed_scales.size() ? extras.delayed_scales[k]
                                                                : std::numeric_limits<float>::quiet_NaN();
        plans.r[k] = an::plan_of(recipes[k], delayed);
    }

    Buffers& b = *buffers_;
    an::grow(b.partials, b.n_partials, an::kMomentBlocks);
    an::grow(b.tile_stats, b.n_tile_stats, tiles);
    an::grow(b.tile_errors, b.n_tile_errors, std::max<std::size_t>(1, tiles * nrec));
    an::grow(b.candidates, b.n_candidates, std::max<std::size_t>(1, tiles * an::kSlices * std::size_t(top_k)));
    an::grow(b.top_tiles, b.n_top_tiles, tiles);
    // The summary with the channel maxima after it: one clear and one copy back for both.
    const std::size_t summary_units = 1 + (std::size_t(x.cols) * sizeof(unsigned) + sizeof(an::Summary) - 1) /
                                              sizeof(an::Summary);
    an::grow(b.summary, b.n_summary, summary_units);
    an::grow_host(b.h_summary, b.nh_summary, summary_units);
    unsigned* const channel = reinterpret_cast<unsigned*>(b.summary + 1);
    const std::size_t summary_bytes = sizeof(an::Summary) + std::size_t(x.cols) * sizeof(unsigned);
    if (extras.tile_maps) {
        an::grow_host(b.h_tile_stats, b.nh_tile_stats, tiles);
        an::grow_host(b.h_tile_errors, b.nh_tile_errors, std::max<std::size_t>(1, tiles * nrec));
    }

    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(b.summary, 0, summary_bytes, stream));
    const int blocks = int(std::min<std::int64_t>(an::kMomentBlocks, (n + an::kThreads * 8 - 1) / (an::kThreads * 8)));
    if (x.dtype == DType::BF16)
        an::moments_kernel<<<blocks, an::kThreads, 0, stream>>>(static_cast<const std::uint16_t*>(x.data), n, aligned,
                                                                plans, opt.outlier_k, b.partials, b.summary);
    else
        an::moments_kernel<<<blocks, an::kThreads, 0, stream>>>(static_cast<const float*>(x.data), n, aligned, plans,
                                                                opt.outlier_k, b.partials, b.summary);
    FP8SCOPE_CUDA_LAUNCHED();
    an::launch_fp4_rht_scales(in, plans, &b.summary->params, &b.summary->rht_amax, stream);
    if (nrec == 0) an::launch_stats(in, &b.summary->params, b.tile_stats, channel, stream);
    else an::launch_tiles(in, plans, &b.summary->params, b.tile_stats, b.tile_errors, channel, stream);
    an::finish_tiles_kernel<<<unsigned(nrec + 1 + (top_k > 0)), an::kFinishThreads, 0, stream>>>(
        b.tile_stats, b.tile_errors, in.tiles(), n, int(nrec), b.partials, blocks, top_k, b.top_tiles, b.summary);
    FP8SCOPE_CUDA_LAUNCHED();
    if (top_k > 0) an::launch_top_values(in, top_k, b.top_tiles, b.candidates, b.summary, stream);

    FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(b.h_summary, b.summary, summary_bytes, cudaMemcpyDeviceToHost, stream));
    if (extras.tile_maps) {
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(b.h_tile_stats, b.tile_stats, tiles * sizeof(an::TileStats),
                                            cudaMemcpyDeviceToHost, stream));
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(b.h_tile_errors, b.tile_errors, tiles * nrec * sizeof(an::TileError),
                                            cudaMemcpyDeviceToHost, stream));
    }
    FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));

    // The figures, finished as the CPU finishes them.
    const an::Summary& s = *b.h_summary;
    Analysis out;
    TensorStats& t = out.tensor;
    MomentTotals m;
    m.sum = s.moments.sum;
    m.sum2 = s.moments.sum2;
    m.amax_bits = s.moments.amax;
    m.amax_finite_bits = s.moments.amax_finite;
    m.nan = std::int64_t(s.moments.nan);
    m.inf = std::int64_t(s.moments.inf);
    finish_moments(m, n, t);
    out.scaling_amax = an::float_bits(m.amax_bits);
    for (int i = 0; i < kHistBins; ++i) t.histogram.bins[i] = std::int64_t(s.hist[i]);
    CentralTotals c;
    c.m2 = s.central.m2;
    c.m4 = s.central.m4;
    c.beyond = std::int64_t(s.central.beyond);
    c.zero = std::int64_t(s.moments.zero);
    c.min_nz_bits = s.moments.min_nz;
    finish_central(c, opt.outlier_k, t);
    t.outliers.channel_absmax.resize(std::size_t(x.cols));
    const auto* channel_bits = reinterpret_cast<const unsigned*>(b.h_summary + 1);
    for (std::int64_t col = 0; col < x.cols; ++col)
        t.outliers.channel_absmax[std::size_t(col)] = an::float_bits(channel_bits[col]);
    for (unsigned i = 0; i < std::min<unsigned>(s.top_count, unsigned(top_k)); ++i) {
        const std::uint64_t index = an::kIndexMask - (s.top[i].key & an::kIndexMask);
        t.outliers.top.push_back({s.top[i].value, std::int64_t(index) / x.cols, std::int64_t(index) % x.cols});
    }
    for (std::size_t k = 0; k < nrec; ++k) {
        const ErrorTotals e = error_totals(s.errors[k]);
        const bool per_tensor = plans.r[k].kind == an::kCurrent || plans.r[k].kind == an::kDelayed;
        // An FP4 quantizer with rht casts (and reports the amax of) the transformed view.
        const float amax = plans.r[k].kind == an::kFP4 && plans.r[k].rht ? an::float_bits(s.rht_amax) : out.scaling_amax;
        out.errors.push_back(finish_error(recipe_name(recipes[k]), amax, e, t,
                                          per_tensor ? std::optional(s.params.si[k]) : std::nullopt));
    }
    if (extras.tile_maps) {
        TileMaps& maps = out.maps;
        maps.tile_rows = int(std::min<std::int64_t>(an::kTile, x.rows));
        maps.tile_cols = int(std::min<std::int64_t>(an::kTile, x.cols));
        maps.grid_rows = int(in.grid_rows);
        maps.grid_cols = int(in.grid_cols);
        maps.absmax.resize(tiles);
        for (std::size_t i = 0; i < tiles; ++i) maps.absmax[i] = an::float_bits(b.h_tile_stats[i].smax);
        maps.recipes.resize(nrec);
        for (std::size_t k = 0; k < nrec; ++k) {
            TileMap& map = maps.recipes[k];
            const bool per_tensor = plans.r[k].kind == an::kCurrent || plans.r[k].kind == an::kDelayed;
            map.scale_inv.resize(tiles);
            map.signal.resize(tiles);
            map.error.resize(tiles);
            for (std::size_t i = 0; i < tiles; ++i) {
                const an::TileError& e = b.h_tile_errors[i * nrec + k];
                map.scale_inv[i] = per_tensor ? s.params.si[k]
                                   : e.si_min <= e.si_max ? e.si_max
                                                          : std::numeric_limits<float>::quiet_NaN();
                map.signal[i] = e.sxx;
                map.error[i] = e.sdd;
            }
        }
    }
    return out;
}

}  // namespace fp8scope::cuda
