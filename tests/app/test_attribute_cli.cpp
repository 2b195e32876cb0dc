// `fp8scope-engine attribute`, run as a user would: replicas of a checkpoint's run, the
// ranking, the verified choice, the printed override, the trace and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "app/run_engine.h"
#include "attribution_table.h"
#include "engine/attribution.h"
#include "engine/model_impl.h"
#include "engine/train_config.h"

namespace fs = std::filesystem;
using fp8scope::testing::run_engine;
using json = nlohmann::json;

namespace {

// A tiny run trained under `current` with an outlier 1000x in one channel of layer 1's fc2
// input from the first step; checkpoints every 5 steps.
struct Checkpointed {
    fs::path dir = fp8scope::testing::scratch_dir("attribute_cli");
    fs::path ckpt = dir / "ck" / "step_5.ckpt";
    Checkpointed() {
        std::ofstream(dir / "run.json") << R"({
  "model": {"n_layer": 2, "d_model": 32, "n_head": 2, "max_seq": 32},
  "optimizer": {"lr": 0.01}, "schedule": {"warmup_steps": 5, "min_lr": 0.001},
  "data": {"corpus_bytes": 65536}, "eval": {"every": 0, "batches": 8},
  "steps": 30, "batch_size": 4, "seq_len": 32, "rewind": {"enabled": false},
  "inject": [{"step": 1, "layer": 1, "linear": "mlp.fc2", "operand": "x", "channels": [3], "scale": 1000}]})";
        const auto r = run_engine("train --config " + (dir / "run.json").string() + " --recipe current --threads 2 "
                                  "--checkpoint-dir " + (dir / "ck").string() + " --checkpoint-every 5 --quiet --json",
                                  dir);
        EXPECT_EQ(r.status, 0) << r.err;
        resumed = json::parse(run_engine("train --resume " + ckpt.string() + " --threads 2 --quiet --json", dir).out);
    }
    json resumed;  // the run continued from step 5
};

const Checkpointed& checkpointed() {
    static const Checkpointed c;
    return c;
}

}  // namespace

