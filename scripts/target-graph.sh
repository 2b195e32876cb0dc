#!/usr/bin/env bash
# Prints how the project's libraries and programs link, as CMake sees them: one line per
# target, its direct dependencies after the colon ("(private)" where only the target itself
# uses one). docs/architecture.md draws the same graph. Tests and benchmarks are left out.
# Usage: scripts/target-graph.sh [build dir, default build]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dot=$(mktemp -d)/targets.dot
trap 'rm -rf "$(dirname "$dot")"' EXIT
cmake --graphviz="$dot" -S . -B "$build" >/dev/null
# An edge reads: "nodeA" -> "nodeB" [ style = dotted ] // from -> to   (dotted: PRIVATE)
grep -E '^\s*"node[0-9]+" -> ' "$dot" | awk '
    { priv = ($0 ~ /style = dotted/); n = split($0, p, "// "); split(p[n], e, " -> ");
      from = e[1]; to = e[2];
      if (from !~ /^fp8scope/ || from ~ /_tests$|^fp8scope_simd|real_run/ || to ~ /::moc$/) next;
      sub(/^.*\//, "", to);  # a library given by its path: its file name
      deps[from] = deps[from] " " to (priv ? " (private)" : ""); }
    END { for (t in deps) print t ":" deps[t] }' | sort
