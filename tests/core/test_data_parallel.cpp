// Data-parallel training on CPU ranks (threads of this process over loopback TCP): two
// ranks train as one process with twice the batch does, stay identical to each other
// (parameters and delayed-scaling histories bit for bit), stop together, and the in-flight
// check names an injected slow rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/cpu_engine.h"
#include "support/data_parallel_job.h"
#include "support/error_of.h"
#include "support/tiny_config.h"
#include "support/train_recorder.h"

namespace fp8scope {
namespace {

using testing::Rank;
using testing::Recorder;
using testing::run_job;
using testing::tiny_config;
using testing::train_job;

class DataParallelCpu : public ::testing::TestWithParam<std::string> {};

TEST_P(DataParallelCpu, TwoRanksTrainAsOneRankWithTwiceTheBatch) {
    const int steps = 10;
    TrainConfig single = tiny_config(steps, GetParam());
    single.batch_size = 8;
    testing::CpuTrainer one(single);
    Recorder one_steps;
    one.add_observer(&one_steps);
    one.run();

    std::vector<Recorder> seen(2);
    auto ranks = train_job("cpu", tiny_config(steps, GetParam()), seen);

    // The same losses on both ranks (the mean over ranks) and, to rounding, the one-rank run's:
    // each rank's mean over its 4 rows averaged over ranks is the mean over the 8 rows. The
    // runs drift apart by float32 rounding of the reductions (sums in another order), which the
    // optimizer carries on: relative 1e-5 at the first step, well under 1e-3 after ten.
    ASSERT_EQ(seen[0].steps.size(), std::size_t(steps));
    ASSERT_EQ(seen[1].steps.size(), std::size_t(steps));
    for (int s = 0; s < steps; ++s) {
        const StepRecord& a = seen[0].steps[std::size_t(s)];
        const StepRecord& b = seen[1].steps[std::size_t(s)];
        const StepRecord& ref = one_steps.steps[std::size_t(s)];
        EXPECT_EQ(a.loss, b.loss) << "step " << s + 1;
        EXPECT_EQ(a.grad_norm, b.grad_norm) << "step " << s + 1;
        EXPECT_EQ(a.batch, ref.batch);
        const double tol = s == 0 ? 1e-5 : 1e-3;
        EXPECT_NEAR(a.loss, ref.loss, tol * ref.loss) << "step " << s + 1;
        EXPECT_NEAR(a.grad_norm, ref.grad_norm, 10 * tol * ref.grad_norm) << "step " << s + 1;
        EXPECT_EQ(a.eval_loss.has_value(), ref.eval_loss.has_value());
        if (a.eval_loss && ref.eval_loss) {
            EXPECT_EQ(*a.eval_loss, *b.eval_loss);
            EXPECT_NEAR(*a.eval_loss, *ref.eval_loss, 1e-3 * *ref.eval_loss);
        }
    }
    // Each rank saw its own half of every batch: their own losses differ.
    ASSERT_EQ(seen[0].ranks.size(), std::size_t(2 * steps));
    EXPECT_NE(seen[0].ranks[0].loss, seen[0].ranks[1].loss);
    EXPECT_NEAR(0.5 * (double(seen[0].ranks[0].loss) + seen[0].ranks[1].loss), seen[0].steps[0].loss,
                1e-6 * seen[0].steps[0].loss);

    // The ranks are identical: parameters, AdamW's moments and delayed scaling's state.
    const Trainer& t0 = *ranks[0]->trainer;
    const Trainer& t1 = *ranks[1]->trainer;
    EXPECT_EQ(t0.model(0).params_to_host(), t1.model(0).params_to_host());
    EXPECT_EQ(t0.model(0).save_recipe_state(), t1.model(0).save_recipe_state());
    const TrainState s0 = t0.state(), s1 = t1.state();
    ASSERT_EQ(s0.runs.size(), s1.runs.size());
    EXPECT_EQ(s0.runs[0].m, s1.runs[0].m);
    EXPECT_EQ(s0.runs[0].v, s1.runs[0].v);
    // ... and near the one-rank run's parameters: the weight gradients are sums over the rows
    // in another order (each rank's half, then the two halves), and AdamW turns a rounding
    // difference of a near-zero gradient into a step of up to lr = 1e-2 in either direction;
    // over ten steps no parameter moved more than a quarter of one step away.
    const std::vector<float> p = t0.model(0).params_to_host(), q = one.model(0).params_to_host();
    double worst = 0;
    for (std::size_t i = 0; i < p.size(); ++i) worst = std::max(worst, double(std::fabs(p[i] - q[i])));
    EXPECT_LT(worst, 2.5e-3);
}

// baseline: no FP8; delayed: the amax reduction; blockwise: per-block scales need none.
INSTANTIATE_TEST_SUITE_P(Recipes, DataParallelCpu, ::testing::Values("baseline", "delayed", "blockwise"));

TEST(DataParallel, TheMeanAddsInRankOrderSoEveryRankHoldsTheSameDouble) {
    // Ranks send 1e16, 1 and -1e16 (then 0.5, 1.5, 4): in rank order 1e16 + 1 rounds back to
    // 1e16 (doubles there are 2 apart), so the first mean is exactly 0, where another order
    // would give 1/3. The second is 6 / 3 = 2.
    std::vector<std::vector<double>> got(3);
    testing::run_ranks(3, "cpu", 1, [&](Rank& r) {
        DataParallel dp(*r.rendezvous, *r.comm, "cpu:0", {});
        const std::size_t k = std::size_t(r.env.rank);
        got[k] = dp.mean({std::vector<double>{1e16, 1.0, -1e16}[k], std::vector<double>{0.5, 1.5, 4.0}[k]});
    });
    for (const auto& g : got) EXPECT_EQ(g, (std::vector<double>{0.0, 2.0}));
}

TEST(DataParallel, AMeanOfAnotherLengthNamesTheRank) {
    const std::string error = testing::error_of([] {
        testing::run_ranks(2, "cpu", 1, [&](Rank& r) {
            DataParallel dp(*r.rendezvous, *r.comm, "cpu:0", {});
            if (r.env.rank == 0) {
                dp.mean({1.0, 2.0, 3.0});
            } else {
                dp.mean({1.0, 2.0});
            }
        });
    });
    // Whichever rank failed first: each names the other.
    EXPECT_TRUE(error == "mean over ranks: rank 1 sent 16 bytes, expected 24 (ranks disagree on the array)" ||
                error == "mean over ranks: rank 0 sent 24 bytes, expected 16 (ranks disagree on the array)")
        << error;
}

TEST(DataParallel, DelayedScalingPushesTheMaximumOverRanks) {
    // After one step each rank's history holds, per operand, the larger of the two ranks'
    // amaxes: the amax one process sees over all 8 rows. The first step's activations and
    // activation gradients are row by row the bits one process computes (dlogits are
    // divided by all ranks' rows), so every amax equals the one-process amax exactly.
    TrainConfig single = tiny_config(1, "delayed");
    single.batch_size = 8;
    testing::CpuTrainer one(single);
    one.run();
    auto ranks = run_job(2, "cpu", tiny_config(1, "delayed"), [&](Rank& r) { r.trainer->run(); });
    const Model& ref = one.model(0);
    for (const auto& rank : ranks) {
        const Model& m = rank->trainer->model(0);
        const auto x = m.delayed_state(0, Operand::X), w = m.delayed_state(0, Operand::W);
        ASSERT_TRUE(x && w);
        ASSERT_EQ(x->history().size(), 1u);
        EXPECT_EQ(x->history(), ref.delayed_state(0, Operand::X)->history());
        EXPECT_EQ(x->scale(), ref.delayed_state(0, Operand::X)->scale());
        EXPECT_EQ(w->history(), ref.delayed_state(0, Operand::W)->history());
        for (int l = 0; l < int(m.linears().size()); ++l)
            for (Operand o : {Operand::X, Operand::W, Operand::DY})
                EXPECT_EQ(m.delayed_state(l, o)->history(), ref.delayed_state(l, o)->history())
                    << "linear " << l << " operand " << int(o);
    }
    EXPECT_EQ(ranks[0]->trainer->model(0).save_recipe_state(), ranks[1]->trainer->model(0).save_recipe_state());
}

TEST(DataParallel, Bf16GradientSumsHalveTheBytesAndRecordTheErrorTheyAdd) {
    const int steps = 6;
    DataParallelOptions bf16;
    bf16.grad_dtype = DType::BF16;
    bf16.measure_every = 4;  // steps 1 and 4
    std::vector<Recorder> exact(2), low(2);
    train_job("cpu", tiny_config(steps, "delayed"), exact);
    auto ranks = train_job("cpu", tiny_config(steps, "delayed"), low, bf16);
    const double params = double(ranks[0]->trainer->model(0).num_params());
    for (int s = 0; s < steps; ++s)
        for (int k = 0; k < 2; ++k) {
            const RankStepRecord& e = exact[0].ranks[std::size_t(2 * s + k)];
            const RankStepRecord& b = low[0].ranks[std::size_t(2 * s + k)];
            EXPECT_EQ(e.grad_bytes, 4 * params);
            EXPECT_EQ(b.grad_bytes, 2 * params);
            EXPECT_TRUE(std::isnan(e.grad_error));
            EXPECT_TRUE(std::isnan(b.grad_snr_db));  // measured for FP8 sums only
            if (s + 1 == 1 || s + 1 == 4) {
                // Each rank's share rounded to BF16 (relative 2^-9 at most), then the sum
                // rounded again: the L2 error of the sums stays under 2^-8 of their norm.
                EXPECT_GT(b.grad_error, 0.0) << "step " << s + 1;
                EXPECT_LT(b.grad_error, 1.0 / 256) << "step " << s + 1;
            } else {
                EXPECT_TRUE(std::isnan(b.grad_error)) << "step " << s + 1;
            }
        }
    // Still one model on both ranks, and close to the float32 sums' run.
    EXPECT_EQ(ranks[0]->trainer->model(0).params_to_host(), ranks[1]->trainer->model(0).params_to_host());
    for (int s = 0; s < steps; ++s)
        EXPECT_NEAR(low[0].steps[std::size_t(s)].loss, exact[0].steps[std::size_t(s)].loss,
                    1e-2 * exact[0].steps[std::size_t(s)].loss);
}

TEST(DataParallel, Fp8GradientSumsQuarterTheBytesAndTrainCloseToFloat32Sums) {
    const int steps = 8;
    std::vector<Recorder> exact(2);
    train_job("cpu", tiny_config(steps, "delayed"), exact);
    for (DType type : {DType::E4M3, DType::E5M2}) {
        SCOPED_TRACE(dtype_name(type));
        DataParallelOptions fp8;
        fp8.grad_dtype = type;
        fp8.measure_every = 4;  // steps 1, 4 and 8
        std::vector<Recorder> low(2);
        auto ranks = train_job("cpu", tiny_config(steps, "delayed"), low, fp8);
        const double params = double(ranks[0]->trainer->model(0).num_params());
        // A cast's error is uniform within half a spacing of the FP8 grid: RMS relative
        // 2^-m / sqrt(12) times 0.74 (E[1/mantissa^2]^(1/2) for log-uniform values), m = 3
        // mantissa bits for E4M3 (2.7e-2), 2 for E5M2 (5.3e-2). The shares are cast, then
        // their sum: sqrt(2) times that, 3.7e-2 and 7.5e-2; measured on this model 3.5e-2
        // to 4.1e-2 and 7.3e-2 to 7.9e-2. The bound is three times the estimate.
        const double bound = type == DType::E4M3 ? 1.0 / 8 : 1.0 / 4;
        for (int s = 0; s < steps; ++s)
            for (int k = 0; k < 2; ++k) {
                const RankStepRecord& b = low[0].ranks[std::size_t(2 * s + k)];
                // One byte per gradient, plus each chunk's header and padding (32 bytes).
                EXPECT_GE(b.grad_bytes, params);
                EXPECT_LE(b.grad_bytes, params + 64);
                EXPECT_NEAR(b.grad_bytes / exact[0].ranks[std::size_t(2 * s + k)].grad_bytes, 0.25, 1e-3);
                if (s + 1 == 1 || s + 1 == 4 || s + 1 == 8) {
                    EXPECT_GT(b.grad_error, 0.0) << "step " << s + 1;
                    EXPECT_LT(b.grad_error, bound) << "step " << s + 1;
                    // Against the BF16 shadow sums: the BF16 sums' own error (2^-8 scale,
                    // under 4e-3) is far below FP8's, so the SNR is about -20 log10 of the
                    // error against float32 sums: within 2 dB of it.
                    EXPECT_NEAR(b.grad_snr_db, -20 * std::log10(b.grad_error), 2.0) << "step " << s + 1;
                    EXPECT_GE(b.grad_underflow_pct, 0.0);
                    EXPECT_LT(b.grad_underflow_pct, 20.0);
                    EXPECT_EQ(b.grad_overflow_pct, 0.0);  // each chunk scaled by its own amax
                } else {
                    EXPECT_TRUE(std::isnan(b.grad_error)) << "step " << s + 1;
                    EXPECT_TRUE(std::isnan(b.grad_snr_db)) << "step " << s + 1;
                    EXPECT_TRUE(std::isnan(b.grad_underflow_pct)) << "step " << s + 1;
                }
            }
        // Still one model on both ranks, and within 1% of the float32 sums' run (measured:
        // at most 5.5e-4 relative for E4M3 and 6.8e-4 for E5M2 over the 8 steps).
        EXPECT_EQ(ranks[0]->trainer->model(0).params_to_host(), ranks[1]->trainer->model(0).params_to_host());
        for (int s = 0; s < steps; ++s) {
            const double e = exact[0].steps[std::size_t(s)].loss, got = low[0].steps[std::size_t(s)].loss;
            const RankStepRecord& k = low[0].ranks[std::size_t(2 * s)];
            std::printf("[ %s ] step %d: loss %.6f, float32 sums %.6f, relative %.2e, error %.2e, against BF16: SNR "
                        "%.1f dB, underflow %.2f%%, overflow %.2f%%\n",
                        dtype_name(type), s + 1, got, e, std::fabs(got / e - 1), k.grad_error, k.grad_snr_db,
                        k.grad_underflow_pct, k.grad_overflow_pct);
            EXPECT_NEAR(got, e, 1e-2 * e) << "step " << s + 1;
        }
    }
}

TEST(DataParallel, AStopOnOneRankStopsEveryRankAtTheSameStep) {
    struct StopAt : TrainObserver {
        Trainer* trainer = nullptr;
        void on_step(const StepRecord& r) override {
            if (r.step == 3) trainer->stop();
        }
    };
    std::vector<std::int64_t> done(2);
    run_job(2, "cpu", tiny_config(20, "baseline"), [&](Rank& r) {
        StopAt stop;
        stop.trainer = r.trainer.get();
        if (r.env.rank == 1) r.trainer->add_observer(&stop);
        const TrainSummary s = r.trainer->run();
        done[std::size_t(r.env.rank)] = s.steps;
        EXPECT_TRUE(s.stopped);
    });
    // The request is agreed at the end of step 3: both ranks stop before step 4... of 20.
    EXPECT_EQ(done[0], 3);
    EXPECT_EQ(done[1], 3);
}

TEST(DataParallel, RankZerosRequestsApplyOnEveryRankAtTheSameStep) {
    // Both ranks ask for a recipe switch and a pause as step 3 is reported, before its
    // exchange: rank 0's switch is agreed there and applies on both ranks from step 4; rank
    // 1's requests and the pauses are refused with an error event.
    struct Ask : TrainObserver {
        Trainer* trainer = nullptr;
        void on_step(const StepRecord& r) override {
            if (r.step != 3) return;
            trainer->switch_recipe(0, "current");
            trainer->pause();
        }
    };
    std::vector<Recorder> seen(2);
    auto ranks = run_job(2, "cpu", tiny_config(7, "delayed"), [&](Rank& r) {
        Ask ask;
        ask.trainer = r.trainer.get();
        r.trainer->add_observer(&ask);
        r.trainer->add_observer(&seen[std::size_t(r.env.rank)]);
        EXPECT_EQ(r.trainer->run().steps, 7);
    });
    for (const Recorder& s : seen) {
        ASSERT_EQ(s.steps.size(), 7u);
        for (const StepRecord& r : s.steps) EXPECT_EQ(r.recipe, r.step <= 3 ? "delayed" : "current") << r.step;
        EXPECT_EQ(s.count(EventKind::RecipeSwitch), 1);
        EXPECT_GE(s.count(EventKind::Error), 1);  // the pause (and on rank 1 its own switch request) refused
    }
    EXPECT_EQ(ranks[0]->trainer->model(0).params_to_host(), ranks[1]->trainer->model(0).params_to_host());
}

TEST(DataParallel, ALiveSwitchToACustomRecipeOfTheConfigAppliesOnEveryRank) {
    // The config's custom recipe (block 1 kept in high precision) is a name every rank's
    // book has, so rank 0's switch to it is agreed like a built-in one.
    struct Ask : TrainObserver {
        Trainer* trainer = nullptr;
        void on_step(const StepRecord& r) override {
            if (r.step == 2) trainer->switch_recipe(0, "current_hp1");
        }
    };
    TrainConfig c = tiny_config(5, "delayed");
    c.recipes = {CustomRecipe{"current_hp1", "current", {{{"blocks.1.*"}, {}, "baseline"}}}};
    std::vector<Recorder> seen(2);
    auto ranks = run_job(2, "cpu", c, [&](Rank& r) {
        Ask ask;
        ask.trainer = r.trainer.get();
        if (r.env.rank == 0) r.trainer->add_observer(&ask);
        r.trainer->add_observer(&seen[std::size_t(r.env.rank)]);
        EXPECT_EQ(r.trainer->run().steps, 5);
    });
    for (const Recorder& s : seen) {
        ASSERT_EQ(s.steps.size(), 5u);
        for (const StepRecord& r : s.steps) EXPECT_EQ(r.recipe, r.step <= 2 ? "delayed" : "current_hp1") << r.step;
        EXPECT_EQ(s.count(EventKind::RecipeSwitch), 1);
        EXPECT_EQ(s.count(EventKind::Error), 0);
    }
    EXPECT_EQ(ranks[0]->trainer->model(0).params_to_host(), ranks[1]->trainer->model(0).params_to_host());
}

// Rank 1 plays a peer that sends what no engine sends; the receiving ranks end the step
// with an error naming the sender and the field, and do not crash.
std::vector<std::string> errors_of_a_peer_sending(const DataParallel::StepShare& bad, int bad_rank) {
    std::vector<std::string> errors(2);
    run_job(2, "cpu", tiny_config(3, "baseline"), [&](Rank& r) {
        errors[std::size_t(r.env.rank)] = testing::error_of([&] {
            if (r.env.rank == bad_rank) r.dp->exchange(bad);
            else r.step->agree(1, 1.0, {});
        });
    });
    return errors;
}

TEST(DataParallel, ASwitchOfARunOutsideTheJobIsRefusedOnEveryRank) {
    DataParallel::StepShare bad;
    bad.record = RankStepRecord{1, 0, 1.0, 1.0, 2.0, 3.0f, 0.0, NAN};
    bad.requests = "3 1000 0 mxfp8\n";
    const std::vector<std::string> e = errors_of_a_peer_sending(bad, 0);
    FP8SCOPE_EXPECT_CONTAINS(e[1], "run 1000 is outside 0..0");
    FP8SCOPE_EXPECT_CONTAINS(e[1], "'3 1000 0 mxfp8'");
}

TEST(DataParallel, AStepRecordWithAFieldOutOfRangeNamesTheRankAndTheField) {
    const auto sent = [](auto change) {
        DataParallel::StepShare s;
        s.record = RankStepRecord{1, 1, 1.0, 1.0, 2.0, 3.0f, 0.0, NAN};
        change(s);
        return errors_of_a_peer_sending(s, 1)[0];
    };
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.step = 7; }), "rank 1 sent a step record with step 7, expected 1");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.rank = 0; }), "rank 1 sent a step record with rank 0, expected 1");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.compute_ms = NAN; }), "times nan");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.step_ms = -1; }), "-1.000000 ms");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.grad_bytes = INFINITY; }), "gradient bytes inf");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.grad_error = -0.5; }), "gradient error -0.5");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.grad_snr_db = -INFINITY; }), "gradient SNR -inf");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.grad_underflow_pct = 101; }), "percentage 101");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.record.grad_overflow_pct = -1; }), "percentage -1");
    FP8SCOPE_EXPECT_CONTAINS(sent([](auto& s) { s.requests = "4 -1 0 /tmp/x\n"; }), "only rank 0 sends");
    // The same record in range goes through, an SNR of +Inf (equal sums) too.
    EXPECT_EQ(sent([](auto&) {}), "(no error)");
    EXPECT_EQ(sent([](auto& s) { s.record.grad_snr_db = INFINITY; }), "(no error)");
}

