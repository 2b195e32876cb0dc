// The recorder's side of a data-parallel run: make_trace_meta takes the job's rank and world
// size from a LaunchEnv (a single process without one), and every rank's step record the
// trainer reports becomes one trace RankStepRecord with the same figures.
#include <gtest/gtest.h>

#include <cmath>

#include "comm/launch_env.h"
#include "engine/train_config.h"
#include "train_recorder.h"
#include "vector_sink.h"

namespace fp8scope::trace {
namespace {

TEST(RankRecorder, TheMetaSaysWhichRankOfTheJobRecords) {
    const TrainConfig config;
    const TraceMeta one = make_trace_meta(config, {}, "test", 4);
    EXPECT_EQ(one.rank, 0);
    EXPECT_EQ(one.world_size, 1);
    LaunchEnv job;
    job.rank = 2;
    job.world_size = 4;
    const TraceMeta third = make_trace_meta(config, {}, "test", 4, default_analysis_recipes(), job);
    EXPECT_EQ(third.rank, 2);
    EXPECT_EQ(third.world_size, 4);
    EXPECT_TRUE(check_meta(third).empty());
}

// The trace names its baseline: the run whose recipe quantizes nothing, wherever it is in
// the comparison; -1 when every run quantizes.
TEST(RankRecorder, TheMetaNamesTheRunThatQuantizesNothing) {
    TrainConfig config;
    config.compare = {"delayed", "mxfp8", "baseline"};
    EXPECT_EQ(make_trace_meta(config, {}, "test", 4).baseline_run, 2);
    config.compare = {"delayed", "current"};
    EXPECT_EQ(make_trace_meta(config, {}, "test", 4).baseline_run, -1);
}

// The trainer reports a step's time in seconds; the trace keeps it in milliseconds, the
// unit of the rank records.
TEST(RankRecorder, StepTimesAreRecordedInMilliseconds) {
    const TraceMeta meta = make_trace_meta(TrainConfig{}, {}, "test", 4);
    VectorSink sink;
    TrainRecorder recorder(meta, sink);
    recorder.on_step_begin(3, false);
    fp8scope::StepRecord step;
    step.step = 3;
    step.recipe = "baseline";
    step.step_time_s = 0.25;
    recorder.on_step(step);
    const auto got = sink.all<StepRecord>();
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].step_ms, 250.0);
}

TEST(RankRecorder, EachRanksStepBecomesOneRecord) {
    LaunchEnv job;
    job.world_size = 2;
    const TraceMeta meta = make_trace_meta(TrainConfig{}, {}, "test", 4, default_analysis_recipes(), job);
    VectorSink sink;
    TrainRecorder recorder(meta, sink);
    recorder.on_rank_step(
        fp8scope::RankStepRecord{7, 1, 130.5, 19.75, 151.25, 3.5f, 4096.0, 0.0078125, 0, 31.25, 0.5, 0.125});
    recorder.on_rank_step(fp8scope::RankStepRecord{7, 0, 100.0, 50.25, 151.25, 3.25f, 4096.0, 0.0078125});
    const auto got = sink.all<RankStepRecord>();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].step, 7);
    EXPECT_EQ(got[0].rank, 1);
    EXPECT_EQ(got[0].compute_ms, 130.5);
    EXPECT_EQ(got[0].comm_ms, 19.75);
    EXPECT_EQ(got[0].step_ms, 151.25);
    EXPECT_EQ(got[0].loss, 3.5);
    EXPECT_EQ(got[0].grad_bytes, 4096.0);
    EXPECT_EQ(got[0].grad_error, 0.0078125);
    EXPECT_EQ(got[0].grad_snr_db, 31.25);
    EXPECT_EQ(got[0].grad_underflow_pct, 0.5);
    EXPECT_EQ(got[0].grad_overflow_pct, 0.125);
    EXPECT_TRUE(std::isnan(got[1].grad_snr_db));  // not FP8 sums
    EXPECT_EQ(got[1].rank, 0);
    EXPECT_EQ(got[1].comm_ms, 50.25);
    EXPECT_EQ(got[1].loss, 3.25);
}

}  // namespace
}  // namespace fp8scope::trace
