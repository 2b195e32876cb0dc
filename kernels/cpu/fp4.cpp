// FP4 quantization and error sums of a tensor's blocks (fp4.h). Scalar: the analysis of
// FP4 quantizers runs at a few elements per nanosecond, well within a tensor's other passes.
#include "cpu/fp4.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

#include "cpu/quantize.h"
#include "fp8/format.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

constexpr std::uint32_t kAbs = ~cast::kSignBit;

}  // namespace

cast::FP4BlockScale FP4Plan::block(std::uint32_t amax_bits, bool nonfinite) const {
    const std::uint32_t a = nonfinite ? cast::kInfBits : amax_bits;
    return nvfp4 ? cast::nvfp4_block_scale(a, s_enc, s_dec) : cast::mxfp4_block_scale(a, rule);
}

FP4Plan fp4_plan(const Recipe& r, float scaling_amax) {
    FP4Plan p;
    if (const auto* nv = std::get_if<NVFP4Scaling>(&r)) {
        p.block_rows = nv->two_d ? 16 : 1;
        p.block_cols = 16;
        p.s_enc = cast::nvfp4_tensor_scale(scaling_amax);
        p.s_dec = 1.0f / p.s_enc;
    } else if (const auto* mx = std::get_if<MXFP4Scaling>(&r)) {
        p.nvfp4 = false;
        p.rule = mx->rule;
        p.block_cols = 32;
    } else {
        throw std::invalid_argument(recipe_name(r) + " is not an FP4 quantizer");
    }
    return p;
}

float FP4Tensor::dequantize(std::int64_t r, std::int64_t c) const {
    const std::uint8_t sc = scale_codes[(r / block_rows) * scale_cols() + c / block_cols];
    const float scale = nvfp4 ? decode(Format::E4M3, sc) : e8m0_decode(sc);
    return cast::mul_rn(cast::mul_rn(cast::e2m1_value(codes[r * cols + c]), scale), tensor_scale_inv);
}

FP4Tensor quantize_fp4(MatrixView x, const Recipe& r, int threads) {
    const FP4Plan p = fp4_plan(r, scaling_amax(x));
    FP4Tensor q;
    q.nvfp4 = p.nvfp4;
    q.rows = x.rows, q.cols = x.cols;
    q.block_rows = p.block_rows, q.block_cols = p.block_cols;
    q.tensor_scale_inv = p.s_dec;
    q.codes.assign(static_cast<std::size_t>(x.rows * x.cols), 0);
    q.scale_codes.assign(static_cast<std::size_t>(q.scale_rows() * q.scale_cols()), 0);
    std::vector<std::int64_t> overflow(static_cast<std::size_t>(q.scale_rows()), 0);
    // One task per band of block rows: its blocks and codes are its own.
    parallel_for(q.scale_rows(), 1, threads, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t br = b0; br < b1; ++br) {
            const std::int64_t r0 = br * p.block_rows, r1 = std::min(x.rows, r0 + p.block_rows);
            for (std::int64_t bc = 0; bc < q.scale_cols(); ++bc) {
                const std::int64_t c0 = bc * p.block_cols, c1 = std::min(x.cols, c0 + p.block_cols);
                std::uint32_t amax = 0;
                bool nonfinite = false;
                for (std::int64_t row = r0; row < r1; ++row) {
                    bool nf;
                    amax = std::max(amax, simd::kernels().amax(x.row(row) + c0, c1 - c0, &nf));
                    nonfinite |= nf;
                }
                const cast::FP4BlockScale b = p.block(amax, nonfinite);
                q.scale_codes[br * q.scale_cols() + bc] = b.code;
                if (nonfinite) continue;  // codes stay 0 under the NaN scale
                for (std::int64_t row = r0; row < r1; ++row) {
                    for (std::int64_t c = c0; c < c1; ++c) {
                        std::uint8_t code;
                        std::uint32_t clamped;
                        cast::fp4_qdq(x.row(row)[c], b, code, clamped);
                        q.codes[row * x.cols + c] = code;
                        overflow[br] += clamped;
                    }
                }
            }
        }
    });
    for (std::int64_t o : overflow) q.overflow += o;
    return q;
}

void fp4_error_sums(const float* x, std::int64_t n, const cast::FP4BlockScale& b, simd::ErrorSums& acc) {
    if (cast::is_nan(b.scale)) {
        for (std::int64_t i = 0; i < n; ++i) acc.nonfinite_out += (std::bit_cast<std::uint32_t>(x[i]) & kAbs) < cast::kInfBits;
        return;
    }
    for (std::int64_t i = 0; i < n; ++i) {
        const int j = static_cast<int>(i % simd::kLanes);
        const float v = x[i];
        const std::uint32_t a = std::bit_cast<std::uint32_t>(v) & kAbs;
        if (a >= cast::kInfBits) continue;  // only in NaN blocks, which returned above
        std::uint8_t code;
        std::uint32_t clamped;
        const float q = cast::fp4_qdq(v, b, code, clamped);
        // x' past FLT_MAX (a block near FLT_MAX whose x rounds up) is left out, as in FP8.
        const bool q_fin = (std::bit_cast<std::uint32_t>(q) & kAbs) < cast::kInfBits;
        const double xd = q_fin ? double(v) : 0.0, qd = q_fin ? double(q) : 0.0, d = qd - xd;
        acc.sxx[j] += xd * xd;
        acc.sdd[j] += d * d;
        acc.sqq[j] += qd * qd;
        acc.sxq[j] += xd * qd;
        acc.max_err[j] = std::max(acc.max_err[j], d < 0 ? -d : d);
        acc.underflow += a != 0 && (code & 7u) == 0;
        acc.overflow += clamped;
        acc.nonfinite_out += !q_fin;
    }
}

}  // namespace fp8scope