// A step record as the wire carries it: the fields one after another, nothing between them.
template <class... T>
std::string packed(const T&... fields) {
    std::string out;
    (out.append(reinterpret_cast<const char*>(&fields), sizeof fields), ...);
    return out;
}

TEST(DataParallel, AStepRecordCarriesItsFieldsAndNoOtherByte) {
    // Rank 1 reads rank 0's record off the rendezvous as raw bytes.
    std::string got;
    run_job(2, "cpu", tiny_config(3, "baseline"), [&](Rank& r) {
        if (r.env.rank == 0) {
            DataParallel::StepShare mine;
            mine.record = RankStepRecord{1, 0, 1.5, 2.5, 4.5, 3.25f, 1024.0, 0.125, 9, 31.5, 0.75, 0.0};
            mine.stop = true;
            mine.scaling_digest = 0x0123456789abcdefull;
            mine.requests = "5 -1 7 \n";
            r.dp->exchange(mine);
        } else {
            got = r.rendezvous->all_gather(packed(std::int64_t(1), std::int32_t(1), std::int32_t(0), 0.0, 0.0, 0.0,
                                                  0.0f, 0.0, 0.0, std::int64_t(0), 0.0, 0.0, 0.0,
                                                  std::uint64_t(0)))[0];
        }
    });
    const std::string want = packed(std::int64_t(1), std::int32_t(0), std::int32_t(1), 1.5, 2.5, 4.5, 3.25f, 1024.0,
                                    0.125, std::int64_t(9), 31.5, 0.75, 0.0, std::uint64_t(0x0123456789abcdefull)) +
                             "5 -1 7 \n";
    ASSERT_EQ(want.size(), 100u + 8u);
    EXPECT_EQ(got, want);  // bytes 44-47 (a struct's padding after the loss) are not sent
}

