#!/usr/bin/env bash
# Regenerates the README screenshots in docs/images/ from two real runs: the tiny
# lock-step comparison of tests/gui/write_real_trace (200 steps, capture every 10) and,
# for the block heatmaps, a wider model whose operands span many 128x128 tiles. The
# Kernels view shows a GPU trace when GPU_TRACE names one (made on a GPU machine with
# `fp8scope-engine train --device cuda --recipe current --steps 12 --capture-every 10
# --set model.n_layer=4 --set model.d_model=1024 --set model.n_head=16
# --set model.max_seq=512 --seq 512 --batch 8 --eval-every 0 --out gpu.h5`), else the
# tiny CPU run's ops. The Health view shows rank 0's trace of a data-parallel job: DP_TRACE
# (scripts/gpu_data_parallel.sh leaves one as data_parallel_slow_rank.h5), else a four-rank
# CPU job with FP8 E4M3 gradient sums and an injected slow rank. Needs a configured build
# (scripts/setup.sh); BUILD overrides its folder.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ninja -C "$build" fp8scope fp8scope-engine write_real_trace

"$build/bin/write_real_trace" "$tmp/tiny.h5" 200
"$build/bin/fp8scope-engine" train --recipe delayed --steps 6 --batch 8 --seq 128 \
    --capture-every 3 --blockmap-every 3 --quiet --out "$tmp/wide.h5" \
    --set model.n_layer=2 --set model.d_model=512 --set model.d_ff=2048 --set model.n_head=8

shot() {
    local name=$1
    shift
    QT_QPA_PLATFORM=offscreen "$build/bin/fp8scope" --screenshot "docs/images/$name.png" "$@"
}
shot main --open "$tmp/tiny.h5" --run delayed --select "L0 qkv fprop x, L0 qkv fprop w, L0 qkv dgrad dy"
shot error --open "$tmp/tiny.h5" --view error --run delayed
shot outliers --open "$tmp/tiny.h5" --view outliers
if [ -n "${GPU_TRACE:-}" ]; then
    shot kernels --open "$GPU_TRACE" --view kernels --step 10
else
    shot kernels --open "$tmp/tiny.h5" --view kernels
fi
shot amax --open "$tmp/tiny.h5" --view amax --run delayed \
    --select "L1 fc2 fprop x, L0 fc1 fprop x, L1 proj fprop w, L1 fc1 dgrad dy"
shot blocks --open "$tmp/wide.h5" --view blocks --select "L1 fc2 fprop x" --blocks sqnr
if [ -z "${DP_TRACE:-}" ]; then
    DP_TRACE=$tmp/dp.h5
    # Two layers of width 128: steps of tens of ms per rank (about 80 with four ranks on
    # two cores), so the 30 ms delay stands out of the noise of a shared CPU.
    "$build/bin/fp8scope-engine" train --recipe delayed --steps 40 --nproc-per-node 4 --threads 1 \
        --grad-dtype e4m3 --preflight --quiet --inject-slow-rank 2 --inject-delay-ms 30 \
        --set model.n_layer=2 --set model.d_model=128 --out "$DP_TRACE"
fi
shot health --open "$DP_TRACE" --view health
ls -l docs/images/*.png
