#!/usr/bin/env bash
# GPU verification in one call of the device tool (no Qt, HDF5 or GTest there).
#   scripts/gpu.sh pack   here: builds the GPU targets in build-gpu/ (portable CPU code,
#                         sm_90a kernels) and packs them with the libraries they load,
#                         except CUDA's own, into .gpu-run/gpu-run.tar.xz
#   scripts/gpu.sh check  on the GPU machine: unpacks, lists the devices, runs the CUDA
#                         tests and the benchmarks, and writes everything under $OUT
# The device call: command "scripts/gpu.sh check", carry [".gpu-run"].
# Environment for check: GTEST_FILTER (default: every test; "-" skips them), BENCHES
# (default: the CUDA kernel benchmarks), EXTRA (shell commands run after them, with the
# unpacked binaries on PATH; their output goes to $OUT/extra.txt), NCU_KERNEL (a regex
# over demangled kernel names: Nsight Compute profiles one launch of it, after NCU_SKIP
# (default 5) others, in NCU_CMD (default bench_cuda_quantize) with section set NCU_SET
# (default detailed), into $OUT/ncu.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(fp8scope-engine fp8scope_cuda_tests fp8scope_core_tests bench_cuda_gemm bench_cuda_quantize bench_cuda_ops bench_cuda_analysis bench_cuda_gemm_layouts
         bench_step bench_train_step bench_sgemm bench_capture_overhead bench_data_parallel)

pack() {
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8SCOPE_GUI=OFF -DFP8SCOPE_NATIVE=OFF >/dev/null
    cmake --build build-gpu --target "${targets[@]}"
    local bins=()
    for t in "${targets[@]}"; do bins+=("build-gpu/bin/$t"); done
    FP8SCOPE_BUNDLE_SKIP='/usr/local/cuda' scripts/gpu-bundle.sh "${bins[@]}"
}

check() {
    local out=${OUT:-/tmp/out} g=/tmp/g
    mkdir -p "$out" "$g"
    tar -C "$g" -xJf .gpu-run/gpu-run.tar.xz
    export LD_LIBRARY_PATH="$g/lib:${LD_LIBRARY_PATH:-}"
    {
        nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
        "$g/bin/fp8scope-engine" devices || true
    } >"$out/devices.txt" 2>&1
    if [ "${GTEST_FILTER:-}" != "-" ]; then
        (cd "$g" && timeout 900 "$g/bin/fp8scope_cuda_tests" --gtest_brief=1 ${GTEST_FILTER:+--gtest_filter="$GTEST_FILTER"}) \
            >"$out/cuda_tests.txt" 2>&1 || true
    fi
    for b in ${BENCHES-bench_cuda_gemm bench_cuda_gemm_layouts bench_cuda_quantize bench_cuda_ops bench_cuda_analysis}; do
        timeout 300 "$g/bin/$b" >"$out/$b.txt" 2>&1 || echo "exit $?" >>"$out/$b.txt"
    done
    if [ -n "${EXTRA:-}" ]; then
        PATH="$g/bin:$PATH" bash -c "$EXTRA" >"$out/extra.txt" 2>&1 || echo "exit $?" >>"$out/extra.txt"
    fi
    if [ -n "${NCU_KERNEL:-}" ]; then
        # ncu locks the clocks to base: compare its durations with each other, not with events.
        PATH="$g/bin:/usr/local/cuda/bin:$PATH" timeout 300 ncu --target-processes all --kernel-name-base demangled \
            -k "regex:$NCU_KERNEL" --launch-skip "${NCU_SKIP:-5}" --launch-count 1 --set "${NCU_SET:-detailed}" \
            bash -c "${NCU_CMD:-bench_cuda_quantize}" >"$out/ncu.txt" 2>&1 || echo "exit $?" >>"$out/ncu.txt"
    fi
    {
        cat "$out/devices.txt"
        [ -f "$out/cuda_tests.txt" ] && { echo "== cuda tests"; grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|tests? ran|FAILED TEST" "$out/cuda_tests.txt" | tail -40; }
        for f in "$out"/bench_*.txt "$out"/extra.txt; do [ -f "$f" ] && { echo "== $(basename "$f")"; tail -60 "$f"; }; done
    } >"$out/summary.txt"
    cat "$out/summary.txt"
}

case "${1:-}" in
    pack) pack ;;
    check) check ;;
    *) echo "usage: $0 pack|check" >&2; exit 2 ;;
esac
