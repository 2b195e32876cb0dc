// FP4 code casts (fp4.h): fp4_tile.cuh's kernel storing packed E2M1 codes and block scale
// codes. Each block's amax, scale and codes follow cast_rules.h, the rules the CPU applies.
#include "cuda/cast/fp4.h"

#include <stdexcept>
#include <variant>

#include "cuda/cast/fp4_tile.cuh"
#include "cuda/runtime/check.h"

namespace fp8scope::cuda {
namespace {

// Packed codes (a block's codes 0 when it holds NaN or Inf) and one scale code per block,
// or per 16x16 tile (block_rows 16).
struct CodesOut {
    static constexpr bool kCodes = true;
    std::uint8_t *row_codes, *row_scales, *col_codes, *col_scales;
    int block_rows;

    template <int B>
    struct Acc {
        std::uint32_t words[B / 8] = {};
        __device__ __forceinline__ void put(int j, std::uint8_t code, float, const cast::FP4BlockScale&, bool finite) {
            words[j / 8] |= std::uint32_t(finite ? code : 0) << (4 * (j % 8));
        }
    };

    template <int B>
    __device__ __forceinline__ void store(int copy, const fp4k::Block& blk, const Acc<B>& acc,
                                          std::uint8_t scale_code) const {
        const std::int64_t ld = fp4_packed(blk.cols), nb = (blk.cols + B - 1) / B;
        std::uint8_t* out = (copy ? col_codes : row_codes) + blk.row * ld + blk.col / 2;
        if (ld % (B / 2) == 0 && blk.n == B) {
            if constexpr (B == 16) *reinterpret_cast<uint2*>(out) = make_uint2(acc.words[0], acc.words[1]);
            else *reinterpret_cast<uint4*>(out) = make_uint4(acc.words[0], acc.words[1], acc.words[2], acc.words[3]);
        } else {
#pragma unroll
            for (int k = 0; k < B / 2; ++k)
                if (k < (blk.n + 1) / 2) out[k] = static_cast<std::uint8_t>(acc.words[k / 4] >> (8 * (k % 4)));
        }
        if (blk.write_scale) (copy ? col_scales : row_scales)[(blk.row / block_rows) * nb + blk.col / B] = scale_code;
    }
};

}  // namespace

int fp4_block(const Recipe& recipe) {
    if (std::holds_alternative<NVFP4Scaling>(recipe)) return 16;
    if (std::holds_alternative<MXFP4Scaling>(recipe)) return 32;
    throw std::invalid_argument(recipe_name(recipe) + " is not an FP4 quantizer");
}

int fp4_block_rows(const Recipe& recipe) {
    const auto* nv = std::get_if<NVFP4Scaling>(&recipe);
    return fp4_block(recipe) == 16 && nv->two_d ? 16 : 1;
}

void cast_fp4(const CastInput& x, const Recipe& recipe, const Fp4Target& out, cudaStream_t stream,
              const cast::RoundingKey& rounding) {
    const int block_rows = fp4_block_rows(recipe);
    if (!out.amax || !out.tensor_scale_inv || !out.overflow)
        throw std::invalid_argument("cast_fp4: the amax, tensor_scale_inv and overflow scalars are required");
    fp4k::Params p = fp4k::params_of(recipe);
    if (p.rht && out.col_codes && (!out.col_amax || !out.col_tensor_scale_inv))
        throw std::invalid_argument("cast_fp4: rht needs the columnwise copy's amax and tensor_scale_inv");
    const bool own_col = p.rht && out.col_codes;  // the columnwise copy has scalars of its own
    fp4k::zero_totals(out.overflow, out.amax, own_col ? out.col_amax : nullptr, stream);
    if (p.nvfp4) fp4k::amax_pass(x, own_col, out.amax, out.col_amax, stream);
    if (x.rows == 0 || x.cols == 0) {
        const float one[2] = {1.0f, 1.0f};
        FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(out.tensor_scale_inv, one, sizeof(float), cudaMemcpyHostToDevice, stream));
        if (out.col_codes && out.col_tensor_scale_inv)
            FP8SCOPE_CUDA_CHECK(cudaMemcpyAsync(out.col_tensor_scale_inv, one + 1, sizeof(float), cudaMemcpyHostToDevice, stream));
        FP8SCOPE_CUDA_CHECK(cudaStreamSynchronize(stream));  // `one` lives on this stack
        return;
    }
    p.rowwise = out.row_codes != nullptr;
    p.columnwise = out.col_codes != nullptr;
    p.key = rounding;
    p.amax = out.amax;
    p.col_amax = own_col ? out.col_amax : out.amax;
    p.row_tensor_scale_inv = out.tensor_scale_inv;
    p.col_tensor_scale_inv = out.col_codes ? out.col_tensor_scale_inv : nullptr;
    p.overflow = out.overflow;
    if (!p.nvfp4) p.fused_amax = reinterpret_cast<std::uint32_t*>(out.amax);  // zeroed above
    fp4k::dispatch_tiles(x, recipe, p, CodesOut{out.row_codes, out.row_scales, out.col_codes, out.col_scales, block_rows},
                         stream);
    FP8SCOPE_CUDA_LAUNCHED();
}

}  // namespace fp8scope::cuda
