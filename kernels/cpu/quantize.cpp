// Quantization under a recipe: block amaxes, the scale rules, then one elementwise pass
// that casts with the block's scale. Every recipe is a grid of blocks (per-tensor is one
// block), so one code path serves them all; the elementwise kernels come from cast.h.
// GCC 12 warns falsely about uninitialized values inside the AVX-512 intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#include "cpu/quantize.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include "cpu/cast.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

constexpr std::int64_t kGrain = 1 << 16;  // elements per parallel chunk, at least

// Block shape, format and scales of one quantization, before any element is cast.
struct Plan {
    Format format = Format::E4M3;
    std::int64_t block_rows = 1, block_cols = 1, scale_rows = 0, scale_cols = 0;
    std::vector<float> s, scale_inv;     // per block
    std::vector<std::uint8_t> e8m0;      // MX only
    std::vector<std::uint8_t> nan_block;  // MX only: 1 where the block holds NaN or Inf
    bool mx = false;
    float amax = 0;  // scaling amax of the whole tensor
    float tensor_scale = std::numeric_limits<float>::quiet_NaN();  // per-tensor recipes
};

Plan plan_for(MatrixView x, const Recipe& recipe, const DelayedState* state, int threads) {
    Plan p;
    p.format = std::visit([](const auto& r) { return r.format; }, recipe);
    const std::int64_t rows = x.rows, cols = x.cols;
    auto grid = [&](std::int64_t br, std::int64_t bc) {
        p.block_rows = std::max<std::int64_t>(1, br);
        p.block_cols = std::max<std::int64_t>(1, bc);
        p.scale_rows = (rows + p.block_rows - 1) / p.block_rows;
        p.scale_cols = (cols + p.block_cols - 1) / p.block_cols;
    };
    auto per_tensor = [&](float s) {
        grid(rows, cols);
        p.tensor_scale = s;
        p.s.assign(p.scale_rows * p.scale_cols, s);
        p.scale_inv.assign(p.s.size(), 1.0f / s);
    };

    if (const auto* c = std::get_if<CurrentScaling>(&recipe)) {
        p.amax = scaling_amax(x);
        per_tensor(compute_scale(p.amax, c->format, c->eps, c->pow2));
        return p;
    }
    if (std::holds_alternative<DelayedScaling>(recipe)) {
        p.amax = scaling_amax(x);  // pushed into the history after the cast
        per_tensor(state ? state->scale() : 1.0f);
        return p;
    }

    const BlockScaling* b = std::get_if<BlockScaling>(&recipe);
    const MXScaling* mx = std::get_if<MXScaling>(&recipe);
    if (b) {
        if (b->block_rows < 1 || b->block_cols < 1)
            throw std::invalid_argument("block recipe: block shape must be positive, got " +
                                        std::to_string(b->block_rows) + "x" + std::to_string(b->block_cols));
        grid(b->block_rows, b->block_cols);
    } else {
        if (mx->block < 1) throw std::invalid_argument("mx recipe: block must be positive, got " + std::to_string(mx->block));
        grid(1, mx->block);
        p.mx = true;
    }
    const std::int64_t nblocks = p.scale_rows * p.scale_cols;
    std::vector<std::uint32_t> amax(nblocks, 0);
    std::vector<std::uint8_t> nonfinite(nblocks, 0);
    // Bands of block_rows rows own disjoint blocks: no reduction across threads.
    parallel_for(p.scale_rows, std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, cols * p.block_rows)),
                 threads, [&](std::int64_t b0, std::int64_t b1) {
        for (std::int64_t br = b0; br < b1; ++br) {
            const std::int64_t r1 = std::min(rows, (br + 1) * p.block_rows);
            for (std::int64_t r = br * p.block_rows; r < r1; ++r) {
                for (std::int64_t bc = 0; bc < p.scale_cols; ++bc) {
                    const std::int64_t c0 = bc * p.block_cols, c1 = std::min(cols, c0 + p.block_cols);
                    bool nf;
                    const std::uint32_t m = cast::amax_bits(x.row(r) + c0, c1 - c0, nf);
                    const std::int64_t i = br * p.scale_cols + bc;
                    amax[i] = std::max(amax[i], m);
                    nonfinite[i] |= nf;
                }
            }
        }
    });

    p.s.resize(nblocks);
    p.scale_inv.resize(nblocks);
    if (p.mx) {
        p.e8m0.resize(nblocks);
        p.nan_block = nonfinite;
    }
    p.amax = std::bit_cast<float>(nblocks ? *std::max_element(amax.begin(), amax.end()) : 0u);
    for (std::int64_t i = 0; i < nblocks; ++i) {
        const float a = std::bit_cast<float>(amax[i]);
        if (b) {
            p.s[i] = compute_scale(a, b->format, 0.0f, b->pow2);
            p.scale_inv[i] = 1.0f / p.s[i];
        } else if (nonfinite[i]) {
            p.e8m0[i] = kE8M0NaN;
            p.s[i] = p.scale_inv[i] = std::numeric_limits<float>::quiet_NaN();
        } else {
            const int e = mx_exponent(a, mx->format, mx->rule);
            p.e8m0[i] = e8m0_from_exponent(e);
            p.s[i] = cast::pow2(-e);
            p.scale_inv[i] = cast::pow2(e);
        }
    }
    return p;
}

