// Quantization under a recipe: block amaxes, the scale rules, then one elementwise pass
// that casts with the block's scale. Every recipe is a grid of blocks (per-tensor is one
// block), so one code path serves them all. The elementwise kernels are simd.h's (the
// widest vector ISA of the CPU); the codes of quantize() come from cast_rules.h directly.
// Delayed scaling knows its scale before the cast, so its amax is taken in the same pass.
// The cast-transpose of 1 x B recipes reads x once, tile by tile, for both copies.
#include "cpu/quantize.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include "fp8/cast_rules.h"
#include "cpu/simd.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

// Elements per parallel chunk, at least: a chunk costs a few microseconds, and a weight
// (a few M elements) splits into several chunks per thread, which balances the load.
constexpr std::int64_t kGrain = 1 << 14;

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

// Scale, scale_inv and E8M0 code of one block of a block recipe from its amax (bits) and
// non-finite flag; for MX, NaN or Inf in the block makes its scales NaN.
cast::BlockScale block_scale(const Recipe& r, std::uint32_t amax_bits, bool nonfinite) {
    if (const auto* b = std::get_if<BlockScaling>(&r)) return cast::block_scale(amax_bits, b->format, false, MXRule::RCeil, b->pow2);
    const auto& m = std::get<MXScaling>(r);
    return cast::block_scale(nonfinite ? cast::kInfBits : amax_bits, m.format, true, m.rule, false);
}

