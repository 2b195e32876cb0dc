// FP4 quantization and error sums of a tensor's blocks (fp4.h). The codes (quantize_fp4,
// the reference) are cast element by element with cast_rules.h's scalar rules; the
// dequantized casts of training run simd.h's vector kernels, held to them bit for bit.
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
constexpr std::int64_t kRowGrain = 1 << 14;  // elements per task, at least

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
        p.rht = nv->rht;
        p.sr = nv->sr;
    } else if (const auto* mx = std::get_if<MXFP4Scaling>(&r)) {
        p.nvfp4 = false;
        p.rule = mx->rule;
        p.block_cols = 32;
        p.rht = mx->rht;
        p.sr = mx->sr;
    } else {
        throw std::invalid_argument(recipe_name(r) + " is not an FP4 quantizer");
    }
    return p;
}

void rht_rows(float* x, std::int64_t rows, std::int64_t cols, int threads) {
    const std::int64_t full = cols / cast::kRhtSize * cast::kRhtSize;
    parallel_for(rows, std::max<std::int64_t>(1, kRowGrain / std::max<std::int64_t>(cols, 1)), threads,
                 [&](std::int64_t r0, std::int64_t r1) {
                     for (std::int64_t r = r0; r < r1; ++r)
                         for (std::int64_t c = 0; c < full; c += cast::kRhtSize) cast::rht16(x + r * cols + c);
                 });
}

void rounding_bits_run(const cast::RoundingKey& key, std::uint64_t e0, std::int64_t n, std::uint32_t* out) {
    const std::uint64_t e1 = e0 + static_cast<std::uint64_t>(n);
    for (std::uint64_t c = e0 >> 2; (c << 2) < e1; ++c) {
        const cast::Philox4 r = cast::philox4x32_10(static_cast<std::uint32_t>(c), key.tensor,
                                                    static_cast<std::uint32_t>(key.step),
                                                    static_cast<std::uint32_t>(key.step >> 32),
                                                    static_cast<std::uint32_t>(key.seed),
                                                    static_cast<std::uint32_t>(key.seed >> 32));
        for (std::uint64_t e = std::max(e0, c << 2); e < std::min(e1, (c << 2) + 4); ++e) out[e - e0] = r.v[e & 3u];
    }
}

namespace {

// One block row segment x[0, n) under block scale b into codes, element by element with
// cast_rules.h's scalar rules; returns the count clamped.
template <bool kSr>
std::int64_t code_run(const float* x, std::int64_t n, const cast::FP4BlockScale b, const std::uint32_t* bits,
                      std::uint8_t* codes) {
    std::uint32_t clamped_sum = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        std::uint32_t clamped;
        std::uint8_t code;
        if (kSr) cast::fp4_qdq_sr(x[i], b, bits[i], code, clamped);
        else cast::fp4_qdq(x[i], b, code, clamped);
        codes[i] = code;
        clamped_sum += clamped;
    }
    return clamped_sum;
}

std::int64_t grain_of(const MatrixView& x, const FP4Plan& p) {
    return std::max<std::int64_t>(1, kRowGrain / std::max<std::int64_t>(x.cols * p.block_rows, 1));
}

std::int64_t sum(const std::vector<std::int64_t>& v) {
    std::int64_t total = 0;
    for (std::int64_t o : v) total += o;
    return total;
}

