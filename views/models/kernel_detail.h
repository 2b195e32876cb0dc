// Which steps of a run kept their individual kernel records (a GPU trace keeps them on
// capture steps and around events, `--kernel-timings`) while every step has its kernel
// sums, and how the Kernels view says so.
#pragma once

#include <QString>
#include <cstdint>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

// Whether the run has device records (kernels, copies, memsets) at `step`.
bool has_kernel_records(const RunData& rd, std::int64_t step);
// The steps with device records, ascending.
std::vector<std::int64_t> detailed_steps(const RunData& rd);
// Ascending steps as ranges: "1, 101, 195-205, 301"; past `max_ranges` ranges the rest is
// counted ("..., and 40 more steps").
QString step_ranges(const std::vector<std::int64_t>& steps, int max_ranges = 8);
// What the Kernels view says of `run`: where the individual records are and that the
// statistics come from every step (of a large trace opened as an overview: from which
// steps); empty when the run has no kernel data, or kept every step's records.
QString kernel_detail_note(const TraceData& d, int run);

}  // namespace fp8scope::views
