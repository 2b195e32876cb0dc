// The gate/up alignment rule: on a trace whose SwiGLU rows align (written with the trace
// writer, the figures chosen) it names the layer, the channel and the step, quotes the
// trace's figures and suggests Smooth-SwiGLU, or fc2 in high precision where Smooth-SwiGLU
// is on; on a trace whose rows keep their random level, and on a baseline run, it is
// silent. And a SwiGLU model trained by the engine records the table (fc2's input amax of
// the leading channel as the operand table has it), and its rows, aligned early and then
// steady, raise no finding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "app/run_engine.h"
#include "finding.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace {

using namespace fp8scope;
namespace fs = std::filesystem;

fs::path scratch() {
    static const fs::path d = fp8scope::testing::scratch_dir("fp8scope_gate_up_rule_tests");
    return d;
}

// Two SwiGLU blocks (fc1 32 -> 2 x 64, fc2 64 -> 32); runs baseline and delayed.
trace::TraceMeta meta(bool smooth) {
    trace::TraceMeta m;
    m.tool_version = "test";
    m.config_json = std::string(R"({"model": {"mlp": "swiglu", "smooth_swiglu": )") + (smooth ? "true" : "false") +
                    R"(}, "schedule": {"warmup_steps": 5}})";
    m.runs = {{"baseline", "baseline"}, {"delayed", "delayed"}};
    m.linears = {{"blocks.0.mlp.fc1", 0, 32, 128}, {"blocks.0.mlp.fc2", 0, 64, 32},
                 {"blocks.1.mlp.fc1", 1, 32, 128}, {"blocks.1.mlp.fc2", 1, 64, 32}};
    m.quantizers = {"current_e4m3"};
    m.training_recipes = {"baseline", "delayed"};
    m.capture_every = 10;
    return m;
}

// max |cos| per capture (steps 1, 11, ...): random rows at ~0.15, then block 0's align.
const double kFlat[] = {0.15, 0.16, 0.15, 0.16, 0.15, 0.16, 0.15, 0.16, 0.15, 0.16, 0.15};
const double kAligning[] = {0.15, 0.16, 0.15, 0.2, 0.3, 0.45, 0.6, 0.75, 0.85, 0.93, 0.95};

trace::GateUpAlignmentRecord row(int run, std::int64_t step, int linear, double max_cos) {
    trace::GateUpAlignmentRecord a;
    a.run = run;
    a.step = step;
    a.linear = linear;
    a.channels = 64;
    a.max_abs_cos = max_cos;
    a.p99_abs_cos = 0.9 * max_cos;
    a.mean_abs_cos = 0.05;
    a.aligned = max_cos > 0.9 ? 3 : 0;
    a.top_channel = 17;
    a.top_cos = -max_cos;
    a.top_norm_product = 2 * max_cos;
    a.top_down_amax = 40 * max_cos;
    a.down_amax_median = 2;
    return a;
}

// Block 0 of both runs follows `block0`, block 1 stays flat.
std::string write(const std::string& name, const double (&block0)[11], bool smooth) {
    const fs::path p = scratch() / (name + ".h5");
    trace::TraceWriter w(p.string(), meta(smooth));
    for (int run = 0; run < 2; ++run)
        for (int i = 0; i < 11; ++i) {
            const std::int64_t step = 1 + 10 * i;
            w.write(row(run, step, 0, block0[i]));
            w.write(row(run, step, 2, kFlat[i]));
        }
    w.close();
    return p.string();
}

double figure(const diagnose::Finding& f, const std::string& name) {
    for (const auto& [k, v] : f.figures)
        if (k == name) return v;
    ADD_FAILURE() << f.kind << " has no figure " << name;
    return NAN;
}

std::vector<diagnose::Finding> alignment_findings(const trace::TraceReader& r) {
    std::vector<diagnose::Finding> out;
    for (auto& f : diagnose::diagnose(r))
        if (f.kind == "gate_up_alignment") out.push_back(std::move(f));
    return out;
}

TEST(GateUpAlignmentRule, NamesTheAligningLayerAndChannel) {
    const trace::TraceReader r(write("aligning", kAligning, false));
    const auto found = alignment_findings(r);
    ASSERT_EQ(found.size(), 1u);  // block 0 of the delayed run; not block 1, not the baseline
    const diagnose::Finding& f = found[0];
    EXPECT_EQ(f.run, 1);
    EXPECT_EQ(f.layer, 0);
    EXPECT_EQ(f.linear, 0);
    EXPECT_EQ(f.step, 61);       // the first capture at >= 0.5 and twice the reference
    EXPECT_EQ(f.step_end, 101);  // the largest
    EXPECT_EQ(f.severity, diagnose::Severity::Critical);  // 0.95 > 0.9
    EXPECT_DOUBLE_EQ(figure(f, "max_abs_cos_reference"), 0.15);  // median of 0.15, 0.16, 0.15
    EXPECT_DOUBLE_EQ(figure(f, "max_abs_cos"), 0.95);
    EXPECT_DOUBLE_EQ(figure(f, "growth"), 0.95 / 0.15);
    EXPECT_EQ(figure(f, "channel"), 17);
    EXPECT_DOUBLE_EQ(figure(f, "channel_cos"), -0.95);
    EXPECT_DOUBLE_EQ(figure(f, "aligned_channels"), 3);
    EXPECT_DOUBLE_EQ(figure(f, "down_amax_ratio"), 40 * 0.95 / 2);
    EXPECT_NE(f.summary.find("blocks.0.mlp.fc1"), std::string::npos);
    EXPECT_NE(f.summary.find("channel 17"), std::string::npos);
    ASSERT_TRUE(f.fix);
    EXPECT_NE(f.fix->summary.find("model.smooth_swiglu=true"), std::string::npos);
    EXPECT_TRUE(f.fix->override.empty());
}