inline std::uint32_t finite_bit(float x) {
    return (std::bit_cast<std::uint32_t>(x) & ~cast::kSignBit) < cast::kInfBits ? 1u : 0u;
}

// The elementwise kernels: one block segment with its scale. They return the overflow
// count (finite inputs that saturation clamped).
template <Format F>
std::int64_t fake_segment(const float* x, std::int64_t n, float s, float scale_inv, float* out) {
    std::int64_t i = 0;
    std::uint32_t overflow = 0;
#if defined(__AVX512F__)
    const __m512 vs = _mm512_set1_ps(s), vsi = _mm512_set1_ps(scale_inv);
    const __m512i abs = _mm512_set1_epi32(static_cast<int>(~cast::kSignBit));
    const __m512i inf = _mm512_set1_epi32(static_cast<int>(cast::kInfBits));
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        __mmask16 clamped;
        const __m512 r = cast::round_sat16<F>(_mm512_mul_ps(v, vs), clamped);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(r, vsi));
        const __mmask16 fin = _mm512_cmplt_epu32_mask(_mm512_and_si512(_mm512_castps_si512(v), abs), inf);
        overflow += std::popcount(static_cast<unsigned>(fin & clamped));
    }
#endif
    for (; i < n; ++i) {
        std::uint32_t o;
        const float v = cast::round_sat<F>(x[i] * s, o);
        overflow += o & finite_bit(x[i]);
        out[i] = v * scale_inv;
    }
    return overflow;
}

template <Format F>
std::int64_t code_segment(const float* x, std::int64_t n, float s, std::uint8_t* codes) {
    std::uint32_t overflow = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        std::uint32_t o;
        codes[i] = cast::cast_code<F>(x[i] * s, o);
        overflow += o & finite_bit(x[i]);
    }
    return overflow;
}

// Runs `segment(r, c0, c1, block index)` over every block segment of every row, threads
// over rows (or over flat ranges for a per-tensor plan, so a single row also splits).
// Returns the summed overflow.
template <typename Segment>
std::int64_t for_each_segment(MatrixView x, const Plan& p, int threads, Segment segment) {
    std::int64_t overflow = 0;
    std::mutex mu;
    if (p.scale_rows == 1 && p.scale_cols == 1) {
        parallel_for(x.size(), kGrain, threads, [&](std::int64_t i0, std::int64_t i1) {
            const std::int64_t o = segment(i0, i1, 0);
            std::lock_guard lock(mu);
            overflow += o;
        });
        return overflow;
    }
    parallel_for(x.rows, std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, x.cols)), threads,
                 [&](std::int64_t r0, std::int64_t r1) {
        std::int64_t o = 0;
        for (std::int64_t r = r0; r < r1; ++r) {
            const std::int64_t br = r / p.block_rows;
            for (std::int64_t bc = 0; bc < p.scale_cols; ++bc) {
                const std::int64_t c0 = bc * p.block_cols, c1 = std::min(x.cols, c0 + p.block_cols);
                o += segment(r * x.cols + c0, r * x.cols + c1, br * p.scale_cols + bc);
            }
        }
        std::lock_guard lock(mu);
        overflow += o;
    });
    return overflow;
}