// The codes of x's blocks under p (x already transformed when p.rht), scalar: each
// block's scale code goes to scale_codes (scale_rows x scale_cols), each element's code to
// codes (row-major like x); a NaN block gives codes 0. Threads over bands of block rows,
// each element's result its own: the same for every thread count. Returns the overflow.
std::int64_t code_blocks(MatrixView x, const FP4Plan& p, const cast::RoundingKey& key, std::uint8_t* scale_codes,
                         std::uint8_t* codes, int threads) {
    const std::int64_t scale_rows = (x.rows + p.block_rows - 1) / p.block_rows;
    const std::int64_t scale_cols = (x.cols + p.block_cols - 1) / p.block_cols;
    std::vector<std::int64_t> overflow(static_cast<std::size_t>(scale_rows), 0);
    parallel_for(scale_rows, grain_of(x, p), threads, [&](std::int64_t b0, std::int64_t b1) {
        std::vector<std::uint32_t> bits(p.sr ? static_cast<std::size_t>(x.cols) : 0);
        for (std::int64_t br = b0; br < b1; ++br) {
            const std::int64_t r0 = br * p.block_rows, r1 = std::min(x.rows, r0 + p.block_rows);
            std::int64_t clamped_sum = 0;
            for (std::int64_t bc = 0; bc < scale_cols; ++bc) {
                const std::int64_t c0 = bc * p.block_cols, c1 = std::min(x.cols, c0 + p.block_cols);
                std::uint32_t amax = 0;
                bool nonfinite = false;
                for (std::int64_t row = r0; row < r1; ++row) {
                    bool nf;
                    amax = std::max(amax, simd::kernels().amax(x.row(row) + c0, c1 - c0, &nf));
                    nonfinite |= nf;
                }
                const cast::FP4BlockScale b = p.block(amax, nonfinite);
                scale_codes[br * scale_cols + bc] = b.code;
                for (std::int64_t row = r0; row < r1; ++row) {
                    const std::int64_t e0 = row * x.cols + c0;
                    if (nonfinite) {
                        std::fill(codes + e0, codes + e0 + (c1 - c0), std::uint8_t(0));
                        continue;
                    }
                    if (p.sr) {
                        rounding_bits_run(key, static_cast<std::uint64_t>(e0), c1 - c0, bits.data() + c0);
                        clamped_sum += code_run<true>(x.row(row) + c0, c1 - c0, b, bits.data() + c0, codes + e0);
                    } else {
                        clamped_sum += code_run<false>(x.row(row) + c0, c1 - c0, b, nullptr, codes + e0);
                    }
                }
            }
            overflow[br] = clamped_sum;
        }
    });
    return sum(overflow);
}

// The dequantized cast of x's blocks under p into out (may be x.data), through the vector
// kernels: per band of block rows the block amaxes (a tile's over its rows), the scales,
// then each row's x' with its rounding bits. Bit for bit code_blocks' codes dequantized;
// the same for every thread count. Returns the overflow count.
std::int64_t fake_blocks(MatrixView x, const FP4Plan& p, const cast::RoundingKey& key, float* out, int threads) {
    const std::int64_t scale_rows = (x.rows + p.block_rows - 1) / p.block_rows;
    const std::int64_t scale_cols = (x.cols + p.block_cols - 1) / p.block_cols;
    const simd::Kernels& k = simd::kernels();
    const simd::PhiloxKey philox{key.tensor, static_cast<std::uint32_t>(key.step),
                                 static_cast<std::uint32_t>(key.step >> 32), static_cast<std::uint32_t>(key.seed),
                                 static_cast<std::uint32_t>(key.seed >> 32)};
    const int block = static_cast<int>(p.block_cols);
    std::vector<std::int64_t> overflow(static_cast<std::size_t>(scale_rows), 0);
    parallel_for(scale_rows, grain_of(x, p), threads, [&](std::int64_t b0, std::int64_t b1) {
        const auto cols = static_cast<std::size_t>(scale_cols);
        std::vector<std::uint32_t> bits(p.sr ? static_cast<std::size_t>(x.cols) : 0), amax(cols);
        std::vector<float> enc(cols), scale(cols);
        for (std::int64_t br = b0; br < b1; ++br) {
            const std::int64_t r0 = br * p.block_rows, r1 = std::min(x.rows, r0 + p.block_rows);
            std::fill(amax.begin(), amax.end(), 0u);
            for (std::int64_t row = r0; row < r1; ++row) k.block_amax(x.row(row), x.cols, block, amax.data());
            for (std::int64_t bc = 0; bc < scale_cols; ++bc) {
                const cast::FP4BlockScale b = p.block(amax[bc], amax[bc] >= cast::kInfBits);
                enc[bc] = b.enc, scale[bc] = b.scale;
            }
            std::int64_t clamped_sum = 0;
            for (std::int64_t row = r0; row < r1; ++row) {
                const std::int64_t e0 = row * x.cols;
                if (p.sr) k.rounding_bits(philox, static_cast<std::uint64_t>(e0), x.cols, bits.data());
                clamped_sum += k.fp4_fake_row(x.row(row), x.cols, block, enc.data(), scale.data(), p.s_dec,
                                              p.sr ? bits.data() : nullptr, out + e0);
            }
            overflow[br] = clamped_sum;
        }
    });
    return sum(overflow);
}

}  // namespace

