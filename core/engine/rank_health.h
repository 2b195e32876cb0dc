// Health rules of a data-parallel job, as large FP8 training clusters run them: ranks are
// compared with the median of all ranks, so a uniformly slow job raises nothing and one
// slow GPU, link or host stands out. Used before training (a short GEMM and all-reduce
// workload per rank: pre-flight) and during it (each step's compute and communication
// times per rank: in-flight). Pure functions of the gathered times.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp8scope {

// The median of `ms` (the mean of the middle two for an even count); NaN when empty.
double median_ms(std::span<const double> ms);

struct SlowRank {
    int rank = 0;
    double ms = 0, median_ms = 0;
    double ratio() const { return ms / median_ms; }
};

// The ranks slower than the median by more than `margin` (0.1: more than 10% slower),
// slowest first. A rank whose time is not a finite number is always reported.
std::vector<SlowRank> slow_ranks(std::span<const double> ms, double margin);

// Pre-flight: one rank's GEMM time and where it ran, as the ranks exchange it over the
// rendezvous: "ms\nhost\ndevice" (a device's description may hold spaces; the time is
// written exactly, so every rank judges the same numbers).
struct RankTiming {
    double ms = 0;
    std::string host, device;
};
std::string encode_rank_timing(const RankTiming& t);

// Every rank's timing (in rank order) judged by slow_ranks().
struct RankTimings {
    std::vector<RankTiming> ranks;
    std::vector<double> ms;  // ranks[r].ms
    double median_ms = 0;
    std::vector<SlowRank> slow;
    bool is_slow(int rank) const;
};
// Decodes the records all ranks gathered (rank r's at [r]) and judges them against their
// median with `margin`. Throws std::invalid_argument naming the rank and its text when a
// record is not three lines with a number first.
RankTimings judge_rank_timings(std::span<const std::string> records, double margin);

// In-flight: a rank slow (as slow_ranks() says) in `steps` consecutive steps is a
// straggler. One alert when it becomes one and one when it has been fast again for as
// many steps, so a straggler is reported, not every step it is slow.
class StragglerMonitor {
public:
    StragglerMonitor(int world_size, double margin, int steps);

    struct Alert {
        int rank = 0;
        bool straggling = true;  // false: recovered
        std::int64_t step = 0;
        double ms = 0, median_ms = 0;
    };
    // The step's time per rank (world_size values); returns the alerts it raises.
    std::vector<Alert> observe(std::int64_t step, std::span<const double> ms);
    bool straggling(int rank) const { return state_.at(static_cast<std::size_t>(rank)).straggling; }

private:
    struct RankState {
        int slow_run = 0, fast_run = 0;
        bool straggling = false;
    };
    double margin_;
    int steps_;
    std::vector<RankState> state_;
};

}  // namespace fp8scope
