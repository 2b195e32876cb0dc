// Every recorded quantity goes through the writer and comes back unchanged from the
// reader: metadata, steps, events, scaling, operand statistics with all error figures,
// histograms and vectors, block maps, op timings and op names added late.
#include <gtest/gtest.h>

#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

void expect_operand(const OperandRecord& want, const OperandRecord& got) {
    EXPECT_EQ(want.key.run, got.key.run);
    EXPECT_EQ(want.key.step, got.key.step);
    EXPECT_EQ(want.key.linear, got.key.linear);
    EXPECT_EQ(want.key.gemm, got.key.gemm);
    EXPECT_EQ(want.key.operand, got.key.operand);
    EXPECT_EQ(want.recipe_in_use, got.recipe_in_use);
    expect_same(want.scale, got.scale, "scale");
    const TensorStats &a = want.stats, &b = got.stats;
    EXPECT_EQ(a.numel, b.numel);
    EXPECT_EQ(a.finite, b.finite);
    EXPECT_EQ(a.nan, b.nan);
    EXPECT_EQ(a.inf, b.inf);
    EXPECT_EQ(a.zero, b.zero);
    EXPECT_EQ(a.amax, b.amax);
    EXPECT_EQ(a.min_nonzero_abs, b.min_nonzero_abs);
    EXPECT_EQ(a.mean, b.mean);
    EXPECT_EQ(a.rms, b.rms);
    EXPECT_EQ(a.stddev, b.stddev);
    EXPECT_EQ(a.dynamic_range, b.dynamic_range);
    EXPECT_EQ(a.histogram.bins, b.histogram.bins);
    EXPECT_EQ(a.histogram.zero, b.histogram.zero);
    EXPECT_EQ(a.histogram.nan, b.histogram.nan);
    EXPECT_EQ(a.histogram.inf, b.histogram.inf);
    EXPECT_EQ(a.outliers.kurtosis, b.outliers.kurtosis);
    EXPECT_EQ(a.outliers.k, b.outliers.k);
    EXPECT_EQ(a.outliers.frac_beyond_k_rms, b.outliers.frac_beyond_k_rms);
    EXPECT_EQ(a.outliers.channel_absmax, b.outliers.channel_absmax);
    ASSERT_EQ(a.outliers.top.size(), b.outliers.top.size());
    for (std::size_t i = 0; i < a.outliers.top.size(); ++i) {
        EXPECT_EQ(a.outliers.top[i].value, b.outliers.top[i].value);
        EXPECT_EQ(a.outliers.top[i].row, b.outliers.top[i].row);
        EXPECT_EQ(a.outliers.top[i].col, b.outliers.top[i].col);
    }
    EXPECT_EQ(want.amax_history, got.amax_history);
    ASSERT_EQ(want.errors.size(), got.errors.size());
    for (std::size_t i = 0; i < want.errors.size(); ++i) {
        const ErrorStats &e = want.errors[i], &f = got.errors[i];
        EXPECT_EQ(e.recipe, f.recipe);
        EXPECT_EQ(e.amax, f.amax);
        EXPECT_EQ(e.mse, f.mse);
        EXPECT_EQ(e.sqnr_db, f.sqnr_db);
        EXPECT_EQ(e.rel_l2, f.rel_l2);
        EXPECT_EQ(e.max_abs_err, f.max_abs_err);
        EXPECT_EQ(e.cosine, f.cosine);
        EXPECT_EQ(e.underflow_pct, f.underflow_pct);
        EXPECT_EQ(e.overflow_pct, f.overflow_pct);
        EXPECT_EQ(e.scale_inv_min, f.scale_inv_min);
        EXPECT_EQ(e.scale_inv_max, f.scale_inv_max);
        EXPECT_EQ(e.nonfinite_out, f.nonfinite_out);
    }
}

constexpr std::int64_t kSteps = 20;

// Writes the sample trace: both runs, every step, operands every capture_every steps.
void write_sample(const std::string& path) {
    TraceMeta m = sample_meta();
    TraceWriter w(path, m);
    w.write(sample_event(0, 0, EventKind::Start));
    for (std::int64_t step = 0; step < kSteps; ++step) {
        for (int run = 0; run < 2; ++run) {
            w.write(sample_step(run, step));
            w.write(sample_scaling(m, run, step));
            if (step % m.capture_every == 0)
                for (int l = 0; l < 2; ++l)
                    for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
                        for (Operand o : {Operand::X, Operand::W, Operand::DY})
                            if (operand_slot(l, g, o) >= 0) w.write(sample_operand(m, {run, step, l, g, o}));
            if (step % m.blockmap_every == 0)
                for (int r = 0; r < 3; ++r) w.write(sample_blockmap({run, step, 1, Gemm::Dgrad, Operand::DY}, r));
            for (int i = 0; i < 5; ++i) w.write(sample_op(run, step, i));
        }
        if (step == 12) {
            w.write(OpNameRecord{3, "cutlass_fp8_gemm_kernel<128,128>"});
            w.write(OpRecord{0, step, 3, -1, -1, 0, 7, 5, 9});
        }
    }
    w.write(sample_event(1, 7, EventKind::Rewind));
    w.write(EventRecord{0, 19, EventKind::RecipeSwitch, std::string(400, 'x')});
    w.close();
}

