// Dequantize one copy of a cast: out (rows, cols) = decode(code) * scale_inv of its block,
// in float32 (tests, analysis) or rounded to BF16 (the MXFP8 path on Hopper, which has no
// MX tensor cores: the backend dequantizes and runs a BF16 GEMM). A thread takes 16 codes
// of a row (one 16-byte load), decodes pairs with cvt.rn.f16x2.e4m3x2/e5m2x2 (every FP8
// value is exact in FP16, and FP16 in float32) and multiplies in float32 with _rn.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {

namespace {

constexpr int kThreads = 256;

// How the kernel walks the scale grid, worked out once on the host.
struct GridWalk {
    int block_rows, block_cols;       // clamped to the tensor: 32-bit divisions
    std::int64_t row_step, col_step;  // between grid rows and grid columns (ScaleGrid)
    bool uniform;                     // a chunk of 16 lies in one block
    bool vec;                         // whole chunks, 16-byte aligned
};

// Thread (x, y) takes chunk x of rows y, y + gridDim.y, ...: rows and columns below 2^31
// (dequantize checks), so the block of a row or a chunk is a 32-bit division, done once
// per row or chunk (64-bit ones per chunk cost more than the copy itself).
template <Format F, bool kBF16>
__global__ void __launch_bounds__(kThreads) dequantize_kernel(const QuantizedInput q, void* out, const GridWalk w) {
    const int rows = int(q.rows), cols = int(q.cols), br = w.block_rows, bc = w.block_cols;
    const std::int64_t row_step = w.row_step, col_step = w.col_step;
    const int c0 = (int(blockIdx.x) * kThreads + int(threadIdx.x)) * 16;
    if (c0 >= cols) return;
    const float* sinv_col = q.scale_inv + std::int64_t(c0 / bc) * col_step;  // the chunk's first block
    for (int r = int(blockIdx.y); r < rows; r += int(gridDim.y)) {
        const float* sinv_row = q.scale_inv + std::int64_t(r / br) * row_step;
        const std::int64_t base = std::int64_t(r) * cols + c0;
        float y[16];
        if (w.vec) {  // a whole chunk, aligned
            const uint4 packed = *reinterpret_cast<const uint4*>(q.codes + base);
            const std::uint32_t word[4] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float2 d = qk::decode2<F>(word[i / 2] >> (16 * (i % 2)));
                y[2 * i] = d.x, y[2 * i + 1] = d.y;
            }
            if (w.uniform) {
                const float si = sinv_col[std::int64_t(r / br) * row_step];
#pragma unroll
                for (int i = 0; i < 16; ++i) y[i] = __fmul_rn(y[i], si);
            } else {
#pragma unroll
                for (int i = 0; i < 16; ++i) y[i] = __fmul_rn(y[i], sinv_row[std::int64_t((c0 + i) / bc) * col_step]);
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
            const int n = cols - c0 < 16 ? cols - c0 : 16;
            for (int i = 0; i < n; ++i) {
                const float si = sinv_row[std::int64_t((c0 + i) / bc) * col_step];
                const float v = __fmul_rn(qk::decode2<F>(q.codes[base + i]).x, si);
                if constexpr (kBF16) static_cast<std::uint16_t*>(out)[base + i] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
                else static_cast<float*>(out)[base + i] = v;
            }
        }
    }
}

template <Format F>
void launch(const QuantizedInput& q, void* out, bool bf16, const GridWalk& w, dim3 blocks, cudaStream_t stream) {
    if (bf16) dequantize_kernel<F, true><<<blocks, kThreads, 0, stream>>>(q, out, w);
    else dequantize_kernel<F, false><<<blocks, kThreads, 0, stream>>>(q, out, w);
}

}  // namespace

void dequantize(const QuantizedInput& q, void* out, DType out_dtype, cudaStream_t stream) {
    if (out_dtype != DType::F32 && out_dtype != DType::BF16)
        throw std::invalid_argument(std::string("cuda::dequantize: output must be f32 or bf16, got ") + dtype_name(out_dtype));
    if (q.block_rows < 1 || q.block_cols < 1) throw std::invalid_argument("cuda::dequantize: block shape must be positive");
    if (q.rows <= 0 || q.cols <= 0) return;
    if (q.rows > 0x7FFFFFFF || q.cols > 0x7FFFFFF0)
        throw std::invalid_argument("cuda::dequantize: " + std::to_string(q.rows) + " x " + std::to_string(q.cols) +
                                    " is past 2^31 rows or columns");
    const bool bf16 = out_dtype == DType::BF16;
    const ScaleGrid g{q.block_rows, q.block_cols, (q.rows + q.block_rows - 1) / q.block_rows,
                      (q.cols + q.block_cols - 1) / q.block_cols, q.scale_transposed};
    GridWalk w{};
    // A block past the tensor's end divides as the tensor's extent does.
    w.block_rows = int(std::min(q.block_rows, q.rows)), w.block_cols = int(std::min(q.block_cols, q.cols));
    w.row_step = g.row_step(), w.col_step = g.col_step();
    w.uniform = q.block_cols % 16 == 0;
    w.vec = q.cols % 16 == 0 && reinterpret_cast<std::uintptr_t>(q.codes) % 16 == 0 &&
            reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
    const std::int64_t chunk_blocks = ((q.cols + 15) / 16 + kThreads - 1) / kThreads;
    const dim3 blocks(static_cast<unsigned>(chunk_blocks), static_cast<unsigned>(std::min<std::int64_t>(q.rows, 65535)));
    if (q.format == Format::E4M3) launch<Format::E4M3>(q, out, bf16, w, blocks, stream);
    else launch<Format::E5M2>(q, out, bf16, w, blocks, stream);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
