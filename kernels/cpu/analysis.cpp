// The fused analysis: tensor statistics and the quantization error of every recipe in
// two passes over the data.
//   Pass 1 (flat chunks): scaling amax, sum and sum of squares, NaN/Inf counts; these fix
//     the per-tensor scales, the mean and the rms that pass 2 needs.
//   Pass 2 (tiles of P rows x W columns, threads over tiles): each tile is walked in
//     sub-tiles of P x SW (128 x 128 by default, so a 128x128 block and its source stay in
//     L1/L2); a sub-tile gets its block amaxes and its tensor statistics, then every recipe
//     casts it and accumulates its error sums. A sub-tile's sums are also one cell of
//     the tile maps (the block heatmaps), so those cost no pass of their own.
// Sums are kept in 16 float64 lanes per quantity so the loops vectorize (the leaf kernels
// are simd.h's, for the CPU's widest vector ISA, all giving the same sums); every tile
// keeps its own partial results and they are combined in tile order, so the figures do
// not depend on the thread count. No codes or dequantized copies are stored.

#include "cpu/analysis.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <variant>

#include "fp8/cast_rules.h"
#include "cpu/fp4.h"
#include "cpu/quantize.h"
#include "cpu/simd.h"
#include "util/parallel.h"

namespace fp8scope {
namespace {

using simd::kLanes;
constexpr std::uint32_t kAbs = ~cast::kSignBit;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

inline std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

// Sum of lanes in a fixed order.
inline double lane_sum(const double (&l)[kLanes]) {
    double s = 0;
    for (double v : l) s += v;
    return s;
}

// ---- Pass 1: sums, amax, NaN/Inf counts (simd::MomentSums) ---------------------------

using Pass1 = simd::MomentSums;

// ---- Pass 2: tensor statistics of one row segment ------------------------------------

struct TopEntry {
    std::uint32_t abs_bits;
    std::int64_t index;  // row-major position
    float value;
};
// a ranks before b: larger |x|, then earlier position.
inline bool ranks_before(const TopEntry& a, const TopEntry& b) {
    return a.abs_bits != b.abs_bits ? a.abs_bits > b.abs_bits : a.index < b.index;
}

struct StatsAcc {
    simd::CentralSums central;  // moments, count beyond the threshold, least nonzero |x|
    std::int64_t zero = 0;
    std::array<std::int64_t, kHistBins> hist{};
    std::vector<TopEntry> top;  // heap: the entry ranking last on top
};

// Returns the bits of the segment's largest finite |x|.
std::uint32_t stats_segment(const float* x, std::int64_t n, std::int64_t index0, double mean, double threshold,
                            int top_k, StatsAcc& acc, std::uint32_t* channel_amax) {
    const std::uint32_t smax = simd::kernels().central_sums(x, n, mean, threshold, acc.central);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t a = bits(x[i]) & kAbs;
        channel_amax[i] = std::max(channel_amax[i], a < cast::kInfBits ? a : 0u);
    }
    // floor(log2|x|): the float32 exponent field, or the leading one of a subnormal.
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t a = bits(x[i]) & kAbs;
        const std::uint32_t e = a >> 23;
        if (e - 1u < 254u) {
            ++acc.hist[e - 127 - kHistMinExp];
        } else if (a == 0) {
            ++acc.zero;
        } else if (e == 0) {
            ++acc.hist[(31 - std::countl_zero(a)) - 149 - kHistMinExp];
        }
    }
    // Top-k: only segments that can reach the heap are scanned.
    if (top_k <= 0) return smax;
    auto worse = [](const TopEntry& a, const TopEntry& b) { return ranks_before(a, b); };
    if (static_cast<int>(acc.top.size()) == top_k && smax < acc.top.front().abs_bits) return smax;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t a = bits(x[i]) & kAbs;
        if (a >= cast::kInfBits) continue;
        const TopEntry e{a, index0 + i, x[i]};
        if (static_cast<int>(acc.top.size()) < top_k) {
            acc.top.push_back(e);
            std::push_heap(acc.top.begin(), acc.top.end(), worse);
        } else if (ranks_before(e, acc.top.front())) {
            std::pop_heap(acc.top.begin(), acc.top.end(), worse);
            acc.top.back() = e;
            std::push_heap(acc.top.begin(), acc.top.end(), worse);
        }
    }
    return smax;
}