TEST(TraceRoundTrip, EveryQuantityComesBack) {
    TempDir dir;
    std::string path = dir.file("run.h5");
    write_sample(path);
    TraceReader r(path);
    TraceMeta m = sample_meta();

    const TraceMeta& got = r.meta();
    EXPECT_EQ(got.format_version, kFormatVersion);
    EXPECT_EQ(got.tool_version, m.tool_version);
    EXPECT_EQ(got.created, m.created);
    EXPECT_EQ(got.machine, m.machine);
    EXPECT_EQ(got.config_json, m.config_json);
    ASSERT_EQ(got.runs.size(), 2u);
    EXPECT_EQ(got.runs[1].name, "delayed");
    EXPECT_EQ(got.runs[1].recipe, "delayed");
    ASSERT_EQ(got.linears.size(), 2u);
    EXPECT_EQ(got.linears[1].name, "blocks.0.mlp.fc1");
    EXPECT_EQ(got.linears[1].in_features, 64);
    EXPECT_EQ(got.linears[1].out_features, 256);
    EXPECT_EQ(got.recipes, m.recipes);
    EXPECT_EQ(got.training_recipes, m.training_recipes);
    std::vector<std::string> ops = m.ops;
    ops.push_back("cutlass_fp8_gemm_kernel<128,128>");
    EXPECT_EQ(got.ops, ops);
    EXPECT_EQ(got.capture_every, 5);
    EXPECT_EQ(got.blockmap_every, 10);

    for (int run = 0; run < 2; ++run) {
        auto steps = r.steps(run);
        ASSERT_EQ(steps.size(), static_cast<std::size_t>(kSteps));
        for (std::int64_t i = 0; i < kSteps; ++i) {
            StepRecord want = sample_step(run, i);
            EXPECT_EQ(steps[i].run, run);
            EXPECT_EQ(steps[i].step, i);
            EXPECT_EQ(steps[i].loss, want.loss);
            expect_same(steps[i].eval_loss, want.eval_loss, "eval_loss");
            EXPECT_EQ(steps[i].lr, want.lr);
            EXPECT_EQ(steps[i].grad_norm, want.grad_norm);
            EXPECT_EQ(steps[i].step_time_s, want.step_time_s);
            EXPECT_EQ(steps[i].tokens_per_s, want.tokens_per_s);
            EXPECT_EQ(steps[i].recipe, want.recipe);
        }
        EXPECT_EQ(r.last_step(run), kSteps - 1);

        auto scaling = r.scaling(run, 3, 6);
        ASSERT_EQ(scaling.size(), 4u);
        for (std::size_t i = 0; i < scaling.size(); ++i) {
            ScalingRecord want = sample_scaling(m, run, 3 + i);
            EXPECT_EQ(scaling[i].step, want.step);
            EXPECT_EQ(scaling[i].amax, want.amax);
            ASSERT_EQ(scaling[i].scale.size(), want.scale.size());
            for (std::size_t j = 0; j < want.scale.size(); ++j) expect_same(scaling[i].scale[j], want.scale[j], "scale");
        }

        EXPECT_EQ(r.capture_steps(run), (std::vector<std::int64_t>{0, 5, 10, 15}));
        auto all = r.operands(run, 10);
        ASSERT_EQ(all.size(), 12u);  // 2 linears x 6 slots
        for (const auto& o : all) expect_operand(sample_operand(m, o.key), o);
        auto one = r.operand({run, 15, 1, Gemm::Wgrad, Operand::DY});
        ASSERT_TRUE(one.has_value());
        expect_operand(sample_operand(m, {run, 15, 1, Gemm::Wgrad, Operand::DY}), *one);
        EXPECT_FALSE(r.operand({run, 16, 1, Gemm::Wgrad, Operand::DY}).has_value());
        EXPECT_FALSE(r.operand({run, 15, 1, Gemm::Fprop, Operand::DY}).has_value());

        auto series = r.operand_series(run, 0, Gemm::Fprop, Operand::W);
        ASSERT_EQ(series.size(), 4u);
        for (const auto& p : series) {
            OperandRecord want = sample_operand(m, {run, p.step, 0, Gemm::Fprop, Operand::W});
            EXPECT_EQ(p.amax, want.stats.amax);
            EXPECT_EQ(p.kurtosis, want.stats.outliers.kurtosis);
            EXPECT_EQ(p.dynamic_range, want.stats.dynamic_range);
            EXPECT_EQ(p.recipe_in_use, want.recipe_in_use);
            expect_same(p.scale, want.scale, "scale");
            ASSERT_EQ(p.errors.size(), 3u);
            EXPECT_EQ(p.errors[2].sqnr_db, want.errors[2].sqnr_db);
        }

        EXPECT_EQ(r.blockmap_steps(run), (std::vector<std::int64_t>{0, 10}));
        auto maps = r.blockmaps({run, 10, 1, Gemm::Dgrad, Operand::DY});
        ASSERT_EQ(maps.size(), 3u);
        for (int rec = 0; rec < 3; ++rec) {
            BlockMapRecord want = sample_blockmap({run, 10, 1, Gemm::Dgrad, Operand::DY}, rec);
            EXPECT_EQ(maps[rec].recipe, rec);
            EXPECT_EQ(maps[rec].rows, want.rows);
            EXPECT_EQ(maps[rec].cols, want.cols);
            EXPECT_EQ(maps[rec].tile_rows, want.tile_rows);
            EXPECT_EQ(maps[rec].tile_cols, want.tile_cols);
            EXPECT_EQ(maps[rec].grid_rows, want.grid_rows);
            EXPECT_EQ(maps[rec].grid_cols, want.grid_cols);
            EXPECT_EQ(maps[rec].absmax, want.absmax);
            EXPECT_EQ(maps[rec].scale_inv, want.scale_inv);
            EXPECT_EQ(maps[rec].sqnr_db, want.sqnr_db);
        }
        EXPECT_TRUE(r.blockmaps({run, 10, 0, Gemm::Dgrad, Operand::DY}).empty());

        auto op_times = r.ops(run, 12, 13);
        std::vector<OpRecord> want_ops;
        for (std::int64_t s = 12; s <= 13; ++s) {
            for (int i = 0; i < 5; ++i) want_ops.push_back(sample_op(run, s, i));
            if (run == 0 && s == 12) want_ops.push_back({0, 12, 3, -1, -1, 0, 7, 5, 9});
        }
        ASSERT_EQ(op_times.size(), want_ops.size());
        for (std::size_t i = 0; i < want_ops.size(); ++i) {
            EXPECT_EQ(op_times[i].step, want_ops[i].step);
            EXPECT_EQ(op_times[i].op, want_ops[i].op);
            EXPECT_EQ(op_times[i].linear, want_ops[i].linear);
            EXPECT_EQ(op_times[i].layer, want_ops[i].layer);
            EXPECT_EQ(op_times[i].device, want_ops[i].device);
            EXPECT_EQ(op_times[i].stream, want_ops[i].stream);
            EXPECT_EQ(op_times[i].start_ns, want_ops[i].start_ns);
            EXPECT_EQ(op_times[i].end_ns, want_ops[i].end_ns);
        }
    }

    auto events = r.events();
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0].kind, EventKind::Start);
    EXPECT_EQ(events[0].detail, "start at 0");
    EXPECT_EQ(events[1].run, 1);
    EXPECT_EQ(events[1].step, 7);
    EXPECT_EQ(events[1].kind, EventKind::Rewind);
    EXPECT_EQ(events[2].detail, std::string(kEventDetailChars, 'x'));  // long details are cut
    EXPECT_FALSE(r.refresh());  // a finished file does not grow
}

