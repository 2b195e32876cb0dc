// What the series store keeps of one GEMM operand at one capture step: the figures the
// views draw, in a small fraction of a trace::OperandRecord's memory. A record carries a
// 277-bin int64 log2 histogram (2.2 KB, nearly all of it zeros), every TensorStats figure,
// a recipe name and eleven figures per recipe, and the top values; on a large trace these
// records were most of the GUI's memory. A summary keeps
//   - the histogram's exponent range from its lowest to its highest non-zero bin, as int32
//     counts when every count fits (int64 otherwise): the same count for every exponent;
//   - every numeric figure of the record, its tensor statistics and their nested records
//     (record_figures.h: the key, recipe in use, scale, element counts, amax, kurtosis,
//     ...), so a field added to their lists reaches the views with no line here;
//   - per recipe every numeric error figure (ErrorFigures), without the name: errors()[r]
//     belongs to TraceMeta::recipes[r], as in the record;
//   - the per-channel absmax and the delayed-scaling amax history;
// the variable-length parts in one allocation. Top values stay in the file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "models/record_figures.h"
#include "record_fields.h"
#include "trace_records.h"

namespace fp8scope::views {

// The quantization-error figures of one recipe: e[&ErrorStats::sqnr_db].
using ErrorFigures = RecordFigures<ErrorStats>;

// A log2 histogram's counts over its non-zero exponent range (a view into an
// OperandSummary; valid while the summary is). count() is the original Log2Histogram's
// count for every exponent, 0 outside the range.
class HistogramCounts {
public:
    bool empty() const { return bins_ == 0; }
    int first() const { return first_; }              // lowest exponent with a count (if !empty())
    int last() const { return first_ + bins_ - 1; }   // highest exponent with a count (if !empty())
    std::int64_t count(int exponent) const;

private:
    friend class OperandSummary;
    const std::byte* counts_ = nullptr;
    int first_ = 0, bins_ = 0;
    bool wide_ = false;  // int64 counts; int32 otherwise
};

class OperandSummary {
public:
    static constexpr std::int32_t kAbsent = -2;  // recipe_in_use of a slot with no record

    OperandSummary() = default;  // absent
    explicit OperandSummary(const trace::OperandRecord& r);
    OperandSummary(const OperandSummary& o);
    OperandSummary& operator=(const OperandSummary& o);
    OperandSummary(OperandSummary&& o) noexcept;  // leaves `o` absent
    OperandSummary& operator=(OperandSummary&& o) noexcept;

    bool absent() const { return recipe_in_use == kAbsent; }

    std::int64_t step = 0;             // the capture step
    std::int32_t recipe_in_use = kAbsent;  // id into TraceMeta::recipes; -1 unquantized
    // The record's numeric figures: figures[&OperandRecord::scale], figures[&TensorStats::amax],
    // figures[&OutlierSummary::kurtosis]; a default record's when absent.
    RecordFigures<trace::OperandRecord> figures = RecordFigures<trace::OperandRecord>::of({});

    HistogramCounts histogram() const;
    std::span<const ErrorFigures> errors() const;  // one per TraceMeta::recipes, same order
    std::span<const float> channel_absmax() const;
    std::span<const float> amax_history() const;   // oldest first

    // Bytes this summary takes, its own and its allocation's (for benchmarks).
    std::size_t bytes() const { return sizeof(*this) + data_bytes(); }

private:
    std::size_t data_bytes() const;
    std::size_t count_bytes() const { return static_cast<std::size_t>(hist_bins_) * (hist_wide_ ? 8 : 4); }
    // Layout of data_: errors, histogram counts, channel absmax, amax history.
    std::size_t counts_at() const { return errors_ * sizeof(ErrorFigures); }
    std::size_t channels_at() const { return counts_at() + count_bytes(); }
    std::size_t history_at() const { return channels_at() + channels_ * sizeof(float); }

    std::unique_ptr<std::byte[]> data_;
    std::uint32_t errors_ = 0, channels_ = 0, history_ = 0;
    std::int16_t hist_first_ = 0;
    std::uint16_t hist_bins_ = 0;
    bool hist_wide_ = false;
};

}  // namespace fp8scope::views