// ---- Pass 2: error sums of one recipe over one block segment -------------------------

struct ErrAcc : simd::ErrorSums {
    float scale_inv_min = std::numeric_limits<float>::infinity();
    float scale_inv_max = -std::numeric_limits<float>::infinity();
    void note_scale_inv(float si) {
        if (std::isnan(si)) return;
        scale_inv_min = std::min(scale_inv_min, si);
        scale_inv_max = std::max(scale_inv_max, si);
    }
    void add(const ErrAcc& o) {
        for (int j = 0; j < kLanes; ++j) {
            sxx[j] += o.sxx[j];
            sdd[j] += o.sdd[j];
            sqq[j] += o.sqq[j];
            sxq[j] += o.sxq[j];
            max_err[j] = std::max(max_err[j], o.max_err[j]);
        }
        underflow += o.underflow;
        overflow += o.overflow;
        nonfinite_out += o.nonfinite_out;
        scale_inv_min = std::min(scale_inv_min, o.scale_inv_min);
        scale_inv_max = std::max(scale_inv_max, o.scale_inv_max);
    }
};

using ErrorKernel = void (*)(const float*, std::int64_t, float, float, simd::ErrorSums&);

std::int64_t count_finite(const float* x, std::int64_t n) {
    std::int64_t c = 0;
    for (std::int64_t i = 0; i < n; ++i) c += (bits(x[i]) & kAbs) < cast::kInfBits;
    return c;
}

// What pass 2 needs to know of one recipe.
struct RecipePlan {
    ErrorKernel kernel = nullptr;
    bool per_tensor = false, mx = false, pow2 = false;
    Format format = Format::E4M3;
    MXRule rule = MXRule::RCeil;
    std::int64_t block_rows = 1, block_cols = 1;
    float s = 1, scale_inv = 1;  // per-tensor recipes
    std::optional<FP4Plan> fp4;   // FP4 quantizers: E2M1 elements, their own block scales
    const float* source = nullptr;  // FP4 with rht: the transformed tensor it casts
};

RecipePlan plan_recipe(const Recipe& r, float amax, float delayed_scale) {
    RecipePlan p;
    if (is_fp4(r)) {
        p.fp4 = fp4_plan(r, amax);
        p.block_rows = p.fp4->block_rows;
        p.block_cols = p.fp4->block_cols;
        return p;
    }
    p.format = recipe_format(r);
    p.kernel = simd::kernels().error_sums[simd::format_index(p.format == Format::E5M2)];
    if (const auto* c = std::get_if<CurrentScaling>(&r)) {
        p.per_tensor = true;
        p.s = compute_scale(amax, c->format, c->eps, c->pow2);
    } else if (std::holds_alternative<DelayedScaling>(r)) {
        p.per_tensor = true;  // without its history's scale, a lone tensor is a first step: s = 1
        p.s = std::isnan(delayed_scale) ? 1.0f : delayed_scale;
    } else if (const auto* b = std::get_if<BlockScaling>(&r)) {
        if (b->block_rows < 1 || b->block_cols < 1)
            throw std::invalid_argument("recipe " + recipe_name(r) + ": block shape must be positive");
        p.block_rows = b->block_rows;
        p.block_cols = b->block_cols;
        p.pow2 = b->pow2;
    } else {
        const auto& m = std::get<MXScaling>(r);
        if (m.block < 1) throw std::invalid_argument("recipe " + recipe_name(r) + ": block must be positive");
        p.mx = true;
        p.rule = m.rule;
        p.block_cols = m.block;
    }
    p.scale_inv = 1.0f / p.s;
    return p;
}

// Tiling of pass 2. Tiles hold whole blocks of every recipe; the default 128 x 2048 with
// 128-column sub-tiles depends only on the recipes' block shapes, never on threads.
struct Tiling {
    std::int64_t P = 128, SW = 128, W = 2048;
    std::int64_t panels = 0, chunks = 0;
};

