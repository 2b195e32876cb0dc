// Counterfactual attribution: the groups of a model, the recipes that restore them, the
// recovered fraction, the greedy choice and its verification, the printed override, and
// replicas of a checkpoint's run trained in lock step.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <unistd.h>

#include "engine/attribution.h"
#include "engine/attribution_replicas.h"
#include "engine/model_impl.h"
#include "support/cpu_engine.h"
#include "support/tiny_config.h"

using namespace fp8scope;

namespace {

const std::vector<LinearInfo>& tiny_linears() {
    static const std::vector<LinearInfo> l = model_linears(fp8scope::testing::tiny_config(1).model);
    return l;
}

// Every linear, GEMM and operand: the same quantizer (both null, or the same recipe's).
void expect_same_plan(const PrecisionPlan& a, const PrecisionPlan& b, int linears) {
    for (int l = 0; l < linears; ++l)
        for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad}) {
            EXPECT_EQ(a.recipe(l, g).name, b.recipe(l, g).name) << l << " " << gemm_name(g);
            for (Operand o : {Operand::X, Operand::W, Operand::DY})
                EXPECT_EQ(a.quantizer(l, g, o) == nullptr, b.quantizer(l, g, o) == nullptr);
        }
}

}  // namespace

TEST(Attribution, GroupsOfTheTinyModel) {
    const auto& linears = tiny_linears();  // 2 layers x qkv, proj, fc1, fc2
    ASSERT_EQ(linears.size(), 8u);
    const auto layers = attribution_groups(linears, GroupBy::Layer);
    ASSERT_EQ(layers.size(), 2u);
    EXPECT_EQ(layers[1].name, "blocks.1");
    EXPECT_EQ(layers[1].restore.linears, std::vector<std::string>{"blocks.1.*"});
    const auto each = attribution_groups(linears, GroupBy::Linear);
    ASSERT_EQ(each.size(), 8u);
    EXPECT_EQ(each[7].name, "blocks.1.mlp.fc2");
    const auto gemms = attribution_groups(linears, GroupBy::Gemm);
    ASSERT_EQ(gemms.size(), 3u);
    EXPECT_EQ(gemms[2].name, "wgrad");
    EXPECT_EQ(gemms[2].restore.gemms, std::vector<Gemm>{Gemm::Wgrad});
    EXPECT_EQ(group_by_from_name("linear"), GroupBy::Linear);
    EXPECT_THROW(group_by_from_name("block"), std::invalid_argument);
}

TEST(Attribution, RestoredRecipeKeepsTheRecipesOverridesAndPutsTheGroupsInHighPrecision) {
    const auto& linears = tiny_linears();
    const RecipeBook book({{"cur_wgrad", "current", {{{"*.mlp.*"}, {Gemm::Wgrad}, "mxfp8"}}}});
    const auto each = attribution_groups(linears, GroupBy::Linear);
    const CustomRecipe r = restored_recipe(book, "cur_wgrad", {each[3], each[7]}, "x");
    EXPECT_EQ(r.base, "current");
    ASSERT_EQ(r.overrides.size(), 2u);  // its own, then the two linears merged in one
    EXPECT_EQ(r.overrides[1].linears, (std::vector<std::string>{"blocks.0.mlp.fc2", "blocks.1.mlp.fc2"}));
    const PrecisionPlan plan = RecipeBook({r}).plan("x", linears);
    EXPECT_EQ(plan.recipe(7, Gemm::Fprop).name, "baseline");
    EXPECT_EQ(plan.recipe(6, Gemm::Wgrad).name, "mxfp8");   // fc1: the recipe's own override
    EXPECT_EQ(plan.recipe(6, Gemm::Fprop).name, "current");
    // Two GEMM roles merge into one override; all three say nothing.
    const auto gemms = attribution_groups(linears, GroupBy::Gemm);
    const CustomRecipe two = restored_recipe(book, "current", {gemms[2], gemms[0]}, "y");
    ASSERT_EQ(two.overrides.size(), 1u);
    EXPECT_EQ(two.overrides[0].gemms, (std::vector<Gemm>{Gemm::Wgrad, Gemm::Fprop}));
    const CustomRecipe all = restored_recipe(book, "current", gemms, "z");
    EXPECT_TRUE(all.overrides[0].gemms.empty());
    EXPECT_FALSE(RecipeBook({all}).plan("z", linears).quantized());
    EXPECT_THROW(restored_recipe(book, "nope", {}, "w"), std::invalid_argument);
}

