#!/usr/bin/env python3
"""Inputs for timing llm.c's CPU trainer (train_gpt2.c) against bench_train_step without
downloading GPT-2: a GPT-2 124M checkpoint in llm.c's format (version 3, padded vocab
50304) with random weights, and token files in its data layout. Timing does not depend
on the values. Python standard library only.

    git clone https://github.com/karpathy/llm.c && cd llm.c
    python3 /path/to/fp8scope/bench/reference_llmc.py .     # writes gpt2_124M.bin and dev/data/...
    gcc -Ofast -march=native -fopenmp -DOMP train_gpt2.c -lm -o train_gpt2
    OMP_NUM_THREADS=16 ./train_gpt2     # prints "step N: train loss ... (took X ms)"

train_gpt2.c runs B=4, T=64 and AdamW, as bench_train_step does (it also evaluates and
samples every few steps: only the "took" lines are step times). Compare with
    bench_train_step --threads 16 --recipes baseline   (column "step ms")
"""
import math
import os
import random
import struct
import sys
from array import array

V, VP, MAXT, L, NH, C = 50257, 50304, 1024, 12, 12, 768


def normal_block(n, std, seed):
    rng = random.Random(seed)
    return array("f", (rng.gauss(0.0, std) for _ in range(n)))


def write_tensor(f, count, std, seed, block):
    """count float32 values: N(0, std) from a repeated block (timing needs no fresh draws)."""
    if std == 0.0:
        zeros = array("f", bytes(4 * min(count, 1 << 20)))
        while count:
            k = min(count, len(zeros))
            zeros[:k].tofile(f)
            count -= k
        return
    if std == 1.0:  # LayerNorm gains
        ones = array("f", [1.0]) * min(count, 1 << 20)
        while count:
            k = min(count, len(ones))
            ones[:k].tofile(f)
            count -= k
        return
    scaled = array("f", (v * std for v in block))
    off = seed % len(scaled)
    scaled = scaled[off:] + scaled[:off]
    while count:
        k = min(count, len(scaled))
        scaled[:k].tofile(f)
        count -= k


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    block = normal_block(1 << 20, 1.0, 1)
    resid = 0.02 / math.sqrt(2 * L)
    # llm.c's parameter order and shapes (train_gpt2.c: fill_in_parameter_sizes).
    tensors = [(VP * C, 0.02), (MAXT * C, 0.02), (L * C, 1.0), (L * C, 0.0), (L * 3 * C * C, 0.02),
               (L * 3 * C, 0.0), (L * C * C, resid), (L * C, 0.0), (L * C, 1.0), (L * C, 0.0),
               (L * 4 * C * C, 0.02), (L * 4 * C, 0.0), (L * C * 4 * C, resid), (L * C, 0.0), (C, 1.0), (C, 0.0)]
    header = [0] * 256
    header[0:8] = [20240326, 3, MAXT, V, L, NH, C, VP]
    path = os.path.join(root, "gpt2_124M.bin")
    with open(path, "wb") as f:
        f.write(struct.pack("256i", *header))
        for i, (count, std) in enumerate(tensors):
            write_tensor(f, count, std, 7919 * i, block)
    print("wrote", path, sum(c for c, _ in tensors), "parameters (padded vocab)")

    data = os.path.join(root, "dev", "data", "tinyshakespeare")
    os.makedirs(data, exist_ok=True)
    rng = random.Random(2)
    for name, n in (("tiny_shakespeare_train.bin", 1 << 18), ("tiny_shakespeare_val.bin", 1 << 15)):
        p = os.path.join(data, name)
        with open(p, "wb") as f:
            h = [0] * 256
            h[0:3] = [20240520, 1, n]
            f.write(struct.pack("256i", *h))
            array("H", (rng.randrange(V) for _ in range(n))).tofile(f)
        print("wrote", p, n, "tokens")


if __name__ == "__main__":
    main()
