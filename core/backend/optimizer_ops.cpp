#include "backend/optimizer_ops.h"

#include <stdexcept>
#include <string>

namespace fp8scope {

void check_decay_runs(const std::vector<DecayRun>& runs, std::int64_t n) {
    std::int64_t after = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const DecayRun& r = runs[i];
        if (r.begin < after || r.end <= r.begin || r.end > n)
            throw std::invalid_argument("adamw: decay run " + std::to_string(i) + " [" + std::to_string(r.begin) + ", " +
                                        std::to_string(r.end) + ") is empty, out of [0, " + std::to_string(n) +
                                        ") or not after the run before it");
        after = r.end;
    }
}

}  // namespace fp8scope
