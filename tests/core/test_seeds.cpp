// Training with several seeds: run i of recipe r is the run a single-seed training with
// seed + i would train (initial weights, batches and stochastic rounding follow the run's
// seed), so recipes pair by seed, and the config keeps seeds out of its JSON at 1.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/trainer.h"
#include "support/cpu_engine.h"
#include "support/tiny_config.h"
#include "support/train_recorder.h"

using namespace fp8scope;
using fp8scope::testing::CpuTrainer;
using fp8scope::testing::Recorder;

namespace {

TrainConfig tiny(std::vector<std::string> compare, std::uint64_t seed, int seeds) {
    TrainConfig c = fp8scope::testing::tiny_config(6);
    c.model.n_layer = 1;
    c.threads = 2;
    c.eval.every = 3;
    c.compare = std::move(compare);
    c.seed = seed;
    c.seeds = seeds;
    return c;
}

std::vector<float> params_of(Trainer& t, int run) {
    auto p = t.model(run).params();
    return {p.begin(), p.end()};
}

struct Trained {
    std::vector<std::vector<float>> initial, losses;
};

Trained train(const TrainConfig& c) {
    CpuTrainer t(c);
    Trained out;
    for (int r = 0; r < t.runs(); ++r) out.initial.push_back(params_of(t, r));
    Recorder rec;
    t.add_observer(&rec);
    const TrainSummary s = t.run();
    EXPECT_TRUE(s.error.empty()) << s.error;
    for (int r = 0; r < t.runs(); ++r) out.losses.push_back(rec.losses(r));
    return out;
}

}  // namespace

TEST(Seeds, EveryRunIsTheSingleSeedRunOfItsSeedAndRecipesPairBySeed) {
    const Trained seeded = train(tiny({"baseline", "mxfp8"}, 11, 2));  // baseline s11, s12, mxfp8 s11, s12
    ASSERT_EQ(seeded.losses.size(), 4u);
    // The oracle: each recipe and seed trained alone.
    const Trained b11 = train(tiny({"baseline"}, 11, 1)), b12 = train(tiny({"baseline"}, 12, 1)),
                  m12 = train(tiny({"mxfp8"}, 12, 1));
    EXPECT_EQ(seeded.losses[0], b11.losses[0]);
    EXPECT_EQ(seeded.losses[1], b12.losses[0]);
    EXPECT_EQ(seeded.losses[3], m12.losses[0]);
    // Paired: one seed, one start for every recipe; seeds differ in weights and batches.
    EXPECT_EQ(seeded.initial[0], seeded.initial[2]);
    EXPECT_EQ(seeded.initial[1], seeded.initial[3]);
    EXPECT_NE(seeded.initial[0], seeded.initial[1]);
    EXPECT_NE(seeded.losses[0].front(), seeded.losses[1].front());
    // mxfp8 differs from the baseline of its seed by its casts alone: a small gap at step 1.
    EXPECT_NE(seeded.losses[2].front(), seeded.losses[0].front());
    EXPECT_NEAR(seeded.losses[2].front(), seeded.losses[0].front(), 0.02);
    EXPECT_GT(std::abs(seeded.losses[1].front() - seeded.losses[0].front()),
              std::abs(seeded.losses[2].front() - seeded.losses[0].front()));
}

TEST(Seeds, ConfigRunsAndJson) {
    TrainConfig c = tiny({"baseline", "current"}, 5, 3);
    EXPECT_EQ(c.run_recipes(),
              (std::vector<std::string>{"baseline", "baseline", "baseline", "current", "current", "current"}));
    EXPECT_EQ(c.run_seed(0), 5u);
    EXPECT_EQ(c.run_seed(4), 6u);
    EXPECT_EQ(c.run_seed(5), 7u);
    const std::string json = train_config_to_json(c);
    EXPECT_NE(json.find("\"seeds\": 3"), std::string::npos);
    EXPECT_EQ(train_config_from_json(json).seeds, 3);
    c.seeds = 1;  // as before seeds: no field
    EXPECT_EQ(train_config_to_json(c).find("seeds"), std::string::npos);
    EXPECT_EQ(train_config_from_json(train_config_to_json(c)).seeds, 1);
    EXPECT_THROW(apply_override(c, "seeds=0"), std::invalid_argument);
}

// Concurrent runs are the default and stay out of the JSON; off is written and read back.
TEST(Seeds, ConcurrentRunsSwitchInJson) {
    TrainConfig c = tiny({"baseline"}, 5, 2);
    EXPECT_TRUE(c.concurrent_runs);
    EXPECT_EQ(train_config_to_json(c).find("concurrent_runs"), std::string::npos);
    EXPECT_TRUE(train_config_from_json(train_config_to_json(c)).concurrent_runs);
    apply_override(c, "concurrent_runs=false");
    EXPECT_FALSE(c.concurrent_runs);
    const std::string json = train_config_to_json(c);
    EXPECT_NE(json.find("\"concurrent_runs\": false"), std::string::npos);
    EXPECT_FALSE(train_config_from_json(json).concurrent_runs);
    EXPECT_THROW(apply_override(c, "concurrent_runs=sometimes"), std::invalid_argument);
}

// The CPU backend has no lanes: its runs go one after another whatever the switch says,
// and a trainer with the switch off trains exactly as with it on.
TEST(Seeds, CpuRunsGoOneAfterAnotherEitherWay) {
    TrainConfig on = tiny({"baseline", "mxfp8"}, 3, 2), off = on;
    off.concurrent_runs = false;
    EXPECT_EQ(CpuBackend(2).max_lanes(), 1);
    EXPECT_EQ(train(on).losses, train(off).losses);
}
