// An open trace file and how far it has been read: each readNew() hands over only what was
// appended since the last one, as store batches. No Qt threads here; TraceFileLoader runs
// it on its worker.
//
// Reading is incremental per run: everything up to the newest step record is read, and
// that step is the run's watermark; the next read covers only what lies past it. Step
// records are written after their step's scaling, operands and ops, so what a step record
// covers is complete. A step record at or before the watermark is a rewind: the watermark
// goes back and the store drops the abandoned steps as the re-recorded ones arrive. A
// step record that a later one goes back before or to was abandoned and is not passed on.
//
// The work follows the rows in the file, never the span of step numbers: a damaged
// file's step far from the others (a flipped sign bit, INT64_MAX) costs one batch.
//
// A large trace (kLargeStepRows step records or more) opens as an overview
// (TraceReader::overview()): the first readNew() hands over every record of the newest
// kTailSteps steps, so that every view shows where the run is now at once, then each run's
// earlier steps decimated (min/max per bucket) as batches that replace them: the step
// records, the ranks' step times, the kernel sums (with the steps whose individual kernel
// records the file holds), then the amax and scale of every operand slot. steps() reads a
// range at full
// detail for a plot zoomed into it, and decimated() puts the decimated records back.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/series_store.h"

namespace fp8scope::trace { class TraceReader; }

namespace fp8scope::views {

class OpenTrace {
public:
    static constexpr std::uint64_t kLargeStepRows = 400'000;  // 100,000 steps of 4 runs
    static constexpr std::int64_t kTailSteps = 2000;

    // Throws trace::TraceError (damaged or foreign file) or std::exception. `large_rows`:
    // the step records from which on a trace opens as an overview (0: never).
    explicit OpenTrace(const std::string& path, std::uint64_t large_rows = kLargeStepRows);
    ~OpenTrace();

    const trace::TraceMeta& meta() const;
    // Re-reads the extent of a file still being written; true when it grew.
    bool refresh();
    // How far a readNew() has got: batches pushed and batches planned.
    using Progress = std::function<void(std::size_t done, std::size_t total)>;
    // Passes everything new to `push` in batches of at most kBatchSteps steps that have
    // records, every run's first batch, then every run's second, ..., so the views fill in
    // step order while a large trace is read and the memory in flight stays one batch;
    // `push` may throw to stop. Returns the newest step read, -1 when there was none.
    std::int64_t readNew(const std::function<void(TraceBatch&&)>& push, const Progress& progress = {});

    static constexpr std::size_t kBatchSteps = 250;

    // Opened as an overview.
    bool overview() const;
    // A batch that replaces every run's steps in [first, last] with the records that
    // stand there, at full detail (steps()) or decimated (decimated(), which leaves the
    // newest steps whole): step records, the per-step amax and scale, the per-step
    // kernel sums and the ranks' step times (`what`: TraceBatch::Replaced). steps() decimates a range's amax and
    // scale anew (as finely as the whole run's) where they would exceed
    // kDetailScalingValues values, and keeps its kernel sums decimated where they would
    // exceed kDetailKernelSums (at the newest steps' sums per step).
    TraceBatch steps(std::int64_t first, std::int64_t last) const;
    TraceBatch decimated(std::int64_t first, std::int64_t last,
                         int what = TraceBatch::StepRecords | TraceBatch::Scaling | TraceBatch::KernelSums |
                                    TraceBatch::Ranks) const;
    // A batch that replaces every run's op and kernel records in [first, last] before the
    // newest steps with those the file holds there (TraceBatch::Ops); empty when the range
    // lies within the newest steps, which are read whole. For the Kernels view's timeline:
    // keep the range short.
    TraceBatch kernelRecords(std::int64_t first, std::int64_t last) const;
    // A batch that replaces every run's amax and scale at `step` with its scaling records
    // read whole (TraceBatch::scaling_at), for the cursor in the decimated steps.
    TraceBatch scalingAt(std::int64_t step) const;
    // The same for the kernel sums at `step` (TraceBatch::kernel_sums_at), read as a zoom
    // reads its steps': for the cursor on a step whose sums the decimation left out.
    TraceBatch kernelSumsAt(std::int64_t step) const;
    static constexpr double kDetailScalingValues = 16e6;  // 128 MB of amax and scale
    static constexpr double kDetailKernelSums = 2e6;      // 128 MB of kernel sums

private:
    // A batch that replaces `what` of every run at steps [first, last] with what `read`
    // puts in it for each run.
    TraceBatch replacing(std::int64_t first, std::int64_t last, int what,
                         const std::function<void(TraceBatch&, int run)>& read) const;
    // Kernel sums per step of the newest steps (read whole), every run together.
    double kernelSumsPerStep() const;
    struct RunPlan;
    RunPlan plan(int run);
    void readWindow(const RunPlan& p, std::size_t window, const std::function<void(TraceBatch&&)>& push) const;

    std::unique_ptr<trace::TraceReader> reader_;
    std::vector<std::size_t> steps_read_;  // step records consumed, per run
    std::vector<std::optional<std::int64_t>> done_;  // watermark step, per run (none: nothing read)
    std::size_t events_read_ = 0, ops_known_ = 0, ranks_read_ = 0;
    bool decimated_sent_ = false;  // an overview's decimated earlier steps were handed over
};

}  // namespace fp8scope::views
