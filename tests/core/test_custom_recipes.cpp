// Custom recipes in a config: the JSON and --set forms, the errors that name the field,
// and lock-step training where a custom recipe that keeps every linear in high precision
// trains exactly as the baseline and one that keeps a single block does not.
#include <gtest/gtest.h>

#include <stdexcept>

#include "support/error_of.h"

#include "engine/train_config.h"
#include "support/cpu_engine.h"
#include "support/tiny_config.h"
#include "support/train_recorder.h"

namespace fp8scope {
namespace {

using testing::error_of;

const char* kConfig = R"({"compare": "baseline,current,current_bf16_last",
  "model": {"n_layer": 2},
  "recipes": {"current_bf16_last": {"base": "current", "overrides": [
     {"linears": "blocks.1.*", "recipe": "baseline"},
     {"linears": ["*.fc2", "blocks.0.attn.qkv"], "gemms": ["wgrad", "dgrad"], "recipe": "delayed"}]}}})";

TEST(CustomRecipes, ReadWriteAndReadBack) {
    const TrainConfig c = train_config_from_json(kConfig);
    ASSERT_EQ(c.recipes.size(), 1u);
    const CustomRecipe& r = c.recipes[0];
    EXPECT_EQ(r.name, "current_bf16_last");
    EXPECT_EQ(r.base, "current");
    ASSERT_EQ(r.overrides.size(), 2u);
    EXPECT_EQ(r.overrides[0].linears, std::vector<std::string>{"blocks.1.*"});
    EXPECT_TRUE(r.overrides[0].gemms.empty());
    EXPECT_EQ(r.overrides[1].linears, (std::vector<std::string>{"*.fc2", "blocks.0.attn.qkv"}));
    EXPECT_EQ(r.overrides[1].gemms, (std::vector<Gemm>{Gemm::Wgrad, Gemm::Dgrad}));
    EXPECT_EQ(r.overrides[1].recipe, "delayed");
    const TrainConfig back = train_config_from_json(train_config_to_json(c));
    EXPECT_FALSE(first_difference(c, back).has_value());
    EXPECT_EQ(c.recipe_book().names().back(), "current_bf16_last");
    // And through --set, as JSON.
    TrainConfig s;
    apply_overrides(s, {R"(recipes={"hp": {"base": "mxfp8", "overrides": [{"linears": "*", "recipe": "baseline"}]}})",
                        "recipe=hp"});
    EXPECT_EQ(s.recipe, "hp");
    EXPECT_EQ(s.recipes.at(0).base, "mxfp8");
}

TEST(CustomRecipes, ErrorsNameTheField) {
    auto load = [](const std::string& recipes, const std::string& run = "x") {
        return error_of([&] {
            train_config_from_json(R"({"model": {"n_layer": 2}, "recipe": ")" + run + R"(", "recipes": )" + recipes + "}");
        });
    };
    EXPECT_EQ(load(R"({"x": {"base": "current", "overrides": [{"linears": "blocks.7.*", "recipe": "baseline"}]}})"),
              "recipes.x.overrides[0].linears: 'blocks.7.*' matches no linear of the model (blocks.0.attn.qkv ... "
              "blocks.1.mlp.fc2)");
    EXPECT_NE(load(R"({"x": {"base": "current", "overrides": [{"linears": "*", "recipe": "fp2"}]}})")
                  .find("recipes.x.overrides[0].recipe: 'fp2' is not a built-in training recipe"),
              std::string::npos);
    EXPECT_EQ(load(R"({"x": {"base": "current", "overrides": [{"linears": "*", "gemms": ["bgrad"], "recipe": "baseline"}]}})"),
              "field 'recipes.x.overrides[0].gemms': 'bgrad' is not a GEMM (fprop, dgrad, wgrad)");
    EXPECT_EQ(load(R"({"current": {"base": "delayed"}})", "current"),
              "recipes.current: the name is a built-in training recipe; choose another");
    EXPECT_EQ(load(R"({"x": {"base": "current", "overrides": [{"linears": "*", "recipe": "baseline", "role": 1}]}})"),
              "unknown field 'recipes.x.overrides[0].role'");
    EXPECT_EQ(load(R"({"x": {"overrides": []}})"), "field 'recipes.x.base': expected a recipe name, got null");
    EXPECT_NE(load(R"({"x": {"base": "current"}})", "y").find("recipe: unknown training recipe 'y' (known: baseline,"),
              std::string::npos);
}

TEST(CustomRecipes, LockStepRunsFollowTheirPlans) {
    TrainConfig c = testing::tiny_config(6);
    c.threads = 2;
    c.model.n_layer = 2;
    c.recipes = {{"all_hp", "current", {{{"*"}, {}, "baseline"}}},
                 {"last_hp", "current", {{{"blocks.1.*"}, {}, "baseline"}}}};
    c.compare = {"baseline", "current", "all_hp", "last_hp"};
    testing::CpuTrainer t(c);
    testing::Recorder rec;
    t.add_observer(&rec);
    const TrainSummary s = t.run();
    ASSERT_TRUE(s.error.empty()) << s.error;
    EXPECT_EQ(s.runs[2].recipe, "all_hp");
    EXPECT_EQ(rec.losses(2), rec.losses(0));  // every GEMM unquantized: the baseline, bit for bit
    EXPECT_NE(rec.losses(3), rec.losses(0));
    EXPECT_NE(rec.losses(3), rec.losses(1));
    EXPECT_EQ(t.model(3).plan().recipe(4, Gemm::Fprop).name, "baseline");
    EXPECT_EQ(t.model(3).plan().recipe(3, Gemm::Wgrad).name, "current");
    // A live switch takes a custom name too, and refuses an unknown one at once.
    EXPECT_THROW(t.switch_recipe(1, "no_such"), std::invalid_argument);
    EXPECT_NO_THROW(t.switch_recipe(1, "last_hp"));
}

}  // namespace
}  // namespace fp8scope
