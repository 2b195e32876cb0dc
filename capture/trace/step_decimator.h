// A run's step records thinned for display, spikes kept: the steps are cut into at most
// `max_buckets` equal buckets of consecutive steps, and each bucket keeps, of every figure
// (loss, eval loss, lr, grad norm, step time, tokens/s), the record with its smallest and
// the one with its largest value, its first record with a NaN or infinite loss, and its
// first record (runs that step together keep the same first steps, so a difference of two
// runs has a point in every bucket). A plot
// of the kept records, a pixel or more per bucket, draws every bucket's full range: a
// one-step spike is never averaged or sampled away (min/max decimation).
//
// Records come in file order. The buckets start one step wide and double (neighbours merge,
// which keeps each bucket's extremes exact) whenever a step lies past the last bucket, so a
// growing run needs no step range in advance. A step not newer than the run's last is a
// rewind: the records of that step and later are dropped; the bucket it falls in then lacks
// the extremes of its abandoned records and keeps only those of the records before them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "trace_records.h"

namespace fp8scope::trace {

class StepDecimator {
public:
    static constexpr std::size_t kFigures = 6;
    static constexpr std::size_t kDefaultBuckets = 4096;

    explicit StepDecimator(std::size_t max_buckets = kDefaultBuckets);  // 3 at least

    void add(const StepRecord& r);
    // The kept records, step ascending, each once. Every record that was added and not
    // abandoned when there are no more steps than buckets.
    std::vector<StepRecord> rows() const;

    // The step of the last record added (where the run is now); meaningless while empty().
    std::int64_t last() const { return last_; }
    bool empty() const { return empty_; }
    // Bucket b holds the steps [origin + b * width, origin + (b + 1) * width).
    std::int64_t origin() const { return origin_; }
    std::int64_t width() const { return width_; }
    // The figures kept per bucket, in StepRecord's order.
    static double figure(const StepRecord& r, std::size_t f);

private:
    struct Bucket {
        std::array<StepRecord, kFigures> min, max;
        std::array<bool, kFigures> has{};  // a finite value of the figure was seen
        StepRecord bad_loss;                 // the first non-finite loss, when has_bad_loss
        bool has_bad_loss = false;
        StepRecord first;                    // the first record, when has_first
        bool has_first = false;
    };
    std::size_t bucket_of(std::int64_t step) const;
    void merge(Bucket& into, const Bucket& from) const;
    void rewind_to(std::int64_t step);

    std::size_t max_buckets_;
    std::int64_t origin_ = 0, width_ = 1, last_ = 0;
    bool empty_ = true;
    std::vector<Bucket> buckets_;
};

}  // namespace fp8scope::trace
