#!/usr/bin/env bash
# Builds (installing what is missing, python3-torch for the PyTorch hook's test too) and
# runs every test. GPU tests skip without a GPU; GUI tests run offscreen.
set -euo pipefail
cd "$(dirname "$0")/.."
# The PyTorch hook's end-to-end test needs Debian's python3-torch (CPU); nothing else does,
# so setup.sh leaves it out. Without it that one test is skipped.
if ! dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
  echo "fp8scope: installing python3-torch (for the PyTorch hook's test)"
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends python3-torch
fi
scripts/setup.sh
export QT_QPA_PLATFORM=offscreen
ctest --test-dir build --output-on-failure --parallel "$(nproc)" --timeout 600
