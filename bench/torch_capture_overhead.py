#!/usr/bin/env python3
"""What the PyTorch capture hook costs a training step, and what `import` costs per GB.

Trains reference_torch_gpu.py's model (BF16 autocast, eager) in one process without the
hook, with it (capture every N steps) and without it again, and prints the median step time
of plain steps, of the hooked run's other steps and of its capture steps, and the
capture steps' bytes. With --engine it then runs `fp8scope-engine import` of the folder
on --import-device and prints the engine's own line (seconds of analysis per GB).

usage: python3 bench/torch_capture_overhead.py [--layers 8] [--width 4096] [--heads 32]
           [--seq 2048] [--batch 4] [--steps 21] [--every 10] [--dir /tmp/capture]
           [--max-bytes 40e9] [--engine build/bin/fp8scope-engine] [--import-device cuda]
           [--device cuda]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "python"))
import fp8scope_torch  # noqa: E402
from reference_torch_gpu import GPT, model_arguments  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    model_arguments(p, steps=21)
    p.add_argument("--every", type=int, default=10)
    p.add_argument("--dir", default="/tmp/fp8scope_capture_bench")
    p.add_argument("--max-bytes", type=float, default=40e9)
    p.add_argument("--engine", default="")
    p.add_argument("--import-device", default="cuda")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    dev = torch.device(a.device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    name = torch.cuda.get_device_name() if dev.type == "cuda" else "cpu"
    print(f"torch {torch.__version__}, {name}, {a.layers} x {a.width}, batch {a.batch} x {a.seq}")

    def train(cap):
        torch.manual_seed(1)
        model = GPT(a.layers, a.width, a.heads, a.vocab, a.seq).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
        handle = fp8scope_torch.capture(model, a.dir, every=a.every, max_bytes=int(a.max_bytes)) if cap else None
        times = []
        for s in range(1, a.warmup + a.steps + 1):
            sync()
            t0 = time.perf_counter()
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = model(idx, tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            sync()  # the step's work, copies to host included: not the writer's disk time
            ms = (time.perf_counter() - t0) * 1e3
            if handle:
                captured = handle._state is not None
                handle.step(loss=loss, step_ms=ms)
            else:
                captured = False
            times.append((s, ms, captured))
        if handle:
            t0 = time.perf_counter()
            handle.close()
            print(f"  close (the writer finishing its queue): {time.perf_counter() - t0:.1f} s")
        del model, opt
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        return [t for t in times if t[0] > a.warmup or t[2]]

    shutil.rmtree(a.dir, ignore_errors=True)
    # Plain runs before and after the hooked one: their difference is the noise floor.
    before = statistics.median(ms for _, ms, _ in train(False))
    hooked = train(True)
    after = statistics.median(ms for _, ms, _ in train(False))
    plain = (before + after) / 2
    other = statistics.median(ms for s, ms, c in hooked if not c and s > a.warmup)
    capture = [ms for _, ms, c in hooked if c]
    import json

    with open(os.path.join(a.dir, "manifest.json")) as f:
        man = json.load(f)
    steps = sorted({t["step"] for t in man["tensors"]})
    gb = man["bytes"] / 1e9
    print(f"plain step           {plain:9.1f} ms  (before {before:.1f}, after {after:.1f})")
    print(f"hooked, other steps  {other:9.1f} ms  ({100 * (other / plain - 1):+.1f}%)")
    print(f"hooked, capture step {statistics.median(capture):9.1f} ms  (steps {steps}, {gb / max(len(steps), 1):.2f} GB each)"
          + (f", stopped: {man['stopped']['reason']}" if man["stopped"] else ""))
    if a.engine:
        out = os.path.join(a.dir, "run.h5")
        r = subprocess.run([a.engine, "import", a.dir, "--out", out, "--device", a.import_device, "--recipes", "delayed"],
                           capture_output=True, text=True)
        print((r.stderr or r.stdout).strip().splitlines()[-1])


if __name__ == "__main__":
    main()
