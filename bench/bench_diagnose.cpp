// bench_diagnose TRACE: how long diagnose() takes on a trace (goal: a 500 MB trace in under
// 10 s), opening and reading included, and how many findings it gave.
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "finding.h"
#include "trace_reader.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: bench_diagnose TRACE (e.g. one of train --out with many steps)\n");
        return 2;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const fp8scope::trace::TraceReader reader(argv[1]);
    const auto t1 = std::chrono::steady_clock::now();
    const auto found = fp8scope::diagnose::diagnose(reader);
    const auto t2 = std::chrono::steady_clock::now();
    const double mb = double(std::filesystem::file_size(argv[1])) / 1e6;
    std::printf("trace %.1f MB: open %.3f s, diagnose %.3f s, %zu findings\n", mb,
                std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                found.size());
    return 0;
}
