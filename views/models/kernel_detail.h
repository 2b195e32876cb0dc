// Which steps of a run kept their individual kernel records (a GPU trace keeps them on
// capture steps and around events, `--kernel-timings`) while every step has its kernel
// sums, and how the Kernels view says so.
#pragma once

#include <QString>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

// Whether the run has device records (kernels, copies, memsets) at `step`.
bool has_kernel_records(const RunData& rd, std::int64_t step);
// The steps with device records in the store, ascending.
std::vector<std::int64_t> detailed_steps(const RunData& rd);
// The steps whose device records the trace holds, ascending: those in the store and, of a
// large trace opened as an overview, those its kernel sums name (RunData::kernel_record_steps).
std::vector<std::int64_t> recorded_steps(const RunData& rd);
// Whether the steps with device records are all known: a trace read whole, or an
// overview whose kernel sums said which.
bool detailed_steps_known(const TraceData& d, const RunData& rd);
// The steps of [first, last] whose op and kernel records an overview has yet to read for
// a timeline (before its newest steps, in no window read: TraceData::op_windows); none
// when the store holds them all.
std::optional<std::pair<std::int64_t, std::int64_t>> kernel_records_wanted(const TraceData& d, std::int64_t first,
                                                                           std::int64_t last);
// Whether the kernel sums of every run at `step` are to be read for the cursor: an
// overview's step before its newest whose sums some run's decimation left out, not read
// for the cursor yet (TraceData::kernel_sums_at).
bool kernel_sums_wanted(const TraceData& d, std::int64_t step);
// What the Kernels view's table at `step` of `run` says where the store lacks the step's
// sums: that they are being read, or that the trace has none; empty otherwise.
QString kernel_sums_note(const TraceData& d, int run, std::int64_t step);
// What the Kernels view's timeline of steps [first, step] of `run` says: that their records
// are being read, or that the cursor step has none and which steps have; empty when it
// shows the step's records or the run has no kernel data.
QString timeline_note(const TraceData& d, int run, std::int64_t first, std::int64_t step);
// Ascending steps as ranges: "1, 101, 195-205, 301"; past `max_ranges` ranges the rest is
// counted ("..., and 40 more steps").
QString step_ranges(const std::vector<std::int64_t>& steps, int max_ranges = 8);
// What the Kernels view says of `run`: where the individual records are and that the
// statistics come from every step (of a large trace opened as an overview: from which
// steps); empty when the run has no kernel data, or kept every step's records.
QString kernel_detail_note(const TraceData& d, int run);

}  // namespace fp8scope::views