Tiling make_tiling(MatrixView x, const std::vector<RecipePlan>& plans) {
    Tiling t;
    for (const RecipePlan& p : plans) {
        if (p.per_tensor) continue;
        t.P = std::lcm(t.P, p.block_rows);
        t.SW = std::lcm(t.SW, p.block_cols);
    }
    t.W = t.SW * std::max<std::int64_t>(1, 2048 / t.SW);
    t.panels = (x.rows + t.P - 1) / t.P;
    t.chunks = (x.cols + t.W - 1) / t.W;
    return t;
}

struct TileResult {
    StatsAcc stats;
    std::vector<ErrAcc> errors;
};

// Every recipe over one P x (c1 - c0) sub-tile whose first row is r0.
void errors_subtile(MatrixView x, std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1,
                    const std::vector<RecipePlan>& plans, std::vector<ErrAcc>& errors,
                    std::vector<std::uint32_t>& amax, std::vector<std::uint8_t>& nonfinite) {
    for (std::size_t k = 0; k < plans.size(); ++k) {
        const RecipePlan& p = plans[k];
        ErrAcc& acc = errors[k];
        const MatrixView src = p.source ? MatrixView{p.source, x.rows, x.cols} : x;
        if (p.per_tensor) {
            for (std::int64_t r = r0; r < r1; ++r) p.kernel(x.row(r) + c0, c1 - c0, p.s, p.scale_inv, acc);
            continue;
        }
        const std::int64_t segs = (c1 - c0 + p.block_cols - 1) / p.block_cols;
        for (std::int64_t g0 = r0; g0 < r1; g0 += p.block_rows) {
            const std::int64_t g1 = std::min(r1, g0 + p.block_rows);
            // Block amaxes of this row group (one row for 1xN blocks and MX).
            amax.assign(segs, 0);
            nonfinite.assign(segs, 0);
            for (std::int64_t r = g0; r < g1; ++r) {
                for (std::int64_t b = 0; b < segs; ++b) {
                    const std::int64_t s0 = c0 + b * p.block_cols, s1 = std::min(c1, s0 + p.block_cols);
                    bool nf;
                    const std::uint32_t m = simd::kernels().amax(src.row(r) + s0, s1 - s0, &nf);
                    amax[b] = std::max(amax[b], m);
                    nonfinite[b] |= nf;
                }
            }
            for (std::int64_t b = 0; b < segs; ++b) {
                const std::int64_t s0 = c0 + b * p.block_cols, s1 = std::min(c1, s0 + p.block_cols);
                if (p.fp4) {
                    const cast::FP4BlockScale fb = p.fp4->block(amax[b], nonfinite[b]);
                    acc.note_scale_inv(cast::mul_rn(fb.scale, fb.dec));
                    // sr: the bits of the default key (seed, step, tensor 0), element by element
                    const cast::RoundingKey key{};
                    for (std::int64_t r = g0; r < g1; ++r)
                        fp4_error_sums(src.row(r) + s0, s1 - s0, fb, acc, p.fp4->sr ? &key : nullptr,
                                       static_cast<std::uint64_t>(r * x.cols + s0));
                    continue;
                }
                if (p.mx && nonfinite[b]) {  // NaN scale: every element of the block is NaN
                    acc.nonfinite_out += count_finite(x.row(g0) + s0, s1 - s0);
                    continue;
                }
                const cast::BlockScale bs = cast::block_scale(amax[b], p.format, p.mx, p.rule, p.pow2);
                acc.note_scale_inv(bs.scale_inv);
                for (std::int64_t r = g0; r < g1; ++r) p.kernel(x.row(r) + s0, s1 - s0, bs.s, bs.scale_inv, acc);
            }
        }
    }
}