// The byte of the newest amax of `linear`'s operand `o` under `recipe` in a recipe state
// (Fp8Linear::save_state's layout, engine/fp8_linear_state.cpp), its lowest byte.
std::size_t newest_amax_byte(const std::vector<std::uint8_t>& state, const std::string& recipe, int linear,
                             Operand o) {
    auto u32 = [&](std::size_t p) {
        std::uint32_t v;
        (void)state.at(p + 3);  // in range
        std::memcpy(&v, state.data() + p, 4);
        return v;
    };
    const std::uint32_t linears = u32(8), recipes = u32(12);
    std::size_t at = 16;
    for (std::uint32_t k = 0; k < recipes; ++k) {
        const std::uint32_t len = u32(at);
        const std::string name(state.begin() + std::ptrdiff_t(at + 4), state.begin() + std::ptrdiff_t(at + 4 + len));
        at += 4 + len;
        for (std::uint32_t l = 0; l < linears; ++l)
            for (Operand op : {Operand::X, Operand::W, Operand::DY}) {
                if (state.at(at++) == 0) continue;  // not present
                at += 1 + 4 + 1 + 4 + 4;           // format, history length, algo, margin, scale
                const std::uint32_t n = u32(at);
                at += 4;
                if (name == recipe && int(l) == linear && op == o && n > 0) return at + 4 * (n - 1);
                at += 4 * std::size_t(n);
            }
    }
    throw std::runtime_error("no history of linear " + std::to_string(linear) + " under " + recipe);
}

