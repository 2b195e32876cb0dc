// A config's custom recipe through the engine CLI as a user runs it: lock-step training
// with it, the trace's plan as inspect and export show it, --keep-high-precision, and
// errors that name the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "app/run_engine.h"

namespace fs = std::filesystem;

namespace {

using Result = fp8scope::testing::EngineResult;

fs::path scratch() { return fp8scope::testing::scratch_dir("fp8scope_custom_recipe_cli"); }
Result engine(const std::string& args) { return fp8scope::testing::run_engine(args, scratch()); }

fs::path write_config(const std::string& name, const std::string& text) {
    const fs::path p = scratch() / name;
    std::ofstream(p) << text;
    return p;
}

const char* kTiny = R"("model": {"n_layer": 2, "d_model": 32, "n_head": 2, "max_seq": 16}, "seq_len": 16,
  "batch_size": 4, "eval": {"every": 0, "batches": 1}, "threads": 2, "steps": 3)";

TEST(CustomRecipeCli, LockStepTraceRecordsAndShowsThePlan) {
    const fs::path cfg = write_config("plan.json", std::string("{") + kTiny + R"(,
  "recipes": {"current_bf16_last": {"base": "current", "overrides": [
     {"linears": "blocks.1.*", "recipe": "baseline"},
     {"linears": "*.fc2", "gemms": "wgrad", "recipe": "mxfp8"}]}}})");
    const fs::path trace = scratch() / "plan.h5", csv = scratch() / "plan_csv";
    Result r = engine("train --config " + cfg.string() + " --compare baseline,current_bf16_last --out " +
                      trace.string() + " --quiet");
    ASSERT_EQ(r.status, 0) << r.err;
    r = engine("inspect " + trace.string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("  override blocks.1.attn.qkv fprop+dgrad+wgrad: baseline (high precision)\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("  override blocks.0.mlp.fc2 wgrad: mxfp8\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("override blocks.0.attn"), std::string::npos) << r.out;
    r = engine("export " + trace.string() + " --csv " + csv.string());
    ASSERT_EQ(r.status, 0) << r.err;
    std::ifstream in(csv / "precision.csv");
    std::string header, line;
    std::getline(in, header);
    EXPECT_EQ(header, "run,linear,gemm,recipe,a,b,overridden");
    int rows = 0, overridden = 0;
    while (std::getline(in, line)) {
        ++rows;
        if (line.back() == '1') ++overridden;
    }
    EXPECT_EQ(rows, 2 * 8 * 3);
    EXPECT_EQ(overridden, 4 * 3 + 1);  // block 1's GEMMs and blocks.0.mlp.fc2's wgrad
}

TEST(CustomRecipeCli, KeepHighPrecisionOfTheSingleRun) {
    const fs::path cfg = write_config("tiny.json", std::string("{") + kTiny + "}");
    Result all = engine("train --config " + cfg.string() + " --recipe current --keep-high-precision '*' --json");
    Result base = engine("train --config " + cfg.string() + " --recipe baseline --json");
    ASSERT_EQ(all.status, 0) << all.err;
    ASSERT_EQ(base.status, 0) << base.err;
    auto losses = [](const std::string& out) {
        const std::size_t at = out.find("\"losses\"");
        return out.substr(at, out.find(']', at) - at);
    };
    EXPECT_NE(all.out.find("\"recipe\":\"current+hp\""), std::string::npos) << all.out;
    EXPECT_EQ(losses(all.out), losses(base.out));  // every linear in high precision: the baseline
    Result bad = engine("train --config " + cfg.string() + " --recipe current --keep-high-precision 'blocks.9.*'");
    EXPECT_EQ(bad.status, 2) << bad.err;
    EXPECT_NE(bad.err.find("'blocks.9.*' matches no linear of the model"), std::string::npos) << bad.err;
}

TEST(CustomRecipeCli, AnUnknownRecipeNamesTheCustomOnes) {
    const fs::path cfg = write_config("one.json", std::string("{") + kTiny + R"(,
  "recipes": {"mine": {"base": "current"}}})");
    Result r = engine("train --config " + cfg.string() + " --compare baseline,minee");
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.err.find("unknown training recipe 'minee'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("mine)"), std::string::npos) << r.err;
}

}  // namespace
