#!/bin/sh
# Runs forward_vs_torch.py under the first python3 that imports torch (Debian's
# python3-torch lives in /usr/bin's); exit 77, a skip for ctest, when none does.
for py in python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c "import torch" 2>/dev/null; then
        exec "$py" "$(dirname "$0")/forward_vs_torch.py" "$@"
    fi
done
echo "SKIP: no python3 here imports torch (Debian: apt-get install python3-torch)"
exit 77
