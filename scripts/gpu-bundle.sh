#!/bin/bash
# Packs built binaries with the shared libraries they need (OpenBLAS, HDF5 and theirs)
# into .gpu-run/gpu-run.tar.xz, for a machine that has none of them installed (the GPU
# machines). Compressed, because OpenBLAS alone is 35 MiB.
# Usage (from the project root, after a build): scripts/gpu-bundle.sh build/bin/NAME...
# FP8SCOPE_BUNDLE_SKIP=/usr/local/cuda leaves out the libraries under that prefix (the
# GPU machine has its own CUDA).
# There: tar -C /tmp/g -xJf .gpu-run/gpu-run.tar.xz; LD_LIBRARY_PATH=/tmp/g/lib /tmp/g/bin/NAME
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib" "$root/.gpu-run"
for b in "$@"; do
    cp "$b" "$stage/bin/"
    # glibc and the C++ runtime are on the target already (and must match its loader).
    # (A binary that needs nothing else leaves grep no lines: not an error.)
    ldd "$b" | awk '/=> \//{print $3}' | { grep -v -E '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s)\.so' || true; } |
        { if [ -n "${FP8SCOPE_BUNDLE_SKIP:-}" ]; then grep -v "^${FP8SCOPE_BUNDLE_SKIP}" || true; else cat; fi; } |
        xargs -r -I{} cp -L {} "$stage/lib/"
done
strip "$stage"/bin/* 2>/dev/null || true
tar -C "$stage" -cJf "$root/.gpu-run/gpu-run.tar.xz" bin lib
ls -lh "$root/.gpu-run/gpu-run.tar.xz"
