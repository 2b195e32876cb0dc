#!/usr/bin/env bash
# Sets up (installs what is missing, builds) and runs the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec build/bin/fp8scope-engine analyze resources/samples/*.npy "$@"
