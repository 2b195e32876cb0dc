#!/usr/bin/env bash
# Sets up (installs what is missing, builds) and starts the GUI, which launches a small
# lock-step comparison run (baseline, delayed, blockwise, MXFP8) on the CPU and shows it
# as it trains. Arguments go to the GUI: a trace file to open, or --no-launch.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/fp8scope "$@"
