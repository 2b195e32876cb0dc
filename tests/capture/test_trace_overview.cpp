// Large traces: the decimated steps against a brute-force oracle (every bucket's smallest
// and largest value of every figure is kept, each kept record is one that was written and
// stands), and a trace opened as an overview, whose ranges read on demand equal the same
// ranges of the trace opened whole, for random ranges, with rewinds, and as the file grows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <sys/wait.h>
#include <unistd.h>
#include <set>

#include "reader_overview.h"
#include "step_decimator.h"
#include "trace_fixture.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace fp8scope::trace {
namespace {
using namespace testing;

// A run's records with noise, spikes, NaN losses and eval losses now and then.
std::vector<StepRecord> noisy_steps(int run, std::int64_t first, std::int64_t n, std::mt19937_64& rng) {
    std::normal_distribution<double> noise(0, 1);
    std::vector<StepRecord> out;
    for (std::int64_t i = 0; i < n; ++i) {
        StepRecord r = sample_step(run, first + i);
        r.loss += 0.1 * noise(rng);
        if (rng() % 997 == 0) r.loss += 50;  // a one-step spike
        if (rng() % 1999 == 0) r.loss = NAN;
        r.step_ms = 100 + static_cast<double>(rng() % 1000000);  // tells records apart
        r.grad_norm = std::abs(noise(rng));
        r.lr = rng() % 3 ? r.lr : NAN;
        out.push_back(r);
    }
    return out;
}

// The records that stand, by replaying them: a step not newer than the run's last drops
// that step and every later one.
std::vector<StepRecord> standing_records_of(const std::vector<StepRecord>& written) {
    std::map<std::int64_t, StepRecord> kept;
    for (const StepRecord& r : written) {
        kept.erase(kept.lower_bound(r.step), kept.end());
        kept[r.step] = r;
    }
    std::vector<StepRecord> out;
    for (const auto& [step, r] : kept) out.push_back(r);
    return out;
}

// The oracle: with the decimator's final buckets, every bucket's smallest and largest
// finite value of each figure among `standing` is a value of the bucket's kept records,
// and so are a non-finite loss when the bucket has one and the bucket's first record. A bucket a rewind went back into
// (one of `rewound`) may lack the extremes of its records before the rewind.
void expect_extremes_kept(const StepDecimator& d, const std::vector<StepRecord>& standing,
                          const std::vector<std::int64_t>& rewound = {}) {
    const std::vector<StepRecord> kept = d.rows();
    std::map<std::int64_t, StepRecord> by_step;
    for (const auto& r : standing) by_step[r.step] = r;
    for (std::size_t i = 0; i < kept.size(); ++i) {
        ASSERT_TRUE(by_step.count(kept[i].step)) << "step " << kept[i].step << " was never written or was abandoned";
        EXPECT_EQ(by_step[kept[i].step].step_ms, kept[i].step_ms) << kept[i].step;  // the standing record, not another
        if (i > 0) {
            ASSERT_LT(kept[i - 1].step, kept[i].step);
        }
    }
    const auto bucket = [&](std::int64_t step) { return (step - d.origin()) / d.width(); };
    std::map<std::int64_t, std::vector<const StepRecord*>> all, mine;
    for (const auto& r : standing) all[bucket(r.step)].push_back(&r);
    for (const auto& r : kept) mine[bucket(r.step)].push_back(&r);
    for (const auto& [b, rows] : all) {
        if (std::any_of(rewound.begin(), rewound.end(), [&, b = b](std::int64_t s) { return bucket(s) == b; })) continue;
        const StepRecord* first = *std::min_element(rows.begin(), rows.end(), [](auto* x, auto* y) { return x->step < y->step; });
        EXPECT_TRUE(std::any_of(mine[b].begin(), mine[b].end(), [&](auto* r) { return r->step == first->step; }))
            << "bucket " << b << " lacks its first step " << first->step;
        for (std::size_t f = 0; f < StepDecimator::kFigures; ++f) {
            double lo = INFINITY, hi = -INFINITY;
            bool bad_loss = false;
            for (const StepRecord* r : rows) {
                const double v = StepDecimator::figure(*r, f);
                if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
                bad_loss = bad_loss || (f == 0 && !std::isfinite(v));
            }
            bool has_lo = !std::isfinite(lo), has_hi = !std::isfinite(hi), has_bad = !bad_loss;
            for (const StepRecord* r : mine[b]) {
                const double v = StepDecimator::figure(*r, f);
                has_lo = has_lo || v == lo;
                has_hi = has_hi || v == hi;
                has_bad = has_bad || !std::isfinite(v);
            }
            EXPECT_TRUE(has_lo && has_hi && has_bad) << "bucket " << b << " figure " << f << ": min " << lo << " max " << hi;
        }
    }
}

TEST(StepDecimator, KeepsEveryBucketsExtremes) {
    std::mt19937_64 rng(7);
    for (std::size_t buckets : {3u, 64u, 1000u}) {
        for (std::int64_t n : {1, 50, 5000, 100000}) {
            const auto rows = noisy_steps(0, 1, n, rng);
            StepDecimator d(buckets);
            for (const auto& r : rows) d.add(r);
            ASSERT_LE((rows.back().step - d.origin()) / d.width(), static_cast<std::int64_t>(buckets) - 1);
            expect_extremes_kept(d, rows);
            // Few enough steps: every record; more: at most 14 per bucket.
            if (n <= static_cast<std::int64_t>(buckets)) EXPECT_EQ(d.rows().size(), rows.size());
            EXPECT_LE(d.rows().size(), buckets * (2 * StepDecimator::kFigures + 2));
        }
    }
}

// Runs that step together keep common steps in every bucket: their difference has a point
// in each.
TEST(StepDecimator, RunsInLockStepShareAStepPerBucket) {
    std::mt19937_64 rng(13);
    StepDecimator a(500), b(500);
    for (const auto& r : noisy_steps(0, 1, 100000, rng)) a.add(r);
    for (const auto& r : noisy_steps(1, 1, 100000, rng)) b.add(r);
    ASSERT_EQ(a.width(), b.width());
    std::set<std::int64_t> in_a, buckets;
    for (const auto& r : a.rows()) in_a.insert(r.step);
    for (const auto& r : b.rows())
        if (in_a.count(r.step)) buckets.insert((r.step - a.origin()) / a.width());
    EXPECT_EQ(buckets.size(), static_cast<std::size_t>((100000 - 1) / a.width() + 1));
}

TEST(StepDecimator, StepsWithGapsAndAFarStep) {
    std::mt19937_64 rng(3);
    auto rows = noisy_steps(0, -500, 100, rng);
    for (auto& r : noisy_steps(0, 100000, 100, rng)) rows.push_back(r);
    StepDecimator d(16);
    for (const auto& r : rows) d.add(r);
    expect_extremes_kept(d, rows);
    // A damaged step far off costs buckets, not memory or a crash.
    StepRecord far = sample_step(0, INT64_MAX);
    d.add(far);
    EXPECT_EQ(d.rows().back().step, INT64_MAX);
    StepDecimator two(2);  // the fewest buckets (3), the widest span of steps
    two.add(sample_step(0, INT64_MIN));
    two.add(sample_step(0, INT64_MAX));
    EXPECT_EQ(two.rows().size(), 2u);
}

TEST(StepDecimator, RewindsDropWhatWasAbandoned) {
    std::mt19937_64 rng(11);
    StepDecimator d(256);
    std::vector<StepRecord> written;
    std::int64_t step = 1;
    for (int n = 0; n < 20000; ++n, ++step) {
        StepRecord r = noisy_steps(0, step, 1, rng)[0];
        r.loss += n % 2 ? 0 : 1000 * (n / 1000 % 2);  // the abandoned attempts have larger losses
        written.push_back(r);
        d.add(r);
        if (n % 1000 == 999) step -= 300;
    }
    const std::vector<StepRecord> standing = standing_records_of(written);
    for (const StepRecord& r : d.rows())
        EXPECT_TRUE(std::any_of(standing.begin(), standing.end(),
                                [&](const StepRecord& s) { return s.step == r.step && s.step_ms == r.step_ms; }))
            << "step " << r.step << " was abandoned";
    // A rewind to the first step leaves nothing.
    StepDecimator again(16);
    for (const auto& r : noisy_steps(0, 5, 50, rng)) again.add(r);
    again.add(sample_step(0, 5));
    EXPECT_EQ(again.rows().size(), 1u);
}

// Two runs of 30,000 step records that go back 250 steps every 997, with scaling rows and
// kernel sums every step: what was written, per run, in file order.
std::vector<std::vector<StepRecord>> write_long_trace(const std::string& path, const TraceMeta& m) {
    std::mt19937_64 rng(5);
    std::vector<std::vector<StepRecord>> written(2);
    TraceWriter w(path, m);
    std::int64_t step = 1;
    for (int n = 0; n < 30000; ++n, ++step) {
        for (int run = 0; run < 2; ++run) {
            w.write(sample_scaling(m, run, step));
            w.write(KernelStepRecord{run, step, 0, -1, OpKind::Kernel, 0, 1, 10 + n, 10 + n, 10 + n, 0});
            StepRecord r = noisy_steps(run, step, 1, rng)[0];
            r.grad_norm = n;  // tells attempts at one step apart
            w.write(r);
            written[run].push_back(r);
        }
        if (n % 997 == 996) step -= 250;
    }
    w.close();
    return written;
}

void expect_same_steps(const std::vector<StepRecord>& got, const std::vector<StepRecord>& want, const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_EQ(got[i].step, want[i].step) << what;
        ASSERT_EQ(got[i].grad_norm, want[i].grad_norm) << what << " step " << got[i].step;
    }
}

