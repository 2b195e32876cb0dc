// A trace built in the test from simple formulas: the independent oracle the GUI tests
// check the store, models and views against. Every figure is a closed-form function of
// (run, step, slot) so a test recomputes what a cell or a plot point must show.
#pragma once

#include <cmath>
#include <string>

#include "models/series_store.h"

namespace fp8scope::testing {

struct SyntheticSpec {
    int runs = 3;
    int linears = 4;
    std::int64_t steps = 50;
    std::int64_t capture_every = 10;
    std::int64_t blockmap_every = 25;
    int ops_per_step = 6;
    int world_size = 1;  // > 1: a data-parallel job whose rank 1 computes 30% longer
    std::string grad_dtype;  // the type the job's gradient sums travelled in; empty: not recorded
};

inline double loss_of(int run, std::int64_t step) { return 5.0 - 0.01 * step + 0.05 * run; }
inline double eval_loss_of(int run, std::int64_t step) { return step % 10 == 0 ? loss_of(run, step) + 0.1 : NAN; }
inline double step_time_of(int run, std::int64_t step) { return 0.1 + 0.001 * run + 0.0001 * (step % 7); }
inline float amax_of(int run, std::int64_t step, int slot) { return 1.0f + slot + 0.25f * run + 0.01f * (step % 13); }
inline float scale_of(int run, std::int64_t step, int slot) { return 448.0f / amax_of(run, step > 0 ? step - 1 : 0, slot); }
inline double sqnr_of(int run, std::int64_t step, int slot, int recipe) {
    return 30.0 + recipe * 2.0 - 0.1 * slot + 0.01 * step + run;
}
inline double kurtosis_of(int slot, std::int64_t step) { return 3.0 + slot + 0.001 * step; }
// A data-parallel step: rank 1 computes 30% longer than the others; every rank then waits
// in the all-reduce until the slowest is done, so the fast ranks' comm is the larger.
inline double compute_ms_of(int rank, std::int64_t step) { return (rank == 1 ? 156.0 : 120.0) + double(step % 5); }
inline double comm_ms_of(int rank, std::int64_t step) { return 8.0 + compute_ms_of(1, step) - compute_ms_of(rank, step); }

inline const std::vector<std::string>& synthetic_recipes() {
    static const std::vector<std::string> r{"current_e4m3", "block1x128", "block128x128", "mxfp8_e4m3"};
    return r;
}

inline trace::TraceMeta synthetic_meta(const SyntheticSpec& s) {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.runs = {{"baseline", "baseline"}, {"delayed", "delayed"}, {"blockwise", "blockwise"}};
    m.runs.resize(s.runs, {"extra", "current"});
    for (int l = 0; l < s.linears; ++l)
        m.linears.push_back({"blocks." + std::to_string(l / 2) + (l % 2 ? ".mlp.fc1" : ".attn.qkv"), l / 2, 64, 128});
    m.quantizers = synthetic_recipes();
    m.training_recipes = {"baseline", "delayed", "blockwise", "current"};
    m.ops = {"fprop", "dgrad", "wgrad", "quantize", "attention", "layernorm"};
    m.capture_every = s.capture_every;
    m.blockmap_every = s.blockmap_every;
    m.world_size = s.world_size;
    m.grad_dtype = s.grad_dtype;
    return m;
}

inline trace::OperandRecord synthetic_operand(const SyntheticSpec& s, int run, std::int64_t step, int linear,
                                              Gemm g, Operand o) {
    trace::OperandRecord r;
    r.key = {run, step, linear, g, o};
    const int slot = trace::operand_slot(linear, g, o);
    r.quantizer_in_use = run == 0 ? -1 : run % static_cast<int>(synthetic_recipes().size());
    r.scale = scale_of(run, step, slot);
    r.stats.amax = amax_of(run, step, slot);
    r.stats.numel = 64 * 128;
    r.stats.dynamic_range = 10.0 + slot;
    r.stats.outliers.kurtosis = kurtosis_of(slot, step);
    // Exponent e holds (slot + 1) * (e + 20) elements for e in [-20, floor(log2 amax)].
    for (int e = -20; e <= static_cast<int>(std::floor(std::log2(r.stats.amax))); ++e)
        r.stats.histogram.bins[e - kHistMinExp] = (slot + 1) * (e + 21);
    for (int c = 0; c < 64; ++c) r.stats.outliers.channel_absmax.push_back(c == 7 ? 50.0f : 1.0f + 0.01f * c);
    for (int rc = 0; rc < static_cast<int>(synthetic_recipes().size()); ++rc) {
        ErrorStats e;
        e.recipe = synthetic_recipes()[rc];
        e.sqnr_db = sqnr_of(run, step, slot, rc);
        e.mse = 1e-4 * (rc + 1);
        e.underflow_pct = 0.5 * rc;
        e.overflow_pct = step % 20 == 0 ? 1.0 : 0.0;
        e.cosine = 0.999;
        r.errors.push_back(e);
    }
    for (int h = 0; h < 16; ++h) r.amax_history.push_back(amax_of(run, step - 16 + h, slot));
    (void)s;
    return r;
}

inline views::TraceBatch synthetic_batch(const SyntheticSpec& s) {
    views::TraceBatch b;
    const int slot_count = s.linears * trace::kOperandsPerLinear;
    for (int run = 0; run < s.runs; ++run) {
        for (std::int64_t step = 0; step < s.steps; ++step) {
            b.steps.push_back({run, step, loss_of(run, step), eval_loss_of(run, step), 1e-3, 1.0,
                               1e3 * step_time_of(run, step), 1000.0 / step_time_of(run, step), run});
            trace::ScalingRecord sc{run, step, {}, {}};
            for (int slot = 0; slot < slot_count; ++slot) {
                sc.amax.push_back(amax_of(run, step, slot));
                sc.scale.push_back(scale_of(run, step, slot));
            }
            b.scaling.push_back(std::move(sc));
            std::int64_t t = step * 1'000'000'000LL;
            for (int k = 0; k < s.ops_per_step; ++k) {
                const std::int64_t dur = 1000 * (k + 1) + 10 * run;
                b.ops.push_back({run, step, k % 6, k % s.linears, 0, -1, k % 2, t, t + dur});
                t += dur + 100;
            }
            if (step % s.capture_every == 0)
                for (int l = 0; l < s.linears; ++l)
                    for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                        for (Operand o : {Operand::X, Operand::W, Operand::DY})
                            if (trace::operand_slot(l, g, o) >= 0) b.operands.push_back(synthetic_operand(s, run, step, l, g, o));
            if (s.blockmap_every > 0 && step % s.blockmap_every == 0)
                for (int rc = 0; rc < static_cast<int>(synthetic_recipes().size()); ++rc) {
                    trace::BlockMapRecord m;
                    m.key = {run, step, 0, Gemm::Fprop, Operand::X};
                    m.quantizer = rc;
                    m.rows = 256; m.cols = 512;
                    m.tile_rows = 32; m.tile_cols = 32;
                    m.grid_rows = 8; m.grid_cols = 16;
                    for (int i = 0; i < 8 * 16; ++i) {
                        m.absmax.push_back(1.0f + i);
                        m.scale_inv.push_back((1.0f + i) / 448.0f * (rc + 1));
                        m.sqnr_db.push_back(20.0f + rc * 3 + 0.1f * i);
                    }
                    b.blockmaps.push_back(std::move(m));
                }
        }
    }
    if (s.world_size > 1) {
        for (std::int64_t step = 0; step < s.steps; ++step)
            for (int rank = 0; rank < s.world_size; ++rank) {
                const double compute = compute_ms_of(rank, step), comm = comm_ms_of(rank, step);
                b.ranks.push_back({step, rank, compute, comm, compute + comm + 2.0, loss_of(0, step) + 0.01 * rank});
            }
        b.events.push_back({-1, 0, trace::EventKind::Health,
                            "pre-flight: rank 1 (host gpu1, cuda:1) 12.3 ms, 31% slower than the median 9.4 ms"});
        b.events.push_back({-1, 3, trace::EventKind::Health, "straggler: rank 1 158.0 ms compute vs median 123.0 ms for 3 steps"});
    }
    b.events.push_back({1, 20, trace::EventKind::RecipeSwitch, "delayed -> current"});
    b.events.push_back({0, 5, trace::EventKind::NonFinite, "loss NaN"});
    b.events.push_back({2, 30, trace::EventKind::Rewind, "to step 25"});
    return b;
}

// Makes GEMM `to`'s use of linear `linear`'s `operand` the very cast GEMM `from` makes (a
// per-tensor quantizer casts a tensor once for both): its amax, scale and records become
// `from`'s. `edit` then changes each copied record.
template <class Edit>
void share_tensor(views::TraceBatch& b, int linear, Operand operand, Gemm from, Gemm to, Edit&& edit) {
    const int fs = trace::operand_slot(linear, from, operand), ts = trace::operand_slot(linear, to, operand);
    for (trace::ScalingRecord& s : b.scaling) {
        s.amax[ts] = s.amax[fs];
        s.scale[ts] = s.scale[fs];
    }
    std::vector<trace::OperandRecord> shared;
    for (const trace::OperandRecord& o : b.operands)
        if (o.key.linear == linear && o.key.gemm == from && o.key.operand == operand) shared.push_back(o);
    for (trace::OperandRecord& o : b.operands)
        if (o.key.linear == linear && o.key.gemm == to && o.key.operand == operand)
            for (const trace::OperandRecord& f : shared)
                if (f.key.run == o.key.run && f.key.step == o.key.step) {
                    o = f;
                    o.key.gemm = to;
                    edit(o);
                }
}

}  // namespace fp8scope::testing