TEST(DataParallel, AOneBitDifferenceInARanksAmaxHistoryIsAnEventNamingTheTensorAndTheRank) {
    // Three ranks train delayed scaling; after step 3's backward rank 1's history of
    // linear 1's dy gets its newest amax's lowest bit flipped (as a bad push or a restore
    // on that rank alone would leave it). Every rank reports it at step 3, once (the entry
    // stays in the history), naming the tensor and rank 1 against ranks 0 and 2.
    std::vector<Recorder> seen(3);
    std::string tensor;
    run_job(3, "cpu", tiny_config(6, "delayed"), [&](Rank& r) {
        struct Flip : TrainObserver {
            Trainer* trainer = nullptr;
            void on_step(const StepRecord& rec) override {
                if (rec.step != 3) return;
                Model& m = trainer->model(0);
                std::vector<std::uint8_t> state = m.save_recipe_state();
                state[newest_amax_byte(state, "delayed", 1, Operand::DY)] ^= 1;
                m.load_recipe_state(state);
            }
        } flip;
        flip.trainer = r.trainer.get();
        if (r.env.rank == 1) r.trainer->add_observer(&flip);
        r.trainer->add_observer(&seen[std::size_t(r.env.rank)]);
        EXPECT_EQ(r.trainer->run().steps, 6);
        if (r.env.rank == 0) tensor = r.trainer->model(0).linears()[1].name + " dy";
    });
    for (const Recorder& s : seen) {
        const std::vector<std::string> found = s.details(EventKind::ScalingMismatch);
        ASSERT_EQ(found.size(), 1u);
        EXPECT_EQ(found[0], "delayed scaling state of " + tensor +
                                " differs on rank(s) 1 from rank(s) 0, 2 (amax history or scale not bitwise equal)");
        for (const TrainEvent& e : s.events)
            if (e.kind == EventKind::ScalingMismatch) EXPECT_EQ(e.step, 3);
    }
}

