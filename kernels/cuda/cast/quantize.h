// The FP8 cast of the CUDA backend: launchers for the quantize kernels, plain C++ so the
// backend and the tests include it without nvcc. One entry, cast(), switches on the
// recipe (as Transformer Engine's quantize dispatch does); every variant reads x once for
// the cast and writes, in that pass, the rowwise copy (rows, cols), the columnwise copy
// (cols, rows) = the transpose, their scale_inv grids and the tensor's amax and overflow.
// Current scaling reads x once more before, for its amax.
//
// Codes, grids, amax and overflow are bit-identical to the CPU's quantize()
// (kernels/cpu/quantize.h) on x for the rowwise copy and on x^T for the columnwise copy:
// the scale rules are those of core/fp8/cast_rules.h, the cast is the hardware's
// RNE conversion where it provably agrees with cast_rules.h's integer rounding, that rounding elsewhere.
// Input values are x itself (F32) or the exact float32 of each BF16.
//
// Shape letters: x (R, C) = (rows, cols), C the contraction dimension; a recipe's block is
// br x bc (per-tensor: R x C); the rowwise grid is ceil(R/br) x ceil(C/bc), the columnwise
// grid that of x^T (C, R): ceil(C/br) x ceil(R/bc).
//
// All launchers are asynchronous on `stream` unless they say otherwise; device pointers
// only. Compile-time requirement: no -ftz / fast-math for the .cu files (IEEE products,
// quotients and subnormals are part of the contract).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backend.h"
#include "fp8/recipe.h"
#include "fp8/scaling.h"

