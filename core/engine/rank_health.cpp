#include "engine/rank_health.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>
#include <stdexcept>
#include <string>

namespace fp8scope {

double median_ms(std::span<const double> ms) {
    if (ms.empty()) return std::numeric_limits<double>::quiet_NaN();
    std::vector<double> v(ms.begin(), ms.end());
    const std::size_t h = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + h, v.end());
    if (v.size() % 2) return v[h];
    const double upper = v[h];
    return (*std::max_element(v.begin(), v.begin() + h) + upper) / 2;
}

namespace {

// The median over the ranks whose time is a number.
double finite_median(std::span<const double> ms) {
    std::vector<double> finite;
    for (double t : ms)
        if (std::isfinite(t)) finite.push_back(t);
    return median_ms(finite);
}

bool is_slow(double ms, double median, double margin) { return !std::isfinite(ms) || ms > median * (1 + margin); }

}  // namespace

std::vector<SlowRank> slow_ranks(std::span<const double> ms, double margin) {
    const double median = finite_median(ms);
    std::vector<SlowRank> out;
    for (std::size_t r = 0; r < ms.size(); ++r)
        if (is_slow(ms[r], median, margin)) out.push_back({static_cast<int>(r), ms[r], median});
    std::sort(out.begin(), out.end(), [](const SlowRank& a, const SlowRank& b) {
        const bool fa = std::isfinite(a.ms), fb = std::isfinite(b.ms);
        return fa != fb ? !fa : a.ms > b.ms;
    });
    return out;
}

std::string encode_rank_timing(const RankTiming& t) {
    char ms[64];
    const auto end = std::to_chars(ms, ms + sizeof ms, t.ms).ptr;  // shortest text that reads back exactly
    return std::string(ms, end) + '\n' + t.host + '\n' + t.device;
}

namespace {

RankTiming decode_rank_timing(const std::string& record, std::size_t rank) {
    const std::size_t a = record.find('\n');
    const std::size_t b = a == std::string::npos ? a : record.find('\n', a + 1);
    RankTiming t;
    bool ok = b != std::string::npos && record.find('\n', b + 1) == std::string::npos;  // three lines
    if (ok) {  // the first all a number
        const auto [end, error] = std::from_chars(record.data(), record.data() + a, t.ms);
        ok = error == std::errc{} && end == record.data() + a;
    }
    if (!ok) {
        std::string shown;  // on one line
        for (char c : record) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
        throw std::invalid_argument("rank " + std::to_string(rank) + " sent the pre-flight record \"" + shown +
                                    "\", not \"ms\\nhost\\ndevice\" (ranks of different engine versions?)");
    }
    t.host = record.substr(a + 1, b - a - 1);
    t.device = record.substr(b + 1);
    return t;
}

}  // namespace

bool RankTimings::is_slow(int rank) const {
    return std::any_of(slow.begin(), slow.end(), [&](const SlowRank& s) { return s.rank == rank; });
}

RankTimings judge_rank_timings(std::span<const std::string> records, double margin) {
    RankTimings out;
    for (std::size_t r = 0; r < records.size(); ++r) {
        out.ranks.push_back(decode_rank_timing(records[r], r));
        out.ms.push_back(out.ranks.back().ms);
    }
    out.median_ms = median_ms(out.ms);
    out.slow = slow_ranks(out.ms, margin);
    return out;
}

StragglerMonitor::StragglerMonitor(int world_size, double margin, int steps)
    : margin_(margin), steps_(std::max(1, steps)), state_(static_cast<std::size_t>(std::max(1, world_size))) {}

std::vector<StragglerMonitor::Alert> StragglerMonitor::observe(std::int64_t step, std::span<const double> ms) {
    if (ms.size() != state_.size())
        throw std::invalid_argument("straggler monitor: " + std::to_string(ms.size()) + " times for " +
                                    std::to_string(state_.size()) + " ranks");
    const double median = finite_median(ms);
    std::vector<Alert> alerts;
    for (std::size_t r = 0; r < state_.size(); ++r) {
        RankState& s = state_[r];
        if (is_slow(ms[r], median, margin_)) s.slow_run++, s.fast_run = 0;
        else s.fast_run++, s.slow_run = 0;
        if (!s.straggling && s.slow_run >= steps_) {
            s.straggling = true;
            alerts.push_back({static_cast<int>(r), true, step, ms[r], median});
        } else if (s.straggling && s.fast_run >= steps_) {
            s.straggling = false;
            alerts.push_back({static_cast<int>(r), false, step, ms[r], median});
        }
    }
    return alerts;
}

}  // namespace fp8scope