TEST(TraceWriter, RejectsRecordsThatDoNotFitTheMeta) {
    TempDir dir;
    TraceMeta m = sample_meta();
    TraceWriter w(dir.file("bad.h5"), m);
    EXPECT_THROW(w.write(StepRecord{.run = 2}), std::invalid_argument);
    ScalingRecord s = sample_scaling(m, 0, 0);
    s.amax.pop_back();
    EXPECT_THROW(w.write(s), std::invalid_argument);
    OperandRecord o = sample_operand(m, {0, 0, 0, Gemm::Fprop, Operand::DY});  // fprop has no dy
    EXPECT_THROW(w.write(o), std::invalid_argument);
    o = sample_operand(m, {0, 0, 2, Gemm::Fprop, Operand::X});  // no linear 2
    EXPECT_THROW(w.write(o), std::invalid_argument);
    EXPECT_THROW(w.write(OpRecord{.op = 3}), std::invalid_argument);
    EXPECT_THROW(w.write(OpNameRecord{4, "skips id 3"}), std::invalid_argument);
    BlockMapRecord b = sample_blockmap({0, 0, 0, Gemm::Fprop, Operand::X}, 0);
    b.sqnr_db.pop_back();
    EXPECT_THROW(w.write(b), std::invalid_argument);
    w.write(sample_step(0, 0));
    w.close();
    EXPECT_EQ(TraceReader(dir.file("bad.h5")).steps(0).size(), 1u);
}

TEST(TraceWriter, NamesLongerThanTheirTableAreAnError) {
    TempDir dir;
    TraceMeta m = sample_meta();
    m.runs[0].name = std::string(65, 'r');
    try {
        TraceWriter w(dir.file("long.h5"), m);
        FAIL() << "expected TraceError";
    } catch (const TraceError& e) {
        EXPECT_NE(std::string(e.what()).find("longer than 64"), std::string::npos) << e.what();
    }
}

TEST(TraceWriter, UnwritablePathIsAClearError) {
    TraceMeta m = sample_meta();
    EXPECT_THROW(TraceWriter("/nonexistent-dir/run.h5", m), TraceError);
}

}  // namespace
}  // namespace fp8scope::trace