TEST(TraceOverview, RangesReadOnDemandEqualFullReads) {
    TempDir dir;
    const std::string path = dir / "long.h5";
    const TraceMeta m = sample_meta();
    const auto written = write_long_trace(path, m);
    const TraceReader whole(path);
    const TraceReader over(path, {.min_step_rows = 1000, .tail_steps = 100});
    const TraceReader small(path, {.min_step_rows = 1'000'000});  // too few rows for an overview
    ASSERT_FALSE(whole.overview());
    ASSERT_FALSE(small.overview());
    ASSERT_TRUE(over.overview());
    std::mt19937_64 rng(9);
    for (int run = 0; run < 2; ++run) {
        const auto standing = standing_records_of(written[run]);
        const std::int64_t last = standing.back().step;
        EXPECT_EQ(over.detail_from(), last - 99);
        for (int k = 0; k < 200; ++k) {
            std::int64_t a = static_cast<std::int64_t>(rng() % (last + 20)) - 10, b = a + static_cast<std::int64_t>(rng() % 3000);
            if (k == 0) a = INT64_MIN, b = INT64_MAX;
            std::vector<StepRecord> want;
            for (const auto& r : standing)
                if (r.step >= a && r.step <= b) want.push_back(r);
            const std::string what = "run " + std::to_string(run) + " [" + std::to_string(a) + ", " + std::to_string(b) + "]";
            expect_same_steps(over.steps(run, a, b), want, "overview " + what);
            expect_same_steps(whole.steps(run, a, b), want, "whole " + what);
        }
        // One decimation of every record, whichever way the trace was opened.
        expect_same_steps(over.step_overview(run), whole.step_overview(run), "overview");
        StepDecimator d;
        std::vector<std::int64_t> rewound;
        for (std::size_t i = 0; i < written[run].size(); ++i) {
            d.add(written[run][i]);
            if (i > 0 && written[run][i].step <= written[run][i - 1].step) rewound.push_back(written[run][i].step);
        }
        ASSERT_EQ(rewound.size(), 30u);
        expect_extremes_kept(d, standing, rewound);
        expect_same_steps(over.step_overview(run), d.rows(), "decimated");
        EXPECT_LT(over.step_overview(run).size(), standing.size());
        // The newest steps are indexed whole: their records as the whole trace's.
        const std::int64_t from = over.detail_from();
        std::vector<StepRecord> tail;
        for (const auto& r : standing_records_of(over.steps(run))) tail.push_back(r);
        std::erase_if(tail, [&](const StepRecord& r) { return r.step < from; });
        expect_same_steps(tail, whole.steps(run, from, last), "tail");
        EXPECT_EQ(over.scaling(run, from, last).size(), whole.scaling(run, from, last).size());
        EXPECT_LT(over.scaling(run, INT64_MIN, INT64_MAX).size(), whole.scaling(run, INT64_MIN, INT64_MAX).size() / 10);
        const auto sums = over.kernel_steps(run, from, last), want_sums = whole.kernel_steps(run, from, last);
        ASSERT_EQ(sums.size(), want_sums.size());
        for (std::size_t i = 0; i < sums.size(); ++i) EXPECT_EQ(sums[i].total_ns, want_sums[i].total_ns);
        EXPECT_EQ(over.last_step(run), whole.last_step(run));
    }
}

