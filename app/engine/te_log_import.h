// `fp8scope-engine import --te-log FILES|DIR --out run.h5`: Transformer Engine's
// precision debug logs (nvdlfw_inspect statistics files) as a trace the GUI opens.
#pragma once

#include <string>
#include <vector>

namespace fp8scope::cli {

// Reads every statistics log named by `inputs` (files, or directories searched for
// nvdlfw_inspect_statistics_logs/nvdlfw_inspect_globalrank-N.log) and writes the trace
// `out` (replaced only with `force`). Prints the notices and warnings on stderr, a summary
// on stdout. Returns the exit status: 0 written, 1 a bad input or output (nothing written),
// 2 bad usage (no input, no --out).
int run_te_log_import(const std::vector<std::string>& inputs, const std::string& out, bool force);

}  // namespace fp8scope::cli
