// The first non-finite value of a training run: the CPU scan against a plain search, the
// record of a run whose operand is made Inf at a known step (two outlier injections of
// 3e38 on one row overflow every non-zero element of it) against the first Inf of the
// operand as the capture saw it, a clean run that records nothing, and checkpoints that
// are never written from the state a non-finite step left.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include "cpu/cpu_backend.h"
#include "cpu/nonfinite.h"
#include "engine/checkpoint.h"
#include "io/half.h"
#include "support/cpu_engine.h"
#include "support/data_parallel_job.h"
#include "support/tiny_config.h"
#include "support/train_recorder.h"

namespace fp8scope {
namespace {

using namespace testing;

constexpr float kHuge = 3e38f;

TEST(NonFinite, CpuScanFindsTheFirstNanOrInf) {
    std::vector<float> x(20000, 1.5f);
    EXPECT_EQ(first_nonfinite(x.data(), DType::F32, std::int64_t(x.size())), -1);
    x[17001] = std::numeric_limits<float>::infinity();
    x[9000] = -std::numeric_limits<float>::quiet_NaN();
    EXPECT_EQ(first_nonfinite(x.data(), DType::F32, std::int64_t(x.size())), 9000);
    EXPECT_EQ(first_nonfinite(x.data() + 9001, DType::F32, 8001), 8000);  // the Inf, 17001 - 9001
    x[9000] = std::numeric_limits<float>::max();  // finite: not one
    EXPECT_EQ(first_nonfinite(x.data(), DType::F32, std::int64_t(x.size())), 17001);

    std::vector<std::uint16_t> b(5000, float_to_bf16(2.0f));
    EXPECT_EQ(first_nonfinite(b.data(), DType::BF16, std::int64_t(b.size())), -1);
    b[4999] = 0xff80;  // -Inf
    b[4100] = 0x7f7f;  // the largest finite BF16
    EXPECT_EQ(first_nonfinite(b.data(), DType::BF16, std::int64_t(b.size())), 4999);
}

TEST(NonFinite, TheSmallestTagAndIndexSticks) {
    CpuBackend cpu(1);
    std::vector<float> a(64, 1.0f), c(64, 1.0f);
    a[40] = std::numeric_limits<float>::infinity();
    c[3] = std::numeric_limits<float>::quiet_NaN();
    std::uint64_t word = kNoNonFinite;
    cpu.find_nonfinite(TensorDesc{c.data(), DType::F32, 8, 8}, 5, &word);
    EXPECT_EQ(word, nonfinite_key(5, 3));
    cpu.find_nonfinite(TensorDesc{a.data(), DType::F32, 8, 8}, 2, &word);  // an earlier site
    EXPECT_EQ(word, nonfinite_key(2, 40));
    cpu.find_nonfinite(TensorDesc{c.data(), DType::F32, 8, 8}, 9, &word);  // a later one
    EXPECT_EQ(word, nonfinite_key(2, 40));
    EXPECT_EQ(cpu.staged_nonfinite(), kNoNonFinite);
    cpu.stage_nonfinite(&word);
    EXPECT_EQ(cpu.staged_nonfinite(), nonfinite_key(2, 40));
}

TEST(NonFinite, ADataParallelJobNamesTheRankThatHeldItFirst) {
    // Only rank 1's x of blocks.0.mlp.fc1 is made Inf at step 5 (delayed scaling: the loss
    // stays finite, the job goes on); every rank hears that rank 1 held the job's first.
    TrainConfig c = tiny_config(7, "delayed");
    c.threads = 1;
    c.rewind.enabled = false;
    std::vector<Injection> inject;
    for (int twice = 0; twice < 2; ++twice) inject.push_back({5, 5, 0, "mlp.fc1", Operand::X, true, {1}, kHuge});
    std::vector<Recorder> seen(2);
    std::vector<TrainSummary> summaries(2);
    run_job(2, "cpu", c, [&](Rank& r) {
        const int rank = r.env.rank;
        if (rank == 1) r.trainer->model(0).set_injections(inject, std::int64_t(c.batch_size) * c.seq_len);
        r.trainer->add_observer(&seen[std::size_t(rank)]);
        summaries[std::size_t(rank)] = r.trainer->run();
    });
    ASSERT_TRUE(summaries[1].first_nonfinite);
    EXPECT_EQ(summaries[1].first_nonfinite->step, 5);
    EXPECT_EQ(summaries[1].first_nonfinite->rank, 1);
    EXPECT_EQ(summaries[1].first_nonfinite->linear_name, "blocks.0.mlp.fc1");
    for (int rank = 0; rank < 2; ++rank) {
        EXPECT_EQ(summaries[std::size_t(rank)].first_nonfinite_rank, 1) << "rank " << rank;
        const auto found = seen[std::size_t(rank)].details(EventKind::FirstNonFinite);
        EXPECT_NE(std::find(found.begin(), found.end(), "job: rank 1 held the first non-finite value, at step 5"),
                  found.end())
            << "rank " << rank;
    }
}

// The first non-finite element of one operand as the capture saw it at each step.
struct FirstInf : CaptureSink, TrainObserver {
    int linear;
    Gemm gemm;
    Operand operand;
    std::int64_t step = 0;
    std::optional<std::int64_t> at_step, row, col;
    FirstInf(int l, Gemm g, Operand o) : linear(l), gemm(g), operand(o) {}
    void on_step_begin(std::int64_t s, bool) override { step = s; }
    void on_operand(const OperandCapture& c) override {
        if (at_step || c.linear != linear || c.gemm != gemm || c.operand != operand || c.transposed_repeat) return;
        const float* v = static_cast<const float*>(c.values.data);
        for (std::int64_t i = 0; i < c.values.numel(); ++i)
            if (!std::isfinite(v[i])) {
                at_step = step, row = i / c.values.cols, col = i % c.values.cols;
                return;
            }
    }
    void on_scaling(const OperandScaling&) override {}
    void on_op(const OpTiming&) override {}
};

int linear_index(const Trainer& t, const std::string& name) {
    const auto& ls = t.model(0).linears();
    for (std::size_t i = 0; i < ls.size(); ++i)
        if (ls[i].name == name) return int(i);
    return -1;
}

struct Case {
    std::string recipe;
    int layer;
    std::string linear;
    Operand operand;
    std::int64_t row;
    Gemm gemm;
    int block_rows, block_cols;  // of that recipe's rowwise copy of the operand
};

void PrintTo(const Case& c, std::ostream* os) {
    *os << c.recipe << " " << operand_name(c.operand) << " of blocks." << c.layer << "." << c.linear << " row " << c.row;
}

class NonFiniteRun : public ::testing::TestWithParam<Case> {};

TEST_P(NonFiniteRun, RecordNamesTheInjectedStepLinearGemmOperandAndBlock) {
    const Case k = GetParam();
    constexpr std::int64_t kStep = 3;
    TrainConfig c = tiny_config(6, k.recipe);
    c.rewind.enabled = false;
    c.capture_every = 1;
    for (int twice = 0; twice < 2; ++twice)
        c.inject.push_back({kStep, kStep, k.layer, k.linear, k.operand, true, {k.row}, kHuge});
    CpuTrainer t(c);
    const int linear = linear_index(t, "blocks." + std::to_string(k.layer) + "." + k.linear);
    ASSERT_GE(linear, 0);
    FirstInf oracle(linear, k.gemm, k.operand);
    Recorder events;
    t.set_capture_sink(0, &oracle);
    t.add_observer(&oracle);
    t.add_observer(&events);
    const TrainSummary s = t.run();
    // Where the NaN/Inf reaches the loss, the run gives up at the step (rewind off); a
    // scaled cast may keep it from the loss: the record names it all the same.
    ASSERT_TRUE(oracle.at_step && s.first_nonfinite);
    const NonFiniteRecord& r = *s.first_nonfinite;
    EXPECT_EQ(*oracle.at_step, kStep);
    EXPECT_EQ(*oracle.row, k.row);  // only that row was scaled
    EXPECT_EQ(r.source, NonFiniteRecord::Source::Operand);
    EXPECT_EQ(r.step, kStep);
    EXPECT_EQ(r.rank, 0);
    EXPECT_EQ(r.layer, k.layer);
    EXPECT_EQ(r.linear, linear);
    EXPECT_EQ(r.gemm, k.gemm);
    EXPECT_EQ(r.operand, k.operand);
    EXPECT_EQ(r.row, *oracle.row);
    EXPECT_EQ(r.col, *oracle.col);
    EXPECT_EQ(r.block_rows, k.block_rows);
    EXPECT_EQ(r.block_cols, k.block_cols);
    if (k.block_rows) {
        const std::int64_t grid_cols = (r.cols + k.block_cols - 1) / k.block_cols;
        EXPECT_EQ(r.block, *oracle.row / k.block_rows * grid_cols + *oracle.col / k.block_cols);
    } else {
        EXPECT_EQ(r.block, -1);
    }
    const auto found = events.details(EventKind::FirstNonFinite);
    ASSERT_EQ(found.size(), 1u);
    EXPECT_EQ(found[0], r.describe());
}

INSTANTIATE_TEST_SUITE_P(
    Operands, NonFiniteRun,
    ::testing::Values(Case{"mxfp8", 1, "mlp.fc2", Operand::X, 5, Gemm::Fprop, 1, 32},  // GELU's output, 128 wide
           Case{"blockwise", 0, "attn.proj", Operand::DY, 7, Gemm::Dgrad, 1, 128},
           Case{"current", 1, "attn.qkv", Operand::X, 2, Gemm::Fprop, 0, 0}));

TEST(NonFinite, ACleanRunRecordsNothing) {
    TrainConfig c = tiny_config(6, "current");
    c.compare = {"current", "mxfp8"};
    CpuTrainer t(c);
    Recorder events;
    t.add_observer(&events);
    const TrainSummary s = t.run();
    ASSERT_TRUE(s.error.empty()) << s.error;
    EXPECT_FALSE(s.first_nonfinite);
    EXPECT_TRUE(events.details(EventKind::FirstNonFinite).empty());
    EXPECT_TRUE(events.details(EventKind::CheckpointSkipped).empty());
}

bool all_finite(const std::vector<float>& v) {
    for (float x : v)
        if (!std::isfinite(x)) return false;
    return true;
}

std::set<std::string> files_in(const std::filesystem::path& dir) {
    std::set<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.insert(e.path().filename().string());
    return files;
}

// Step 5's x of blocks.0.mlp.fc1 made Inf in row 1; checkpoints every 2 of 8 steps.
TrainSummary run_with_checkpoints(const std::string& recipe, const std::filesystem::path& dir, Recorder& events) {
    std::filesystem::remove_all(dir);
    TrainConfig c = tiny_config(8, recipe);
    c.rewind.enabled = false;
    c.checkpoint.dir = dir.string();
    c.checkpoint.every = 2;
    for (int twice = 0; twice < 2; ++twice) c.inject.push_back({5, 5, 0, "mlp.fc1", Operand::X, true, {1}, kHuge});
    CpuTrainer t(c);
    t.add_observer(&events);
    return t.run();
}

void expect_finite_checkpoint(const std::filesystem::path& file, std::int64_t step) {
    const TrainState back = load_checkpoint(file.string());
    EXPECT_EQ(back.step, step);
    ASSERT_EQ(back.runs.size(), 1u);
    EXPECT_TRUE(all_finite(back.runs[0].params) && all_finite(back.runs[0].m) && all_finite(back.runs[0].v));
}

TEST(NonFinite, NoCheckpointIsWrittenFromALossThatWentNonFinite) {
    // Unquantized: the Inf reaches the loss, the run gives up after four steps. The final
    // checkpoint (step_4 again) is not written over the good one from the bad state.
    const auto dir = std::filesystem::temp_directory_path() / "fp8scope_nonfinite_loss";
    Recorder events;
    const TrainSummary s = run_with_checkpoints("baseline", dir, events);
    EXPECT_NE(s.error.find("non-finite loss"), std::string::npos) << s.error;
    ASSERT_TRUE(s.first_nonfinite);
    EXPECT_EQ(s.first_nonfinite->step, 5);
    EXPECT_EQ(s.first_nonfinite->source, NonFiniteRecord::Source::Operand);
    EXPECT_EQ(files_in(dir), (std::set<std::string>{"step_2.ckpt", "step_4.ckpt"}));
    const auto skipped = events.details(EventKind::CheckpointSkipped);
    ASSERT_EQ(skipped.size(), 1u);
    EXPECT_EQ(skipped[0].rfind((dir / "step_4.ckpt").string() + " not written: step 5 held a non-finite loss", 0), 0u)
        << skipped[0];
    expect_finite_checkpoint(dir / "step_4.ckpt", 4);
    std::filesystem::remove_all(dir);
}

TEST(NonFinite, NoCheckpointIsWrittenFromADelayedStateHoldingAnInf) {
    // Delayed scaling casts the Inf with the scale of its history (saturated): the loss stays
    // finite, but the history now holds the Inf amax. Steps 6 and 8 are not written.
    const auto dir = std::filesystem::temp_directory_path() / "fp8scope_nonfinite_delayed";
    Recorder events;
    const TrainSummary s = run_with_checkpoints("delayed", dir, events);
    EXPECT_TRUE(s.error.empty()) << s.error;
    ASSERT_TRUE(s.first_nonfinite);
    EXPECT_EQ(s.first_nonfinite->step, 5);
    EXPECT_EQ(files_in(dir), (std::set<std::string>{"step_2.ckpt", "step_4.ckpt"}));
    const auto skipped = events.details(EventKind::CheckpointSkipped);
    ASSERT_EQ(skipped.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) {
        const std::string file = (dir / ("step_" + std::to_string(6 + 2 * i) + ".ckpt")).string();
        EXPECT_EQ(skipped[i].rfind(file + " not written: run 0's delayed scaling state of blocks.0.mlp.fc1 x: a NaN/Inf", 0),
                  0u)
            << skipped[i];
    }
    expect_finite_checkpoint(dir / "step_4.ckpt", 4);
    std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fp8scope