// A trace still being written (SWMR, the writer in another process) opened as an overview:
// the steps a refresh brings are in the decimated series and in ranges read on demand.
TEST(TraceOverview, FollowsAGrowingFile) {
    TempDir dir;
    const std::string path = dir / "growing.h5";
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    constexpr std::int64_t kRound = 6000;
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {  // the writer: a round of steps, a flush, a byte up, wait for a byte down
        char c = 0;
        try {
            const TraceMeta m = sample_meta();
            TraceWriter w(path, m, {.flush_interval = std::chrono::milliseconds(60000)});
            for (std::int64_t round = 0; round < 2; ++round) {
                for (std::int64_t s = round * kRound + 1; s <= (round + 1) * kRound; ++s) {
                    w.write(sample_scaling(m, 0, s));
                    w.write(sample_step(0, s));
                }
                w.flush();
                if (write(up[1], &c, 1) != 1 || read(down[0], &c, 1) != 1) _exit(1);
            }
        } catch (...) {
            _exit(1);
        }
        _exit(0);  // without close(): the file stays as SWMR left it mid-run
    }
    char c = 0;
    ASSERT_EQ(read(up[0], &c, 1), 1);
    TraceReader reader(path, {.min_step_rows = 1, .tail_steps = 100});
    ASSERT_TRUE(reader.overview());
    EXPECT_EQ(reader.detail_from(), kRound - 99);
    EXPECT_EQ(reader.steps(0, 1, kRound).size(), static_cast<std::size_t>(kRound));
    EXPECT_EQ(reader.step_overview(0).back().step, kRound);
    ASSERT_EQ(write(down[1], &c, 1), 1);
    ASSERT_EQ(read(up[0], &c, 1), 1);
    EXPECT_TRUE(reader.refresh());
    const auto steps = reader.steps(0, kRound - 1000, 2 * kRound);
    ASSERT_EQ(steps.size(), static_cast<std::size_t>(kRound + 1001));
    for (const StepRecord& r : steps) ASSERT_EQ(r.loss, sample_step(0, r.step).loss) << r.step;
    EXPECT_EQ(reader.step_overview(0).back().step, 2 * kRound);
    EXPECT_EQ(reader.scaling(0, kRound + 1, 2 * kRound).size(), static_cast<std::size_t>(kRound));  // indexed as added
    ASSERT_EQ(write(down[1], &c, 1), 1);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}

}  // namespace
}  // namespace fp8scope::trace