// `amax_in_cast`: a per-tensor scale known in advance (delayed) leaves the amax to the
// cast pass.
Plan plan_for(MatrixView x, const Recipe& recipe, const DelayedState* state, int threads, bool amax_in_cast = false) {
    Plan p;
    p.format = recipe_format(recipe);  // refuses the FP4 quantizers (fp4.h casts those)
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
        if (!amax_in_cast) p.amax = scaling_amax(x);  // pushed into the history after the cast
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
    // Tasks of (band of block_rows rows, group of block columns) own disjoint blocks: no
    // reduction across threads. Groups keep a band of tall blocks (128 x 128) spread.
    const std::int64_t block_elems = std::max<std::int64_t>(1, p.block_rows * std::min(cols, p.block_cols));
    const std::int64_t group = std::max<std::int64_t>(1, std::min(p.scale_cols, kGrain / block_elems));
    const std::int64_t groups = (p.scale_cols + group - 1) / group;
    const simd::Kernels& k = simd::kernels();
    parallel_for(p.scale_rows * groups, std::max<std::int64_t>(1, kGrain / (block_elems * group)), threads,
                 [&](std::int64_t t0, std::int64_t t1) {
        for (std::int64_t t = t0; t < t1; ++t) {
            const std::int64_t br = t / groups, bc0 = (t % groups) * group, bc1 = std::min(p.scale_cols, bc0 + group);
            const std::int64_t r1 = std::min(rows, (br + 1) * p.block_rows);
            for (std::int64_t r = br * p.block_rows; r < r1; ++r) {
                for (std::int64_t bc = bc0; bc < bc1; ++bc) {
                    const std::int64_t c0 = bc * p.block_cols, c1 = std::min(cols, c0 + p.block_cols);
                    bool nf;
                    const std::uint32_t m = k.amax(x.row(r) + c0, c1 - c0, &nf);
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
        const cast::BlockScale bs = block_scale(recipe, amax[i], nonfinite[i]);
        p.s[i] = bs.s;
        p.scale_inv[i] = bs.scale_inv;
        if (p.mx) p.e8m0[i] = bs.e8m0;
    }
    return p;
}

inline std::uint32_t finite_bit(float x) {
    return (std::bit_cast<std::uint32_t>(x) & ~cast::kSignBit) < cast::kInfBits ? 1u : 0u;
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

// Overflow count and, for a cast that takes it, the scaling amax (bits) of the chunks.
struct Partial {
    std::int64_t overflow = 0;
    std::uint32_t amax = 0;
};

// Runs `segment(i0, i1, block index, partial)` over every block segment of every row,
// threads over rows (or over flat ranges for a per-tensor plan, so a single row also
// splits). Returns the combined partials (sums and maxima: any order gives the same).
template <typename Segment>
Partial for_each_segment(MatrixView x, const Plan& p, int threads, Segment segment) {
    Partial total;
    std::mutex mu;
    auto combine = [&](const Partial& part) {
        std::lock_guard lock(mu);
        total.overflow += part.overflow;
        total.amax = std::max(total.amax, part.amax);
    };
    if (p.scale_rows == 1 && p.scale_cols == 1) {
        parallel_for(x.size(), kGrain, threads, [&](std::int64_t i0, std::int64_t i1) {
            Partial part;
            segment(i0, i1, 0, part);
            combine(part);
        });
        return total;
    }
    parallel_for(x.rows, std::max<std::int64_t>(1, kGrain / std::max<std::int64_t>(1, x.cols)), threads,
                 [&](std::int64_t r0, std::int64_t r1) {
        Partial part;
        for (std::int64_t r = r0; r < r1; ++r) {
            const std::int64_t br = r / p.block_rows;
            for (std::int64_t bc = 0; bc < p.scale_cols; ++bc) {
                const std::int64_t c0 = bc * p.block_cols, c1 = std::min(x.cols, c0 + p.block_cols);
                segment(r * x.cols + c0, r * x.cols + c1, br * p.scale_cols + bc, part);
            }
        }
        combine(part);
    });
    return total;
}

// The dequantized cast; with `take_amax` (a per-tensor plan) also the tensor's amax.
Partial fake_all(MatrixView x, const Plan& p, float* out, int threads, bool take_amax) {
    const simd::Kernels& k = simd::kernels();
    const int f = simd::format_index(p.format == Format::E5M2);
    return for_each_segment(x, p, threads, [&](std::int64_t i0, std::int64_t i1, std::int64_t blk, Partial& part) {
        if (p.mx && p.nan_block[blk]) {
            std::fill(out + i0, out + i1, std::numeric_limits<float>::quiet_NaN());
            return;
        }
        if (take_amax) {
            std::uint32_t m = 0;
            part.overflow += k.fake_amax[f](x.data + i0, i1 - i0, p.s[blk], p.scale_inv[blk], out + i0, &m);
            part.amax = std::max(part.amax, m);
        } else {
            part.overflow += k.fake[f](x.data + i0, i1 - i0, p.s[blk], p.scale_inv[blk], out + i0);
        }
    });
}

template <Format F>
std::int64_t codes_all(MatrixView x, const Plan& p, std::uint8_t* codes, int threads) {
    return for_each_segment(x, p, threads, [&](std::int64_t i0, std::int64_t i1, std::int64_t blk, Partial& part) {
        if (p.mx && p.nan_block[blk]) {
            std::fill(codes + i0, codes + i1, cast::Traits<F>::kNaNCode);
            return;
        }
        part.overflow += code_segment<F>(x.data + i0, i1 - i0, p.s[blk], codes + i0);
    }).overflow;
}

// ---- cast-transpose of 1 x B recipes ----------------------------------------------------

// The block length B of a recipe whose blocks run along one axis (1 x B tiles, MX), or 0.
std::int64_t row_block(const Recipe& r) {
    if (const auto* b = std::get_if<BlockScaling>(&r)) return b->block_rows == 1 && b->block_cols <= 128 ? b->block_cols : 0;
    if (const auto* m = std::get_if<MXScaling>(&r)) return m->block <= 128 ? m->block : 0;
    return 0;
}

}  // namespace

float scaling_amax(MatrixView x) {
    std::uint32_t m = 0;
    std::mutex mu;
    const simd::Kernels& k = simd::kernels();
    parallel_for(x.size(), kGrain, 0, [&](std::int64_t i0, std::int64_t i1) {
        bool nf;
        const std::uint32_t local = k.amax(x.data + i0, i1 - i0, &nf);
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
    const bool delayed = std::holds_alternative<DelayedScaling>(recipe);
    Plan p = plan_for(x, recipe, state, threads, delayed);
    const Partial r = fake_all(x, p, out, threads, delayed);
    if (delayed) p.amax = std::bit_cast<float>(r.amax);
    CastInfo info;
    info.amax = p.amax;
    info.scale = p.tensor_scale;
    info.overflow = r.overflow;
    if (state && delayed) state->push(p.amax);
    return info;
}

bool has_cast_transpose(const Recipe& recipe) { return row_block(recipe) > 0; }

CastInfo fake_quantize_transposed(MatrixView x, const Recipe& recipe, float* rowwise, float* columnwise,
                                  int threads) {
    const std::int64_t B = row_block(recipe);
    if (B <= 0) throw std::invalid_argument("fake_quantize_transposed: " + recipe_name(recipe) + " has no 1 x B blocks");
    const simd::Kernels& k = simd::kernels();
    const int f = simd::format_index(recipe_format(recipe) == Format::E5M2);
    const std::int64_t bands = (x.rows + B - 1) / B, tiles = (x.cols + B - 1) / B;
    // Tasks of whole tiles (B x B: both copies' blocks end inside them), about kGrain
    // elements each, so that a tensor of a few bands still spreads over the threads.
    const std::int64_t per_task = std::max<std::int64_t>(1, kGrain / (B * B));
    const std::int64_t row_tasks = (tiles + per_task - 1) / per_task;
    Partial total;
    std::mutex mu;
    parallel_for(bands * row_tasks, 1, threads, [&](std::int64_t t0, std::int64_t t1) {
        float s_row[128], si_row[128], s_col[128], si_col[128];
        std::uint32_t row_amax[128], col_amax[128];
        std::uint8_t row_nf[128], col_nf[128];
        std::vector<float> xt(std::size_t(B * B));  // a tile's transpose
        Partial part;
        for (std::int64_t task = t0; task < t1; ++task) {
            const std::int64_t band = task / row_tasks, first = (task % row_tasks) * per_task;
            const std::int64_t r0 = band * B, nr = std::min(B, x.rows - r0);
            for (std::int64_t tile = first; tile < std::min(tiles, first + per_task); ++tile) {
                const std::int64_t c0 = tile * B, nc = std::min(B, x.cols - c0);
                const simd::Tile t{x.data + r0 * x.cols + c0, x.cols, int(nr), int(nc), xt.data()};
                k.tile_amax(t, row_amax, row_nf, col_amax, col_nf);
                for (std::int64_t r = 0; r < nr; ++r) {
                    const cast::BlockScale bs = block_scale(recipe, row_amax[r], row_nf[r]);
                    s_row[r] = bs.s, si_row[r] = bs.scale_inv;
                    part.amax = std::max(part.amax, row_amax[r]);
                }
                for (std::int64_t c = 0; c < nc; ++c) {
                    const cast::BlockScale bs = block_scale(recipe, col_amax[c], col_nf[c]);
                    s_col[c] = bs.s, si_col[c] = bs.scale_inv;
                }
                const simd::TileCast cast{s_row, si_row, s_col, si_col, rowwise + r0 * x.cols + c0, x.cols,
                                          columnwise + c0 * x.rows + r0, x.rows};
                part.overflow += k.tile_cast[f](t, cast);
            }
        }
        std::lock_guard lock(mu);
        total.overflow += part.overflow;
        total.amax = std::max(total.amax, part.amax);
    });
    CastInfo info;
    info.amax = std::bit_cast<float>(total.amax);
    info.overflow = total.overflow;
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
