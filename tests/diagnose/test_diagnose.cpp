// diagnose() on real traces the CPU engine writes: a clean lock-step run (no warning), an
// outlier injected under delayed scaling (the leading finding, at the first capture after
// its start), and the figures findings quote against the trace's own tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "app/run_engine.h"
#include "finding.h"
#include "trace_reader.h"

namespace {

using namespace fp8scope;
namespace fs = std::filesystem;

fs::path scratch() {
    static const fs::path d = fp8scope::testing::scratch_dir("fp8scope_diagnose_tests");
    return d;
}

// A tiny model, 40 steps, operands captured every 2 steps (1, 3, 5, ...).
std::string trace(const std::string& name, const std::string& args) {
    const fs::path out = scratch() / (name + ".h5");
    if (!fs::exists(out)) {
        const auto r = fp8scope::testing::run_engine("train --config " + std::string(FP8SCOPE_CONFIGS) +
                                               "/tiny.json --threads 2 --capture-every 2 --quiet --out " + out.string() +
                                               " " + args,
                                           scratch());
        EXPECT_EQ(r.status, 0) << r.err;
    }
    return out.string();
}

// Each test may run alone (ctest runs one per process): a trace is named with its arguments.
std::string clean_trace() { return trace("clean", "--compare baseline,delayed,current,mxfp8"); }
std::string injected_trace() {
    return trace("inject",
                 "--compare baseline,delayed --set rewind.enabled=false --set "
                 "'inject=[{\"step\":20,\"layer\":0,\"linear\":\"mlp.fc2\",\"operand\":\"x\",\"channels\":[3],\"scale\":1000}]'");
}

double figure(const diagnose::Finding& f, const std::string& name) {
    for (const auto& [k, v] : f.figures)
        if (k == name) return v;
    ADD_FAILURE() << f.kind << " has no figure " << name;
    return NAN;
}

TEST(Diagnose, CleanLockStepRunHasNoWarning) {
    const trace::TraceReader r(clean_trace());
    const auto found = diagnose::diagnose(r);
    for (const auto& f : found) EXPECT_EQ(f.severity, diagnose::Severity::Info) << f.kind << ": " << f.summary;
    // Without seeds every recipe's gap is reported, with its caveat.
    const auto gaps = std::count_if(found.begin(), found.end(), [](const auto& f) { return f.kind == "loss_gap"; });
    EXPECT_EQ(gaps, 3);
    for (const auto& f : found)
        if (f.kind == "loss_gap") EXPECT_NE(f.summary.find("--seeds"), std::string::npos);
    EXPECT_TRUE(std::none_of(found.begin(), found.end(), [](const auto& f) { return f.kind == "injection"; }));
}

TEST(Diagnose, InjectionUnderDelayedScalingLeads) {
    const trace::TraceReader r(injected_trace());
    const auto found = diagnose::diagnose(r);
    ASSERT_FALSE(found.empty());
    const diagnose::Finding& f = found.front();
    EXPECT_EQ(f.kind, "injection");
    EXPECT_EQ(f.severity, diagnose::Severity::Critical);
    EXPECT_EQ(r.meta().runs.at(std::size_t(f.run)).name, "delayed");
    EXPECT_EQ(r.meta().linears.at(std::size_t(f.linear)).name, "blocks.0.mlp.fc2");
    EXPECT_EQ(f.layer, 0);
    ASSERT_TRUE(f.operand);
    EXPECT_EQ(*f.operand, Operand::X);
    EXPECT_GE(f.step, 20);
    EXPECT_LT(f.step, 20 + r.meta().capture_every);
    // The figures it quotes are the operand table's: SQNR under the quantizer in use at
    // the capture before the injection and at the step named.
    const auto before = r.operand({f.run, 19, f.linear, *f.gemm, Operand::X});
    const auto at = r.operand({f.run, f.step, f.linear, *f.gemm, Operand::X});
    ASSERT_TRUE(before && at);
    EXPECT_DOUBLE_EQ(figure(f, "sqnr_before_db"), before->errors[std::size_t(before->quantizer_in_use)].sqnr_db);
    EXPECT_DOUBLE_EQ(figure(f, "sqnr_db"), at->errors[std::size_t(at->quantizer_in_use)].sqnr_db);
    EXPECT_DOUBLE_EQ(figure(f, "amax"), at->stats.amax);
    // Its fix is a recipe whose what-if keeps more SQNR on the same tensors.
    ASSERT_TRUE(f.fix);
    EXPECT_FALSE(f.fix->recipe.empty());
    EXPECT_GE(f.fix->evidence.size(), 2u);
}

TEST(Diagnose, HeadroomQuotesTheScalingTable) {
    const trace::TraceReader r(injected_trace());
    for (const auto& f : diagnose::diagnose(r)) {
        if (f.kind != "headroom") continue;
        // fp8_max / (amax * scale) of the step it names, from the per-step scaling table.
        const auto step = std::int64_t(figure(f, "min_headroom_step"));
        const auto rows = r.scaling(f.run, step, step);
        ASSERT_EQ(rows.size(), 1u);
        const int slot = trace::operand_slot(f.linear, *f.gemm, *f.operand);
        const double fp8_max = *f.operand == Operand::DY ? 57344.0 : 448.0;
        EXPECT_NEAR(figure(f, "min_headroom"), fp8_max / (double(rows[0].amax[std::size_t(slot)]) * rows[0].scale[std::size_t(slot)]),
                    1e-9 * figure(f, "min_headroom"));
        return;
    }
    FAIL() << "no headroom finding on a 1000x injection under delayed scaling";
}

TEST(Diagnose, NoInjectionNoInjectionFinding) {
    const trace::TraceReader r(clean_trace());
    for (const auto& f : diagnose::diagnose(r)) EXPECT_NE(f.kind, "injection");
}

}  // namespace