TEST(GateUpAlignmentRule, WithSmoothSwigluOnTheFixKeepsFc2InHighPrecision) {
    const trace::TraceReader r(write("aligning_smooth", kAligning, true));
    const auto found = alignment_findings(r);
    ASSERT_EQ(found.size(), 1u);
    ASSERT_TRUE(found[0].fix);
    EXPECT_EQ(found[0].fix->override, "blocks.0.mlp.fc2");
}

TEST(GateUpAlignmentRule, ModerateGrowthWarns) {
    // 0.15 -> 0.6: past 0.5 and 4x, below 0.9: a warning.
    const double moderate[] = {0.15, 0.16, 0.15, 0.2, 0.3, 0.45, 0.6, 0.55, 0.6, 0.58, 0.6};
    const trace::TraceReader r(write("moderate", moderate, false));
    const auto found = alignment_findings(r);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0].severity, diagnose::Severity::Warning);
}

TEST(GateUpAlignmentRule, SilentWhileRowsKeepTheirRandomLevel) {
    const trace::TraceReader r(write("flat", kFlat, false));
    EXPECT_TRUE(alignment_findings(r).empty());
    // High from the start is not growth: rows that were built aligned.
    const double high[] = {0.8, 0.8, 0.8, 0.82, 0.8, 0.81, 0.8, 0.82, 0.8, 0.81, 0.8};
    const trace::TraceReader h(write("high", high, false));
    EXPECT_TRUE(alignment_findings(h).empty());
}

TEST(GateUpAlignmentRule, EngineRecordsASwigluModelAndACleanRunIsSilent) {
    const fs::path out = scratch() / "swiglu.h5";
    if (!fs::exists(out)) {
        const auto res = fp8scope::testing::run_engine(
            "train --config " + std::string(FP8SCOPE_CONFIGS) + "/tiny.json --threads 2 --capture-every 10 --quiet " +
                "--set model.mlp=swiglu --compare baseline,current --out " + out.string(),
            scratch());
        ASSERT_EQ(res.status, 0) << res.err;
    }
    const trace::TraceReader r(out.string());
    const auto& m = r.meta();
    int fc1 = -1, fc2 = -1;
    for (int i = 0; i < int(m.linears.size()); ++i) {
        if (m.linears[std::size_t(i)].name == "blocks.0.mlp.fc1") fc1 = i;
        if (m.linears[std::size_t(i)].name == "blocks.0.mlp.fc2") fc2 = i;
    }
    ASSERT_GE(fc1, 0);
    ASSERT_GE(fc2, 0);
    for (int run = 0; run < 2; ++run) {
        const auto rows = r.gate_up_alignment(run);
        ASSERT_EQ(rows.size(), r.capture_steps(run).size()) << "one row per capture step of the one block";
        for (const auto& a : rows) {
            EXPECT_EQ(a.linear, fc1);
            EXPECT_EQ(a.channels, m.linears[std::size_t(fc2)].in_features);
            EXPECT_LE(a.mean_abs_cos, a.p99_abs_cos);
            EXPECT_LE(a.p99_abs_cos, a.max_abs_cos);
            EXPECT_LE(a.max_abs_cos, 1);
            ASSERT_GE(a.top_channel, 0);
            // The leading channel's amax is fc2's input channel absmax of the same step (the
            // operand table keeps it in bfloat16: within 2^-8).
            const auto x = r.operand({run, a.step, fc2, Gemm::Fprop, Operand::X});
            ASSERT_TRUE(x);
            const double stored = x->stats.outliers.channel_absmax.at(std::size_t(a.top_channel));
            EXPECT_NEAR(a.top_down_amax, stored, std::ldexp(stored, -8));
        }
    }
    // The tiny model (width 32, lr 0.01) turns its rows within its first captures (random
    // rows of width 32 start near 0.45) and holds them: nothing grows past the reference
    // captures, so the rule has nothing to report.
    for (int run = 0; run < 2; ++run) {
        const auto rows = r.gate_up_alignment(run);
        std::vector<double> first = {rows[0].max_abs_cos, rows[1].max_abs_cos, rows[2].max_abs_cos};
        std::sort(first.begin(), first.end());
        for (const auto& a : rows) EXPECT_LT(a.max_abs_cos, 2 * first[1]) << "step " << a.step;
    }
    EXPECT_TRUE(alignment_findings(r).empty());
}

}  // namespace