namespace fp8scope::trace {
namespace {
using namespace testing;

// The oracle of a slot's decimated points: with buckets of `width` steps from `origin`, every
// bucket's smallest and largest finite amax, scale and amax x scale among `standing` (one
// slot's points, step ascending) are values of the bucket's kept points, and so is a point
// with a non-finite amax or an infinite scale when the bucket has one, and its first point.
// Every kept point is one of `standing`, once, step ascending. A bucket a rewind went back
// into (one of `rewound`) may lack the extremes of its points before the rewind.
void expect_slot_extremes_kept(const std::vector<SlotPoint>& kept, const std::vector<SlotPoint>& standing,
                               std::int64_t origin, std::int64_t width, const std::vector<std::int64_t>& rewound = {}) {
    std::map<std::int64_t, SlotPoint> by_step;
    for (const auto& p : standing) by_step[p.step] = p;
    for (std::size_t i = 0; i < kept.size(); ++i) {
        ASSERT_TRUE(by_step.count(kept[i].step)) << "step " << kept[i].step << " was never written or was abandoned";
        const SlotPoint& want = by_step[kept[i].step];
        EXPECT_TRUE(std::memcmp(&want.amax, &kept[i].amax, sizeof(float)) == 0 &&
                    std::memcmp(&want.scale, &kept[i].scale, sizeof(float)) == 0)
            << "step " << kept[i].step << ": not the point written there";
        if (i > 0) ASSERT_LT(kept[i - 1].step, kept[i].step);
    }
    const auto bucket = [&](std::int64_t step) { return (step - origin) / width; };
    std::map<std::int64_t, std::vector<SlotPoint>> all, mine;
    for (const auto& p : standing) all[bucket(p.step)].push_back(p);
    for (const auto& p : kept) mine[bucket(p.step)].push_back(p);
    for (const auto& [b, points] : all) {
        if (std::any_of(rewound.begin(), rewound.end(), [&, b = b](std::int64_t s) { return bucket(s) == b; })) continue;
        EXPECT_EQ(mine[b].empty() ? -1 : mine[b].front().step, points.front().step) << "bucket " << b << " lacks its first step";
        for (std::size_t f = 0; f < SlotFigures::kCount; ++f) {
            double lo = INFINITY, hi = -INFINITY;
            for (const SlotPoint& p : points)
                if (const double v = SlotFigures::figure(p, f); std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
            bool has_lo = !std::isfinite(lo), has_hi = !std::isfinite(hi);
            for (const SlotPoint& p : mine[b]) {
                has_lo = has_lo || SlotFigures::figure(p, f) == lo;
                has_hi = has_hi || SlotFigures::figure(p, f) == hi;
            }
            EXPECT_TRUE(has_lo && has_hi) << "bucket " << b << " figure " << f << ": min " << lo << " max " << hi;
        }
        const bool bad = std::any_of(points.begin(), points.end(), [](const SlotPoint& p) { return SlotFigures::bad(p); });
        const bool kept_bad = std::any_of(mine[b].begin(), mine[b].end(), [](const SlotPoint& p) { return SlotFigures::bad(p); });
        EXPECT_EQ(bad, kept_bad) << "bucket " << b << ": a NaN or infinite amax dropped";
    }
}

// The width a decimator of `buckets` buckets has after steps from `origin` up to `most`.
std::int64_t width_after(std::int64_t origin, std::int64_t most, std::int64_t buckets) {
    std::int64_t w = 1;
    while ((most - origin) / w >= buckets) w *= 2;
    return w;
}

// Slot points with noise, one-step spikes, NaN and infinite amax, and NaN scales (block
// quantizers), told apart by their values.
SlotPoint noisy_point(std::int64_t step, int slot, std::mt19937_64& rng) {
    std::uniform_real_distribution<float> u(0.5f, 1.5f);
    SlotPoint p{step, u(rng) * (1 + slot), slot == 2 ? NAN : 448.0f / (1 + slot) * u(rng)};
    if (rng() % 499 == 0) p.amax *= 100;  // a spike
    if (rng() % 1499 == 0) p.amax = rng() % 2 ? NAN : INFINITY;
    if (slot == 1 && rng() % 1999 == 0) p.scale = INFINITY;
    return p;
}

TEST(SlotDecimator, KeepsEveryBucketsExtremesOfEverySlot) {
    std::mt19937_64 rng(11);
    constexpr int kSlots = 4;
    for (std::size_t buckets : {3u, 16u, 100u, 1024u}) {
        for (std::int64_t n : {5, 1000, 20011}) {
            SlotDecimator d(buckets, kSlots);
            std::vector<std::vector<SlotPoint>> standing(kSlots);
            std::int64_t step = 7;
            for (std::int64_t i = 0; i < n; ++i, step += 1 + static_cast<std::int64_t>(rng() % 3)) {
                std::vector<SlotPoint> row;
                for (int s = 0; s < kSlots; ++s) row.push_back(noisy_point(step, s, rng));
                d.add(row);
                for (int s = 0; s < kSlots; ++s) standing[s].push_back(row[s]);
            }
            ASSERT_EQ(d.origin(), 7);
            const std::int64_t last = standing[0].back().step;
            ASSERT_EQ(d.width(), width_after(7, last, static_cast<std::int64_t>(std::max<std::size_t>(buckets, 3))));
            for (int s = 0; s < kSlots; ++s) {
                const auto kept = d.rows(s);
                expect_slot_extremes_kept(kept, standing[s], d.origin(), d.width());
                if (n <= static_cast<std::int64_t>(buckets)) {
                    EXPECT_EQ(kept.size(), standing[s].size());
                } else {
                    EXPECT_LE(kept.size(), std::max<std::size_t>(buckets, 3) * (2 * SlotFigures::kCount + 2));
                }
            }
        }
    }
}

// Two runs of 20,000 scaling rows (each run's amax and scale noisy, told apart per attempt)
// that go back 100 steps every 1,500, with their step records: opened as an overview, the
// decimated amax and scale of every slot keep every bucket's extremes and non-finite
// points, and ranges read on demand equal the same ranges of the trace opened whole.
TEST(TraceOverview, ScalingDecimatedAndReadOnDemand) {
    TempDir dir;
    const std::string path = dir / "scaling.h5";
    const TraceMeta m = sample_meta();
    const int slots = static_cast<int>(m.linears.size()) * kOperandsPerLinear;
    std::mt19937_64 rng(3);
    std::vector<std::vector<std::int64_t>> rewound(2);
    std::int64_t most = 0;
    {
        TraceWriter w(path, m);
        std::int64_t step = 1;
        for (int n = 0; n < 20000; ++n, ++step) {
            for (int run = 0; run < 2; ++run) {
                ScalingRecord r{run, step, {}, {}};
                for (int s = 0; s < slots; ++s) {
                    const SlotPoint p = noisy_point(step, s, rng);
                    r.amax.push_back(p.amax);
                    r.scale.push_back(p.scale);
                }
                w.write(r);
                w.write(sample_step(run, step));
                if (n % 1500 == 0 && n > 0) rewound[run].push_back(step);
            }
            most = std::max(most, step);
            if (n % 1500 == 1499) step -= 100;
        }
        w.close();
    }
    const TraceReader whole(path);
    const TraceReader over(path, {.min_step_rows = 1000, .tail_steps = 100});
    ASSERT_TRUE(over.overview());
    for (int run = 0; run < 2; ++run) {
        // Every abandoned step was recorded again: the whole trace's index holds what stands.
        const std::vector<ScalingRecord> standing = whole.scaling(run, INT64_MIN, INT64_MAX);
        ASSERT_EQ(standing.size(), static_cast<std::size_t>(20000 - 100 * 13));
        const auto same = [&](const std::vector<ScalingRecord>& got, std::int64_t a, std::int64_t b, const std::string& what) {
            std::vector<const ScalingRecord*> want;
            for (const auto& r : standing)
                if (r.step >= a && r.step <= b) want.push_back(&r);
            ASSERT_EQ(got.size(), want.size()) << what;
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(got[i].step, want[i]->step) << what;
                ASSERT_EQ(got[i].amax.size(), want[i]->amax.size()) << what;
                ASSERT_EQ(std::memcmp(got[i].amax.data(), want[i]->amax.data(), got[i].amax.size() * sizeof(float)), 0) << what;
                ASSERT_EQ(std::memcmp(got[i].scale.data(), want[i]->scale.data(), got[i].scale.size() * sizeof(float)), 0) << what;
            }
        };
        for (int k = 0; k < 60; ++k) {
            std::int64_t a = static_cast<std::int64_t>(rng() % 19000) - 10, b = a + static_cast<std::int64_t>(rng() % 3000);
            if (k == 0) a = INT64_MIN, b = INT64_MAX;
            const std::string what = "run " + std::to_string(run) + " [" + std::to_string(a) + ", " + std::to_string(b) + "]";
            same(over.scaling_detail(run, a, b), a, b, "overview " + what);
            same(whole.scaling_detail(run, a, b), a, b, "whole " + what);
        }
        const auto decimated = over.scaling_overview(run);
        ASSERT_EQ(decimated.size(), static_cast<std::size_t>(slots));
        std::size_t kept = 0;
        for (int s = 0; s < slots; ++s) {
            std::vector<SlotPoint> points;
            for (const auto& r : standing) points.push_back({r.step, r.amax[s], r.scale[s]});
            expect_slot_extremes_kept(decimated[s], points, 1, width_after(1, most, ScalingOverview::kBuckets), rewound[run]);
            kept += decimated[s].size();
        }
        EXPECT_LT(kept, standing.size() * slots / 3);
        // A range decimated anew (a zoom too wide to hold whole): its standing points alone.
        const std::int64_t a = 2345, b = 17000;
        const auto zoomed = over.scaling_overview(run, a, b);
        ASSERT_EQ(zoomed.size(), static_cast<std::size_t>(slots));
        for (int s = 0; s < slots; ++s) {
            std::vector<SlotPoint> points;
            for (const auto& r : standing)
                if (r.step >= a && r.step <= b) points.push_back({r.step, r.amax[s], r.scale[s]});
            expect_slot_extremes_kept(zoomed[s], points, a, width_after(a, b, ScalingOverview::kBuckets));
            EXPECT_LT(zoomed[s].size(), points.size());
        }
    }
}

}  // namespace
}  // namespace fp8scope::trace