TEST(DataParallel, RanksThatAgreeRaiseNoScalingEvent) {
    // Delayed scaling on 2 ranks (every tensor's history and scale hashed each step) and
    // FP8 gradient sums: identical state, no event.
    std::vector<Recorder> seen(2);
    DataParallelOptions fp8;
    fp8.grad_dtype = DType::E4M3;
    train_job("cpu", tiny_config(6, "delayed"), seen, fp8);
    for (const Recorder& s : seen) {
        EXPECT_EQ(s.steps.size(), 6u);
        EXPECT_EQ(s.count(EventKind::ScalingMismatch), 0);
    }
}

TEST(DataParallel, TheInFlightCheckNamesASlowRank) {
    std::vector<Recorder> seen(2);
    DataParallelOptions options;
    options.straggler_steps = 3;
    run_job(
        2, "cpu", tiny_config(6, "baseline"),
        [&](Rank& r) {
            if (r.env.rank == 1) r.trainer->delay_steps(100);
            r.trainer->add_observer(&seen[std::size_t(r.env.rank)]);
            r.trainer->run();
        },
        options);
    for (const Recorder& s : seen) {
        const std::vector<std::string> health = s.details(EventKind::Health);
        ASSERT_EQ(health.size(), 1u);
        EXPECT_EQ(health[0].rfind("straggler: rank 1 (", 0), 0u) << health[0];
        // The rank records say why: rank 1's compute includes the 100 ms, rank 0 waited for it.
        for (std::size_t i = 0; i + 1 < s.ranks.size(); i += 2) {
            EXPECT_EQ(s.ranks[i].rank, 0);
            EXPECT_EQ(s.ranks[i + 1].rank, 1);
            EXPECT_GT(s.ranks[i + 1].compute_ms, 95.0);  // the sleep, give or take the clock
            EXPECT_LT(s.ranks[i].compute_ms, s.ranks[i + 1].compute_ms - 50.0);
            EXPECT_GT(s.ranks[i].comm_ms, 50.0);
        }
    }
}

}  // namespace
}  // namespace fp8scope
