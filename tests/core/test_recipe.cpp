// Recipe names: canonical names round-trip, parameters parse to the exact values the
// name spells, and every malformed name fails with a message naming the bad part.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "fp8/recipe.h"
#include "fp8/training_recipe.h"

using namespace fp8scope;

namespace {

// The message of the std::invalid_argument that parsing `name` throws ("" if none).
std::string parse_error(const std::string& name) {
    try {
        parse_recipe(name);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

std::string list_error(const std::string& list) {
    try {
        parse_recipe_list(list);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

// The error must exist and contain every fragment.
void expect_error(const std::string& message, const std::vector<std::string>& fragments) {
    ASSERT_FALSE(message.empty()) << "no error";
    for (const std::string& f : fragments) EXPECT_NE(message.find(f), std::string::npos) << message << " lacks " << f;
}

}  // namespace

TEST(Recipe, DefaultAnalysisRecipesInOrder) {
    const std::vector<std::string> expected = {
        "current_e4m3",      "current_e4m3_pow2", "current_e5m2",     "block1x128_fp32",
        "block1x128_pow2",   "block128x128_fp32", "block128x128_pow2", "mxfp8_e4m3_floor",
        "mxfp8_e4m3_rceil",  "mxfp8_e5m2_floor",  "mxfp8_e5m2_rceil"};
    const std::vector<Recipe> got = default_analysis_recipes();
    ASSERT_EQ(got.size(), expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(recipe_name(got[i]), expected[i]);
        EXPECT_EQ(recipe_name(parse_recipe(expected[i])), expected[i]);
    }
}

TEST(Recipe, CurrentParametersParse) {
    struct Case { const char* name; Format format; bool pow2; float eps; };
    const Case cases[] = {
        {"current_e4m3", Format::E4M3, false, 0.0f},
        {"current_e4m3_pow2", Format::E4M3, true, 0.0f},
        {"current_e5m2", Format::E5M2, false, 0.0f},
        {"current_e5m2_pow2", Format::E5M2, true, 0.0f},
        {"current_e4m3:eps=1e-12", Format::E4M3, false, 1e-12f},
        {"current_e5m2_pow2:eps=0.5", Format::E5M2, true, 0.5f},
        {"current_e4m3_pow2:eps=3", Format::E4M3, true, 3.0f},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const Recipe r = parse_recipe(c.name);
        ASSERT_TRUE(std::holds_alternative<CurrentScaling>(r));
        const auto& s = std::get<CurrentScaling>(r);
        EXPECT_EQ(s.format, c.format);
        EXPECT_EQ(s.pow2, c.pow2);
        EXPECT_EQ(s.eps, c.eps);
        EXPECT_EQ(recipe_format(r), c.format);
        EXPECT_EQ(recipe_name(r), c.name);
    }
}

TEST(Recipe, CurrentEpsZeroIsNotWritten) {
    EXPECT_EQ(recipe_name(CurrentScaling{Format::E5M2, 0.0f, true}), "current_e5m2_pow2");
    EXPECT_EQ(recipe_name(parse_recipe("current_e4m3:eps=0")), "current_e4m3");
    EXPECT_EQ(recipe_name(CurrentScaling{Format::E4M3, 0.25f, false}), "current_e4m3:eps=0.25");
}

TEST(Recipe, DelayedGridRoundTrips) {
    // Every combination of defaults and non-defaults, options always in the fixed order.
    for (Format f : {Format::E4M3, Format::E5M2}) {
        for (int history : {1024, 1, 16, 1000000}) {
            for (AmaxAlgo algo : {AmaxAlgo::Max, AmaxAlgo::MostRecent}) {
                for (int margin : {0, 1, -3, 7}) {
                    std::string name = f == Format::E4M3 ? "delayed_e4m3" : "delayed_e5m2";
                    if (history != 1024) name += ":history=" + std::to_string(history);
                    if (algo == AmaxAlgo::MostRecent) name += ":algo=most_recent";
                    if (margin != 0) name += ":margin=" + std::to_string(margin);
                    SCOPED_TRACE(name);
                    const Recipe r = parse_recipe(name);
                    ASSERT_TRUE(std::holds_alternative<DelayedScaling>(r));
                    const auto& d = std::get<DelayedScaling>(r);
                    EXPECT_EQ(d.format, f);
                    EXPECT_EQ(d.history, history);
                    EXPECT_EQ(d.algo, algo);
                    EXPECT_EQ(d.margin, margin);
                    EXPECT_EQ(recipe_format(r), f);
                    EXPECT_EQ(recipe_name(r), name);
                    EXPECT_EQ(recipe_name(DelayedScaling{f, history, algo, margin}), name);
                }
            }
        }
    }
}

TEST(Recipe, OptionsInAnyOrderAndExplicitDefaultsNormalise) {
    EXPECT_EQ(recipe_name(parse_recipe("delayed_e4m3:margin=2:algo=most_recent:history=8")),
              "delayed_e4m3:history=8:algo=most_recent:margin=2");
    EXPECT_EQ(recipe_name(parse_recipe("delayed_e5m2:history=1024:algo=max:margin=0")), "delayed_e5m2");
    EXPECT_EQ(recipe_name(parse_recipe("block1x128_fp32:format=e4m3")), "block1x128_fp32");
    EXPECT_EQ(recipe_name(parse_recipe("mxfp8_e4m3_rceil:block=32")), "mxfp8_e4m3_rceil");
}

TEST(Recipe, BlockGridRoundTrips) {
    for (int rows : {1, 16, 128, 300}) {
        for (int cols : {1, 32, 128, 1000}) {
            for (bool pow2 : {false, true}) {
                for (Format f : {Format::E4M3, Format::E5M2}) {
                    std::string name = "block" + std::to_string(rows) + "x" + std::to_string(cols) +
                                       (pow2 ? "_pow2" : "_fp32");
                    if (f == Format::E5M2) name += ":format=e5m2";
                    SCOPED_TRACE(name);
                    const Recipe r = parse_recipe(name);
                    ASSERT_TRUE(std::holds_alternative<BlockScaling>(r));
                    const auto& b = std::get<BlockScaling>(r);
                    EXPECT_EQ(b.block_rows, rows);
                    EXPECT_EQ(b.block_cols, cols);
                    EXPECT_EQ(b.pow2, pow2);
                    EXPECT_EQ(b.format, f);
                    EXPECT_EQ(recipe_format(r), f);
                    EXPECT_EQ(recipe_name(r), name);
                }
            }
        }
    }
}

TEST(Recipe, MXGridRoundTrips) {
    for (Format f : {Format::E4M3, Format::E5M2}) {
        for (MXRule rule : {MXRule::Floor, MXRule::RCeil}) {
            for (int block : {32, 1, 16, 64}) {
                std::string name = std::string("mxfp8_") + (f == Format::E4M3 ? "e4m3" : "e5m2") +
                                   (rule == MXRule::Floor ? "_floor" : "_rceil");
                if (block != 32) name += ":block=" + std::to_string(block);
                SCOPED_TRACE(name);
                const Recipe r = parse_recipe(name);
                ASSERT_TRUE(std::holds_alternative<MXScaling>(r));
                const auto& m = std::get<MXScaling>(r);
                EXPECT_EQ(m.format, f);
                EXPECT_EQ(m.rule, rule);
                EXPECT_EQ(m.block, block);
                EXPECT_EQ(recipe_format(r), f);
                EXPECT_EQ(recipe_name(r), name);
            }
        }
    }
}

TEST(Recipe, UnknownRecipeListsKnownNames) {
    for (const char* bad : {"foo", "current_e4m2", "current_fp8", "delayed_e4m3_pow2", "mxfp8_e4m3",
                            "mxfp8_e4m3_round", "mxfp8_e3m4_floor", "Current_e4m3", "all"}) {
        SCOPED_TRACE(bad);
        const std::string base = std::string(bad);
        expect_error(parse_error(bad), {"unknown quantizer '" + base + "'", "known:", "current_e4m3",
                                        "delayed_e4m3", "block<R>x<C>_fp32", "mxfp8_e5m2_rceil"});
    }
    expect_error(parse_error(""), {"empty quantizer name"});
}

TEST(Recipe, DelayedErrorsNameTheBadPart) {
    expect_error(parse_error("delayed_e4m3:history=0"), {"delayed_e4m3: history must be 1..1000000, got '0'"});
    expect_error(parse_error("delayed_e4m3:history=1000001"), {"history must be 1..1000000, got '1000001'"});
    expect_error(parse_error("delayed_e5m2:history=-5"), {"delayed_e5m2:", "history", "'-5'"});
    expect_error(parse_error("delayed_e4m3:history=abc"), {"history must be an integer, got 'abc'"});
    expect_error(parse_error("delayed_e4m3:history=16x"), {"history must be an integer, got '16x'"});
    expect_error(parse_error("delayed_e4m3:history=99999999999999999999"), {"history", "'99999999999999999999'"});
    expect_error(parse_error("delayed_e4m3:margin=1.5"), {"margin must be an integer, got '1.5'"});
    expect_error(parse_error("delayed_e4m3:margin=3000000000"), {"margin", "'3000000000'"});
    expect_error(parse_error("delayed_e4m3:algo=mean"), {"algo must be max or most_recent, got 'mean'"});
    expect_error(parse_error("delayed_e4m3:window=4"),
                 {"delayed_e4m3: unknown option 'window'", "history", "algo", "margin"});
    expect_error(parse_error("delayed_e4m3:margin=1:margin=2"), {"option 'margin' given more than once"});
    expect_error(parse_error("delayed_e4m3:history"), {"option 'history' needs a value"});
    expect_error(parse_error("delayed_e4m3:history="), {"option 'history' has an empty value"});
    expect_error(parse_error("delayed_e4m3:"), {"delayed_e4m3:", "empty option"});
    expect_error(parse_error("delayed_e4m3::history=4"), {"empty option"});
}

TEST(Recipe, CurrentErrorsNameTheBadPart) {
    expect_error(parse_error("current_e4m3:eps=-1"), {"current_e4m3: eps must be a finite number >= 0, got '-1'"});
    expect_error(parse_error("current_e4m3:eps=inf"), {"eps", "'inf'"});
    expect_error(parse_error("current_e4m3:eps=nan"), {"eps", "'nan'"});
    expect_error(parse_error("current_e4m3:eps=1e-3x"), {"eps", "'1e-3x'"});
    expect_error(parse_error("current_e5m2_pow2:history=3"), {"current_e5m2_pow2: unknown option 'history'", "eps"});
    expect_error(parse_error("current_e4m3:eps=1:eps=2"), {"option 'eps' given more than once"});
}

TEST(Recipe, BlockErrorsNameTheBadPart) {
    expect_error(parse_error("block0x128_fp32"), {"block0x128_fp32: block rows", "'0'"});
    expect_error(parse_error("block1x0_pow2"), {"block cols", "'0'"});
    expect_error(parse_error("blockAx128_fp32"), {"block rows", "'A'"});
    expect_error(parse_error("block-1x128_fp32"), {"block rows", "'-1'"});
    expect_error(parse_error("block01x128_fp32"), {"leading zeros", "'01'"});
    expect_error(parse_error("block1x128_fp16"), {"scale type must be fp32 or pow2, got 'fp16'"});
    expect_error(parse_error("block1x128"), {"block1x128:", "block<R>x<C>_fp32"});
    expect_error(parse_error("block128_fp32"), {"block<R>x<C>_fp32"});
    expect_error(parse_error("block1x128_fp32:format=e3m4"), {"format must be e4m3 or e5m2, got 'e3m4'"});
    expect_error(parse_error("block1x128_fp32:pow2=1"), {"unknown option 'pow2'", "format"});
}

TEST(Recipe, MXErrorsNameTheBadPart) {
    expect_error(parse_error("mxfp8_e4m3_floor:block=0"), {"mxfp8_e4m3_floor: block", "'0'"});
    expect_error(parse_error("mxfp8_e4m3_floor:block=x"), {"block must be an integer, got 'x'"});
    expect_error(parse_error("mxfp8_e5m2_rceil:rule=floor"), {"unknown option 'rule'", "block"});
}

TEST(RecipeList, ParsesTrimsAndKeepsOrder) {
    const std::vector<Recipe> r = parse_recipe_list(" delayed_e4m3:margin=1 ,\tblock1x128_pow2,mxfp8_e5m2_floor ");
    ASSERT_EQ(r.size(), 3u);
    EXPECT_EQ(recipe_name(r[0]), "delayed_e4m3:margin=1");
    EXPECT_EQ(recipe_name(r[1]), "block1x128_pow2");
    EXPECT_EQ(recipe_name(r[2]), "mxfp8_e5m2_floor");
    EXPECT_EQ(std::get<DelayedScaling>(r[0]).margin, 1);
}

TEST(RecipeList, AllExpandsToTheDefaultsThenTheFP4Quantizers) {
    const std::vector<Recipe> defaults = default_analysis_recipes();
    const std::vector<Recipe> all = parse_recipe_list("all");
    ASSERT_EQ(all.size(), 15u);
    for (std::size_t i = 0; i < defaults.size(); ++i) EXPECT_EQ(recipe_name(all[i]), recipe_name(defaults[i]));
    const std::vector<std::string> fp4 = {"nvfp4", "nvfp4_2d", "mxfp4_floor", "mxfp4_rceil"};
    for (std::size_t i = 0; i < fp4.size(); ++i) EXPECT_EQ(recipe_name(all[11 + i]), fp4[i]);

    // Mixed with others, "all" expands in place.
    const std::vector<Recipe> mixed = parse_recipe_list("delayed_e5m2, all ,current_e5m2_pow2");
    ASSERT_EQ(mixed.size(), 17u);
    EXPECT_EQ(recipe_name(mixed.front()), "delayed_e5m2");
    EXPECT_EQ(recipe_name(mixed[1]), "current_e4m3");
    EXPECT_EQ(recipe_name(mixed[11]), "mxfp8_e5m2_rceil");
    EXPECT_EQ(recipe_name(mixed[15]), "mxfp4_rceil");
    EXPECT_EQ(recipe_name(mixed.back()), "current_e5m2_pow2");
}

TEST(Recipe, FP4NamesRoundTripWithTheirRhtAndSrOptions) {
    const Recipe nv = parse_recipe("nvfp4"), nv2 = parse_recipe("nvfp4_2d");
    const Recipe floor = parse_recipe("mxfp4_floor"), rceil = parse_recipe("mxfp4_rceil");
    EXPECT_FALSE(std::get<NVFP4Scaling>(nv).two_d);
    EXPECT_TRUE(std::get<NVFP4Scaling>(nv2).two_d);
    EXPECT_EQ(std::get<MXFP4Scaling>(floor).rule, MXRule::Floor);
    EXPECT_EQ(std::get<MXFP4Scaling>(rceil).rule, MXRule::RCeil);
    for (const Recipe& r : {nv, nv2, floor, rceil}) {
        EXPECT_TRUE(is_fp4(r));
        EXPECT_EQ(recipe_name(parse_recipe(recipe_name(r))), recipe_name(r));
        expect_error([&] {
            try {
                recipe_format(r);
            } catch (const std::invalid_argument& e) {
                return std::string(e.what());
            }
            return std::string();
        }(), {recipe_name(r), "FP4"});
    }
    for (const Recipe& r : default_analysis_recipes()) EXPECT_FALSE(is_fp4(r));
    const Recipe both = parse_recipe("nvfp4:rht=1:sr=1"), sr2d = parse_recipe("nvfp4_2d:sr=1:rht=0");
    EXPECT_TRUE(std::get<NVFP4Scaling>(both).rht);
    EXPECT_TRUE(std::get<NVFP4Scaling>(both).sr);
    EXPECT_FALSE(std::get<NVFP4Scaling>(both).two_d);
    EXPECT_EQ(recipe_name(both), "nvfp4:rht=1:sr=1");
    EXPECT_EQ(recipe_name(sr2d), "nvfp4_2d:sr=1");  // defaults are not written
    const Recipe mx = parse_recipe("mxfp4_floor:rht=1");
    EXPECT_TRUE(std::get<MXFP4Scaling>(mx).rht);
    EXPECT_FALSE(std::get<MXFP4Scaling>(mx).sr);
    EXPECT_EQ(std::get<MXFP4Scaling>(mx).rule, MXRule::Floor);
    EXPECT_EQ(recipe_name(mx), "mxfp4_floor:rht=1");
    expect_error(parse_error("nvfp4:block=32"), {"nvfp4: unknown option 'block'", "known: rht, sr"});
    expect_error(parse_error("nvfp4:rht=2"), {"nvfp4: rht must be 0 or 1, got '2'"});
    expect_error(parse_error("mxfp4_rceil:sr=yes"), {"mxfp4_rceil: sr must be an integer, got 'yes'"});
    expect_error(parse_error("nvfp4:sr=1:sr=0"), {"nvfp4", "sr"});
    expect_error(parse_error("mxfp4_rceil:block=16"), {"mxfp4_rceil: unknown option 'block'"});
    for (const char* bad : {"nvfp4_1d", "nvfp4_3d", "mxfp4", "mxfp4_round", "NVFP4"}) {
        expect_error(parse_error(bad), {"unknown quantizer '" + std::string(bad) + "'", "nvfp4_2d", "mxfp4_rceil"});
    }
}

TEST(RecipeList, EmptyItemsAreErrors) {
    expect_error(list_error(""), {"item 1 is empty"});
    expect_error(list_error("   "), {"item 1 is empty"});
    expect_error(list_error("current_e4m3,,block1x128_fp32"), {"item 2 is empty"});
    expect_error(list_error("current_e4m3, "), {"item 2 is empty"});
    expect_error(list_error(",current_e4m3"), {"item 1 is empty"});
}

TEST(RecipeList, DuplicatesAreErrors) {
    expect_error(list_error("current_e4m3,block1x128_fp32,current_e4m3"), {"duplicate quantizer 'current_e4m3'"});
    // Same recipe spelled two ways is still a duplicate.
    expect_error(list_error("delayed_e4m3,delayed_e4m3:history=1024"),
                 {"duplicate quantizer 'delayed_e4m3'", "'delayed_e4m3:history=1024'"});
    expect_error(list_error("all,mxfp8_e4m3_rceil"), {"duplicate quantizer 'mxfp8_e4m3_rceil'", "'all'"});
    expect_error(list_error("all,all"), {"duplicate quantizer 'current_e4m3'"});
    // Different options are different recipes.
    EXPECT_EQ(parse_recipe_list("delayed_e4m3,delayed_e4m3:margin=1").size(), 2u);
}

TEST(RecipeList, BadNameInListIsReported) {
    expect_error(list_error("current_e4m3, nope"), {"unknown quantizer 'nope'"});
}

namespace fp8scope {
namespace {

// The baseline's role: a recipe quantizes nothing when none of its operands has a
// quantizer. Of the named recipes only baseline; an unknown name is not taken for one.
TEST(TrainingRecipe, OnlyTheUnquantizedRecipeQuantizesNothing) {
    for (const std::string& name : training_recipe_names()) {
        const TrainingRecipe r = training_recipe(name);
        EXPECT_EQ(quantizes_nothing(name), !r.x && !r.w && !r.dy) << name;
    }
    EXPECT_TRUE(quantizes_nothing("baseline"));
    EXPECT_FALSE(quantizes_nothing("delayed"));
    EXPECT_FALSE(quantizes_nothing("fp32_reference"));
    EXPECT_FALSE(quantizes_nothing(""));
}

}  // namespace
}  // namespace fp8scope
