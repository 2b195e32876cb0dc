// The FP4 training cast (fp4_train.h): BF16 values decode(q) * s_b, by fp4_staged.cuh's
// kernel where it fits (BF16 input of 16-byte rows; 16 x 16 tiles only without rht and
// stochastic rounding), else by fp4_tile.cuh's, whole 32-byte sectors per store where a block is
// whole and its row aligned.
#include "cuda/cast/fp4_train.h"

#include <stdexcept>
#include <string>

#include "cuda/cast/fp4.h"
#include "cuda/cast/fp4_staged.cuh"
#include "cuda/cast/fp4_tile.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {
namespace {

struct ValuesOut {
    static constexpr bool kCodes = false;
    std::uint16_t *row, *col;

    // value * s_b; the float32 product is exact, so its top half is the BF16 (NaN in a
    // block holding NaN or Inf, whose s_b is NaN).
    template <int B>
    struct Acc {
        float v[B];
        __device__ __forceinline__ void put(int j, std::uint8_t, float q, const cast::FP4BlockScale& b, bool) {
            v[j] = cast::mul_rn(q, b.scale);
        }
        // BF16 elements 2i and 2i + 1: the top halves of two floats, one byte permute.
        __device__ __forceinline__ std::uint32_t word(int i) const {
            return __byte_perm(__float_as_uint(v[2 * i]), __float_as_uint(v[2 * i + 1]), 0x7632);
        }
    };

    template <int B>
    __device__ __forceinline__ void store(int copy, const fp4k::Block& blk, const Acc<B>& acc, std::uint8_t) const {
        std::uint16_t* out = (copy ? col : row) + blk.row * blk.cols + blk.col;
        const bool whole = blk.cols % 8 == 0 && blk.n == B;
        uint4 w[B / 8];
#pragma unroll
        for (int i = 0; i < B / 8; ++i)
            w[i] = make_uint4(acc.word(4 * i), acc.word(4 * i + 1), acc.word(4 * i + 2), acc.word(4 * i + 3));
        fp4k::store_pairs<B / 8>(reinterpret_cast<uint4*>(out), w, whole);
        if (!whole) {
#pragma unroll
            for (int j = 0; j < B; ++j)
                if (j < blk.n) out[j] = static_cast<std::uint16_t>(__float_as_uint(acc.v[j]) >> 16);
        }
    }
};

}  // namespace

void cast_fp4_copies(const CastInput& x, const Recipe& recipe, const cast::RoundingKey& rounding,
                     const Fp4Copies& out, cudaStream_t stream) {
    fp4_block(recipe);  // throws for a quantizer that is not FP4
    if (x.dtype != DType::F32 && x.dtype != DType::BF16)
        throw std::invalid_argument(std::string("cast_fp4_copies: input must be f32 or bf16, got ") + dtype_name(x.dtype));
    if (!out.stats || !out.scalars) throw std::invalid_argument("cast_fp4_copies: stats and scalars are required");
    fp4k::Params p = fp4k::params_of(recipe);
    const bool own_col = p.rht && out.columnwise;  // the columnwise copy has an amax of its own
    float* amax = &out.stats->amax;
    float* col_amax = own_col ? &out.scalars->col_amax : amax;
    fp4k::zero_totals(&out.stats->overflow_rowwise, amax, own_col ? col_amax : nullptr, stream);
    if (p.nvfp4) fp4k::amax_pass(x, own_col, amax, col_amax, stream);
    if (x.rows == 0 || x.cols == 0) {
        const Fp4Scalars ones{1.0f, 1.0f, 0.0f, 0.0f};
        const float scale = cast::float_of(cast::kQuietNaNBits);
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(out.scalars, &ones, sizeof ones, cudaMemcpyHostToDevice, stream));
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(&out.stats->scale, &scale, sizeof scale, cudaMemcpyHostToDevice, stream));
        FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));  // the sources live on this stack
        return;
    }
    p.rowwise = out.rowwise != nullptr;
    p.columnwise = out.columnwise != nullptr;
    p.key = rounding;
    p.amax = amax;
    p.col_amax = col_amax;
    p.row_tensor_scale_inv = &out.scalars->row_tensor_scale_inv;
    p.col_tensor_scale_inv = &out.scalars->col_tensor_scale_inv;
    p.tensor_scale = &out.stats->scale;
    p.overflow = &out.stats->overflow_rowwise;
    if (!p.nvfp4) p.fused_amax = reinterpret_cast<std::uint32_t*>(amax);  // zeroed above
    const auto* nv = std::get_if<NVFP4Scaling>(&recipe);
    const bool two_d = nv && nv->two_d, sr = nv ? nv->sr : std::get<MXFP4Scaling>(recipe).sr;
    if (fp4k::staged_fits(x, two_d, p.rht, sr, out.rowwise, out.columnwise))
        fp4k::launch_staged(x, p, two_d, sr, out.rowwise, out.columnwise, stream);
    else
        fp4k::dispatch_tiles(x, recipe, p, ValuesOut{out.rowwise, out.columnwise}, stream);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