namespace fp8scope::cuda {

// x (R, C), row-major, F32 or BF16 (raw bits, uint16 each).
struct CastInput {
    const void* data = nullptr;
    DType dtype = DType::F32;
    std::int64_t rows = 0, cols = 0;
};

// What a cast reports, in device memory; every cast overwrites it (host: CastInfo).
struct CastStats {
    float amax;                              // scaling amax of x: NaN ignored, Inf included
    float scale;                             // per-tensor scale the cast used; NaN for block/MX
    unsigned long long overflow_rowwise;     // finite x the saturation clamped, rowwise copy
    unsigned long long overflow_columnwise;  // the same for the columnwise copy
};
static_assert(sizeof(CastStats) == 24, "CastStats is read back as 24 bytes");

// The host's CastInfo from stats read back: overflow of the rowwise copy, or of the
// columnwise one when only that was cast.
inline CastInfo to_cast_info(const CastStats& s, bool rowwise) {
    return {s.amax, s.scale, static_cast<std::int64_t>(rowwise ? s.overflow_rowwise : s.overflow_columnwise)};
}

// Where a cast writes (device memory). A copy whose codes are null is not written; its
// scale_inv grid is required with it, the E8M0 grid (MX only) is optional.
struct CastTarget {
    std::uint8_t* rowwise = nullptr;               // (R, C) codes
    float* rowwise_scale_inv = nullptr;            // ceil(R/br) x ceil(C/bc)
    std::uint8_t* rowwise_e8m0 = nullptr;          // same grid, MX only
    std::uint8_t* columnwise = nullptr;            // (C, R) codes of x^T
    float* columnwise_scale_inv = nullptr;         // ceil(C/br) x ceil(R/bc)
    std::uint8_t* columnwise_e8m0 = nullptr;
    CastStats* stats = nullptr;                    // required
};

// Block shape and scale grid of one copy: scale_grid(recipe, R, C) for the rowwise copy,
// scale_grid(recipe, C, R) for the columnwise one. Per-tensor: one block of R x C.
// Grids are row-major, entry (gr, gc) at gr * cols + gc, except `transposed` ones, stored
// column-major, at gc * rows + gr: 1x128 grids whose R is a multiple of 4, which is the
// layout cuBLASLt reads (gemm/gemm.h, Tile1x128), so the GEMM takes them as they are; and
// MXFP8 1x32 grids (E8M0 grids alike). A tile then writes its entries as contiguous runs
// instead of a few bytes in each of 128 grid rows.
struct ScaleGrid {
    std::int64_t block_rows = 1, block_cols = 1;
    std::int64_t rows = 0, cols = 0;  // of the grid
    bool transposed = false;
    __host__ __device__ std::int64_t size() const { return rows * cols; }
    __host__ __device__ bool contains(std::int64_t gr, std::int64_t gc) const { return gr < rows && gc < cols; }
    // Where entry (gr, gc) is: gr * row_step() + gc * col_step().
    __host__ __device__ std::int64_t index(std::int64_t gr, std::int64_t gc) const {
        return transposed ? gc * rows + gr : gr * cols + gc;
    }
    __host__ __device__ std::int64_t row_step() const { return transposed ? 1 : cols; }
    __host__ __device__ std::int64_t col_step() const { return transposed ? rows : 1; }
};
ScaleGrid scale_grid(const Recipe& recipe, std::int64_t rows, std::int64_t cols);

// --- delayed scaling's state in device memory --------------------------------------------
// One allocation of delayed_state_bytes(recipe) bytes: this header, then float
// amax[length]. The history (oldest first) is amax[(head - count + i) mod length] for
// i < count; the next push writes amax[head]. length = max(1, recipe.history).
struct DelayedStateHeader {
    float scale;          // the scale of the next cast (1 before any push)
    std::int32_t count;   // entries held, <= length
    std::int32_t head;    // where the next amax goes
    std::int32_t length;  // ring capacity
};
static_assert(sizeof(DelayedStateHeader) == 16, "the ring starts 16 bytes in");

std::size_t delayed_state_bytes(const DelayedScaling& recipe);
// Synchronous copies between a DelayedState and the device layout (restore, read, a fresh
// state: a new allocation must be written once before any cast or push uses it). A host
// history longer than the ring keeps its newest entries.
void delayed_state_write(void* state, const DelayedState& host, cudaStream_t stream);
DelayedState delayed_state_read(const void* state, const DelayedScaling& recipe, cudaStream_t stream);
// DelayedState::push on the device: appends *amax and computes the next scale.
void delayed_push(void* state, const DelayedScaling& recipe, const float* amax, cudaStream_t stream);

// --- the cast ---------------------------------------------------------------------------
// x under `recipe` into `out`. Delayed scaling casts with the scale in `delayed_state`
// (1 when null) and, with `push`, then pushes this cast's amax into it.
void cast(const CastInput& x, const Recipe& recipe, const CastTarget& out, cudaStream_t stream,
          void* delayed_state = nullptr, bool push = false);

// *amax = scaling amax of x (NaN ignored, Inf included).
void scaling_amax(const CastInput& x, float* amax, cudaStream_t stream);

// --- dequantize -------------------------------------------------------------------------
// One copy written by cast(): codes (rows, cols) and the scale_inv grid of its blocks.
struct QuantizedInput {
    const std::uint8_t* codes = nullptr;
    const float* scale_inv = nullptr;
    Format format = Format::E4M3;
    std::int64_t rows = 0, cols = 0;
    std::int64_t block_rows = 1, block_cols = 1;  // ScaleGrid's block of this copy
    bool scale_transposed = false;                // ScaleGrid::transposed
};

// out (rows, cols) = decode(code) * scale_inv in float32 (out_dtype F32), rounded to
// nearest even for BF16 (MXFP8 GEMMs on Hopper run in BF16 on these).
void dequantize(const QuantizedInput& q, void* out, DType out_dtype, cudaStream_t stream);

// --- test hook --------------------------------------------------------------------------
// codes[i] = the cast of the float32 whose bits are first + i, i < n, through the element
// path of the cast kernels (hardware conversion where they use it, cast_rules.h's rounding
// elsewhere) or, with `exact_only`, through the integer rounding alone. Lets a test
// compare every float32 against cast::cast_code.
void cast_bit_patterns(Format format, std::uint32_t first, std::int64_t n, bool exact_only, std::uint8_t* codes,
                       cudaStream_t stream);

}  // namespace fp8scope::cuda
