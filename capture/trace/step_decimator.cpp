// Min/max decimation of step records (step_decimator.h).
#include "step_decimator.h"

#include <algorithm>
#include <cmath>

namespace fp8scope::trace {

// At least 3: a step 2^64 - 1 past the origin lies in bucket 2 of INT64_MAX-wide buckets.
StepDecimator::StepDecimator(std::size_t max_buckets) : max_buckets_(std::max<std::size_t>(max_buckets, 3)) {}

double StepDecimator::figure(const StepRecord& r, std::size_t f) {
    switch (f) {
        case 0: return r.loss;
        case 1: return r.eval_loss;
        case 2: return r.lr;
        case 3: return r.grad_norm;
        case 4: return r.step_ms;
        default: return r.tokens_per_s;
    }
}

std::size_t StepDecimator::bucket_of(std::int64_t step) const {
    // Unsigned: a damaged step far from the origin neither overflows nor goes negative.
    return static_cast<std::size_t>((static_cast<std::uint64_t>(step) - static_cast<std::uint64_t>(origin_)) /
                                    static_cast<std::uint64_t>(width_));
}

void StepDecimator::merge(Bucket& into, const Bucket& from) const {
    for (std::size_t f = 0; f < kFigures; ++f) {
        if (!from.has[f]) continue;
        if (!into.has[f] || figure(from.min[f], f) < figure(into.min[f], f)) into.min[f] = from.min[f];
        if (!into.has[f] || figure(from.max[f], f) > figure(into.max[f], f)) into.max[f] = from.max[f];
        into.has[f] = true;
    }
    if (from.has_bad_loss && (!into.has_bad_loss || from.bad_loss.step < into.bad_loss.step)) {
        into.bad_loss = from.bad_loss;
        into.has_bad_loss = true;
    }
    if (from.has_first && (!into.has_first || from.first.step < into.first.step)) {
        into.first = from.first;
        into.has_first = true;
    }
}

void StepDecimator::rewind_to(std::int64_t step) {
    if (step <= origin_) {  // back to or before the first step: nothing stands
        buckets_.clear();
        origin_ = step;
        return;
    }
    const std::size_t b = bucket_of(step);
    if (b + 1 < buckets_.size()) buckets_.resize(b + 1);
    if (b >= buckets_.size()) return;
    Bucket& k = buckets_[b];
    for (std::size_t f = 0; f < kFigures; ++f)
        if (k.has[f] && (k.min[f].step >= step || k.max[f].step >= step)) {
            // The extreme left with the abandoned records: what stands of it is the other
            // one, if that is older; otherwise the figure starts over in this bucket.
            const bool min_stands = k.min[f].step < step, max_stands = k.max[f].step < step;
            if (min_stands) k.max[f] = k.min[f];
            else if (max_stands) k.min[f] = k.max[f];
            else k.has[f] = false;
        }
    if (k.has_bad_loss && k.bad_loss.step >= step) k.has_bad_loss = false;
    if (k.has_first && k.first.step >= step) k.has_first = false;
}

void StepDecimator::add(const StepRecord& r) {
    if (empty_) {
        origin_ = r.step;
        empty_ = false;
    } else if (r.step <= last_) {
        rewind_to(r.step);
    }
    last_ = r.step;
    std::size_t b = bucket_of(r.step);
    while (b >= max_buckets_) {  // the buckets double: neighbours merge
        std::vector<Bucket> merged((buckets_.size() + 1) / 2);
        for (std::size_t i = 0; i < buckets_.size(); ++i) merge(merged[i / 2], buckets_[i]);
        buckets_ = std::move(merged);
        width_ = width_ > INT64_MAX / 2 ? INT64_MAX : width_ * 2;
        b = bucket_of(r.step);
    }
    if (b >= buckets_.size()) buckets_.resize(b + 1);
    Bucket& k = buckets_[b];
    for (std::size_t f = 0; f < kFigures; ++f) {
        const double v = figure(r, f);
        if (!std::isfinite(v)) continue;
        if (!k.has[f] || v < figure(k.min[f], f)) k.min[f] = r;
        if (!k.has[f] || v > figure(k.max[f], f)) k.max[f] = r;
        k.has[f] = true;
    }
    if (!std::isfinite(r.loss) && !k.has_bad_loss) {
        k.bad_loss = r;
        k.has_bad_loss = true;
    }
    if (!k.has_first) {
        k.first = r;
        k.has_first = true;
    }
}

std::vector<StepRecord> StepDecimator::rows() const {
    std::vector<StepRecord> out;
    for (const Bucket& k : buckets_) {
        const std::size_t first = out.size();
        for (std::size_t f = 0; f < kFigures; ++f)
            if (k.has[f]) {
                out.push_back(k.min[f]);
                out.push_back(k.max[f]);
            }
        if (k.has_bad_loss) out.push_back(k.bad_loss);
        if (k.has_first) out.push_back(k.first);
        // A record that is the extreme of several figures is kept once.
        std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                  [](const StepRecord& a, const StepRecord& b) { return a.step < b.step; });
        out.erase(std::unique(out.begin() + static_cast<std::ptrdiff_t>(first), out.end(),
                              [](const StepRecord& a, const StepRecord& b) { return a.step == b.step; }),
                  out.end());
    }
    return out;
}

}  // namespace fp8scope::trace