void init_maps(TileMaps& maps, MatrixView x, const Tiling& t, std::size_t recipes) {
    maps.tile_rows = static_cast<int>(std::min(t.P, std::max<std::int64_t>(x.rows, 1)));
    maps.tile_cols = static_cast<int>(std::min(t.SW, std::max<std::int64_t>(x.cols, 1)));
    maps.grid_rows = static_cast<int>(t.panels);
    maps.grid_cols = static_cast<int>((x.cols + t.SW - 1) / t.SW);
    const std::size_t cells = static_cast<std::size_t>(maps.grid_rows) * maps.grid_cols;
    maps.absmax.assign(cells, 0.0f);
    maps.recipes.resize(recipes);
    for (TileMap& m : maps.recipes) {
        m.scale_inv.assign(cells, std::numeric_limits<float>::quiet_NaN());
        m.signal.assign(cells, 0.0);
        m.error.assign(cells, 0.0);
    }
}

// One cell of every map from its sub-tile's sums (each cell has one writer).
void fill_cell(TileMaps& maps, std::int64_t cell, std::uint32_t absmax_bits, const std::vector<RecipePlan>& plans,
               const std::vector<ErrAcc>& sub) {
    maps.absmax[cell] = std::bit_cast<float>(absmax_bits);
    for (std::size_t k = 0; k < plans.size(); ++k) {
        TileMap& m = maps.recipes[k];
        const ErrAcc& a = sub[k];
        m.scale_inv[cell] = plans[k].per_tensor ? plans[k].scale_inv
                            : a.scale_inv_min <= a.scale_inv_max ? a.scale_inv_max
                                                                 : std::numeric_limits<float>::quiet_NaN();
        m.signal[cell] = lane_sum(a.sxx);
        m.error[cell] = lane_sum(a.sdd);
    }
}

}  // namespace

