// Device time of one run's training step per op its kernels ran in (and the op's linear
// and operand): what the run-against-run table and the FP8 worth view compare. From the
// step's individual kernel records as the Kernels view attributes them (evaluation left
// out); a step that kept only its kernel sums gives time per op name alone (linear and
// operand -1). A run with no device record at all (a CPU run, whose ops compute where
// they run) gives its host ops' times instead.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <vector>

#include "models/run_data.h"

namespace fp8scope::views {

struct OpTimeKey {
    int op = -1;       // id into TraceMeta::ops of the op the kernels ran in; -1: no op
    int linear = -1;
    int operand = -1;  // a quantize op's operand (Operand), -1 none
    auto operator<=>(const OpTimeKey&) const = default;
};

using OpTimes = std::map<OpTimeKey, double>;  // ns

OpTimes op_kernel_time(const TraceData& d, int run, std::int64_t step);
// The same where the caller knows whether the run has device records (has_device_records).
OpTimes op_kernel_time(const TraceData& d, int run, std::int64_t step, bool device);
bool has_device_records(const RunData& rd);
// The steps whose op_kernel_time has linears: those with device records, or for a run with
// none, those with host ops. Ascending.
std::vector<std::int64_t> timed_steps(const RunData& rd);

}  // namespace fp8scope::views
