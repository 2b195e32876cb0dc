#!/usr/bin/env python3
"""Writes the sample tensors of resources/samples/ (deterministic, Python stdlib only).

activation.npy        float32 256x1024: N(0, 1) with four outlier channels x50, the
                      pattern LLM activations show (a few hidden dimensions carry huge values).
weights.safetensors   "layer0.mlp.weight"  BF16 1024x1024, N(0, 0.02^2) like an initialized
                      linear layer;
                      "layer0.mlp.grad"    F16 256x1024, N(0, (1e-6)^2) with two token rows
                      5e4 times larger: per-tensor scaling sized by those rows flushes the
                      small gradients to zero (underflow); 1x128 tiles keep them.
Usage: scripts/make_samples.py [OUTDIR]   (default resources/samples)
"""
import json
import os
import random
import struct
import sys

SEED = 20240611
OUTLIER_CHANNELS = (17, 301, 666, 1000)


def gaussian(rng, n, sigma):
    return [rng.gauss(0.0, sigma) for _ in range(n)]


def npy_bytes(shape, values):
    """NumPy format 1.0, little-endian float32, C order."""
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in shape)
    header = header.replace(", )", ",)") if len(shape) == 1 else header.replace(", )", ")")
    pad = (64 - (10 + len(header) + 1) % 64) % 64
    header = header + " " * pad + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + \
        struct.pack(f"<{len(values)}f", *values)


def bf16_bits(x):
    """float32 -> bfloat16, round to nearest even (finite inputs)."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    u += 0x7FFF + ((u >> 16) & 1)
    return (u >> 16) & 0xFFFF


def safetensors_bytes(tensors):
    """tensors: list of (name, dtype, shape, raw bytes); offsets follow in list order."""
    header, data, offset = {}, b"", 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)  # keep the data 8-byte aligned
    return struct.pack("<Q", len(text)) + text.encode() + data


def activation(rng):
    rows, cols = 256, 1024
    x = gaussian(rng, rows * cols, 1.0)
    for c in OUTLIER_CHANNELS:
        for r in range(rows):
            x[r * cols + c] *= 50.0
    return (rows, cols), x


def weight(rng):
    rows, cols = 1024, 1024
    w = gaussian(rng, rows * cols, 0.02)
    return (rows, cols), struct.pack(f"<{len(w)}H", *(bf16_bits(v) for v in w))


def gradient(rng):
    rows, cols = 256, 1024
    g = gaussian(rng, rows * cols, 1e-6)
    for r in (7, 200):
        for c in range(cols):
            g[r * cols + c] *= 5e4
    return (rows, cols), struct.pack(f"<{len(g)}e", *g)  # struct rounds half to even


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "resources", "samples")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(SEED)
    shape, x = activation(rng)
    with open(os.path.join(out, "activation.npy"), "wb") as f:
        f.write(npy_bytes(shape, x))
    wshape, wraw = weight(rng)
    gshape, graw = gradient(rng)
    with open(os.path.join(out, "weights.safetensors"), "wb") as f:
        f.write(safetensors_bytes([("layer0.mlp.weight", "BF16", wshape, wraw),
                                   ("layer0.mlp.grad", "F16", gshape, graw)]))


if __name__ == "__main__":
    main()
