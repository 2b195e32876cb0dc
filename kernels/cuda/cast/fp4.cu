// FP4 casts (fp4.h). One CTA per 64 x 64 tile of x, held in shared memory as float32:
// the rowwise pass gives each thread one block of a tile row, the columnwise pass one block
// of a tile column, so x is read once for both copies. Each block's amax, scale and codes
// follow cast_rules.h, the rules the CPU applies.
#include "cuda/cast/fp4.h"

#include <stdexcept>
#include <variant>

#include "cuda/runtime/check.h"
#include "fp8/cast_rules.h"

namespace fp8scope::cuda {
namespace {

constexpr int kTile = 64;
constexpr int kStride = kTile + 1;  // a tile column's elements fall in different banks
constexpr int kThreads = 256;

struct Plan {
    bool nvfp4;
    MXRule rule;
};

__device__ __forceinline__ float load_as_float(const float* x, std::int64_t i) { return x[i]; }
__device__ __forceinline__ float load_as_float(const std::uint16_t* x, std::int64_t i) {
    return __uint_as_float(unsigned(x[i]) << 16);
}

// The tile into shared memory (zeros outside x: they change no block amax).
template <class T>
__device__ __forceinline__ void load_tile(const T* x, std::int64_t rows, std::int64_t cols, std::int64_t r0,
                                          std::int64_t c0, float* tile) {
    constexpr int kV = 16 / sizeof(T);  // elements per 16-byte load
    const bool whole = r0 + kTile <= rows && c0 + kTile <= cols && cols % kV == 0 &&
                       reinterpret_cast<std::uintptr_t>(x) % 16 == 0;
    if (whole) {
        for (int i = threadIdx.x; i < kTile * kTile / kV; i += blockDim.x) {
            const int r = i / (kTile / kV), c = (i % (kTile / kV)) * kV;
            const uint4 q = __ldg(reinterpret_cast<const uint4*>(x + (r0 + r) * cols + c0 + c));
            T v[kV];
            memcpy(v, &q, 16);
#pragma unroll
            for (int k = 0; k < kV; ++k) tile[r * kStride + c + k] = load_as_float(v, k);
        }
        return;
    }
    for (int i = threadIdx.x; i < kTile * kTile; i += blockDim.x) {
        const int r = i / kTile, c = i % kTile;
        tile[r * kStride + c] = r0 + r < rows && c0 + c < cols ? load_as_float(x, (r0 + r) * cols + c0 + c) : 0.0f;
    }
}

// One block of B elements at v[0], v[step], ... (n of them inside x): its scale code and
// its codes packed into out[0, ceil(n / 2)); returns the elements clamped to +-6.
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
    const bool nonfinite = amax >= cast::kInfBits;
    unsigned clamped = 0;
    std::uint8_t bytes[B / 2];
#pragma unroll
    for (int j = 0; j < B; j += 2) {
        std::uint32_t c0 = 0, c1 = 0;
        std::uint8_t lo = 0, hi = 0;
        if (!nonfinite) {
            lo = cast::e2m1_code(cast::mul_rn(v[j * step], b.enc), c0);
            hi = cast::e2m1_code(cast::mul_rn(v[(j + 1) * step], b.enc), c1);
            clamped += (j < n ? c0 : 0u) + (j + 1 < n ? c1 : 0u);
        }
        bytes[j / 2] = static_cast<std::uint8_t>(lo | (j + 1 < n ? hi << 4 : 0));
    }
    if (packed_aligned && n == B) {
        if constexpr (B == 16) {
            uint2 w;
            memcpy(&w, bytes, 8);
            *reinterpret_cast<uint2*>(out) = w;
        } else {
            uint4 w;
            memcpy(&w, bytes, 16);
            *reinterpret_cast<uint4*>(out) = w;
        }
    } else {
        for (int j = 0; j < (n + 1) / 2; ++j) out[j] = bytes[j];
    }
    return clamped;
}

template <class T, int B>
__global__ void __launch_bounds__(kThreads) fp4_kernel(const T* x, std::int64_t rows, std::int64_t cols, Plan p,
                                                       Fp4Target out) {
    __shared__ float tile[kTile * kStride];
    __shared__ unsigned counts[2];
    const std::int64_t r0 = std::int64_t(blockIdx.y) * kTile, c0 = std::int64_t(blockIdx.x) * kTile;
    if (threadIdx.x < 2) counts[threadIdx.x] = 0;
    float s_enc = 1.0f, s_dec = 1.0f;
    if (p.nvfp4) {
        s_enc = cast::nvfp4_tensor_scale(*out.amax);
        s_dec = 1.0f / s_enc;
    }
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) *out.tensor_scale_inv = s_dec;
    load_tile(x, rows, cols, r0, c0, tile);
    __syncthreads();
    constexpr int kSegs = kTile / B;  // blocks along a tile row or column
    unsigned clamped[2] = {0, 0};
    const int t = threadIdx.x;
    if (t < kTile * kSegs) {
        if (out.row_codes) {  // rowwise: tile row t / kSegs, its block t % kSegs
            const int r = t / kSegs, s = t % kSegs;
            const std::int64_t gr = r0 + r, gc = c0 + s * B;
            if (gr < rows && gc < cols) {
                const int n = cols - gc < B ? int(cols - gc) : B;
                const std::int64_t ld = fp4_packed(cols), nb = (cols + B - 1) / B;
                clamped[0] = cast_block<B>(tile + r * kStride + s * B, 1, n, p, s_enc, s_dec,
                                           out.row_codes + gr * ld + gc / 2, out.row_scales + gr * nb + gc / B,
                                           ld % (B / 2) == 0);
            }
        }
        if (out.col_codes) {  // columnwise: tile column t % kTile, its block t / kTile
            const int c = t % kTile, s = t / kTile;
            const std::int64_t gc = c0 + c, gr = r0 + s * B;
            if (gc < cols && gr < rows) {
                const int n = rows - gr < B ? int(rows - gr) : B;
                const std::int64_t ld = fp4_packed(rows), nb = (rows + B - 1) / B;
                clamped[1] = cast_block<B>(tile + s * B * kStride + c, kStride, n, p, s_enc, s_dec,
                                           out.col_codes + gc * ld + gr / 2, out.col_scales + gc * nb + gr / B,
                                           ld % (B / 2) == 0);
            }
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
    const dim3 grid(unsigned((x.cols + kTile - 1) / kTile), unsigned((x.rows + kTile - 1) / kTile));
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
