#!/usr/bin/env bash
# The FP4 result of the README: lock-step runs of the FP4 training recipes against the
# baseline on the default model and a wider one, for several seeds, and each recipe's
# final evaluation-loss gap to the baseline of the same seed (percent; the spread over
# seeds tells a real gap from seed noise).
#   scripts/fp4_loss_gaps.sh [DEVICE] [OUTDIR]     DEVICE cpu (default) or cuda
# Environment: ENGINE (default build/bin/fp8scope-engine, or fp8scope-engine on PATH),
# STEPS (600), SEEDS ("1 2 3"), RECIPES, WIDE (the wider model's --set options; empty:
# default model only), OPTS (options for every run, e.g. --config FILE with custom recipes).
set -euo pipefail
device=${1:-cpu}
out=${2:-/tmp/fp4-loss-gaps}
engine=${ENGINE:-$( [ -x build/bin/fp8scope-engine ] && echo build/bin/fp8scope-engine || echo fp8scope-engine )}
steps=${STEPS:-600}
seeds=${SEEDS:-1 2 3}
recipes=${RECIPES:-baseline,nvfp4,nvfp4:rht=0,nvfp4:sr=0,nvfp4:2d=0,mxfp4,mxfp8}
wide=${WIDE-"--set model.n_layer=6 --set model.d_model=512 --set model.n_head=8 --set seq_len=128"}
mkdir -p "$out"

run() {  # model-name, extra options
    local name=$1; shift
    for s in $seeds; do
        "$engine" train --device "$device" --compare "$recipes" --steps "$steps" --seed "$s" ${OPTS:-} "$@" --json \
            >"$out/$name.seed$s.json" 2>"$out/$name.seed$s.log"
    done
    python3 - "$out" "$name" $seeds <<'PY'
import json, sys, statistics
out, name, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
gaps = {}
for s in seeds:
    runs = json.load(open(f"{out}/{name}.seed{s}.json"))["runs"]
    base = next(r["eval_loss"] for r in runs if r["recipe"] == "baseline")
    for r in runs:
        gaps.setdefault(r["recipe"], []).append((r["eval_loss"], 100.0 * (r["eval_loss"] - base) / base))
print(f"{name}: final eval loss and gap to baseline (%), seeds {' '.join(seeds)}")
for recipe, v in gaps.items():
    g = [x[1] for x in v]
    sd = statistics.stdev(g) if len(g) > 1 else float("nan")
    print(f"  {recipe:18s} loss {statistics.mean(x[0] for x in v):.4f}  gap {statistics.mean(g):+.3f}%  "
          f"(sd {sd:.3f}; per seed {' '.join(f'{x:+.3f}' for x in g)})")
PY
}

run default
[ -n "$wide" ] && run wide $wide
