// The GEMMs of the CUDA backend, through cuBLASLt. One entry point, the backend's one
// GEMM shape:
//   out (m,n) = A (m,k) B (n,k)^T  [+ bias (n) over every row]  [+ out when accumulate]
//               [then GELU, in the epilogue]
// everything row-major, both operands contraction-last ("TN", what FP8 tensor cores need).
//
// Operand types: E4M3 x E4M3, E4M3 x E5M2, E5M2 x E4M3 (never E5M2 x E5M2: cuBLASLt has
// no such kernel), scaled per tensor or blockwise (A 1x128 with B 128x128 or 1x128);
// BF16 x BF16 and F32 x F32 (exact float32, TF32 off), where either operand may be a
// transposed view. Output BF16 (activations) or F32 (weight gradients).
//
// A GemmRunner owns a cuBLASLt handle, a 32 MiB workspace and a cache keyed by the whole
// problem (shape, types, scalings, transposes, bias, accumulate, fast_accum, pointer
// alignment) that keeps the matmul descriptor, the layouts and the algorithm the
// heuristic chose: after the first call of a shape, a call sets pointers and runs.
// Not thread-safe: one runner per stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "backend.h"

namespace fp8scope::cuda {

// How an operand's values are scaled. scale_inv are dequantization factors (x = q *
// scale_inv), float32 in device memory.
enum class GemmScaling : std::uint8_t {
    None,       // BF16 / F32 values
    PerTensor,  // FP8, one scale_inv
    Tile1x128,  // FP8, one scale_inv per 1x128 tile along k (cuBLASLt VEC128_32F)
    Block128,   // FP8, one per 128x128 block (BLK128x128_32F); never on both operands
};
const char* gemm_scaling_name(GemmScaling s);  // "none", "tensor", "1x128", "128x128"

// One operand, (rows, k) with rows = m for A and n for B.
struct GemmInput {
    const void* data = nullptr;
    DType dtype = DType::BF16;  // E4M3, E5M2, BF16 or F32
    GemmScaling scaling = GemmScaling::None;
    // Our quantizer's grid, float32 row-major over the operand's own (rows, k):
    //   Tile1x128 (rows, ceil(k/128)), Block128 (ceil(rows/128), ceil(k/128)).
    // The runner rearranges it into cuBLASLt's layout in its own scratch memory, unless
    // `scale_inv_gemm_ready` says it already is (see gemm_ready_scale_index; the cast's
    // 1x128 grids over a multiple of 4 rows are, cast/quantize.h).
    const float* scale_inv = nullptr;
    bool scale_inv_gemm_ready = false;
    // BF16 / F32 only: a float32 factor in device memory the operand's values stand
    // multiplied by (null: 1), the tensor scale S_dec of an FP4 copy held as BF16
    // decode(q) * s_b. The GEMM takes alpha = a's times b's on the device (cuBLASLt's
    // device pointer mode), so the factor never rounds into the operand.
    const float* tensor_scale_inv = nullptr;
    // The data is stored as the transpose, (k, rows) row-major. BF16 / F32 only: FP8
    // kernels on Hopper read TN only (use the operand's other copy instead).
    bool transposed = false;
};

// GELU (tanh form) in cuBLASLt's epilogue (GELU_AUX[_BIAS]), on the float32 result before
// it is rounded: out = gelu(A B^T + bias), gelu_aux = A B^T + bias. (Its gradient, DGELU,
// measured slower than the GEMM and a pass of its own on an H200: BF16 1.77 vs 1.66 ms at
// 8192 x 4096 x 16384, and with FP8 operands cuBLASLt adds a separate epilogue kernel.)
enum class GemmGelu : std::uint8_t { None, Forward };

struct GemmArgs {
    std::int64_t m = 0, n = 0, k = 0;
    GemmInput a, b;
    void* out = nullptr;  // (m,n) row-major
    DType out_dtype = DType::BF16;  // BF16 or F32
    // (n) float32 in device memory, added to every row. cuBLASLt's FP8 kernels take the
    // bias in BF16, so for FP8 operands it is rounded to BF16 first (relative 2^-9,
    // below the BF16 rounding of the output it lands in); F32 / BF16 GEMMs add it as the
    // output type.
    const float* bias = nullptr;
    bool accumulate = false;  // out += A B^T (+ bias)
    // FP8 only. Off (the default): cuBLASLt promotes the tensor cores' partial sums into
    // float32 as it goes (Hopper's FP8 accumulator keeps ~14 bits, DeepSeek-V3). On: one
    // accumulator all along k, faster. Blockwise kernels always promote (on is refused).
    bool fast_accum = false;
    GemmGelu gelu = GemmGelu::None;
    void* gelu_aux = nullptr;  // (m,n) row-major, out's type
};

// Thrown when cuBLASLt cannot run a problem (a shape, alignment or type combination it
// has no kernel for). Nothing has been written; the backend falls back, e.g. to a BF16
// GEMM of dequantized operands.
class GemmUnsupported : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class GemmRunner {
public:
    static constexpr std::size_t kDefaultWorkspace = std::size_t(32) << 20;

