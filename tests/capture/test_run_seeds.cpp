// Runs of a comparison trained with several seeds: their names say recipe and seed, and a
// trace's config gives back every run's seed; one seed names and reads as before.
#include <gtest/gtest.h>

#include "engine/train_config.h"
#include "run_seeds.h"
#include "train_recorder.h"

namespace fp8scope::trace {
namespace {

TEST(RunSeeds, NamesSayRecipeAndSeed) {
    TrainConfig c;
    c.compare = {"baseline", "mxfp8"};
    c.seed = 7;
    c.seeds = 3;
    std::vector<std::string> names;
    for (int r = 0; r < 6; ++r) names.push_back(run_name(c, r));
    EXPECT_EQ(names, (std::vector<std::string>{"baseline s7", "baseline s8", "baseline s9", "mxfp8 s7", "mxfp8 s8",
                                               "mxfp8 s9"}));
    c.compare = {"baseline", "baseline"};
    EXPECT_EQ(run_name(c, 4), "baseline#1 s8");
    c.seeds = 1;  // the names of before
    EXPECT_EQ(run_name(c, 0), "baseline#0");
    EXPECT_EQ(run_name(c, 1), "baseline#1");
    c.compare = {"baseline", "mxfp8"};
    EXPECT_EQ(run_name(c, 1), "mxfp8");
}

TEST(RunSeeds, ReadFromTheTracesConfig) {
    TrainConfig c;
    c.compare = {"baseline", "current"};
    c.seed = 40;
    c.seeds = 2;
    TraceMeta m = make_trace_meta(c, {}, "test", 0);
    ASSERT_EQ(m.runs.size(), 4u);
    RunSeeds s = run_seeds(m);
    EXPECT_EQ(s.per_recipe, 2);
    EXPECT_EQ(s.seed, (std::vector<std::uint64_t>{40, 41, 40, 41}));
    EXPECT_EQ(s.recipes(), 2);
    EXPECT_EQ(s.recipe_of(3), 1);
    c.seeds = 1;
    s = run_seeds(make_trace_meta(c, {}, "test", 0));
    EXPECT_EQ(s.per_recipe, 1);
    EXPECT_TRUE(s.seed.empty());
    m.config_json = "not json";  // a damaged config: one seed
    EXPECT_EQ(run_seeds(m).per_recipe, 1);
}

}  // namespace
}  // namespace fp8scope::trace
