#!/usr/bin/env python3
"""PyTorch float32 reference for bench_train_step: the same GPT-2 124M training step on
the CPU (L=12, C=768, NH=12, V=50257, max_seq 1024, tied head, LayerNorm, tanh GELU,
biases; B=4, T=64; AdamW betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on matrices,
gradient clipping at norm 1.0, as fp8scope's trainer runs it).

Prints the parameter count and, per step, forward + backward and the whole step
(with AdamW) in ms: best and median of --steps after --warmup.

    python3 bench/reference_gpt2_torch.py --threads 16 [--steps 10] [--warmup 3]

Needs only torch (any recent CPU build). Compare with
    bench_train_step --threads 16 --recipes baseline
"""
import argparse
import math
import os
import platform
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc1 = nn.Linear(C, 4 * C)
        self.fc2 = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, V=50257, maxT=1024, L=12, C=768, NH=12):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(maxT, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.head = nn.Linear(C, V, bias=False)
        self.head.weight = self.wte.weight  # tied, as GPT-2
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "fc2.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = GPT2()
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-4, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(2)
    idx = torch.randint(0, 50257, (a.batch, a.seq), generator=g)
    tgt = torch.randint(0, 50257, (a.batch, a.seq), generator=g)

    print(f"cpu model: {cpu_model()} | torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"mkl {torch.backends.mkl.is_available()}, mkldnn {torch.backends.mkldnn.is_available()}")
    print(f"GPT-2 L=12 C=768 NH=12 V=50257 tied, B={a.batch} T={a.seq}: {n_params / 1e6:.1f} M parameters, float32")
    fb, step = [], []
    loss = float("nan")
    for s in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        t1 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t2 = time.perf_counter()
        if s >= a.warmup:
            fb.append((t1 - t0) * 1e3)
            step.append((t2 - t0) * 1e3)
    print(f"fwd+bwd ms: best {min(fb):.1f} median {statistics.median(fb):.1f} | "
          f"step ms (with AdamW): best {min(step):.1f} median {statistics.median(step):.1f} | loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