namespace fp8scope::trace {
namespace {
using namespace testing;

bool same_sum(const KernelStepRecord& a, const KernelStepRecord& b) {
    return a.run == b.run && a.step == b.step && a.op == b.op && a.parent == b.parent && a.kind == b.kind &&
           a.count == b.count && a.total_ns == b.total_ns && a.min_ns == b.min_ns && a.max_ns == b.max_ns;
}

// Two runs of 12,000 steps of kernel sums (one to three kernels a step, their times noisy
// with spikes) that go back 150 steps every 1,100: opened as an overview, the decimated
// sums keep every bucket's cheapest, dearest and first step with all their rows, and
// ranges read on demand hold exactly the sums that stand there.
TEST(TraceOverview, KernelSumsDecimatedAndReadOnDemand) {
    TempDir dir;
    const std::string path = dir / "kernels.h5";
    const TraceMeta m = sample_meta();
    std::mt19937_64 rng(17);
    std::vector<std::map<std::int64_t, std::vector<KernelStepRecord>>> standing(2);
    std::vector<std::vector<std::int64_t>> rewound(2);
    std::int64_t most = 0;
    {
        TraceWriter w(path, m);
        std::int64_t step = 1;
        for (int n = 0; n < 12000; ++n, ++step) {
            for (int run = 0; run < 2; ++run) {
                std::vector<KernelStepRecord> sums;
                for (int op = 0; op < 3; ++op) {
                    if (op > 0 && rng() % 3 == 0) continue;
                    const std::int64_t ns = 1000 + static_cast<std::int64_t>(rng() % 500) + (rng() % 701 == 0 ? 1'000'000 : 0);
                    sums.push_back({run, step, op, -1, OpKind::Kernel, 0, 2, ns, ns / 3, ns - ns / 3, 0});
                }
                for (const auto& k : sums) w.write(k);
                w.write(sample_step(run, step));
                auto& kept = standing[run];
                if (!kept.empty() && step <= kept.rbegin()->first) rewound[run].push_back(step);
                kept.erase(kept.lower_bound(step), kept.end());
                kept[step] = sums;
            }
            most = std::max(most, step);
            if (n % 1100 == 1099) step -= 150;
        }
        w.close();
    }
    const TraceReader whole(path);
    const TraceReader over(path, {.min_step_rows = 1000, .tail_steps = 100});
    ASSERT_TRUE(over.overview());
    for (int run = 0; run < 2; ++run) {
        for (int k = 0; k < 80; ++k) {
            std::int64_t a = static_cast<std::int64_t>(rng() % 11000) - 10, b = a + static_cast<std::int64_t>(rng() % 2000);
            if (k == 0) a = INT64_MIN, b = INT64_MAX;
            std::vector<KernelStepRecord> want;
            for (auto it = standing[run].lower_bound(a); it != standing[run].end() && it->first <= b; ++it)
                want.insert(want.end(), it->second.begin(), it->second.end());
            const auto got = over.kernel_steps_detail(run, a, b);
            ASSERT_EQ(got.size(), want.size()) << "run " << run << " [" << a << ", " << b << "]";
            for (std::size_t i = 0; i < got.size(); ++i)
                ASSERT_TRUE(same_sum(got[i], want[i])) << "run " << run << " step " << want[i].step;
        }
        // Decimated: whole steps that stand, each bucket's extremes and first step kept.
        const auto kept = over.kernel_step_overview(run);
        std::map<std::int64_t, std::vector<KernelStepRecord>> kept_steps;
        for (const auto& r : kept) kept_steps[r.step].push_back(r);
        EXPECT_LT(kept_steps.size(), standing[run].size());
        for (const auto& [step, rows] : kept_steps) {
            ASSERT_TRUE(standing[run].count(step)) << "step " << step << " was abandoned";
            const auto& want = standing[run][step];
            ASSERT_EQ(rows.size(), want.size()) << "step " << step;
            for (std::size_t i = 0; i < rows.size(); ++i) EXPECT_TRUE(same_sum(rows[i], want[i])) << step;
        }
        const std::int64_t width = width_after(1, most, StepDecimator::kDefaultBuckets);
        const auto bucket = [&](std::int64_t s) { return (s - 1) / width; };
        std::map<std::int64_t, std::vector<std::pair<std::int64_t, std::int64_t>>> buckets;  // (step, device ns)
        for (const auto& [step, rows] : standing[run]) {
            std::int64_t ns = 0;
            for (const auto& r : rows) ns += r.total_ns;
            buckets[bucket(step)].push_back({step, ns});
        }
        for (const auto& [b, steps] : buckets) {
            if (std::any_of(rewound[run].begin(), rewound[run].end(), [&, b = b](std::int64_t s) { return bucket(s) == b; })) continue;
            const auto [lo, hi] = std::minmax_element(steps.begin(), steps.end(), [](auto x, auto y) { return x.second < y.second; });
            std::set<std::int64_t> kept_ns;  // the device times of the bucket's kept steps
            for (const auto& [step, ns] : steps)
                if (kept_steps.count(step)) kept_ns.insert(ns);
            EXPECT_TRUE(kept_steps.count(steps.front().first)) << "bucket " << b << " lacks its first step";
            EXPECT_TRUE(kept_ns.count(lo->second) && kept_ns.count(hi->second))
                << "bucket " << b << " lacks its device time " << lo->second << " or " << hi->second;
        }
    }
}

// Two runs of 6,000 steps, each with a host op, and on some steps (one in five, chosen
// anew when a rewind records a step again) two kernels whose sums say so; they go back 150
// steps every 1,100. Opened as an overview (the newest 100 steps whole), ranges of /ops
// read on demand hold exactly the records that stand there, in file order, and the steps
// with kernel records are exactly those that stand with them.
TEST(TraceOverview, KernelRecordsReadOnDemand) {
    TempDir dir;
    const std::string path = dir / "ops.h5";
    const TraceMeta m = sample_meta();
    std::mt19937_64 rng(23);
    std::vector<std::map<std::int64_t, std::vector<OpRecord>>> standing(2);
    std::vector<std::set<std::int64_t>> recorded(2);
    {
        TraceWriter w(path, m);
        std::int64_t step = 1;
        for (int n = 0; n < 6000; ++n, ++step) {
            for (int run = 0; run < 2; ++run) {
                const bool kept = rng() % 5 == 0;
                std::vector<OpRecord> ops;
                OpRecord host{run, step, 0, -1, -1, -1, 0, step * 1000, step * 1000 + 500};
                ops.push_back(host);
                for (int k = 0; kept && k < 2; ++k) {
                    OpRecord kernel{run, step, 1 + k, -1, -1, 0, 7, step * 1000 + 10 * k, step * 1000 + 10 * k + 5};
                    kernel.kind = OpKind::Kernel;
                    kernel.parent = 0;
                    ops.push_back(kernel);
                }
                for (const auto& o : ops) w.write(o);
                w.write(KernelStepRecord{run, step, 1, 0, OpKind::Kernel, kept ? 1 : 0, 1, 5, 5, 5, 0});
                w.write(sample_step(run, step));
                auto& v = standing[run];
                v.erase(v.lower_bound(step), v.end());
                v[step] = ops;
                recorded[run].erase(recorded[run].lower_bound(step), recorded[run].end());
                if (kept) recorded[run].insert(step);
            }
            if (n % 1100 == 1099) step -= 150;
        }
        w.close();
    }
    const TraceReader over(path, {.min_step_rows = 1000, .tail_steps = 100});
    ASSERT_TRUE(over.overview());
    for (int run = 0; run < 2; ++run) {
        EXPECT_EQ(over.kernel_record_steps(run), std::vector<std::int64_t>(recorded[run].begin(), recorded[run].end()));
        for (int k = 0; k < 60; ++k) {
            const std::int64_t a = static_cast<std::int64_t>(rng() % 5200) - 10, b = a + static_cast<std::int64_t>(rng() % 300);
            std::vector<OpRecord> want;
            for (auto it = standing[run].lower_bound(a); it != standing[run].end() && it->first <= b; ++it)
                want.insert(want.end(), it->second.begin(), it->second.end());
            const auto got = over.ops_detail(run, a, b);
            ASSERT_EQ(got.size(), want.size()) << "run " << run << " [" << a << ", " << b << "]";
            for (std::size_t i = 0; i < got.size(); ++i) {
                ASSERT_EQ(got[i].step, want[i].step) << "run " << run << " [" << a << ", " << b << "]";
                ASSERT_EQ(got[i].op, want[i].op) << "step " << want[i].step;
                ASSERT_EQ(got[i].device, want[i].device) << "step " << want[i].step;
                ASSERT_EQ(got[i].start_ns, want[i].start_ns) << "step " << want[i].step;
            }
        }
    }
}

}  // namespace
}  // namespace fp8scope::trace

