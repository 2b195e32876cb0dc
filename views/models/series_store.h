// The series store every view reads: filled with trace records by a DataSource (a trace
// file or a live run; the views never know which), read by the UI under a shared lock.
//
// Producers append batches from their own threads; each batch carries the generation it
// was made for, and a batch for an older generation (a file replaced by another, a
// detached run) is dropped, so the newest source always wins. The store only announces
// appends; the UI redraws on a coalescing timer (RedrawScheduler), never per record.
#pragma once

#include <QObject>
#include <atomic>
#include <cstdint>
#include <optional>
#include <shared_mutex>

#include "models/run_data.h"

namespace fp8scope::views {

struct TraceBatch {
    std::vector<trace::StepRecord> steps;
    std::vector<trace::ScalingRecord> scaling;
    std::vector<trace::OperandRecord> operands;
    std::vector<trace::BlockMapRecord> blockmaps;
    std::vector<trace::OpRecord> ops;
    std::vector<trace::EventRecord> events;
    std::vector<trace::OpNameRecord> op_names;  // kernel names seen after the trace began
    std::vector<trace::RankStepRecord> ranks;   // a data-parallel run's per-rank step times
    std::vector<trace::GemmErrorRecord> gemm_errors;  // GEMM output errors at capture steps
    std::vector<trace::KernelStepRecord> kernel_steps;  // per-step kernel sums
    std::vector<trace::GateUpAlignmentRecord> gate_up;  // a SwiGLU's gate/up alignment at capture steps
    // A large trace's amax and scale decimated (trace::SlotDecimator): per run, the points
    // of each operand slot; only in a batch that replaces a range (below).
    struct SlotPoints {
        std::int32_t run = 0;
        std::vector<std::vector<trace::SlotPoint>> by_slot;  // by operand slot, step ascending
    };
    std::vector<SlotPoints> scaling_points;
    // A large trace's kernel sums of the steps its decimation kept (every sum of each kept
    // step); only in a batch that replaces a range.
    std::vector<trace::KernelStepRecord> kernel_steps_decimated;
    // The same for a job's per-rank step times (with Ranks, `ranks` are the full-detail
    // records of the range).
    std::vector<trace::RankStepRecord> ranks_decimated;
    // A large trace's steps whose individual kernel records the file holds, per run
    // (RunData::kernel_record_steps), all of them: they replace what the store knew.
    struct RecordSteps {
        std::int32_t run = 0;
        std::vector<std::int64_t> steps;  // ascending
    };
    std::vector<RecordSteps> kernel_record_steps;
    // Set: the batch holds the amax and scale of this step of every run read whole, where
    // the cursor stands in a large trace's decimated steps (TraceData::scaling_at).
    std::optional<std::int64_t> scaling_at;
    // Set: the batch holds the kernel sums of this step of every run read whole, where the
    // cursor stands on a step whose sums a large trace's decimation left out
    // (TraceData::kernel_sums_at).
    std::optional<std::int64_t> kernel_sums_at;
    // Set: the trace is a large one opened as an overview, whose per-step records are read
    // whole from this step on (TraceData::detail_from).
    std::optional<std::int64_t> detail_from;
    // Set: the batch's step records, its scaling records and points, its kernel sums (of
    // both kinds), its rank records (of both kinds; every rank), or some of these (`what`),
    // replace those the store holds of `runs` at steps in [first, last] (a large trace's
    // steps at full detail where a plot zoomed in, or decimated again where it zoomed out),
    // instead of being appended. With Ops, its op and kernel records replace those of every
    // run in the range: a window of steps before an overview's newest read for the Kernels
    // view's timeline (TraceData::op_windows), the oldest such window dropped past
    // TraceData::kOpWindows.
    enum Replaced { StepRecords = 1, Scaling = 2, KernelSums = 4, Ranks = 8, Ops = 16 };
    struct StepRange {
        std::int64_t first = 0, last = 0;
        std::vector<std::int32_t> runs;
        int what = StepRecords | Scaling | KernelSums | Ranks;
    };
    std::optional<StepRange> replace;

    // Files one record under its kind (the live stream delivers them one at a time).
    void add(const trace::StepRecord& r) { steps.push_back(r); }
    void add(const trace::ScalingRecord& r) { scaling.push_back(r); }
    void add(const trace::OperandRecord& r) { operands.push_back(r); }
    void add(const trace::BlockMapRecord& r) { blockmaps.push_back(r); }
    void add(const trace::OpRecord& r) { ops.push_back(r); }
    void add(const trace::EventRecord& r) { events.push_back(r); }
    void add(const trace::OpNameRecord& r) { op_names.push_back(r); }
    void add(const trace::RankStepRecord& r) { ranks.push_back(r); }
    void add(const trace::GemmErrorRecord& r) { gemm_errors.push_back(r); }
    void add(const trace::KernelStepRecord& r) { kernel_steps.push_back(r); }
    void add(const trace::GateUpAlignmentRecord& r) { gate_up.push_back(r); }

    bool empty() const {
        return !replace && steps.empty() && scaling.empty() && operands.empty() && blockmaps.empty() &&
               ops.empty() && events.empty() && op_names.empty() && ranks.empty() &&
               gemm_errors.empty() && kernel_steps.empty() && gate_up.empty() && scaling_points.empty() &&
               kernel_steps_decimated.empty() && ranks_decimated.empty() && !detail_from &&
               kernel_record_steps.empty() && !scaling_at && !kernel_sums_at;
    }
};

class SeriesStore : public QObject {
    Q_OBJECT
public:
    explicit SeriesStore(QObject* parent = nullptr);

    // Starts a new trace (any thread); returns its generation.
    std::uint64_t reset(trace::TraceMeta meta, std::vector<RankRun> rank_runs = {});
    // Empties the store (nothing open).
    void clear();
    std::uint64_t generation() const { return generation_.load(); }
    // False (and nothing changes) when `generation` is no longer current.
    bool append(std::uint64_t generation, TraceBatch batch);
    // Changes with every reset and accepted append.
    std::uint64_t revision() const { return revision_.load(); }

    // Runs f(const TraceData&) under the shared lock and returns its result. Keep f short:
    // producers wait for it.
    template <class F>
    auto read(F&& f) const {
        std::shared_lock lock(mutex_);
        return f(static_cast<const TraceData&>(data_));
    }

signals:
    // Emitted from the producer's thread after a reset or an accepted append.
    void changed();

private:
    void append_locked(TraceBatch& batch);

    mutable std::shared_mutex mutex_;
    TraceData data_;
    std::atomic<std::uint64_t> generation_{0};
    std::atomic<std::uint64_t> revision_{0};
};

}  // namespace fp8scope::views
