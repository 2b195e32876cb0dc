#!/usr/bin/env bash
# Runs torch_capture_test.py with the first python3 that imports torch ($FP8SCOPE_PYTHON,
# python3 on PATH, /usr/bin/python3); skips (exit 77) when none does.
# Usage: run_torch_test.sh ENGINE WORK_DIR
set -u
here=$(cd "$(dirname "$0")" && pwd)
for py in ${FP8SCOPE_PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import torch" >/dev/null 2>&1; then
    exec env PYTHONPATH="$here/../../python${PYTHONPATH:+:$PYTHONPATH}" "$py" "$here/torch_capture_test.py" "$@"
  fi
done
echo "SKIP: no python3 that imports torch (Debian: apt-get install python3-torch)"
exit 77
