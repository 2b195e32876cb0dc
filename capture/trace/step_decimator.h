// Series thinned for display, spikes kept: the steps are cut into at most `max_buckets`
// equal buckets of consecutive steps, and each bucket keeps, of every figure of every
// series, the record with its smallest and the one with its largest value, its first
// record the figures call bad (a NaN or infinite loss or amax), and, where the figures ask
// for it, its first record. A plot of the kept records, a pixel or more per bucket, draws
// every bucket's full range: a one-step spike is never averaged or sampled away (min/max
// decimation).
//
// StepDecimator thins a run's step records (loss, eval loss, lr, grad norm, step time,
// tokens/s). SlotDecimator thins a run's per-step amax and scale, one series per operand
// slot (amax, scale and amax x scale, so the step of a bucket where the cast overflows most
// is kept). RankDecimator thins a rank's step times. All keep each bucket's first record too: runs that step together keep the
// same first steps, so a difference of two runs has a point in every bucket, and a plot
// starts at the run's first step.
//
// Records come in file order, one step at a time (one record per series). The buckets
// start one step wide and double (neighbours merge, which keeps each bucket's extremes
// exact) whenever a step lies past the last bucket, so a growing run needs no step range
// in advance. A step not newer than the run's last is a rewind: the records of that step
// and later are dropped; the bucket it falls in then lacks the extremes of its abandoned
// records and keeps only those of the records before them.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

template <class Figures>
class MinMaxDecimator {
public:
    using Record = typename Figures::Record;
    static constexpr std::size_t kFigures = Figures::kCount;
    static constexpr std::size_t kDefaultBuckets = 4096;

    // `series`: records per step (1 at least); `max_buckets`: 3 at least (a step 2^64 - 1
    // past the origin lies in bucket 2 of INT64_MAX-wide buckets).
    explicit MinMaxDecimator(std::size_t max_buckets = kDefaultBuckets, std::size_t series = 1)
        : max_buckets_(std::max<std::size_t>(max_buckets, 3)), series_(std::max<std::size_t>(series, 1)) {}

    void add(const Record& r) { add(std::span<const Record>(&r, 1)); }
    // One step's records, one per series (all of one step).
    void add(std::span<const Record> step_records);
    // The kept records of `series`, step ascending, each once. Every record that was added
    // and not abandoned when there are no more steps than buckets.
    std::vector<Record> rows(std::size_t series = 0) const;

    // The step of the last record added (where the run is now); meaningless while empty().
    std::int64_t last() const { return last_; }
    bool empty() const { return empty_; }
    std::size_t series() const { return series_; }
    // Bucket b holds the steps [origin + b * width, origin + (b + 1) * width).
    std::int64_t origin() const { return origin_; }
    std::int64_t width() const { return width_; }
    static double figure(const Record& r, std::size_t f) { return Figures::figure(r, f); }

private:
    struct Cell {  // one series in one bucket
        std::array<Record, kFigures> min, max;
        std::array<bool, kFigures> has{};  // a finite value of the figure was seen
        Record bad, first;
        bool has_bad = false, has_first = false;
    };
    std::size_t bucket_of(std::int64_t step) const {
        // Unsigned: a damaged step far from the origin neither overflows nor goes negative.
        return static_cast<std::size_t>((static_cast<std::uint64_t>(step) - static_cast<std::uint64_t>(origin_)) /
                                        static_cast<std::uint64_t>(width_));
    }
    std::size_t buckets() const { return cells_.size() / series_; }
    static void merge(Cell& into, const Cell& from);
    static void forget_from(Cell& k, std::int64_t step);
    void rewind_to(std::int64_t step);

    std::size_t max_buckets_, series_;
    std::int64_t origin_ = 0, width_ = 1, last_ = 0;
    bool empty_ = true;
    std::vector<Cell> cells_;  // bucket b, series s: cells_[b * series_ + s]
};

struct StepFigures {
    using Record = StepRecord;
    static constexpr std::size_t kCount = 6;
    static constexpr bool kKeepFirst = true;
    static std::int64_t step(const StepRecord& r) { return r.step; }
    static double figure(const StepRecord& r, std::size_t f) {
        switch (f) {
            case 0: return r.loss;
            case 1: return r.eval_loss;
            case 2: return r.lr;
            case 3: return r.grad_norm;
            case 4: return r.step_ms;
            default: return r.tokens_per_s;
        }
    }
    static bool bad(const StepRecord& r) { return !std::isfinite(r.loss); }
};
using StepDecimator = MinMaxDecimator<StepFigures>;

// A rank's step times (compute, wait for the gradient sums, the whole step).
struct RankFigures {
    using Record = RankStepRecord;
    static constexpr std::size_t kCount = 3;
    static constexpr bool kKeepFirst = true;
    static std::int64_t step(const RankStepRecord& r) { return r.step; }
    static double figure(const RankStepRecord& r, std::size_t f) {
        return f == 0 ? r.compute_ms : f == 1 ? r.comm_ms : r.step_ms;
    }
    static bool bad(const RankStepRecord& r) { return !std::isfinite(r.step_ms); }
};
using RankDecimator = MinMaxDecimator<RankFigures>;

