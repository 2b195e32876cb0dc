#!/usr/bin/env bash
# GPU verification in one call of the device tool (no Qt, HDF5 or GTest there).
#   scripts/gpu.sh pack   here: builds the GPU targets in build-gpu/ (portable CPU code,
#                         sm_90a kernels) and packs them with the libraries they load,
#                         except CUDA's own, into .gpu-run/gpu-run.tar.xz
#   scripts/gpu.sh check  on the GPU machine: unpacks, lists the devices, runs the CUDA
#                         tests and the benchmarks, and writes everything under $OUT
#   scripts/gpu.sh pack-base REV
#                         here: builds fp8scope-engine, bench_step and bench_train_step of
#                         commit REV (a worktree of it in build-base/) and packs them into
#                         .gpu-run-base/gpu-run.tar.xz (they load this build's libraries)
# The device call: command "scripts/gpu.sh check", carry [".gpu-run"] (and ".gpu-run-base"
# when it exists: check then also compares the two builds, "same results, same speed":
# the losses of a CUDA lock-step run of every recipe bit for bit, and bench_step (CUDA) and
# bench_train_step (CPU) of each build, one after the other in the same call).
# Environment for check: GTEST_FILTER (default: every test; "-" skips them), BENCHES
# (default: the CUDA kernel benchmarks), EXTRA (shell commands run after them, with the
# unpacked binaries on PATH; their output goes to $OUT/extra.txt), NCU_KERNEL (a regex
# over demangled kernel names: Nsight Compute profiles one launch of it, after NCU_SKIP
# (default 5) others, in NCU_CMD (default bench_cuda_quantize) with section set NCU_SET
# (default detailed), into $OUT/ncu.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(fp8scope-engine fp8scope_cuda_tests fp8scope_core_tests bench_seeds bench_cuda_gemm bench_cuda_quantize bench_cuda_ops bench_cuda_analysis bench_cuda_gemm_layouts bench_cuda_gemm_accumulation
         bench_step bench_train_step bench_sgemm bench_capture_overhead bench_data_parallel bench_nccl_nan_max)

pack() {
    cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8SCOPE_GUI=OFF -DFP8SCOPE_NATIVE=OFF >/dev/null
    cmake --build build-gpu --target "${targets[@]}"
    local bins=()
    for t in "${targets[@]}"; do bins+=("build-gpu/bin/$t"); done
    FP8SCOPE_BUNDLE_SKIP='/usr/local/cuda' scripts/gpu-bundle.sh "${bins[@]}"
}

pack_base() {
    local rev=${1:?usage: $0 pack-base REV} wt=build-base/src
    rm -rf build-base/src; git worktree prune
    git worktree add --detach "$wt" "$rev" >/dev/null
    local keep=/tmp/fp8scope-base.$$
    cmake -S "$wt" -B build-base/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFP8SCOPE_GUI=OFF -DFP8SCOPE_NATIVE=OFF >/dev/null
    cmake --build build-base/build --target fp8scope-engine bench_step bench_train_step
    # Only the three programs: the libraries are this build's (the carried tree has a
    # size limit).
    mkdir -p .gpu-run-base "$keep/bin"
    cp build-base/build/bin/{fp8scope-engine,bench_step,bench_train_step} "$keep/bin/"
    strip "$keep"/bin/*
    tar -C "$keep" -cJf .gpu-run-base/gpu-run.tar.xz bin
    rm -rf "$keep"
    git -C "$wt" rev-parse HEAD >.gpu-run-base/rev
    git worktree remove --force "$wt"
}

# Base against this build: every recipe's CUDA losses, then each build's step benchmarks.
compare_base() {
    local out=$1 g=$2 b=/tmp/gb
    mkdir -p "$b"
    tar -C "$b" -xJf .gpu-run-base/gpu-run.tar.xz
    local run="train --device cuda --compare baseline,delayed,current,blockwise,mxfp8 --steps 40 --json"
    for v in base new; do
        local d=$g; [ "$v" = base ] && d=$b
        LD_LIBRARY_PATH="$d/lib:$LD_LIBRARY_PATH" "$d/bin/fp8scope-engine" $run >"$out/train_$v.json" 2>/dev/null || true
    done
    {
        echo "base $(cat .gpu-run-base/rev 2>/dev/null)"
        if cmp -s "$out/train_base.json" "$out/train_new.json"; then
            echo "CUDA lock-step losses (5 recipes x 40 steps): bit-identical"
        else
            echo "CUDA lock-step losses DIFFER:"; diff "$out/train_base.json" "$out/train_new.json" | head -5
        fi
        for v in base new; do
            local d=$g; [ "$v" = base ] && d=$b
            echo "== bench_step ($v)"
            LD_LIBRARY_PATH="$d/lib:$LD_LIBRARY_PATH" timeout 300 "$d/bin/bench_step" --device cuda 2>&1 | tail -12
        done
        for v in base new; do
            local d=$g; [ "$v" = base ] && d=$b
            echo "== bench_train_step ($v)"
            LD_LIBRARY_PATH="$d/lib:$LD_LIBRARY_PATH" timeout 300 "$d/bin/bench_train_step" 2>&1 | tail -12
        done
    } >"$out/compare.txt" 2>&1
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
    [ -f .gpu-run-base/gpu-run.tar.xz ] && compare_base "$out" "$g"
    if [ -n "${NCU_KERNEL:-}" ]; then
        # ncu locks the clocks to base: compare its durations with each other, not with events.
        PATH="$g/bin:/usr/local/cuda/bin:$PATH" timeout 300 ncu --target-processes all --kernel-name-base demangled \
            -k "regex:$NCU_KERNEL" --launch-skip "${NCU_SKIP:-5}" --launch-count 1 --set "${NCU_SET:-detailed}" \
            bash -c "${NCU_CMD:-bench_cuda_quantize}" >"$out/ncu.txt" 2>&1 || echo "exit $?" >>"$out/ncu.txt"
    fi
    {
        cat "$out/devices.txt"
        [ -f "$out/cuda_tests.txt" ] && { echo "== cuda tests"; grep -E "^\[  (PASSED|FAILED|SKIPPED) \]|tests? ran|FAILED TEST" "$out/cuda_tests.txt" | tail -40; }
        for f in "$out"/bench_*.txt "$out"/compare.txt "$out"/extra.txt; do [ -f "$f" ] && { echo "== $(basename "$f")"; tail -60 "$f"; }; done
    } >"$out/summary.txt"
    cat "$out/summary.txt"
}

case "${1:-}" in
    pack) pack ;;
    pack-base) pack_base "${2:-}" ;;
    check) check ;;
    *) echo "usage: $0 pack|pack-base REV|check" >&2; exit 2 ;;
esac
