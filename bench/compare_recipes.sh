#!/usr/bin/env bash
# Trains the default config under every training recipe in lock step (one process, the
# same initial weights and batches) and prints each recipe's final eval loss with its
# relative difference to the float32 baseline. Goal: every FP8 recipe within 2%.
#
#   bench/compare_recipes.sh [ENGINE] [extra train flags...]
# ENGINE defaults to build/bin/fp8scope-engine; extra flags go to `train`
# (e.g. --steps 100, --set model.n_layer=2, --config resources/configs/llama_style.json).
set -euo pipefail
cd "$(dirname "$0")/.."
engine=build/bin/fp8scope-engine
if [[ $# -gt 0 && "$1" != --* ]]; then engine="$1"; shift; fi
recipes=baseline,delayed,delayed_e4m3,current,blockwise,mxfp8
goal=2.0

start=$(date +%s)
table=$("$engine" train --compare "$recipes" "$@")
end=$(date +%s)
echo "$table"
echo
echo "wall time: $((end - start)) s"
# Columns: run recipe loss eval_loss eval_vs_base ("+0.123%").
echo "$table" | awk -v goal="$goal" '
    NR > 1 && $5 != "-" { pct = $5; sub("%", "", pct); pct += 0; a = pct < 0 ? -pct : pct;
                          worst = a > worst ? a : worst; n++ }
    END { if (n == 0) { print "no FP8 recipe to compare"; exit 1 }
          printf "worst |eval vs baseline|: %.3f%% (goal: within %.1f%%) %s\n", worst, goal,
                 worst <= goal ? "MET" : "MISSED" }'
