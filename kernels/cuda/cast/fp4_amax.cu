// The amax pass before an NVFP4 cast (fp4_tile.cuh): the scaling amax of x, and with rht
// also that of the columnwise copy after its transform, from one read. BF16 x of 16-byte
// rows takes rht_amax_staged_kernel (the staged cast's schedule). Other x, bands: a CTA
// walks bands of 16 rows by 256 columns: each warp loads two rows of the band, a lane 16
// contiguous bytes at a time (whole sectors), into shared memory, and issues the next
// band's loads before it works on this one; then thread t takes column t of the band,
// keeps max |x| and runs cast::rht16 down the column when the 16 rows are all inside x (a
// tail of fewer rows counts as it is, as the cast leaves it). NaN is ignored, Inf included.
#include <algorithm>

#include "cuda/cast/fp4_staged.cuh"
#include "cuda/cast/fp4_tile.cuh"
#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"
#include "cuda/runtime/dependent_launch.cuh"

namespace fp8scope::cuda::fp4k {
namespace {

constexpr int kAmaxThreads = 256, kBandRows = 16, kBandCols = kAmaxThreads;

// A band row's 16-byte words, and those each lane loads per row (lane l: l, l + 32, ...).
template <class T>
constexpr int kRowWords = kBandCols * int(sizeof(T)) / 16;
template <class T>
constexpr int kLaneWords = kRowWords<T> / 32;

// x[r, c + e] for the 16 / sizeof(T) elements e of one word (0 outside x).
template <class T>
__device__ __forceinline__ uint4 load_word(const T* x, std::int64_t rows, std::int64_t cols, std::int64_t r,
                                           std::int64_t c, bool vec) {
    constexpr int kPer = 16 / int(sizeof(T));
    if (r >= rows) return make_uint4(0, 0, 0, 0);
    if (vec && c + kPer <= cols) return __ldg(reinterpret_cast<const uint4*>(x + r * cols + c));
    std::uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
        if (c + e >= cols) break;
        const std::uint32_t bits = sizeof(T) == 2 ? std::uint32_t(x[r * cols + c + e]) : __float_as_uint(load_as_float(x, r * cols + c + e));
        if constexpr (sizeof(T) == 2) w[e / 2] |= bits << (16 * (e % 2));
        else w[e] = bits;
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The words of band `band` this lane loads: rows warp and warp + 8 of it.
template <class T>
struct BandWords {
    uint4 w[2][kLaneWords<T>];
};

template <class T>
__device__ __forceinline__ BandWords<T> load_band(const T* x, std::int64_t rows, std::int64_t cols, bool vec,
                                                  std::int64_t band, std::int64_t bands_x) {
    constexpr int kPer = 16 / int(sizeof(T));
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const std::int64_t r0 = (band / bands_x) * kBandRows, c0 = (band % bands_x) * kBandCols;
    BandWords<T> b;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int k = 0; k < kLaneWords<T>; ++k)
            b.w[h][k] = load_word(x, rows, cols, r0 + warp + 8 * h, c0 + (lane + 32 * k) * kPer, vec);
    return b;
}

__device__ __forceinline__ float abs_max(float m, const float (&v)[16]) {
#pragma unroll
    for (int j = 0; j < 16; ++j) m = fmaxf(m, fabsf(v[j]));  // fmaxf drops NaN
    return m;
}

template <class T>
__global__ void __launch_bounds__(kAmaxThreads) rht_amax_kernel(const T* x, std::int64_t rows, std::int64_t cols,
                                                                 bool vec, std::uint32_t* amax, std::uint32_t* col_amax) {
    __shared__ uint4 band_words[kBandRows][kRowWords<T>];
    __shared__ std::uint32_t cta[2];
    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    if (t < 2) cta[t] = 0;
    const std::int64_t bands_x = (cols + kBandCols - 1) / kBandCols;
    const std::int64_t bands = bands_x * ((rows + kBandRows - 1) / kBandRows);
    float m = 0.0f, mt = 0.0f;
    std::int64_t band = blockIdx.x;
    BandWords<T> next{};
    if (band < bands) next = load_band(x, rows, cols, vec, band, bands_x);
    for (; band < bands; band += gridDim.x) {
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int k = 0; k < kLaneWords<T>; ++k) band_words[warp + 8 * h][lane + 32 * k] = next.w[h][k];
        __syncthreads();
        if (band + gridDim.x < bands) next = load_band(x, rows, cols, vec, band + gridDim.x, bands_x);
        float v[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const T* row = reinterpret_cast<const T*>(band_words[j]);
            v[j] = load_as_float(row, t);
        }
        m = abs_max(m, v);
        if ((band / bands_x) * kBandRows + kBandRows <= rows) cast::rht16(v);
        mt = abs_max(mt, v);
        __syncthreads();  // the band is rewritten next round
    }
    allow_dependents();  // the cast after it waits for the whole max anyway
    const std::uint32_t w0 = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m));
    const std::uint32_t w1 = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(mt));
    if (lane == 0) atomicMax(&cta[0], w0), atomicMax(&cta[1], w1);
    __syncthreads();
    if (t == 0 && cta[0]) atomicMax(amax, cta[0]);
    if (t == 1 && cta[1]) atomicMax(col_amax, cta[1]);
}

