#!/usr/bin/env bash
# Sets up (installs what is missing, builds) and runs the main job: the analysis of the
# sample tensors (an activation with outlier channels, a BF16 weight, an F16 gradient).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/fp8scope-engine analyze resources/samples/*.npy resources/samples/*.safetensors "$@"