namespace fp8scope::trace {
namespace {
using namespace testing;

// A three-rank job's 12,000 steps of rank records (noisy times, spikes, a NaN step time now
// and then) that go back 100 steps every 1,300: opened as an overview, every rank's
// decimated records keep every bucket's extremes of compute, comm and step time, its NaN
// and its first step, and ranges read on demand hold exactly the records that stand.
TEST(TraceOverview, RankTimesDecimatedAndReadOnDemand) {
    TempDir dir;
    const std::string path = dir / "ranks.h5";
    TraceMeta m = sample_meta();
    m.world_size = 3;
    std::mt19937_64 rng(23);
    std::vector<std::map<std::int64_t, RankStepRecord>> standing(3);
    std::vector<std::int64_t> rewound;
    std::int64_t most = 0;
    {
        TraceWriter w(path, m);
        std::int64_t step = 1;
        for (int n = 0; n < 12000; ++n, ++step) {
            if (!standing[0].empty() && step <= standing[0].rbegin()->first) rewound.push_back(step);
            for (int run = 0; run < 2; ++run) w.write(sample_step(run, step));
            for (int rank = 0; rank < 3; ++rank) {
                const auto t = [&] { return 50.0 + static_cast<double>(rng() % 100000) / 1000 + (rng() % 997 == 0 ? 500 : 0); };
                RankStepRecord r{step, rank, t(), t(), t()};
                if (rng() % 1499 == 0) r.step_ms = NAN;
                w.write(r);
                standing[rank].erase(standing[rank].lower_bound(step), standing[rank].end());
                standing[rank][step] = r;
            }
            most = std::max(most, step);
            if (n % 1300 == 1299) step -= 100;
        }
        w.close();
    }
    const TraceReader over(path, {.min_step_rows = 1000, .tail_steps = 100});
    ASSERT_TRUE(over.overview());
    const auto same = [](const RankStepRecord& a, const RankStepRecord& b) {
        return a.step == b.step && a.rank == b.rank && a.compute_ms == b.compute_ms && a.comm_ms == b.comm_ms &&
               (a.step_ms == b.step_ms || (std::isnan(a.step_ms) && std::isnan(b.step_ms)));
    };
    for (int k = 0; k < 40; ++k) {
        std::int64_t a = static_cast<std::int64_t>(rng() % 11000) - 10, b = a + static_cast<std::int64_t>(rng() % 3000);
        if (k == 0) a = INT64_MIN, b = INT64_MAX;
        std::vector<RankStepRecord> want;
        for (int rank = 0; rank < 3; ++rank)
            for (auto it = standing[rank].lower_bound(a); it != standing[rank].end() && it->first <= b; ++it) want.push_back(it->second);
        const auto got = over.rank_steps_detail(a, b);
        ASSERT_EQ(got.size(), want.size()) << "[" << a << ", " << b << "]";
        for (std::size_t i = 0; i < got.size(); ++i) ASSERT_TRUE(same(got[i], want[i])) << "step " << want[i].step;
    }
    const std::int64_t width = width_after(1, most, StepDecimator::kDefaultBuckets);
    const auto bucket = [&](std::int64_t s) { return (s - 1) / width; };
    std::vector<std::map<std::int64_t, std::vector<RankStepRecord>>> kept(3);
    std::size_t n_kept = 0;
    for (const auto& r : over.rank_overview()) {
        ASSERT_TRUE(standing[r.rank].count(r.step) && same(standing[r.rank][r.step], r)) << "rank " << r.rank << " step " << r.step;
        kept[r.rank][bucket(r.step)].push_back(r);
        ++n_kept;
    }
    EXPECT_LT(n_kept, 3 * standing[0].size());
    for (int rank = 0; rank < 3; ++rank) {
        std::map<std::int64_t, std::vector<RankStepRecord>> all;
        for (const auto& [step, r] : standing[rank]) all[bucket(step)].push_back(r);
        for (const auto& [b, rows] : all) {
            if (std::any_of(rewound.begin(), rewound.end(), [&, b = b](std::int64_t s) { return bucket(s) == b; })) continue;
            const auto& mine = kept[rank][b];
            EXPECT_TRUE(!mine.empty() && mine.front().step == rows.front().step) << "rank " << rank << " bucket " << b;
            for (std::size_t f = 0; f < RankFigures::kCount; ++f) {
                double lo = INFINITY, hi = -INFINITY;
                for (const auto& r : rows)
                    if (const double v = RankFigures::figure(r, f); std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
                bool has_lo = false, has_hi = false;
                for (const auto& r : mine) has_lo = has_lo || RankFigures::figure(r, f) == lo, has_hi = has_hi || RankFigures::figure(r, f) == hi;
                EXPECT_TRUE(has_lo && has_hi) << "rank " << rank << " bucket " << b << " figure " << f;
            }
            const bool nan = std::any_of(rows.begin(), rows.end(), [](const auto& r) { return std::isnan(r.step_ms); });
            EXPECT_EQ(nan, std::any_of(mine.begin(), mine.end(), [](const auto& r) { return std::isnan(r.step_ms); }))
                << "rank " << rank << " bucket " << b;
        }
    }
}

}  // namespace
}  // namespace fp8scope::trace