Analysis analyze(MatrixView x, const std::vector<Recipe>& recipes, const StatsOptions& opt,
                 const AnalysisExtras& extras) {
    Analysis out;
    TensorStats& t = out.tensor;
    const std::int64_t n = x.size();
    t.numel = n;
    ThreadPool& pool = ThreadPool::shared(opt.threads);

    // Pass 1 over fixed flat chunks.
    constexpr std::int64_t kChunk = 1 << 18;
    const std::int64_t chunks1 = (n + kChunk - 1) / kChunk;
    std::vector<Pass1> p1(chunks1);
    pool.run(chunks1, [&](std::int64_t c) {
        const std::int64_t i0 = c * kChunk, i1 = std::min(n, i0 + kChunk);
        simd::kernels().moment_sums(x.data + i0, i1 - i0, p1[c]);
    });
    MomentTotals moments;
    for (const Pass1& p : p1) {
        moments.sum += lane_sum(p.sum);
        moments.sum2 += lane_sum(p.sum2);
        moments.amax_bits = std::max(moments.amax_bits, p.amax);
        moments.amax_finite_bits = std::max(moments.amax_finite_bits, p.amax_finite);
        moments.nan += p.nan;
        moments.inf += p.inf;
    }
    finish_moments(moments, n, t);
    const double threshold = opt.outlier_k * t.rms;
    const float scaling_amax = out.scaling_amax = std::bit_cast<float>(moments.amax_bits);

    // FP4 quantizers with rht cast x's transform along rows (fp4.h), made once for all.
    std::vector<float> transformed;
    float transformed_amax = 0;
    std::vector<RecipePlan> plans;
    for (std::size_t k = 0; k < recipes.size(); ++k) {
        const float delayed = k < extras.delayed_scales.size() ? extras.delayed_scales[k] : kNaN;
        const bool rht = is_fp4(recipes[k]) && fp4_plan(recipes[k], 0.0f).rht;
        if (rht && transformed.empty() && n > 0) {
            transformed.assign(x.data, x.data + n);
            rht_rows(transformed.data(), x.rows, x.cols, opt.threads);
            transformed_amax = fp8scope::scaling_amax(MatrixView{transformed.data(), x.rows, x.cols});
        }
        plans.push_back(plan_recipe(recipes[k], rht ? transformed_amax : scaling_amax, delayed));
        if (rht) plans.back().source = transformed.data();
    }
    const Tiling tiling = make_tiling(x, plans);
    TileMaps& maps = out.maps;
    if (extras.tile_maps) init_maps(maps, x, tiling, plans.size());

    // Pass 2 over tiles.
    const std::int64_t tiles = tiling.panels * tiling.chunks;
    std::vector<TileResult> results(tiles);
    std::vector<std::uint32_t> channel(x.cols, 0);
    std::mutex channel_mu;
    const double mean = central_mean(t);
    pool.run(tiles, [&](std::int64_t tile) {
        const std::int64_t r0 = (tile / tiling.chunks) * tiling.P, r1 = std::min(x.rows, r0 + tiling.P);
        const std::int64_t w0 = (tile % tiling.chunks) * tiling.W, w1 = std::min(x.cols, w0 + tiling.W);
        TileResult& res = results[tile];
        res.errors.resize(plans.size());
        std::vector<std::uint32_t> ch(w1 - w0, 0), amax;
        std::vector<std::uint8_t> nonfinite;
        std::vector<ErrAcc> sub(plans.size());  // per sub-tile: a cell of the tile maps
        for (std::int64_t c0 = w0; c0 < w1; c0 += tiling.SW) {
            const std::int64_t c1 = std::min(w1, c0 + tiling.SW);
            std::uint32_t sub_max = 0;
            for (std::int64_t r = r0; r < r1; ++r) {
                sub_max = std::max(sub_max, stats_segment(x.row(r) + c0, c1 - c0, r * x.cols + c0, mean, threshold,
                                                          opt.top_k, res.stats, ch.data() + (c0 - w0)));
            }
            std::fill(sub.begin(), sub.end(), ErrAcc{});
            errors_subtile(x, r0, r1, c0, c1, plans, sub, amax, nonfinite);
            for (std::size_t k = 0; k < plans.size(); ++k) res.errors[k].add(sub[k]);
            if (extras.tile_maps) {
                fill_cell(maps, (r0 / tiling.P) * maps.grid_cols + c0 / tiling.SW, sub_max, plans, sub);
            }
        }
        std::lock_guard lock(channel_mu);
        for (std::int64_t c = w0; c < w1; ++c) channel[c] = std::max(channel[c], ch[c - w0]);
    });

    // Combine in tile order.
    CentralTotals central;
    std::vector<TopEntry> top;
    for (const TileResult& r : results) {
        central.m2 += lane_sum(r.stats.central.m2);
        central.m4 += lane_sum(r.stats.central.m4);
        central.beyond += r.stats.central.beyond;
        central.zero += r.stats.zero;
        central.min_nz_bits = std::min(central.min_nz_bits, r.stats.central.min_nz);
        for (int b = 0; b < kHistBins; ++b) t.histogram.bins[b] += r.stats.hist[b];
        top.insert(top.end(), r.stats.top.begin(), r.stats.top.end());
    }
    finish_central(central, opt.outlier_k, t);
    t.outliers.channel_absmax.resize(x.cols);
    for (std::int64_t c = 0; c < x.cols; ++c) t.outliers.channel_absmax[c] = std::bit_cast<float>(channel[c]);
    std::sort(top.begin(), top.end(), ranks_before);
    if (static_cast<int>(top.size()) > std::max(0, opt.top_k)) top.resize(std::max(0, opt.top_k));
    for (const TopEntry& e : top) t.outliers.top.push_back({e.value, e.index / x.cols, e.index % x.cols});

    for (std::size_t k = 0; k < plans.size(); ++k) {
        ErrorTotals e;
        for (const TileResult& r : results) {
            const ErrAcc& a = r.errors[k];
            e.sxx += lane_sum(a.sxx);
            e.sdd += lane_sum(a.sdd);
            e.sqq += lane_sum(a.sqq);
            e.sxq += lane_sum(a.sxq);
            for (double m : a.max_err) e.max_err = std::max(e.max_err, m);
            e.underflow += a.underflow;
            e.overflow += a.overflow;
            e.nonfinite_out += a.nonfinite_out;
            e.scale_inv_min = std::min(e.scale_inv_min, a.scale_inv_min);
            e.scale_inv_max = std::max(e.scale_inv_max, a.scale_inv_max);
        }
        const RecipePlan& p = plans[k];
        out.errors.push_back(finish_error(recipe_name(recipes[k]), p.source ? transformed_amax : scaling_amax, e, t,
                                          p.per_tensor ? std::optional(p.scale_inv) : std::nullopt));
    }
    return out;
}

}  // namespace fp8scope
