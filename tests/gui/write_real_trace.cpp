// Writes the trace of a real run for the README screenshots: the tiny lock-step
// comparison (baseline, delayed, blockwise, MXFP8) with capture every 10 steps.
// Usage: write_real_trace OUT.h5 [steps]
#include <cstdio>
#include <string>

#include "real_run.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s OUT.h5 [steps]\n", argv[0]);
        return 2;
    }
    try {
        const auto steps = fp8scope::testing::train_and_record(
            argv[1], fp8scope::testing::tiny_compare_config(argc > 2 ? std::stoll(argv[2]) : 200), 50);
        std::printf("%s: %zu step records\n", argv[1], steps.size());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s\n", e.what());
        return 1;
    }
    return 0;
}