TEST(Attribution, PrintedOverrideReadsBackAsAConfigWithTheSamePlan) {
    const auto& linears = tiny_linears();
    const RecipeBook book;
    const auto each = attribution_groups(linears, GroupBy::Linear);
    const CustomRecipe r = restored_recipe(book, "nvfp4:sr=0", {each[5], each[1]}, "nvfp4_sr_0_attributed");
    const std::string snippet = override_snippet(r, 2);
    // The snippet is a config of its own (with the tiny model, so its patterns match).
    TrainConfig c = train_config_from_json(snippet);
    c.model = fp8scope::testing::tiny_config(1).model;
    c.seq_len = 32;
    ASSERT_NO_THROW(c.validate());
    ASSERT_EQ(c.recipes.size(), 1u);
    EXPECT_EQ(c.recipes[0].name, r.name);
    expect_same_plan(c.recipe_book().plan(r.name, linears), RecipeBook({r}).plan(r.name, linears), 8);
    EXPECT_EQ(c.recipe_book().plan(r.name, linears).recipe(5, Gemm::Dgrad).name, "baseline");
    EXPECT_EQ(c.recipe_book().plan(r.name, linears).recipe(4, Gemm::Dgrad).name, "nvfp4:sr=0");
}

TEST(Attribution, RecoveredFractionAndRanking) {
    EXPECT_DOUBLE_EQ(recovered_fraction(3.5, 3.0, 3.0), 1.0);
    EXPECT_DOUBLE_EQ(recovered_fraction(3.5, 3.5, 3.0), 0.0);
    EXPECT_DOUBLE_EQ(recovered_fraction(3.5, 3.375, 3.0), 0.25);
    EXPECT_DOUBLE_EQ(recovered_fraction(3.5, 3.75, 3.0), -0.5);  // worse than R
    EXPECT_TRUE(std::isnan(recovered_fraction(3.0, 3.1, 3.0)));
    const std::vector<double> rec = {0.1, std::nan(""), 0.6, 0.1, 0.3};
    EXPECT_EQ(rank_groups(rec), (std::vector<int>{2, 4, 0, 3, 1}));
    // gap 1, target 0.15: 0.6 leaves 0.4, + 0.3 leaves 0.1: two groups.
    EXPECT_EQ(greedy_count(rec, rank_groups(rec), 1.0, 0.15), 2u);
    EXPECT_EQ(greedy_count(rec, rank_groups(rec), 1.0, 0.5), 1u);
    EXPECT_EQ(greedy_count(rec, rank_groups(rec), 1.0, 0.0), 4u);  // 1.1 recovered by four
    const std::vector<double> little = {0.2, 0.1};
    EXPECT_EQ(greedy_count(little, rank_groups(little), 1.0, 0.5), 2u);  // never there: all
}