TEST(AttributeCli, RanksTheLinearsVerifiesTheChoiceAndPrintsAnOverrideThatReadsBack) {
    const auto& c = checkpointed();
    const fs::path trace = c.dir / "attr.h5";
    const auto r = run_engine("attribute --from " + c.ckpt.string() + " --recipe current --groups linear --steps 20 "
                              "--threads 2 --json --out " + trace.string(), c.dir);
    ASSERT_EQ(r.status, 0) << r.err;
    const json out = json::parse(r.out);
    EXPECT_EQ(out["start_step"], 5);
    // R's replica is the checkpoint's run continued, bit for bit.
    const json resumed = c.resumed["runs"][0]["losses"];
    ASSERT_GE(resumed.size(), 20u);
    for (int k = 0; k < 20; ++k) EXPECT_EQ(out["recipe_losses"][k], resumed[k]) << k;
    EXPECT_NE(out["baseline_losses"][0], out["recipe_losses"][0]);  // the recipes differ from step 1
    const double gap = out["baseline_gap"];
    EXPECT_GT(gap, 0.1);  // the outlier costs current per-tensor scaling
    EXPECT_DOUBLE_EQ(out["target"].get<double>(), 0.1 * gap);
    ASSERT_EQ(out["groups"].size(), 8u);
    double last = 1e9;
    for (std::size_t k = 0; k < 8; ++k) {
        const json& g = out["groups"][k];
        EXPECT_EQ(g["rank"], int(k + 1));
        EXPECT_EQ(g["kind"], "linear");
        const double rec = g["recovered"];
        EXPECT_LE(rec, last);  // ranked by recovered fraction
        last = rec;
        // The recovered fraction is the replica's eval loss against R's and the baseline's.
        EXPECT_NEAR(rec, (out["recipe_loss"].get<double>() - g["loss"].get<double>()) / gap, 1e-9);
        EXPECT_EQ(g["curve"].size(), 20u);
    }
    // The chosen set: the best ranked first, verified within the target.
    ASSERT_FALSE(out["chosen"].empty());
    EXPECT_EQ(out["chosen"][0], out["groups"][0]["group"]);
    EXPECT_TRUE(out["target_met"]);
    EXPECT_LE(out["verified_gap"].get<double>(), out["target"].get<double>());
    EXPECT_EQ(out["verifications"].back()["gap"], out["verified_gap"]);

    // The override is a config: its recipe is current with exactly the chosen linears in
    // high precision.
    using namespace fp8scope;
    const TrainConfig snippet = train_config_from_json(out["override"].dump());
    ASSERT_EQ(snippet.recipes.size(), 1u);
    EXPECT_EQ(snippet.recipes[0].name, out["override_recipe"]);
    const auto linears = model_linears(train_config_from_json(R"({"model": {"n_layer": 2, "d_model": 32, "n_head": 2}})").model);
    const PrecisionPlan plan = snippet.recipe_book().plan(snippet.recipes[0].name, linears);
    for (std::size_t l = 0; l < linears.size(); ++l) {
        bool chosen = false;
        for (const auto& name : out["chosen"]) chosen = chosen || name == linears[l].name;
        for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad})
            EXPECT_EQ(plan.recipe(int(l), g).name, chosen ? "baseline" : "current") << linears[l].name;
    }

    // The trace: the replicas as lock-step runs, and the attribution table.
    const auto rows = trace::read_attribution_table(trace.string());
    ASSERT_EQ(rows.size(), 8u);
    for (const auto& row : rows) {
        const auto it = std::find_if(out["groups"].begin(), out["groups"].end(), [&](const json& g) { return g["group"] == row.group; });
        ASSERT_NE(it, out["groups"].end()) << row.group;
        EXPECT_EQ(row.rank, (*it)["rank"]);
        EXPECT_DOUBLE_EQ(row.recovered, (*it)["recovered"].get<double>());
        bool chosen = false;
        for (const auto& name : out["chosen"]) chosen = chosen || name == row.group;
        EXPECT_EQ(row.chosen, chosen ? 1 : 0);
    }
    const auto inspect = run_engine("inspect " + trace.string(), c.dir);
    EXPECT_EQ(inspect.status, 0) << inspect.err;
    EXPECT_NE(inspect.out.find("current+hp:blocks.1.mlp.fc2"), std::string::npos) << inspect.out;
}

TEST(AttributeCli, TextOutputNamesTheChosenGroupsAndTheOverride) {
    const auto& c = checkpointed();
    const auto r = run_engine("attribute --from " + c.ckpt.string() + " --recipe current --groups gemm --steps 20 --threads 2",
                              c.dir);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("chosen: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"current_attributed\""), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("wgrad"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("replicas: step 20/20"), std::string::npos) << r.err;  // progress
}

TEST(AttributeCli, BadInputIsAClearErrorNamingTheValue) {
    const auto& c = checkpointed();
    const std::string from = " --from " + c.ckpt.string();
    auto r = run_engine("attribute --from /nonexistent/step_9.ckpt --recipe current", c.dir);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("/nonexistent/step_9.ckpt"), std::string::npos) << r.err;
    r = run_engine("attribute --from " + (c.dir / "run.json").string() + " --recipe current", c.dir);
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("run.json"), std::string::npos) << r.err;
    r = run_engine("attribute" + from + " --recipe fp3", c.dir);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("'fp3'"), std::string::npos) << r.err;
    r = run_engine("attribute" + from + " --recipe baseline", c.dir);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("already high precision"), std::string::npos) << r.err;
    r = run_engine("attribute" + from + " --recipe current --steps 0", c.dir);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("--steps 0"), std::string::npos) << r.err;
    r = run_engine("attribute" + from + " --recipe current --groups block", c.dir);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("'block'"), std::string::npos) << r.err;
}
