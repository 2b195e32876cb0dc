// The cast's dispatch: one switch over the recipe picks the passes and the kernel
// (block.cuh for the scalings training uses, tile.cuh for the rest):
//   current   amax pass, then the cast with compute_scale(amax)            (reads x twice)
//   delayed   the cast with the state's scale, amax fused; then the push   (reads x once)
//   block/MX  1x128, 128x128, MX 1x32: one pass, exchanges fixed at compile time;
//             other shapes that tile 128: one pass, block amaxes in shared memory
//             (tile kernel, Cells); any other: block amax pass, cast, grids finalized
//             (tile kernel, Grid; reads x twice)
// Stats are zeroed first by a kernel that lets the next start at once (runtime/dependent_launch.cuh);
// every kernel after that only adds to them.
#include "cuda/cast/quantize.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

#include "cuda/cast/launch.cuh"
#include "cuda/runtime/check.h"
#include "cuda/runtime/dependent_launch.cuh"

namespace fp8scope::cuda {

namespace {

bool pow2_in(int v, int lo, int hi) { return v >= lo && v <= hi && (v & (v - 1)) == 0; }

int log2_of(int v) {
    int l = 0;
    while ((1 << l) < v) ++l;
    return l;
}

// stats->scale = *src, or `value` when src is null (empty tensors: no kernel wrote it).
__global__ void set_scale_kernel(CastStats* stats, const float* src, float value) {
    stats->scale = src ? *src : value;
}

void set_scale(CastStats* stats, const float* src, float value, cudaStream_t stream) {
    set_scale_kernel<<<1, 1, 0, stream>>>(stats, src, value);
    FP8SCOPE_CUDA_LAUNCHED();
}

// words[0 .. n) = 0, n <= 32 (one word a lane); the kernel after it (a dependent launch)
// waits only where it reads them.
__global__ void zero_words_kernel(std::uint32_t* words, int n) {
    allow_dependents();
    if (int(threadIdx.x) < n) words[threadIdx.x] = 0u;
}

// A cast's statistics or an amax: a few words, zeroed by one warp.
void zero_words(void* p, std::size_t bytes, cudaStream_t stream) {
    if (bytes > 32 * 4) throw std::logic_error("cuda zero_words: " + std::to_string(bytes) + " bytes, one warp clears 128");
    zero_words_kernel<<<1, 32, 0, stream>>>(static_cast<std::uint32_t*>(p), int(bytes / 4));
    FP8SCOPE_CUDA_LAUNCHED();
}

void launch_tile(const qk::TileParams& p, DType in, Format f, qk::ScaleSource s, cudaStream_t stream) {
    if (in == DType::BF16) qk::launch_tile_bf16(p, f, s, stream);
    else qk::launch_tile_f32(p, f, s, stream);
}

void launch_block(const qk::TileParams& p, DType in, Format f, qk::BlockShape b, cudaStream_t stream) {
    if (in == DType::BF16) qk::launch_block_bf16(p, f, b, stream);
    else qk::launch_block_f32(p, f, b, stream);
}

// The shapes with a kernel of their own.
std::optional<qk::BlockShape> block_shape(const qk::TileParams& p) {
    if (p.mx) return p.br == 1 && p.bc == 32 ? std::optional(qk::BlockShape::Mx32) : std::nullopt;
    if (p.br == 1 && p.bc == 128) return qk::BlockShape::Rows128;
    if (p.br == 128 && p.bc == 128) return qk::BlockShape::Square128;
    return std::nullopt;
}

bool aligned(const void* p, std::size_t n) { return reinterpret_cast<std::uintptr_t>(p) % n == 0; }

}  // namespace

ScaleGrid scale_grid(const Recipe& recipe, std::int64_t rows, std::int64_t cols) {
    if (is_fp4(recipe)) throw std::invalid_argument(recipe_name(recipe) + ": the GPU casts to FP8 only, not to FP4");
    ScaleGrid g;
    auto set = [&](std::int64_t br, std::int64_t bc) {
        g.block_rows = std::max<std::int64_t>(1, br);
        g.block_cols = std::max<std::int64_t>(1, bc);
        g.rows = (rows + g.block_rows - 1) / g.block_rows;
        g.cols = (cols + g.block_cols - 1) / g.block_cols;
    };
    if (const auto* b = std::get_if<BlockScaling>(&recipe)) {
        if (b->block_rows < 1 || b->block_cols < 1)
            throw std::invalid_argument("block recipe: block shape must be positive, got " +
                                        std::to_string(b->block_rows) + "x" + std::to_string(b->block_cols));
        set(b->block_rows, b->block_cols);
        g.transposed = b->block_rows == 1 && b->block_cols == 128 && rows % 4 == 0;
    } else if (const auto* mx = std::get_if<MXScaling>(&recipe)) {
        if (mx->block < 1) throw std::invalid_argument("mx recipe: block must be positive, got " + std::to_string(mx->block));
        set(1, mx->block);
        g.transposed = mx->block == 32;
    } else {
        set(rows, cols);  // per-tensor: one block
    }
    return g;
}

void scaling_amax(const CastInput& x, float* amax, cudaStream_t stream) {
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::invalid_argument(std::string("cuda::scaling_amax: input must be f32 or bf16, got ") + dtype_name(x.dtype));
    zero_words(amax, sizeof(float), stream);
    qk::launch_tensor_amax(x, reinterpret_cast<std::uint32_t*>(amax), stream);
}

void cast(const CastInput& x, const Recipe& recipe, const CastTarget& out, cudaStream_t stream, void* delayed_state,
          bool push) {
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::invalid_argument(std::string("cuda::cast: input must be f32 or bf16, got ") + dtype_name(x.dtype));
    if (!out.stats) throw std::invalid_argument("cuda::cast: stats are required");
    if ((out.rowwise && !out.rowwise_scale_inv) || (out.columnwise && !out.columnwise_scale_inv))
        throw std::invalid_argument("cuda::cast: a copy needs its scale_inv grid");
    const Format f = recipe_format(recipe);
    const ScaleGrid rg = scale_grid(recipe, x.rows, x.cols), cg = scale_grid(recipe, x.cols, x.rows);
    const bool empty = x.rows == 0 || x.cols == 0;
    zero_words(out.stats, sizeof(CastStats), stream);

    qk::TileParams p{};
    p.x = x.data;
    p.rows = x.rows;
    p.cols = x.cols;
    p.vec_load = aligned(x.data, 16) && x.cols % (x.dtype == DType::BF16 ? 8 : 4) == 0;
    p.row_codes = out.rowwise;
    p.row_sinv = out.rowwise_scale_inv;
    p.row_e8m0 = out.rowwise_e8m0;
    p.col_codes = out.columnwise;
    p.col_sinv = out.columnwise_scale_inv;
    p.col_e8m0 = out.columnwise_e8m0;
    p.row_vec_store = aligned(out.rowwise, 8) && x.cols % 8 == 0;
    p.col_vec_store = aligned(out.columnwise, 8) && x.rows % 8 == 0;
    p.stats = out.stats;
    p.row_grid = rg, p.col_grid = cg;
    p.br = p.bc = 1;

    if (const auto* c = std::get_if<CurrentScaling>(&recipe)) {
        if (empty) return set_scale(out.stats, nullptr, compute_scale(0.0f, f, c->eps, c->pow2), stream);
        qk::launch_tensor_amax(x, reinterpret_cast<std::uint32_t*>(&out.stats->amax), stream);
        p.current = true;
        p.eps = c->eps;
        p.pow2 = c->pow2;
        return launch_block(p, x.dtype, f, qk::BlockShape::PerTensor, stream);
    }
    if (const auto* d = std::get_if<DelayedScaling>(&recipe)) {
        auto* state = static_cast<DelayedStateHeader*>(delayed_state);
        const float* scale = state ? &state->scale : nullptr;
        if (empty) {
            set_scale(out.stats, scale, 1.0f, stream);
        } else {
            p.scale_in = scale;
            p.fuse_amax = true;
            launch_block(p, x.dtype, f, qk::BlockShape::PerTensor, stream);
        }
        if (state && push) delayed_push(state, *d, &out.stats->amax, stream);
        return;
    }

    // Blockwise and MX: the rowwise block br x bc.
    if (const auto* b = std::get_if<BlockScaling>(&recipe)) {
        p.br = b->block_rows, p.bc = b->block_cols, p.pow2 = b->pow2;
    } else {
        const MXScaling& mx = std::get<MXScaling>(recipe);
        p.br = 1, p.bc = mx.block, p.mx = true, p.rule = mx.rule;
    }
    if (empty) return set_scale(out.stats, nullptr, qk::float_of(qk::kQuietNaNBits), stream);
    if (const auto b = block_shape(p)) return launch_block(p, x.dtype, f, *b, stream);  // amax fused always
    if (pow2_in(p.br, 1, qk::kTile) && pow2_in(p.bc, 8, qk::kTile)) {
        p.br_log2 = log2_of(p.br), p.bc_log2 = log2_of(p.bc);
        p.fuse_amax = true;
        return launch_tile(p, x.dtype, f, qk::ScaleSource::Cells, stream);
    }
    // Any other shape: the grids hold block amax bits until the finalize kernel.
    if (out.rowwise) FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(out.rowwise_scale_inv, 0, rg.size() * sizeof(float), stream));
    if (out.columnwise)
        FP8SCOPE_CUDA_CHECK(cudaMemsetAsync(out.columnwise_scale_inv, 0, cg.size() * sizeof(float), stream));
    qk::launch_grid_amax(p, x.dtype, stream);
    launch_tile(p, x.dtype, f, qk::ScaleSource::Grid, stream);
    qk::launch_grid_finalize(p, f, stream);
}

}  // namespace fp8scope::cuda