// One operand slot's amax and scale in use at one step (ScalingRecord's columns).
struct SlotPoint {
    std::int64_t step = 0;
    float amax = 0, scale = 0;
    bool operator==(const SlotPoint&) const = default;
};
struct SlotFigures {
    using Record = SlotPoint;
    static constexpr std::size_t kCount = 3;
    static constexpr bool kKeepFirst = true;
    static std::int64_t step(const SlotPoint& p) { return p.step; }
    static double figure(const SlotPoint& p, std::size_t f) {
        return f == 0 ? p.amax : f == 1 ? p.scale : static_cast<double>(p.amax) * p.scale;
    }
    // A NaN scale is no scale (block quantizers, float32); an infinite one is not.
    static bool bad(const SlotPoint& p) { return !std::isfinite(p.amax) || std::isinf(p.scale); }
};
using SlotDecimator = MinMaxDecimator<SlotFigures>;

template <class Figures>
void MinMaxDecimator<Figures>::merge(Cell& into, const Cell& from) {
    for (std::size_t f = 0; f < kFigures; ++f) {
        if (!from.has[f]) continue;
        if (!into.has[f] || figure(from.min[f], f) < figure(into.min[f], f)) into.min[f] = from.min[f];
        if (!into.has[f] || figure(from.max[f], f) > figure(into.max[f], f)) into.max[f] = from.max[f];
        into.has[f] = true;
    }
    if (from.has_bad && (!into.has_bad || Figures::step(from.bad) < Figures::step(into.bad))) {
        into.bad = from.bad;
        into.has_bad = true;
    }
    if (from.has_first && (!into.has_first || Figures::step(from.first) < Figures::step(into.first))) {
        into.first = from.first;
        into.has_first = true;
    }
}

template <class Figures>
void MinMaxDecimator<Figures>::forget_from(Cell& k, std::int64_t step) {
    for (std::size_t f = 0; f < kFigures; ++f)
        if (k.has[f] && (Figures::step(k.min[f]) >= step || Figures::step(k.max[f]) >= step)) {
            // The extreme left with the abandoned records: what stands of it is the other
            // one, if that is older; otherwise the figure starts over in this bucket.
            const bool min_stands = Figures::step(k.min[f]) < step, max_stands = Figures::step(k.max[f]) < step;
            if (min_stands) k.max[f] = k.min[f];
            else if (max_stands) k.min[f] = k.max[f];
            else k.has[f] = false;
        }
    if (k.has_bad && Figures::step(k.bad) >= step) k.has_bad = false;
    if (k.has_first && Figures::step(k.first) >= step) k.has_first = false;
}

template <class Figures>
void MinMaxDecimator<Figures>::rewind_to(std::int64_t step) {
    if (step <= origin_) {  // back to or before the first step: nothing stands
        cells_.clear();
        origin_ = step;
        return;
    }
    const std::size_t b = bucket_of(step);
    if (b + 1 < buckets()) cells_.resize((b + 1) * series_);
    if (b >= buckets()) return;
    for (std::size_t s = 0; s < series_; ++s) forget_from(cells_[b * series_ + s], step);
}

template <class Figures>
void MinMaxDecimator<Figures>::add(std::span<const Record> step_records) {
    if (step_records.empty()) return;
    const std::int64_t step = Figures::step(step_records[0]);
    if (empty_) {
        origin_ = step;
        empty_ = false;
    } else if (step <= last_) {
        rewind_to(step);
    }
    last_ = step;
    std::size_t b = bucket_of(step);
    while (b >= max_buckets_) {  // the buckets double: neighbours merge
        std::vector<Cell> merged(((buckets() + 1) / 2) * series_);
        for (std::size_t i = 0; i < buckets(); ++i)
            for (std::size_t s = 0; s < series_; ++s) merge(merged[(i / 2) * series_ + s], cells_[i * series_ + s]);
        cells_ = std::move(merged);
        width_ = width_ > INT64_MAX / 2 ? INT64_MAX : width_ * 2;
        b = bucket_of(step);
    }
    if (b >= buckets()) cells_.resize((b + 1) * series_);
    for (std::size_t s = 0; s < series_ && s < step_records.size(); ++s) {
        const Record& r = step_records[s];
        Cell& k = cells_[b * series_ + s];
        for (std::size_t f = 0; f < kFigures; ++f) {
            const double v = figure(r, f);
            if (!std::isfinite(v)) continue;
            if (!k.has[f] || v < figure(k.min[f], f)) k.min[f] = r;
            if (!k.has[f] || v > figure(k.max[f], f)) k.max[f] = r;
            k.has[f] = true;
        }
        if (!k.has_bad && Figures::bad(r)) {
            k.bad = r;
            k.has_bad = true;
        }
        if (Figures::kKeepFirst && !k.has_first) {
            k.first = r;
            k.has_first = true;
        }
    }
}

template <class Figures>
std::vector<typename Figures::Record> MinMaxDecimator<Figures>::rows(std::size_t series) const {
    std::vector<Record> out;
    if (series >= series_) return out;
    const auto by_step = [](const Record& a, const Record& b) { return Figures::step(a) < Figures::step(b); };
    const auto same_step = [](const Record& a, const Record& b) { return Figures::step(a) == Figures::step(b); };
    for (std::size_t b = 0; b < buckets(); ++b) {
        const Cell& k = cells_[b * series_ + series];
        const std::size_t first = out.size();
        for (std::size_t f = 0; f < kFigures; ++f)
            if (k.has[f]) {
                out.push_back(k.min[f]);
                out.push_back(k.max[f]);
            }
        if (k.has_bad) out.push_back(k.bad);
        if (k.has_first) out.push_back(k.first);
        // A record that is the extreme of several figures is kept once.
        std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), by_step);
        out.erase(std::unique(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(), same_step), out.end());
    }
    return out;
}

}  // namespace fp8scope::trace
