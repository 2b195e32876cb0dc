// The FP4 casts written out from cast_rules.h, element by element in plain loops: the
// oracle of the device's FP4 code cast (cast_fp4) and training cast (cast_fp4_copies and
// CudaBackend::cast). For x (R, C) and a quantizer:
//   rowwise copy    M = x (R, C)
//   columnwise copy M = x^T (C, R), with rht each row's full runs of 16 through rht16
// each cast under S_enc = nvfp4_tensor_scale(its scaling amax) (MXFP4: 1), in blocks of
// 1 x B (16x16 for nvfp4_2d) with nvfp4_block_scale / mxfp4_block_scale of the block amax,
// q = e2m1_code(m * enc) or, with sr, e2m1_code_sr(m * enc, rounding_bits(key, e)) for the
// element's row-major index e in its copy (key.tensor | 1 columnwise); value = decode(q) * s_b.
// nvfp4_2d without rht: the columnwise copy is the rowwise one transposed (sr bits included),
// as the CPU's training cast has it (kernels/cpu/fp4_cast.h).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <variant>
#include <vector>

#include "fp8/cast_rules.h"
#include "fp8/recipe.h"

namespace fp8scope::testing {

// Normal data with zeros, subnormals and outliers; with `specials` a NaN and a -Inf.
inline std::vector<float> fp4_test_data(std::int64_t rows, std::int64_t cols, bool specials) {
    std::mt19937_64 rng(std::uint64_t(rows * 131 + cols));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(0.0f, 1.0f);
    std::vector<float> x(std::size_t(rows * cols));
    for (float& v : x) {
        const float u = uni(rng);
        v = normal(rng);
        if (u < 0.02f) v = 0.0f;
        else if (u < 0.03f) v = std::ldexp(normal(rng), -130);  // subnormal
        else if (u < 0.035f) v *= 300.0f;                        // outliers
    }
    if (specials && x.size() > 40) {
        x[3] = std::numeric_limits<float>::quiet_NaN();
        x[x.size() - 5] = -std::numeric_limits<float>::infinity();
    }
    return x;
}

// One cast copy: one code and one value per element, a scale code per block.
struct Fp4RefCopy {
    std::int64_t rows = 0, cols = 0;
    std::vector<std::uint8_t> codes;   // rows x cols, 0 in a block holding NaN or Inf
    std::vector<float> values;         // decode(q) * s_b (NaN in such a block)
    std::vector<std::uint8_t> scales;  // ceil(rows / br) x ceil(cols / B)
    float amax = 0.0f;                 // the scaling amax of M (NaN ignored)
    float tensor_scale = 1.0f;         // S_enc
    float tensor_scale_inv = 1.0f;     // S_dec
    std::uint64_t overflow = 0;        // finite-block elements with |m * enc| > 6
};

struct Fp4Ref {
    Fp4RefCopy row, col;
};

inline Fp4RefCopy fp4_reference_copy(const std::vector<float>& m, std::int64_t rows, std::int64_t cols,
                                     const Recipe& recipe, const cast::RoundingKey& key) {
    const auto* nv = std::get_if<NVFP4Scaling>(&recipe);
    const auto* mx = std::get_if<MXFP4Scaling>(&recipe);
    const bool sr = nv ? nv->sr : mx->sr;
    const std::int64_t bc = nv ? 16 : 32, br = nv && nv->two_d ? 16 : 1;
    Fp4RefCopy out;
    out.rows = rows, out.cols = cols;
    out.codes.assign(std::size_t(rows * cols), 0);
    out.values.assign(std::size_t(rows * cols), 0.0f);
    const std::int64_t gr = (rows + br - 1) / br, gc = (cols + bc - 1) / bc;
    out.scales.assign(std::size_t(gr * gc), 0);
    for (float v : m)
        if (!std::isnan(v)) out.amax = std::max(out.amax, std::fabs(v));
    float s_enc = 1.0f, s_dec = 1.0f;
    if (nv) {
        s_enc = cast::nvfp4_tensor_scale(out.amax);
        s_dec = 1.0f / s_enc;
    }
    out.tensor_scale = s_enc;
    out.tensor_scale_inv = s_dec;
    for (std::int64_t bi = 0; bi < gr; ++bi)
        for (std::int64_t bj = 0; bj < gc; ++bj) {
            std::uint32_t amax_bits = 0;
            for (std::int64_t i = bi * br; i < std::min(rows, (bi + 1) * br); ++i)
                for (std::int64_t j = bj * bc; j < std::min(cols, (bj + 1) * bc); ++j)
                    amax_bits = std::max(amax_bits, cast::bits_of(m[std::size_t(i * cols + j)]) & ~cast::kSignBit);
            const cast::FP4BlockScale b =
                nv ? cast::nvfp4_block_scale(amax_bits, s_enc, s_dec) : cast::mxfp4_block_scale(amax_bits, mx->rule);
            const bool finite = amax_bits < cast::kInfBits;
            out.scales[std::size_t(bi * gc + bj)] = b.code;
            for (std::int64_t i = bi * br; i < std::min(rows, (bi + 1) * br); ++i)
                for (std::int64_t j = bj * bc; j < std::min(cols, (bj + 1) * bc); ++j) {
                    const std::int64_t e = i * cols + j;
                    const float y = m[std::size_t(e)] * b.enc;
                    std::uint32_t clamped = 0;
                    const std::uint8_t q = sr ? cast::e2m1_code_sr(y, cast::rounding_bits(key, std::uint64_t(e)), clamped)
                                              : cast::e2m1_code(y, clamped);
                    out.codes[std::size_t(e)] = finite ? q : 0;
                    out.values[std::size_t(e)] = cast::e2m1_value(q) * b.scale;
                    out.overflow += finite ? clamped : 0;
                }
        }
    return out;
}

inline bool fp4_has_rht(const Recipe& r) {
    const auto* nv = std::get_if<NVFP4Scaling>(&r);
    return nv ? nv->rht : std::get<MXFP4Scaling>(r).rht;
}

// Both copies of x (rows, cols) under `recipe`, the columnwise with key.tensor | 1.
inline Fp4Ref fp4_reference(const std::vector<float>& x, std::int64_t rows, std::int64_t cols, const Recipe& recipe,
                            cast::RoundingKey key = {}) {
    std::vector<float> t(x.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) t[std::size_t(c * rows + r)] = x[std::size_t(r * cols + c)];
    if (fp4_has_rht(recipe))
        for (std::int64_t c = 0; c < cols; ++c)
            for (std::int64_t r0 = 0; r0 + 16 <= rows; r0 += 16) cast::rht16(&t[std::size_t(c * rows + r0)]);
    Fp4Ref ref;
    ref.row = fp4_reference_copy(x, rows, cols, recipe, key);
    const auto* nv = std::get_if<NVFP4Scaling>(&recipe);
    if (nv && nv->two_d && !nv->rht) {  // 16x16 tiles: the transpose of the rowwise copy, sr bits included
        ref.col = ref.row;
        ref.col.rows = cols, ref.col.cols = rows;
        const std::int64_t gr = (rows + 15) / 16, gc = (cols + 15) / 16;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c) {
                ref.col.codes[std::size_t(c * rows + r)] = ref.row.codes[std::size_t(r * cols + c)];
                ref.col.values[std::size_t(c * rows + r)] = ref.row.values[std::size_t(r * cols + c)];
            }
        for (std::int64_t i = 0; i < gr; ++i)
            for (std::int64_t j = 0; j < gc; ++j) ref.col.scales[std::size_t(j * gr + i)] = ref.row.scales[std::size_t(i * gc + j)];
        return ref;
    }
    key.tensor |= 1u;
    ref.col = fp4_reference_copy(t, cols, rows, recipe, key);
    return ref;
}

}  // namespace fp8scope::testing
