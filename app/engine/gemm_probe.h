// The pre-flight GEMM workload: a rank's device timed on the float GEMM training runs, the
// same on every rank, so ranks compare with the median (engine/rank_health.h).
#pragma once

#include "backend.h"

namespace fp8scope::cli {

// Median milliseconds of `reps` GEMMs out (n, n) = a (n, n) w (n, n)^T on `backend`, after
// one untimed warm-up.
double time_gemm(Backend& backend, int n, int reps);

}  // namespace fp8scope::cli
