// FP4 casts (fp4.h). One CTA per tile of x, held in shared memory as float32, so x is
// read once for both copies. Each block's amax, scale and codes
// follow cast_rules.h, the rules the CPU applies.
#include "cuda/cast/fp4.h"

#include <stdexcept>
#include <variant>

#include "cuda/runtime/check.h"
#include "fp8/cast_rules.h"

namespace fp8scope::cuda {
namespace {

// A tile is 64 rows by 4 blocks of B columns: the rowwise pass gives each of the 256
// threads one block of a row, the columnwise pass one block of a column.
constexpr int kRows = 64;
constexpr int kThreads = 256;
template <int B>
constexpr int kCols = 4 * B;
template <int B>
constexpr int kStride = kCols<B> + 1;  // a tile column's elements fall in different banks

struct Plan {
    bool nvfp4;
    MXRule rule;
};

__device__ __forceinline__ float load_as_float(const float* x, std::int64_t i) { return x[i]; }
__device__ __forceinline__ float load_as_float(const std::uint16_t* x, std::int64_t i) {
    return __uint_as_float(unsigned(x[i]) << 16);
}

// The tile into shared memory (zeros outside x: they change no block amax).
template <class T, int B>
__device__ __forceinline__ void load_tile(const T* x, std::int64_t rows, std::int64_t cols, std::int64_t r0,
                                          std::int64_t c0, float* tile) {
    constexpr int kV = 16 / sizeof(T);  // elements per 16-byte load
    constexpr int kC = kCols<B>, kS = kStride<B>;
    const bool whole = r0 + kRows <= rows && c0 + kC <= cols && cols % kV == 0 &&
                       reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
    if (whole) {
#pragma unroll
        for (int i = threadIdx.x; i < kRows * kC / kV; i += kThreads) {
            const int r = i / (kC / kV), c = (i % (kC / kV)) * kV;
            const uint4 q = __ldg(reinterpret_cast<const uint4*>(x + (r0 + r) * cols + c0 + c));
            T v[kV];
            memcpy(v, &q, 16);
#pragma unroll
            for (int k = 0; k < kV; ++k) tile[r * kS + c + k] = load_as_float(v, k);
        }
        return;
    }
    for (int i = threadIdx.x; i < kRows * kC; i += kThreads) {
        const int r = i / kC, c = i % kC;
        tile[r * kS + c] = r0 + r < rows && c0 + c < cols ? load_as_float(x, (r0 + r) * cols + c0 + c) : 0.0f;
    }
}

// One block of B elements at v[0], v[step], ... (n of them inside x): its scale code and
// its codes packed into out[0, ceil(n / 2)); returns the elements clamped to +-6. The
// codes are packed in registers (static indices only: no local memory).
template <int B>
__device__ __forceinline__ unsigned cast_block(const float* v, int step, int n, const Plan& p, float s_enc,
                                               float s_dec, std::uint8_t* out, std::uint8_t* scale_code,
                                               bool packed_aligned) {
    std::uint32_t amax = 0;
#pragma unroll
    for (int j = 0; j < B; ++j) amax = max(amax, cast::bits_of(v[j * step]) & ~cast::kSignBit);
    // NaN bits lie above Inf's: a block holding either gets the NaN scale and codes 0.
    const cast::FP4BlockScale b = p.nvfp4 ? cast::nvfp4_block_scale(amax, s_enc, s_dec)
                                          : cast::mxfp4_block_scale(amax, p.rule);
    *scale_code = b.code;
    const bool finite = amax < cast::kInfBits;
    unsigned clamped = 0;
    std::uint32_t words[B / 8] = {};
#pragma unroll
    for (int j = 0; j < B; ++j) {
        std::uint32_t c = 0;
        const std::uint8_t code = finite && j < n ? cast::e2m1_code(cast::mul_rn(v[j * step], b.enc), c) : 0;
        clamped += c;
        words[j / 8] |= std::uint32_t(code) << (4 * (j % 8));
    }
    if (packed_aligned && n == B) {
        if constexpr (B == 16) {
            *reinterpret_cast<uint2*>(out) = make_uint2(words[0], words[1]);
        } else {
            *reinterpret_cast<uint4*>(out) = make_uint4(words[0], words[1], words[2], words[3]);
        }
    } else {
#pragma unroll
        for (int k = 0; k < B / 2; ++k)
            if (k < (n + 1) / 2) out[k] = static_cast<std::uint8_t>(words[k / 4] >> (8 * (k % 4)));
    }
    return clamped;
}

template <class T, int B>
__global__ void __launch_bounds__(kThreads) fp4_kernel(const T* x, std::int64_t rows, std::int64_t cols, Plan p,
                                                       Fp4Target out) {
    constexpr int kC = kCols<B>, kS = kStride<B>;
    __shared__ float tile[kRows * kS];
    __shared__ unsigned counts[2];
    const std::int64_t r0 = std::int64_t(blockIdx.y) * kRows, c0 = std::int64_t(blockIdx.x) * kC;
    if (threadIdx.x < 2) counts[threadIdx.x] = 0;
    float s_enc = 1.0f, s_dec = 1.0f;
    if (p.nvfp4) {
        s_enc = cast::nvfp4_tensor_scale(*out.amax);
        s_dec = 1.0f / s_enc;
    }
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *out.tensor_scale_inv = s_dec;
    load_tile<T, B>(x, rows, cols, r0, c0, tile);
    __syncthreads();
    unsigned clamped[2] = {0, 0};
    const int t = threadIdx.x;
    if (out.row_codes) {  // rowwise: tile row t / 4, its block t % 4
        const int r = t / 4, s = t % 4;
        const std::int64_t gr = r0 + r, gc = c0 + s * B;
        if (gr < rows && gc < cols) {
            const int n = cols - gc < B ? int(cols - gc) : B;
            const std::int64_t ld = fp4_packed(cols), nb = (cols + B - 1) / B;
            clamped[0] = cast_block<B>(tile + r * kS + s * B, 1, n, p, s_enc, s_dec, out.row_codes + gr * ld + gc / 2,
                                       out.row_scales + gr * nb + gc / B, ld % (B / 2) == 0);
        }
    }
    if (out.col_codes) {  // columnwise: tile column t % kC, its block t / kC
        const int c = t % kC, s = t / kC;
        const std::int64_t gc = c0 + c, gr = r0 + s * B;
        if (gc < cols && gr < rows) {
            const int n = rows - gr < B ? int(rows - gr) : B;
            const std::int64_t ld = fp4_packed(rows), nb = (rows + B - 1) / B;
            clamped[1] = cast_block<B>(tile + s * B * kS + c, kS, n, p, s_enc, s_dec, out.col_codes + gc * ld + gr / 2,
                                       out.col_scales + gc * nb + gr / B, ld % (B / 2) == 0);
        }
    }
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        const unsigned w = __reduce_add_sync(0xFFFFFFFFu, clamped[k]);
        if ((t & 31) == 0 && w) atomicAdd(&counts[k], w);
    }
    __syncthreads();
    if (t < 2 && counts[t]) atomicAdd(out.overflow + t, static_cast<unsigned long long>(counts[t]));
}

template <class T, int B>
void launch(const CastInput& x, const Plan& p, const Fp4Target& out, cudaStream_t stream) {
    const dim3 grid(unsigned((x.cols + kCols<B> - 1) / kCols<B>), unsigned((x.rows + kRows - 1) / kRows));
    fp4_kernel<T, B><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(x.data), x.rows, x.cols, p, out);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace

int fp4_block(const Recipe& recipe) {
    if (const auto* nv = std::get_if<NVFP4Scaling>(&recipe)) {
        if (nv->two_d) throw std::invalid_argument("nvfp4_2d (16x16 tiles) is not cast on the GPU yet");
        return 16;
    }
    if (std::holds_alternative<MXFP4Scaling>(recipe)) return 32;
    throw std::invalid_argument(recipe_name(recipe) + " is not an FP4 quantizer");
}

void cast_fp4(const CastInput& x, const Recipe& recipe, const Fp4Target& out, cudaStream_t stream) {
    const int block = fp4_block(recipe);
    if (!out.amax || !out.tensor_scale_inv || !out.overflow)
        throw std::invalid_argument("cast_fp4: the amax, tensor_scale_inv and overflow scalars are required");
    const auto* mx = std::get_if<MXFP4Scaling>(&recipe);
    const Plan p{mx == nullptr, mx ? mx->rule : MXRule::RCeil};
    FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(out.overflow, 0, 2 * sizeof(unsigned long long), stream));
    if (p.nvfp4) {
        scaling_amax(x, out.amax, stream);
    } else {
        FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(out.amax, 0, sizeof(float), stream));
    }
    if (x.rows == 0 || x.cols == 0) {
        const float one = 1.0f;
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(out.tensor_scale_inv, &one, sizeof one, cudaMemcpyHostToDevice, stream));
        FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));  // `one` lives on this stack
        return;
    }
    const bool bf16 = x.dtype == DType::BF16;
    if (block == 16) {
        bf16 ? launch<std::uint16_t, 16>(x, p, out, stream) : launch<float, 16>(x, p, out, stream);
    } else {
        bf16 ? launch<std::uint16_t, 32>(x, p, out, stream) : launch<float, 32>(x, p, out, stream);
    }
}

}  // namespace fp8scope::cuda
