// Operand summaries: packing a record's figures into one allocation and reading them back.
#include "models/operand_summary.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <utility>

namespace fp8scope::views {

std::int64_t HistogramCounts::count(int exponent) const {
    const int i = exponent - first_;
    if (i < 0 || i >= bins_) return 0;
    if (wide_) return std::launder(reinterpret_cast<const std::int64_t*>(counts_))[i];
    return std::launder(reinterpret_cast<const std::int32_t*>(counts_))[i];
}

namespace {

template <class T>
std::uint32_t clamp_count(const std::vector<T>& v) {
    return static_cast<std::uint32_t>(std::min<std::size_t>(v.size(), std::numeric_limits<std::uint32_t>::max()));
}

// Creates `n` objects of type T at `at`, copies of `src`.
template <class T, class Src>
void place(std::byte* at, const Src* src, std::size_t n) {
    std::uninitialized_copy_n(src, n, reinterpret_cast<T*>(at));
}

}  // namespace

OperandSummary::OperandSummary(const trace::OperandRecord& r)
    : step(r.key.step),
      recipe_in_use(r.quantizer_in_use),
      figures(RecordFigures<trace::OperandRecord>::of(r)),
      errors_(clamp_count(r.errors)),
      channels_(clamp_count(r.stats.outliers.channel_absmax)),
      history_(clamp_count(r.amax_history)) {
    const auto& bins = r.stats.histogram.bins;
    int lo = 0, hi = kHistBins - 1;
    while (lo < kHistBins && bins[lo] == 0) ++lo;
    while (hi >= lo && bins[hi] == 0) --hi;
    if (lo <= hi) {
        hist_first_ = static_cast<std::int16_t>(lo + kHistMinExp);
        hist_bins_ = static_cast<std::uint16_t>(hi - lo + 1);
        hist_wide_ = std::any_of(bins.begin() + lo, bins.begin() + hi + 1, [](std::int64_t c) {
            return c < std::numeric_limits<std::int32_t>::min() || c > std::numeric_limits<std::int32_t>::max();
        });
    }
    const std::size_t n = data_bytes();
    if (n == 0) return;
    data_ = std::make_unique_for_overwrite<std::byte[]>(n);
    std::byte* d = data_.get();
    auto* errors = reinterpret_cast<ErrorFigures*>(d);
    for (std::size_t i = 0; i < errors_; ++i) ::new (errors + i) ErrorFigures(ErrorFigures::of(r.errors[i]));
    if (hist_wide_) place<std::int64_t>(d + counts_at(), bins.data() + lo, hist_bins_);
    else place<std::int32_t>(d + counts_at(), bins.data() + lo, hist_bins_);
    place<float>(d + channels_at(), r.stats.outliers.channel_absmax.data(), channels_);
    place<float>(d + history_at(), r.amax_history.data(), history_);
}

OperandSummary::OperandSummary(const OperandSummary& o)
    : step(o.step),
      recipe_in_use(o.recipe_in_use),
      figures(o.figures),
      errors_(o.errors_),
      channels_(o.channels_),
      history_(o.history_),
      hist_first_(o.hist_first_),
      hist_bins_(o.hist_bins_),
      hist_wide_(o.hist_wide_) {
    if (const std::size_t n = data_bytes(); n > 0) {
        data_ = std::make_unique_for_overwrite<std::byte[]>(n);
        std::memcpy(data_.get(), o.data_.get(), n);  // creates the objects it copies
    }
}

OperandSummary::OperandSummary(OperandSummary&& o) noexcept { *this = std::move(o); }

OperandSummary& OperandSummary::operator=(const OperandSummary& o) {
    if (this != &o) *this = OperandSummary(o);
    return *this;
}

OperandSummary& OperandSummary::operator=(OperandSummary&& o) noexcept {
    if (this == &o) return *this;
    step = o.step;
    recipe_in_use = std::exchange(o.recipe_in_use, kAbsent);
    figures = o.figures;
    data_ = std::move(o.data_);
    errors_ = std::exchange(o.errors_, 0);
    channels_ = std::exchange(o.channels_, 0);
    history_ = std::exchange(o.history_, 0);
    hist_first_ = std::exchange(o.hist_first_, 0);
    hist_bins_ = std::exchange(o.hist_bins_, 0);
    hist_wide_ = std::exchange(o.hist_wide_, false);
    return *this;
}

std::size_t OperandSummary::data_bytes() const { return history_at() + history_ * sizeof(float); }

HistogramCounts OperandSummary::histogram() const {
    HistogramCounts h;
    if (hist_bins_ == 0) return h;
    h.counts_ = data_.get() + counts_at();
    h.first_ = hist_first_;
    h.bins_ = hist_bins_;
    h.wide_ = hist_wide_;
    return h;
}

std::span<const ErrorFigures> OperandSummary::errors() const {
    if (errors_ == 0) return {};
    return {std::launder(reinterpret_cast<const ErrorFigures*>(data_.get())), errors_};
}

std::span<const float> OperandSummary::channel_absmax() const {
    if (channels_ == 0) return {};
    return {std::launder(reinterpret_cast<const float*>(data_.get() + channels_at())), channels_};
}

std::span<const float> OperandSummary::amax_history() const {
    if (history_ == 0) return {};
    return {std::launder(reinterpret_cast<const float*>(data_.get() + history_at())), history_};
}

}  // namespace fp8scope::views