float FP4Tensor::dequantize(std::int64_t r, std::int64_t c) const {
    const std::uint8_t sc = scale_codes[(r / block_rows) * scale_cols() + c / block_cols];
    const float scale = nvfp4 ? decode(Format::E4M3, sc) : e8m0_decode(sc);
    return cast::mul_rn(cast::mul_rn(cast::e2m1_value(codes[r * cols + c]), scale), tensor_scale_inv);
}

FP4Tensor quantize_fp4(MatrixView x, const Recipe& r, int threads, const cast::RoundingKey& key) {
    std::vector<float> transformed;
    if (fp4_plan(r, 0.0f).rht) {
        transformed.assign(x.data, x.data + x.size());
        rht_rows(transformed.data(), x.rows, x.cols, threads);
        x = MatrixView{transformed.data(), x.rows, x.cols};
    }
    const FP4Plan p = fp4_plan(r, scaling_amax(x));
    FP4Tensor q;
    q.nvfp4 = p.nvfp4;
    q.rows = x.rows, q.cols = x.cols;
    q.block_rows = p.block_rows, q.block_cols = p.block_cols;
    q.tensor_scale_inv = p.s_dec;
    q.codes.assign(static_cast<std::size_t>(x.rows * x.cols), 0);
    q.scale_codes.assign(static_cast<std::size_t>(q.scale_rows() * q.scale_cols()), 0);
    q.overflow = code_blocks(x, p, key, q.scale_codes.data(), q.codes.data(), threads);
    return q;
}

CastInfo fp4_fake_quantize(MatrixView x, const Recipe& r, float* out, const cast::RoundingKey& key, int threads) {
    if (fp4_plan(r, 0.0f).rht) {  // transform in out, then cast there in place
        if (out != x.data) std::copy(x.data, x.data + x.size(), out);
        rht_rows(out, x.rows, x.cols, threads);
        x = MatrixView{out, x.rows, x.cols};
    }
    CastInfo info;
    info.amax = scaling_amax(x);
    const FP4Plan p = fp4_plan(r, info.amax);
    // In place is safe: a block's elements are read for its amax before any is written,
    // and each element's x' depends on itself and its block's scale only.
    info.overflow = fake_blocks(x, p, key, out, threads);
    return info;
}

CastInfo fp4_fake_quantize_transposed(MatrixView x, const Recipe& r, float* out, const cast::RoundingKey& key,
                                      int threads) {
    const bool rht = fp4_plan(r, 0.0f).rht;
    const simd::Kernels& k = simd::kernels();
    const std::int64_t stripes = (x.rows + cast::kRhtSize - 1) / cast::kRhtSize;
    std::vector<std::uint32_t> amax(static_cast<std::size_t>(stripes), 0);
    const std::int64_t grain = std::max<std::int64_t>(1, kRowGrain / std::max<std::int64_t>(x.cols * cast::kRhtSize, 1));
    parallel_for(stripes, grain, threads, [&](std::int64_t s0, std::int64_t s1) {
        for (std::int64_t s = s0; s < s1; ++s)
            amax[s] = k.rht_transpose(out, x.data, x.rows, x.cols, s * cast::kRhtSize,
                                      std::min(x.rows, (s + 1) * cast::kRhtSize), rht);
    });
    CastInfo info;
    info.amax = std::bit_cast<float>(amax.empty() ? 0u : *std::max_element(amax.begin(), amax.end()));
    const FP4Plan p = fp4_plan(r, info.amax);
    info.overflow = fake_blocks(MatrixView{out, x.cols, x.rows}, p, key, out, threads);
    return info;
}

void fp4_error_sums(const float* x, std::int64_t n, const cast::FP4BlockScale& b, simd::ErrorSums& acc,
                    const cast::RoundingKey* sr, std::uint64_t e0) {
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
        const float q = sr ? cast::fp4_qdq_sr(v, b, cast::rounding_bits(*sr, e0 + i), code, clamped)
                           : cast::fp4_qdq(v, b, code, clamped);
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
