// Dequantize one copy of a cast: out (rows, cols) = decode(code) * scale_inv of its block,
// in float32 (tests, analysis) or rounded to BF16 (the MXFP8 path on Hopper, which has no
// MX tensor cores: the backend dequantizes and runs a BF16 GEMM). A thread takes 16 codes
// of a row (one 16-byte load), decodes pairs with cvt.rn.f16x2.e4m3x2/e5m2x2 (every FP8
// value is exact in FP16, and FP16 in float32) and multiplies in float32 with _rn.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>

#include "cuda/check.h"
#include "cuda/quantize_launch.cuh"

namespace fp8scope::cuda {

namespace {

constexpr int kThreads = 256;

template <Format F, bool kBF16>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(const QuantizedInput q, void* out, bool vec) {
    const std::int64_t chunks = (q.cols + 15) / 16, total = q.rows * chunks;
    const std::int64_t grid_rows = (q.rows + q.block_rows - 1) / q.block_rows;
    const std::int64_t grid_cols = (q.cols + q.block_cols - 1) / q.block_cols;
    // Steps between grid rows and between grid columns (ScaleGrid::transposed).
    const std::int64_t row_step = q.scale_transposed ? 1 : grid_cols, col_step = q.scale_transposed ? grid_rows : 1;
    const bool uniform = q.block_cols % 16 == 0;  // a chunk lies in one block
    const std::int64_t stride = std::int64_t(gridDim.x) * blockDim.x;
    for (std::int64_t t = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += stride) {
        const std::int64_t r = t / chunks, c0 = (t % chunks) * 16;
        const float* sinv_row = q.scale_inv + (r / q.block_rows) * row_step;
        const std::int64_t base = r * q.cols + c0;
        float y[16];
        if (vec) {  // a whole chunk, aligned
            const uint4 w = *reinterpret_cast<const uint4*>(q.codes + base);
            const std::uint32_t word[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float2 d = qk::decode2<F>(word[i / 2] >> (16 * (i % 2)));
                y[2 * i] = d.x, y[2 * i + 1] = d.y;
            }
            if (uniform) {
                const float si = sinv_row[c0 / q.block_cols * col_step];
#pragma unroll
                for (int i = 0; i < 16; ++i) y[i] = __fmul_rn(y[i], si);
            } else {
#pragma unroll
                for (int i = 0; i < 16; ++i) y[i] = __fmul_rn(y[i], sinv_row[(c0 + i) / q.block_cols * col_step]);
            }
            if constexpr (kBF16) {
                std::uint32_t b[8];
#pragma unroll
                for (int i = 0; i < 8; ++i)
                    b[i] = std::uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(y[2 * i]))) |
                           (std::uint32_t(__bfloat16_as_ushort(__float2bfloat16_rn(y[2 * i + 1]))) << 16);
                uint4* dst = reinterpret_cast<uint4*>(static_cast<std::uint16_t*>(out) + base);
                dst[0] = make_uint4(b[0], b[1], b[2], b[3]);
                dst[1] = make_uint4(b[4], b[5], b[6], b[7]);
            } else {
                float4* dst = reinterpret_cast<float4*>(static_cast<float*>(out) + base);
#pragma unroll
                for (int i = 0; i < 4; ++i) dst[i] = make_float4(y[4 * i], y[4 * i + 1], y[4 * i + 2], y[4 * i + 3]);
            }
        } else {
            const int n = q.cols - c0 < 16 ? static_cast<int>(q.cols - c0) : 16;
            for (int i = 0; i < n; ++i) {
                const float si = sinv_row[(c0 + i) / q.block_cols * col_step];
                const float v = __fmul_rn(qk::decode2<F>(q.codes[base + i]).x, si);
                if constexpr (kBF16) static_cast<std::uint16_t*>(out)[base + i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
                else static_cast<float*>(out)[base + i] = v;
            }
        }
    }
}

template <Format F>
void launch(const QuantizedInput& q, void* out, bool bf16, bool vec, unsigned blocks, cudaStream_t stream) {
    if (bf16) dequantize_kernel<F, true><<<blocks, kThreads, 0, stream>>>(q, out, vec);
    else dequantize_kernel<F, false><<<blocks, kThreads, 0, stream>>>(q, out, vec);
}

}  // namespace

void dequantize(const QuantizedInput& q, void* out, DType out_dtype, cudaStream_t stream) {
    if (out_dtype != DType::F32 && out_dtype != DType::BF16)
        throw std::invalid_argument(std::string("cuda::dequantize: output must be f32 or bf16, got ") + dtype_name(out_dtype));
    if (q.block_rows < 1 || q.block_cols < 1) throw std::invalid_argument("cuda::dequantize: block shape must be positive");
    const std::int64_t total = q.rows * ((q.cols + 15) / 16);
    if (total == 0) return;
    const bool bf16 = out_dtype == DType::BF16;
    const bool vec = q.cols % 16 == 0 && reinterpret_cast<std::uintptr_t>(q.codes) % 16 == 0 &&
                     reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
    const unsigned blocks = static_cast<unsigned>(
        std::min<std::int64_t>((total + kThreads - 1) / kThreads, std::int64_t(qk::sm_count()) * 8));
    if (q.format == Format::E4M3) launch<Format::E4M3>(q, out, bf16, vec, blocks, stream);
    else launch<Format::E5M2>(q, out, bf16, vec, blocks, stream);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