template <Format F>
std::int64_t fake_all(MatrixView x, const Plan& p, float* out, int threads) {
    return for_each_segment(x, p, threads, [&](std::int64_t i0, std::int64_t i1, std::int64_t blk) -> std::int64_t {
        if (p.mx && p.nan_block[blk]) {
            std::fill(out + i0, out + i1, std::numeric_limits<float>::quiet_NaN());
            return 0;
        }
        return fake_segment<F>(x.data + i0, i1 - i0, p.s[blk], p.scale_inv[blk], out + i0);
    });
}

template <Format F>
std::int64_t codes_all(MatrixView x, const Plan& p, std::uint8_t* codes, int threads) {
    return for_each_segment(x, p, threads, [&](std::int64_t i0, std::int64_t i1, std::int64_t blk) -> std::int64_t {
        if (p.mx && p.nan_block[blk]) {
            std::fill(codes + i0, codes + i1, cast::Traits<F>::kNaNCode);
            return 0;
        }
        return code_segment<F>(x.data + i0, i1 - i0, p.s[blk], codes + i0);
    });
}

}  // namespace

float scaling_amax(MatrixView x) {
    std::uint32_t m = 0;
    std::mutex mu;
    parallel_for(x.size(), kGrain, 0, [&](std::int64_t i0, std::int64_t i1) {
        bool nf;
        const std::uint32_t local = cast::amax_bits(x.data + i0, i1 - i0, nf);
        std::lock_guard lock(mu);
        m = std::max(m, local);
    });
    return std::bit_cast<float>(m);
}

float QuantizedTensor::dequantize(std::int64_t r, std::int64_t c) const {
    return decode(format, codes[r * cols + c]) * scale_inv_at(r, c);
}

QuantizedTensor quantize(MatrixView x, const Recipe& recipe, DelayedState* state, int threads) {
    const Plan p = plan_for(x, recipe, state, threads);
    QuantizedTensor q;
    q.format = p.format;
    q.rows = x.rows;
    q.cols = x.cols;
    q.block_rows = p.block_rows;
    q.block_cols = p.block_cols;
    q.scale_inv = p.scale_inv;
    q.scale_e8m0 = p.e8m0;
    q.codes.resize(x.size());
    q.overflow = p.format == Format::E4M3 ? codes_all<Format::E4M3>(x, p, q.codes.data(), threads)
                                          : codes_all<Format::E5M2>(x, p, q.codes.data(), threads);
    if (state && std::holds_alternative<DelayedScaling>(recipe)) state->push(p.amax);
    return q;
}

CastInfo fake_quantize(MatrixView x, const Recipe& recipe, float* out, DelayedState* state, int threads) {
    const Plan p = plan_for(x, recipe, state, threads);
    CastInfo info;
    info.amax = p.amax;
    info.scale = p.tensor_scale;
    info.overflow = p.format == Format::E4M3 ? fake_all<Format::E4M3>(x, p, out, threads)
                                             : fake_all<Format::E5M2>(x, p, out, threads);
    if (state && std::holds_alternative<DelayedScaling>(recipe)) state->push(p.amax);
    return info;
}

void dequantize(const QuantizedTensor& q, float* out) {
    const float* table = decode_table(q.format);
    for (std::int64_t r = 0; r < q.rows; ++r) {
        for (std::int64_t bc = 0; bc < q.scale_cols(); ++bc) {
            const std::int64_t c0 = bc * q.block_cols, c1 = std::min(q.cols, c0 + q.block_cols);
            const float si = q.scale_inv[(r / q.block_rows) * q.scale_cols() + bc];
            for (std::int64_t c = c0; c < c1; ++c) out[r * q.cols + c] = table[q.codes[r * q.cols + c]] * si;
        }
    }
}

}  // namespace fp8scope
