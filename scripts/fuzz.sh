#!/usr/bin/env bash
# Builds the libFuzzer harnesses of tests/fuzz with clang (ASan + UBSan, any UB fatal) into
# build-fuzz/ and runs each for SECONDS (default 10) from its seed corpus
# (tests/fuzz/corpus/<parser>/; what a run adds stays in build-fuzz/corpus/<parser>/).
# A finding (crash, sanitizer report, uncaught exception, allocation over 2 GB, an input
# slower than 20 s) is saved as build-fuzz/findings/<parser>/crash-* and fails the run;
# replay one with build-fuzz/bin/fuzz_<parser> FILE.
#
#   scripts/fuzz.sh              every parser, 10 s each
#   scripts/fuzz.sh 600          every parser, 10 minutes each
#   scripts/fuzz.sh 60 npy config
#
# Exits 77 (ctest: skipped) when clang or libFuzzer's runtime is missing; on Debian:
# apt-get install clang libclang-rt-14-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-10}
[ $# -gt 0 ] && shift
parsers=("$@")
[ ${#parsers[@]} -gt 0 ] || parsers=(npy safetensors trace_reader config checkpoint live_wire rendezvous_hello step_record control_request te_log torch_manifest)

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
if ! command -v clang++ >/dev/null 2>&1; then
    echo "fuzz.sh: clang++ not found: fuzzing skipped (apt-get install clang libclang-rt-14-dev)"
    exit 77
fi
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/f.cpp"
if ! clang++ -fsanitize=fuzzer "$probe/f.cpp" -o "$probe/f" >/dev/null 2>&1; then
    echo "fuzz.sh: clang++ has no libFuzzer runtime: fuzzing skipped (apt-get install libclang-rt-14-dev)"
    exit 77
fi

cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
      -DCMAKE_CXX_COMPILER=clang++ -DFP8SCOPE_FUZZ=ON -DFP8SCOPE_GUI=OFF -DFP8SCOPE_CUDA=OFF \
      -DFP8SCOPE_BENCH=OFF >build-fuzz.configure.log 2>&1 || { cat build-fuzz.configure.log; exit 1; }
rm -f build-fuzz.configure.log
cmake --build build-fuzz --parallel "$(nproc)" --target "${parsers[@]/#/fuzz_}"

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=()
for p in "${parsers[@]}"; do
    mkdir -p "build-fuzz/corpus/$p" "build-fuzz/findings/$p"
    echo "== fuzz_$p: ${seconds} s"
    # libhdf5 keeps free lists and caches from one input to the next, so libFuzzer's
    # per-input leak check would fire on every trace input and scan the whole heap each
    # time (1 input/s instead of 30). The sanitizer suite checks the reader for leaks.
    leaks=1
    [ "$p" = trace_reader ] && leaks=0
    if ! "build-fuzz/bin/fuzz_$p" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -detect_leaks=$leaks \
            -print_final_stats=1 -artifact_prefix="build-fuzz/findings/$p/" \
            "build-fuzz/corpus/$p" "tests/fuzz/corpus/$p" >"build-fuzz/fuzz_$p.log" 2>&1; then
        failed+=("$p")
        tail -n 60 "build-fuzz/fuzz_$p.log"
    fi
    grep -E "^stat::number_of_executed_runs|^Done|^INFO: fuzzed for" "build-fuzz/fuzz_$p.log" || true
done
if ((${#failed[@]})); then
    echo "fuzz.sh: findings in: ${failed[*]} (inputs in build-fuzz/findings/)"
    exit 1
fi
echo "fuzz.sh: no findings"