    // Needs a current CUDA device (allocates the workspace on it).
    explicit GemmRunner(cudaStream_t stream = nullptr, std::size_t workspace_bytes = kDefaultWorkspace);
    ~GemmRunner();
    GemmRunner(const GemmRunner&) = delete;
    GemmRunner& operator=(const GemmRunner&) = delete;

    // Calls are ordered on the runner's stream (its scratch memory relies on that): after
    // a switch, order the new stream after the old one if a GEMM may still be running.
    void set_stream(cudaStream_t stream);
    cudaStream_t stream() const;

    // Why cuBLASLt cannot take `g` by the rules known up front ("" when it can):
    //   - A, B: E4M3/E5M2 (not both E5M2) with PerTensor/Tile1x128/Block128 scaling, or
    //     both BF16, or both F32 (F32 output), unscaled; out BF16 or F32; per-tensor
    //     does not mix with blockwise; no Block128 x Block128.
    //   - FP8: no transposed views; k % 16 == 0 (16-byte rows); n % 8 (BF16 out) or
    //     n % 4 (F32 out), the 16-byte rule on out's rows; data pointers 16-byte aligned.
    //   - Blockwise also m % 8 == 0 and n % 8 == 0; no fast_accum.
    //   - tensor_scale_inv: BF16 / F32 operands only.
    //   - GELU: BF16 output, no accumulate, gelu_aux 16-byte aligned, n % 8 == 0 (its
    //     rows' stride).
    // The heuristic can still refuse on the first call of a shape: gemm() then throws.
    static std::string check(const GemmArgs& g);

    // Enqueues the GEMM on the runner's stream. Throws GemmUnsupported (see above),
    // std::invalid_argument for malformed arguments, CudaError for a CUDA failure.
    void gemm(const GemmArgs& g);

    // The cached plan of `g` (built if new) in words: the algorithm and its tiling.
    std::string describe_plan(const GemmArgs& g);
    std::size_t plans() const;              // cached problems
    std::size_t heuristic_queries() const;  // cuBLASLt heuristic calls so far

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

// --- cuBLASLt's scale layouts -------------------------------------------------------
// For an operand (rows, k) stored K-major (TN), cuBLASLt reads (sources: cuBLAS
// VEC128/BLK128x128 as used by TransformerEngine's cublaslt_gemm.cu and quantizers and by
// PyTorch's _scaled_mm checks):
//   Tile1x128: K-block-major, rows contiguous: (kb, r) at kb * pad4(rows) + r
//   Block128:  row-block-major, K-blocks contiguous: (rb, kb) at rb * pad4(ceil(k/128)) + kb
// pad4 rounds up to a multiple of 4 (16 bytes). `row` is r (Tile1x128) or rb (Block128).
std::int64_t gemm_ready_scale_count(GemmScaling s, std::int64_t rows, std::int64_t k);
std::int64_t gemm_ready_scale_index(GemmScaling s, std::int64_t rows, std::int64_t k, std::int64_t row,
                                    std::int64_t kb);
// Rearranges our row-major grid `src` into `dst` (gemm_ready_scale_count floats, padding
// zeroed) on `stream`. For a quantizer that wants to write the GEMM's layout once.
void to_gemm_ready_scales(float* dst, const float* src, GemmScaling s, std::int64_t rows, std::int64_t k,
                          cudaStream_t stream);

// --- from the backend's operands ------------------------------------------------------
// The chosen copy of a cast operand as a GEMM input: PerTensor and Block (1x128,
// 128x128) map to their scaling, None to BF16/F32 by the copy's dtype, an emulated copy
// (dequantized float32) to F32. Throws GemmUnsupported for MX (no MX tensor cores on
// Hopper) and other block shapes. rows and k are the copy's rows and cols.
GemmInput gemm_input(const GemmOperand& op, Copy copy);

}  // namespace fp8scope::cuda