TEST(Attribution, SelectionAddsTheNextGroupUntilTheVerifiedGapMeetsTheTarget) {
    const std::vector<double> rec = {0.5, 0.45, 0.2, 0.1, 0.05};
    const std::vector<int> ranking = rank_groups(rec);
    // Measured gaps of sets of 2, 3, 4 groups (the groups do not add up).
    std::vector<std::size_t> sizes;
    const auto measure = [&](const std::vector<int>& set) {
        sizes.push_back(set.size());
        return set.size() == 2 ? 0.3 : set.size() == 3 ? 0.15 : 0.05;
    };
    const Selection s = select_groups(rec, ranking, 1.0, 0.1, 4, measure);
    EXPECT_EQ(sizes, (std::vector<std::size_t>{2, 3, 4}));
    EXPECT_TRUE(s.met);
    EXPECT_EQ(s.chosen, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_DOUBLE_EQ(s.verified_gap, 0.05);
    // Bounded: two verifications, still missing.
    sizes.clear();
    const Selection bounded = select_groups(rec, ranking, 1.0, 0.01, 2, measure);
    EXPECT_EQ(sizes, (std::vector<std::size_t>{3, 4}));  // 0.5 + 0.45 + 0.2 pass 0.99
    EXPECT_FALSE(bounded.met);
    EXPECT_EQ(bounded.attempts.size(), 2u);
}

namespace {

// A checkpoint of the tiny run after 4 steps under `recipe`.
ReplicaSource tiny_checkpoint(const std::string& recipe, const std::filesystem::path& dir) {
    TrainConfig c = fp8scope::testing::tiny_config(8, recipe);
    c.checkpoint.dir = dir.string();
    c.checkpoint.every = 4;
    c.rewind.enabled = false;
    fp8scope::testing::CpuTrainer t(c);
    t.run();
    return load_replica_source((dir / "step_4.ckpt").string(), recipe);
}

// The training losses of the checkpoint's run resumed as `train --resume` resumes it.
std::vector<float> resumed_losses(const ReplicaSource& src) {
    TrainConfig resumed = src.config;
    resumed.checkpoint = {};
    resumed.checkpoint.resume = src.path;
    fp8scope::testing::CpuTrainer t(resumed);
    struct Keep : TrainObserver {
        std::vector<float> losses;
        void on_step(const StepRecord& r) override { losses.push_back(r.loss); }
    } keep;
    t.add_observer(&keep);
    t.run();
    return keep.losses;
}

}  // namespace

TEST(AttributionReplicas, StartFromTheCheckpointAndRestoringEveryGroupIsTheBaselineBitForBit) {
    const auto dir = std::filesystem::temp_directory_path() / ("attr_core_" + std::to_string(::getpid()));
    const ReplicaSource src = tiny_checkpoint("delayed", dir);
    EXPECT_EQ(src.state.step, 4);
    const RecipeBook book = src.config.recipe_book();
    const auto groups = attribution_groups(tiny_linears(), GroupBy::Layer);
    const CustomRecipe all = restored_recipe(book, "delayed", groups, "delayed+hp:all");
    const CustomRecipe none = restored_recipe(book, "delayed", {}, "delayed+hp:none");
    const TrainConfig c = replica_config(src, {"baseline", "delayed", all.name, none.name}, {all, none}, 4);
    EXPECT_EQ(c.steps, 8);  // the checkpoint's schedule
    CpuBackend cpu(1);
    Replicas replicas(src, c, cpu);
    const ReplicaLosses l = replicas.train(4);
    ASSERT_EQ(l.train[0].size(), 4u);
    EXPECT_EQ(l.train[2], l.train[0]);  // every group restored: the baseline, bit for bit
    EXPECT_EQ(l.eval[2], l.eval[0]);
    EXPECT_EQ(l.train[3], l.train[1]);  // nothing restored: R, histories and all
    EXPECT_NE(l.train[1], l.train[0]);

    EXPECT_EQ(resumed_losses(src), l.train[1]);  // R's replica: the checkpoint's run continued
    std::filesystem::remove_all(dir);
}

TEST(AttributionReplicas, TheBaselineReplicaOfABaselineCheckpointIsTheResumedRun) {
    const auto dir = std::filesystem::temp_directory_path() / ("attr_core_b_" + std::to_string(::getpid()));
    const ReplicaSource src = tiny_checkpoint("baseline", dir);
    const TrainConfig c = replica_config(src, {"baseline", "mxfp8"}, {}, 4);
    CpuBackend cpu(1);
    Replicas replicas(src, c, cpu);
    const ReplicaLosses l = replicas.train(4);
    EXPECT_EQ(resumed_losses(src), l.train[0]);
    EXPECT_NE(l.train[1][0], l.train[0][0]);
    std::filesystem::remove_all(dir);
}

TEST(AttributionReplicas, AMissingOrDamagedCheckpointIsAnErrorNamingTheFile) {
    EXPECT_THROW(
        {
            try {
                load_replica_source("/nonexistent/step_3.ckpt", "current");
            } catch (const std::runtime_error& e) {
                EXPECT_NE(std::string(e.what()).find("/nonexistent/step_3.ckpt"), std::string::npos) << e.what();
                throw;
            }
        },
        std::runtime_error);
}
