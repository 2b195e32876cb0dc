// Monotonic nanoseconds for op timings: one clock for every op record of a run.
#pragma once

#include <chrono>
#include <cstdint>

namespace fp8scope {

inline std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

}  // namespace fp8scope