// BF16 x of 16-byte rows, on the cast's own schedule (fp4_staged.cuh): short-lived CTAs of
// two 32 x 128 tiles in x's order (the cast then starts from the end, still in L2), each
// thread's four 16-byte loads first; then, as the cast's rht pass does, thread t takes
// rows 16 (t % 2) on of column t / 2 of each tile from shared memory, and the transform's
// amax is cast::rht16_times4_abs_max's, a quarter at the end. A CTA adds its maxima only
// where they pass what the words held when it started.
__global__ void __launch_bounds__(kStagedThreads, kStagedRhtMinBlocks)
    rht_amax_staged_kernel(const std::uint16_t* x, std::int64_t rows, std::int64_t cols, unsigned ctas_x,
                           std::uint32_t* amax, std::uint32_t* col_amax) {
    __shared__ StagedTiles tile;
    __shared__ std::uint32_t cta[2];
    const int t = threadIdx.x, w = t % kStagedWords;
    const std::int64_t r0 = std::int64_t(blockIdx.x / ctas_x) * kStagedRows,
                       c0 = std::int64_t(blockIdx.x % ctas_x) * (kTilesPerCta * kStagedCols);
    uint4 q[kTilesPerCta][2];
#pragma unroll
    for (int k = 0; k < kTilesPerCta; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const std::int64_t r = r0 + t / kStagedWords + 16 * h, c = c0 + k * kStagedCols + 8 * w;
            q[k][h] = r < rows && c < cols ? __ldg(reinterpret_cast<const uint4*>(x + r * cols + c)) : make_uint4(0, 0, 0, 0);
        }
    wait_prior_grid();  // zero_totals
    const std::uint32_t seen = t < 2 ? ld_relaxed(t ? col_amax : amax) : 0;
    if (t < 2) cta[t] = 0;
#pragma unroll
    for (int k = 0; k < kTilesPerCta; ++k)
#pragma unroll
        for (int h = 0; h < 2; ++h) tile[k][staged_slot(t / kStagedWords + 16 * h, w)] = q[k][h];
    __syncthreads();
    const int c = t / 2, g = t % 2;
    const bool full = r0 + 16 * g + 16 <= rows;
    float m = 0.0f, mt = 0.0f;
#pragma unroll 1
    for (int k = 0; k < kTilesPerCta; ++k) {
        const std::uint16_t* halves = reinterpret_cast<const std::uint16_t*>(tile[k]);
        float v[16];
#pragma unroll
        for (int j = 0; j < 16; ++j) v[j] = __uint_as_float(std::uint32_t(halves[8 * staged_slot(16 * g + j, c / 8) + c % 8]) << 16);
        m = abs_max(m, v);
        mt = full ? fmaxf(mt, cast::rht16_times4_abs_max(v)) : abs_max(mt, v);
    }
    if (full) mt *= 0.25f;  // exact: cast::rht16_times4
    allow_dependents();  // the cast after it waits for the whole max anyway
    const std::uint32_t w0 = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(m));
    const std::uint32_t w1 = __reduce_max_sync(0xFFFFFFFFu, __float_as_uint(mt));
    if (t % 32 == 0) atomicMax(&cta[0], w0), atomicMax(&cta[1], w1);
    __syncthreads();
    if (t < 2 && cta[t] > seen) atomicMax(t ? col_amax : amax, cta[t]);
}

// One warp: the kernels after it add into these words only after wait_prior_grid().
__global__ void zero_totals_kernel(unsigned long long* overflow, std::uint32_t* amax, std::uint32_t* col_amax) {
    allow_dependents();
    const int t = threadIdx.x;
    if (t < 2) overflow[t] = 0;
    if (t == 2) *amax = 0;
    if (t == 3 && col_amax) *col_amax = 0;
}

}  // namespace

void zero_totals(unsigned long long* overflow, float* amax, float* col_amax, cudaStream_t stream) {
    zero_totals_kernel<<<1, 32, 0, stream>>>(overflow, reinterpret_cast<std::uint32_t*>(amax),
                                             reinterpret_cast<std::uint32_t*>(col_amax));
    FP8SCOPE_CUDA_LAUNCHED();
}

void amax_pass(const CastInput& x, bool rht, float* amax, float* col_amax, cudaStream_t stream) {
    if (x.rows == 0 || x.cols == 0) return;
    if (!rht) {
        qk::launch_tensor_amax(x, reinterpret_cast<std::uint32_t*>(amax), stream);
        return;
    }
    if (staged_input(x)) {
        const StagedGrid g = staged_grid(x);
        launch_dependent(rht_amax_staged_kernel, g.ctas, kStagedThreads, 0, stream,
                         static_cast<const std::uint16_t*>(x.data), x.rows, x.cols, g.ctas_x,
                         reinterpret_cast<std::uint32_t*>(amax), reinterpret_cast<std::uint32_t*>(col_amax));
        FP8SCOPE_CUDA_LAUNCHED();
        return;
    }
    auto launch = [&](const auto* data) {
        using T = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
        static const int per_sm = [] {
            int n = 0;
            FP8SCOPE_CUDA_CHECK(
                cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, rht_amax_kernel<T>, kAmaxThreads, 0));
            return std::max(1, n);
        }();
        const std::int64_t bands = (x.cols + kBandCols - 1) / kBandCols * ((x.rows + kBandRows - 1) / kBandRows);
        const unsigned blocks = unsigned(std::min<std::int64_t>(bands, std::int64_t(per_sm) * qk::sm_count()));
        const bool vec = reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && x.cols % (16 / sizeof(T)) == 0;
        rht_amax_kernel<T><<<blocks, kAmaxThreads, 0, stream>>>(data, x.rows, x.cols, vec,
                                                                reinterpret_cast<std::uint32_t*>(amax),
                                                                reinterpret_cast<std::uint32_t*>(col_amax));
    };
    if (x.dtype == DType::BF16) launch(static_cast<const std::uint16_t*>(x.data));
    else launch(static_cast<const float*>(x.data));
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda::fp4k
