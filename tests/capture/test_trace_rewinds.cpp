// A run that rewinds again and again (back 3 steps every 4 steps): the reader gives every
// op row in step order, rows of one step in file order (the re-recorded ones last), the
// operand series with the later point of each re-recorded capture step, and the scaling of
// the later attempt; also when the file is read while it grows, one flush at a time.
#include <gtest/gtest.h>

#include <map>

#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

constexpr int kRecords = 60, kRewindEvery = 4, kRewindBy = 3, kOpsPerStep = 3;

// One attempt at a step: its scaling and ops carry the attempt number (start_ns, amax),
// so the test can tell the first recording of a step from the later one.
struct Written {
    std::vector<std::pair<std::int64_t, int>> ops;  // (step, attempt) in file order
    std::map<std::int64_t, int> last_attempt;        // step -> newest attempt
};

Written write_rewinding(TraceWriter& w, const TraceMeta& m, int run) {
    Written out;
    std::int64_t step = 1;
    for (int n = 0; n < kRecords; ++n, ++step) {
        const int attempt = n;
        ScalingRecord sc = sample_scaling(m, run, step);
        sc.amax[0] = static_cast<float>(attempt);
        w.write(sc);
        if (step % m.capture_every == 0) {
            OperandRecord o = sample_operand(m, {run, step, 0, Gemm::Fprop, Operand::X});
            o.stats.amax = attempt;
            w.write(o);
        }
        for (int i = 0; i < kOpsPerStep; ++i) {
            w.write(OpRecord{run, step, i, -1, -1, -1, 0, attempt, attempt + 1});
            out.ops.push_back({step, attempt});
        }
        w.write(sample_step(run, step));
        out.last_attempt[step] = attempt;
        if (n % kRewindEvery == kRewindEvery - 1) step -= kRewindBy;
    }
    return out;
}

// Every op of every step in step order; within a step, the file order (stable).
std::vector<std::pair<std::int64_t, int>> expected_ops(const Written& w) {
    auto v = w.ops;
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return v;
}

void check(const TraceReader& r, const Written& w, int run) {
    const auto ops = r.ops(run, INT64_MIN, INT64_MAX);
    const auto want = expected_ops(w);
    ASSERT_EQ(ops.size(), want.size());
    for (std::size_t i = 0; i < ops.size(); ++i) {
        EXPECT_EQ(ops[i].step, want[i].first) << "op " << i;
        EXPECT_EQ(ops[i].start_ns, want[i].second) << "op " << i;
    }
    // One scaling row per step, the newest attempt's.
    const auto scaling = r.scaling(run, INT64_MIN, INT64_MAX);
    ASSERT_EQ(scaling.size(), w.last_attempt.size());
    std::size_t i = 0;
    for (const auto& [step, attempt] : w.last_attempt) {
        EXPECT_EQ(scaling[i].step, step);
        EXPECT_EQ(scaling[i].amax[0], static_cast<float>(attempt)) << "step " << step;
        ++i;
    }
    // The operand series: capture steps ascending, each once, the newest attempt's point.
    const auto series = r.operand_series(run, 0, Gemm::Fprop, Operand::X);
    std::vector<std::pair<std::int64_t, int>> want_series;
    for (const auto& [step, attempt] : w.last_attempt)
        if (step % 5 == 0) want_series.push_back({step, attempt});
    ASSERT_EQ(series.size(), want_series.size());
    for (std::size_t k = 0; k < series.size(); ++k) {
        EXPECT_EQ(series[k].step, want_series[k].first);
        EXPECT_EQ(series[k].amax, want_series[k].second) << "step " << series[k].step;
    }
    // The operand at a re-recorded capture step is the newest one.
    const auto o = r.operand({run, 10, 0, Gemm::Fprop, Operand::X});
    ASSERT_TRUE(o);
    EXPECT_EQ(o->stats.amax, w.last_attempt.at(10));
}

TEST(TraceRewinds, RowsComeInStepOrderWithTheLaterRecordingLast) {
    TempDir dir;
    const std::string path = dir.file("rewinds.h5");
    TraceMeta m = sample_meta();
    Written w;
    {
        TraceWriter writer(path, m);
        w = write_rewinding(writer, m, 1);
        writer.close();
    }
    // 60 records, 4 steps forward and 3 back: 15 rounds over steps c+1..c+4, up to 18.
    ASSERT_EQ(w.last_attempt.size(), 18u);
    EXPECT_EQ(w.last_attempt.at(4), 12);  // step 4 is recorded in rounds 0..3, last at record 12
    EXPECT_EQ(w.last_attempt.at(18), 59);
    TraceReader r(path);
    check(r, w, 1);
    EXPECT_TRUE(r.ops(0, INT64_MIN, INT64_MAX).empty());
}

TEST(TraceRewinds, AGrowingFileIsIndexedTheSameAsAFinishedOne) {
    TempDir dir;
    const std::string path = dir.file("growing.h5");
    TraceMeta m = sample_meta();
    TraceWriter writer(path, m);
    writer.flush();
    TraceReader r(path);
    // Written in pieces with a refresh after each: the merge of new rows into the index
    // must give the same order as indexing the whole file at once.
    Written all;
    std::int64_t step = 1;
    for (int n = 0; n < kRecords; ++n, ++step) {
        for (int i = 0; i < kOpsPerStep; ++i) {
            writer.write(OpRecord{0, step, i, -1, -1, -1, 0, n, n + 1});
            all.ops.push_back({step, n});
        }
        ScalingRecord sc = sample_scaling(m, 0, step);
        sc.amax[0] = static_cast<float>(n);
        writer.write(sc);
        if (step % m.capture_every == 0) {
            OperandRecord o = sample_operand(m, {0, step, 0, Gemm::Fprop, Operand::X});
            o.stats.amax = n;
            writer.write(o);
        }
        writer.write(sample_step(0, step));
        all.last_attempt[step] = n;
        if (n % kRewindEvery == kRewindEvery - 1) step -= kRewindBy;
        if (n % 7 == 6) {
            writer.flush();
            r.refresh();
        }
    }
    writer.close();
    r.refresh();
    check(r, all, 0);
}

}  // namespace
}  // namespace fp8scope::trace
