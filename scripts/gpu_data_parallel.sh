#!/usr/bin/env bash
# The data-parallel evidence on a machine with several GPUs (scripts/gpu.sh check runs it
# as EXTRA, with the bundle's binaries on PATH): the pre-flight check, a short job on every
# GPU with an injected slow rank (the in-flight check must flag it), a rank killed mid-run
# (the other ranks must end with a message) and resumed from the last checkpoint, then the
# all-reduce benchmark, the gradient sums in float32, BF16 and E4M3 (the bytes and time
# FP8 saves against BF16) and the scaling benchmark on the 4096-wide model, its training
# steps with float32, BF16 and E4M3 sums; last, what NCCL's own float max does with NaN
# next to the engine's max of ordered keys. An elastic job (--elastic) that loses its last
# rank is compared with the resumed job of the others.
# usage: scripts/gpu_data_parallel.sh [ranks]   (default: every GPU)
set -uo pipefail
n=${1:-$(nvidia-smi -L | wc -l)}
work=$(mktemp -d)
small=(--device cuda --set model.n_layer=2 --set model.d_model=512 --set model.n_head=8 --set model.max_seq=256
       --seq 256 --batch 8 --eval-every 0)

echo "== preflight, $n ranks"
fp8scope-engine preflight --device cuda --size 4096 --reps 5 --nproc-per-node "$n" --timeout-s 120

echo "== train, $n ranks, rank $((n - 1)) slowed by 40 ms per step, pre-flight check first"
fp8scope-engine train "${small[@]}" --steps 30 --recipe delayed --nproc-per-node "$n" --preflight \
    --inject-slow-rank $((n - 1)) --inject-delay-ms 40 --out "$work/slow.h5" --log-every 10
fp8scope-engine inspect "$work/slow.h5" | sed -n '/^events/,/^worst/p'
cp "$work/slow.h5" "${OUT:-/tmp}/data_parallel_slow_rank.h5"  # for the GUI's Health view

echo "== train, $n ranks, pre-flight with rank $((n - 1)) made slow and --exclude-slow"
fp8scope-engine train "${small[@]}" --steps 10 --nproc-per-node "$n" --preflight --exclude-slow \
    --inject-slow-rank $((n - 1)) --inject-delay-ms 500 --out "$work/excl.h5" --log-every 5
fp8scope-engine inspect "$work/excl.h5" | sed -n '/^events/,/^worst/p'

echo "== train, $n ranks, rank 1 killed in step 7 (checkpoint every 5)"
start=$(date +%s%N)
fp8scope-engine train "${small[@]}" --steps 12 --nproc-per-node "$n" --rank-timeout-s 30 \
    --checkpoint-dir "$work/ckpt" --checkpoint-every 5 --inject-crash-rank 1 --inject-crash-step 7 --log-every 5
status=$?
echo "exit $status after $(( ($(date +%s%N) - start) / 1000000 )) ms"
ls "$work/ckpt"
echo "== resumed from step 5"
fp8scope-engine train --nproc-per-node "$n" --resume "$work/ckpt/step_5.ckpt" --log-every 5
echo "exit $?"

echo "== train --elastic, $n ranks, rank $((n - 1)) killed in step 7: the others go on from step 5 over a new NCCL"
echo "   communicator; their losses from there against $((n - 1)) ranks resumed from step_5.ckpt (bit for bit expected)"
elastic=("${small[@]}" --steps 12 --elastic --rank-timeout-s 30 --set rewind.snapshot_every=5 --json)
fp8scope-engine train "${elastic[@]}" --nproc-per-node "$n" --checkpoint-dir "$work/el" --checkpoint-every 5 \
    --inject-crash-rank $((n - 1)) --inject-crash-step 7 --out "$work/elastic.h5" > "$work/elastic.json"
echo "exit $?"
fp8scope-engine inspect "$work/elastic.h5" | grep world_changed
fp8scope-engine train "${elastic[@]}" --nproc-per-node $((n - 1)) --checkpoint-dir "$work/el_oracle" \
    --resume "$work/el/step_5.ckpt" > "$work/oracle.json"
python3 - "$work/elastic.json" "$work/oracle.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["runs"][0]["losses"] for p in sys.argv[1:])
print("losses after the recovery equal the resumed job's:", a[-len(b):] == b, a[-len(b):], b)
PY

echo "== NCCL's own all-reduce figures (PyTorch's NCCL process group)"
python3 bench/reference_allreduce_torch.py --ranks "$n" 2>&1 | grep -v Warning

echo "== bench_data_parallel, 8 x 4096: all-reduce, gradient sums (f32, bf16, e4m3), training"
model=(model.n_layer=8 model.d_model=4096 model.n_head=32 model.vocab_size=50304 model.max_seq=2048 seq_len=2048
       batch_size=4)
bench_data_parallel --ranks "$n" --steps 20 --grad-dtype e4m3 --train 0
for dtype in f32 bf16 e4m3; do
    bench_data_parallel --ranks "$n" --steps 20 --allreduce 0 --sums 0 --grad-dtype $dtype "${model[@]}" recipe=current
done
bench_data_parallel --ranks "$n" --steps 20 --allreduce 0 --sums 0 "${model[@]}" recipe=baseline
bench_data_parallel --ranks "$n" --steps 20 --allreduce 0 --sums 0 "${model[@]}" recipe=blockwise

echo "== bench_nccl_nan_max: ncclMax on float32 with NaN, Inf, signed zeros and denormals (GPUs 0 and 1)"
bench_nccl_nan_max
rm -rf "$work"
