// Precision plans: name patterns, GEMM roles, the order of overrides and the errors that
// name the field, against hand-worked expectations for a two-block model.
#include <gtest/gtest.h>

#include <stdexcept>

#include "support/error_of.h"

#include "fp8/precision_plan.h"

namespace fp8scope {
namespace {

std::vector<LinearInfo> two_blocks() {
    std::vector<LinearInfo> out;
    for (int l = 0; l < 2; ++l)
        for (const char* n : {"attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2"})
            out.push_back({"blocks." + std::to_string(l) + "." + n, l, 8, 8});
    return out;
}

using testing::error_of;

TEST(GlobMatch, StarAndQuestionMarkOverWholeNames) {
    EXPECT_TRUE(glob_match("blocks.1.*", "blocks.1.mlp.fc2"));
    EXPECT_FALSE(glob_match("blocks.1.*", "blocks.11.mlp.fc2"));
    EXPECT_TRUE(glob_match("*.fc2", "blocks.0.mlp.fc2"));
    EXPECT_FALSE(glob_match("*.fc2", "blocks.0.mlp.fc21"));
    EXPECT_TRUE(glob_match("blocks.?.attn.*", "blocks.7.attn.qkv"));
    EXPECT_FALSE(glob_match("blocks.?.attn.*", "blocks.10.attn.qkv"));
    EXPECT_TRUE(glob_match("*", ""));
    EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
    EXPECT_FALSE(glob_match("a*b*c", "aXbYbZ"));
    EXPECT_FALSE(glob_match("blocks.0.mlp.fc", "blocks.0.mlp.fc1"));  // the whole name
    EXPECT_TRUE(glob_match("**.proj", "blocks.0.attn.proj"));
}

TEST(GemmNames, ParseAndOperands) {
    EXPECT_EQ(gemm_from_name("wgrad"), Gemm::Wgrad);
    EXPECT_NE(error_of([] { gemm_from_name("bprop"); }).find("'bprop' is not a GEMM"), std::string::npos);
    EXPECT_EQ(gemm_operands(Gemm::Dgrad), std::make_pair(Operand::DY, Operand::W));
    EXPECT_EQ(operand_gemms(Operand::X), std::make_pair(Gemm::Fprop, Gemm::Wgrad));
    EXPECT_EQ(operand_gemms(Operand::W), std::make_pair(Gemm::Fprop, Gemm::Dgrad));
    EXPECT_EQ(operand_gemms(Operand::DY), std::make_pair(Gemm::Dgrad, Gemm::Wgrad));
}

TEST(PrecisionPlan, ABuiltInRecipeCoversEveryGemm) {
    const PrecisionPlan p(training_recipe("current"));
    EXPECT_EQ(p.name(), "current");
    EXPECT_FALSE(p.overridden());
    EXPECT_TRUE(p.quantized());
    for (Gemm g : {Gemm::Fprop, Gemm::Dgrad, Gemm::Wgrad}) EXPECT_EQ(p.recipe(5, g).name, "current");
    EXPECT_EQ(recipe_name(*p.quantizer(0, Gemm::Dgrad, Operand::DY)), recipe_name(*training_recipe("current").dy));
    EXPECT_FALSE(PrecisionPlan().quantized());
}

TEST(PrecisionPlan, LaterOverridesWinPerGemm) {
    CustomRecipe c{"mixed", "current",
                   {{{"blocks.1.*"}, {}, "baseline"},
                    {{"*.fc2"}, {Gemm::Wgrad}, "delayed"},
                    {{"blocks.0.attn.qkv", "blocks.1.attn.proj"}, {Gemm::Fprop, Gemm::Dgrad}, "mxfp8"}}};
    const PrecisionPlan p(c, two_blocks());
    EXPECT_EQ(p.name(), "mixed");
    EXPECT_TRUE(p.overridden());
    ASSERT_EQ(p.recipes().size(), 4u);
    EXPECT_EQ(p.base().name, "current");
    auto names = [&](int l) {
        return p.recipe(l, Gemm::Fprop).name + "," + p.recipe(l, Gemm::Dgrad).name + "," +
               p.recipe(l, Gemm::Wgrad).name;
    };
    EXPECT_EQ(names(0), "mxfp8,mxfp8,current");        // blocks.0.attn.qkv
    EXPECT_EQ(names(1), "current,current,current");    // blocks.0.attn.proj
    EXPECT_EQ(names(3), "current,current,delayed");    // blocks.0.mlp.fc2
    EXPECT_EQ(names(4), "baseline,baseline,baseline"); // blocks.1.attn.qkv
    EXPECT_EQ(names(5), "mxfp8,mxfp8,baseline");       // blocks.1.attn.proj
    EXPECT_EQ(names(7), "baseline,baseline,delayed");  // blocks.1.mlp.fc2
    EXPECT_EQ(p.quantizer(4, Gemm::Fprop, Operand::X), nullptr);
    EXPECT_EQ(recipe_name(*p.quantizer(7, Gemm::Wgrad, Operand::X)), recipe_name(*training_recipe("delayed").x));
}

TEST(PrecisionPlan, RecipesOverriddenEverywhereAreDropped) {
    CustomRecipe c{"c", "current", {{{"*"}, {}, "delayed"}, {{"*"}, {}, "baseline"}}};
    const PrecisionPlan p(c, two_blocks());
    ASSERT_EQ(p.recipes().size(), 2u);  // the base stays, delayed went
    EXPECT_EQ(p.recipes()[1].name, "baseline");
    EXPECT_FALSE(p.quantized());  // every GEMM in high precision, though the base quantizes
    // The same recipe as the base is no override.
    const PrecisionPlan same(CustomRecipe{"s", "current", {{{"*.fc1"}, {}, "current"}}}, two_blocks());
    EXPECT_FALSE(same.overridden());
}

TEST(PrecisionPlan, ErrorsNameTheField) {
    const auto lin = two_blocks();
    EXPECT_EQ(error_of([&] { PrecisionPlan(CustomRecipe{"c", "current", {{{"blocks.7.*"}, {}, "baseline"}}}, lin); }),
              "overrides[0].linears: 'blocks.7.*' matches no linear of the model (blocks.0.attn.qkv ... "
              "blocks.1.mlp.fc2)");
    EXPECT_NE(error_of([&] { PrecisionPlan(CustomRecipe{"c", "current", {{{"*"}, {}, "fp3"}}}, lin); })
                  .find("overrides[0].recipe: 'fp3' is not a built-in training recipe"),
              std::string::npos);
    EXPECT_NE(error_of([&] { PrecisionPlan(CustomRecipe{"c", "nope", {}}, lin); }).find("base: 'nope'"),
              std::string::npos);
}

TEST(RecipeBook, KnowsBuiltInAndCustomNames) {
    const RecipeBook book({CustomRecipe{"current_bf16_last", "current", {{{"blocks.1.*"}, {}, "baseline"}}}});
    EXPECT_TRUE(book.knows("delayed"));
    EXPECT_TRUE(book.knows("current_bf16_last"));
    EXPECT_FALSE(book.knows("current_bf16"));
    EXPECT_EQ(book.names().back(), "current_bf16_last");
    EXPECT_NE(error_of([&] { book.check("fp3"); }).find("unknown training recipe 'fp3' (known: baseline,"),
              std::string::npos);
    EXPECT_NE(error_of([&] { book.check("fp3"); }).find("current_bf16_last)"), std::string::npos);
    const PrecisionPlan p = book.plan("current_bf16_last", two_blocks());
    EXPECT_EQ(p.recipe(4, Gemm::Fprop).name, "baseline");
    EXPECT_EQ(p.recipe(3, Gemm::Fprop).name, "current");
    EXPECT_EQ(book.plan("mxfp8", two_blocks()).name(), "mxfp8");
    // A pattern checked against the model it is planned for.
    const auto all = two_blocks();
    const std::vector<LinearInfo> one_block(all.begin(), all.begin() + 4);
    EXPECT_EQ(error_of([&] { book.plan("current_bf16_last", one_block); }),
              "recipes.current_bf16_last.overrides[0].linears: 'blocks.1.*' matches no linear of the model "
              "(blocks.0.attn.qkv ... blocks.0.mlp.fc2)");
}

TEST(RecipeBook, RefusesClashesAndBadOverrides) {
    EXPECT_EQ(error_of([] { RecipeBook({CustomRecipe{"current", "delayed", {}}}); }),
              "recipes.current: the name is a built-in training recipe; choose another");
    EXPECT_EQ(error_of([] { RecipeBook({CustomRecipe{"a", "current", {}}, CustomRecipe{"a", "delayed", {}}}); }),
              "recipes.a: named twice");
    EXPECT_NE(error_of([] { RecipeBook({CustomRecipe{"a", "current", {{{"*"}, {}, "a"}}}}); })
                  .find("recipes.a.overrides[0].recipe: 'a' is not a built-in training recipe"),
              std::string::npos);
    EXPECT_EQ(error_of([] { RecipeBook({CustomRecipe{"a", "current", {{{}, {}, "baseline"}}}}); }),
              "recipes.a.overrides[0].linears: no pattern");
    EXPECT_EQ(error_of([] { RecipeBook({CustomRecipe{"a", "current", {{{""}, {}, "baseline"}}}}); }),
              "recipes.a.overrides[0].linears: an empty pattern");
}

}  // namespace
}  // namespace fp8scope
