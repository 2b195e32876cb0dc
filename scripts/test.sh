#!/usr/bin/env bash
# Builds (installing what is missing) and runs every test. GPU tests skip without a GPU;
# GUI tests run offscreen.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export QT_QPA_PLATFORM=offscreen
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 600
