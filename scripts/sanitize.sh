#!/usr/bin/env bash
# Builds everything with AddressSanitizer and UndefinedBehaviorSanitizer into build-asan/
# and runs the whole test suite there (GUI tests offscreen; the CUDA backend is left out:
# nvcc code cannot be instrumented). Any report fails the test that shows it: UB is fatal
# (-fno-sanitize-recover), and LeakSanitizer runs at every test process's exit with the
# suppressions of tests/sanitizer/lsan.supp (libhdf5's own allocations, none of ours).
# Extra arguments go to ctest, e.g. scripts/sanitize.sh -R Live
# The build is long (every library and test instrumented): ccache is used when it is on
# PATH (or as CMAKE_CXX_COMPILER_LAUNCHER / CMAKE_C_COMPILER_LAUNCHER in the environment
# say), the compiler runs at nice 10, and JOBS (default: the number of cores) bounds both
# the build's and ctest's parallelism, e.g. JOBS=2 scripts/sanitize.sh on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${JOBS:-$(nproc)}
launcher=()
cxx_launcher=${CMAKE_CXX_COMPILER_LAUNCHER:-$(command -v ccache || true)}
c_launcher=${CMAKE_C_COMPILER_LAUNCHER:-$cxx_launcher}
[[ -n $cxx_launcher ]] && launcher+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$cxx_launcher")
[[ -n $c_launcher ]] && launcher+=(-DCMAKE_C_COMPILER_LAUNCHER="$c_launcher")
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFP8SCOPE_CUDA=OFF -DFP8SCOPE_BENCH=OFF \
      -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
      -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
      -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" "${launcher[@]}"
nice -n 10 cmake --build build-asan --parallel "$jobs"

export QT_QPA_PLATFORM=offscreen
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:check_initialization_order=1
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# fuzz_short builds its own clang fuzzers (scripts/fuzz.sh); the replays of the seed
# corpora (fuzz_replay_*) run here, instrumented.
ctest --test-dir build-asan --output-on-failure --parallel "$jobs" --timeout 1800 -E '^fuzz_short$' "$@"
