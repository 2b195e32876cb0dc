#!/usr/bin/env python3
"""The engine's GPT model trained by PyTorch on the same GPU, for bench_step's figures.

Same architecture (pre-norm LayerNorm blocks, GELU MLP of 4C, biases, learned positions,
untied head), same shape and AdamW; with --arch llama the engine's Llama-style model
(RMSNorm, SwiGLU of 8/3 C rounded up to 64, no biases, rotary positions with the
half-split pairing, --kv-heads key/value heads through SDPA's grouped-query attention),
the shape of bench_step --config resources/configs/presets/llama-8x4096.json. Modes:
  bf16          BF16 autocast, eager
  bf16-compile  the same under torch.compile
  fp8           per-tensor current scaling through torch._scaled_mm on every linear of the
                blocks: E4M3 activations and weights, E5M2 gradients (the "HYBRID" recipe), eager
  fp8-compile   the same under torch.compile
Prints ms per step (median after warm-up) and MFU with bench_step's FLOP count.

usage: python3 bench/reference_torch_gpu.py [--layers 8] [--width 4096] [--heads 32]
           [--seq 2048] [--batch 4] [--vocab 50304] [--steps 10] [--modes bf16,bf16-compile,fp8,fp8-compile]
           [--arch gpt|llama] [--kv-heads 8] [--rope-theta 500000]
"""
import argparse
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def to_fp8(x, dtype):
    """Per-tensor current scaling: s = fp8_max / amax; returns codes and 1/s."""
    amax = x.abs().max().float().clamp(min=1e-12)
    scale = torch.finfo(dtype).max / amax
    return (x.float() * scale).clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype), scale.reciprocal()


class Fp8Matmul(torch.autograd.Function):
    """y = x w^T with every GEMM operand cast to FP8 along its contraction dimension."""

    @staticmethod
    def forward(ctx, x, w):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1])
        xq, sx = to_fp8(x2, E4M3)
        wq, sw = to_fp8(w, E4M3)
        y = torch._scaled_mm(xq, wq.t(), scale_a=sx, scale_b=sw, out_dtype=torch.bfloat16)
        ctx.save_for_backward(xq, sx, wq, sw)
        ctx.shape = shape
        return y.reshape(*shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, dy):
        xq, sx, wq, sw = ctx.saved_tensors
        dy2 = dy.reshape(-1, dy.shape[-1])
        dyq, sdy = to_fp8(dy2, E5M2)
        # dgrad: dX = dY W; _scaled_mm wants its second operand column-major.
        wt = wq.t().contiguous().t()
        dx = torch._scaled_mm(dyq, wt, scale_a=sdy, scale_b=sw, out_dtype=torch.bfloat16)
        # wgrad: dW = dY^T X
        dyt = dyq.t().contiguous()
        xcm = xq.t().contiguous().t()
        dw = torch._scaled_mm(dyt, xcm, scale_a=sdy, scale_b=sx, out_dtype=torch.float32)
        return dx.reshape(ctx.shape), dw


class Linear(nn.Linear):
    fp8 = False

    def forward(self, x):
        if not Linear.fp8:
            return super().forward(x)
        y = Fp8Matmul.apply(x, self.weight)
        return y if self.bias is None else y + self.bias.to(torch.bfloat16)


def swiglu_hidden(C):
    return (8 * C // 3 + 63) // 64 * 64


def rotate(x, cos, sin):
    """RoPE, half-split pairing: (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin)."""
    x1, x2 = x.chunk(2, dim=-1)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)  # BF16 under autocast, as the engine's activations
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, C, NH, KV):
        super().__init__()
        hs, H = C // NH, swiglu_hidden(C)
        self.ln1, self.ln2 = nn.RMSNorm(C, eps=1e-5), nn.RMSNorm(C, eps=1e-5)
        self.qkv, self.proj = Linear(C, (NH + 2 * KV) * hs, bias=False), Linear(C, C, bias=False)
        self.fc1, self.fc2 = Linear(C, 2 * H, bias=False), Linear(H, C, bias=False)
        self.NH, self.KV, self.hs = NH, KV, hs

    def forward(self, x, cos, sin):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split([C, self.KV * self.hs, self.KV * self.hs], dim=2)
        q = rotate(q.view(B, T, self.NH, self.hs).transpose(1, 2), cos, sin)
        k = rotate(k.view(B, T, self.KV, self.hs).transpose(1, 2), cos, sin)
        v = v.view(B, T, self.KV, self.hs).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.KV != self.NH)
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        gate, up = self.fc1(self.ln2(x)).chunk(2, dim=-1)
        return x + self.fc2(F.silu(gate) * up)


class Llama(nn.Module):
    def __init__(self, L, C, NH, KV, V, T, theta):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(LlamaBlock(C, NH, KV) for _ in range(L))
        self.lnf, self.head = nn.RMSNorm(C, eps=1e-5), nn.Linear(C, V, bias=False)
        hs = C // NH
        inv = theta ** (-2 * torch.arange(hs // 2, dtype=torch.float64) / hs)
        angle = torch.outer(torch.arange(T, dtype=torch.float64), inv)
        self.register_buffer("cos", angle.cos().float(), persistent=False)
        self.register_buffer("sin", angle.sin().float(), persistent=False)

    def forward(self, idx, targets):
        x = self.wte(idx)
        T = idx.shape[1]
        for b in self.blocks:
            x = b(x, self.cos[:T], self.sin[:T])
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = Linear(C, 3 * C), Linear(C, C)
        self.fc1, self.fc2 = Linear(C, 4 * C), Linear(4 * C, C)
        self.NH = NH

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, V, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.lnf, self.head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        logits = self.head(self.lnf(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def model_arguments(p, steps=10):
    """The model's shape and the steps timed (shared with torch_capture_overhead.py)."""
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=50304)
    p.add_argument("--steps", type=int, default=steps)
    p.add_argument("--warmup", type=int, default=3)


def main():
    p = argparse.ArgumentParser()
    model_arguments(p)
    p.add_argument("--peak", type=float, default=989.0)
    p.add_argument("--modes", default="bf16,bf16-compile,fp8,fp8-compile")
    p.add_argument("--arch", default="gpt", choices=["gpt", "llama"])
    p.add_argument("--kv-heads", type=int, default=0, help="key/value heads of --arch llama (0: --heads)")
    p.add_argument("--rope-theta", type=float, default=500000.0)
    a = p.parse_args()
    L, C, V, T, B = a.layers, a.width, a.vocab, a.seq, a.batch
    KV = a.kv_heads or a.heads
    if a.arch == "llama":  # bench_step's count: the linears' parameters, then attention
        H = swiglu_hidden(C)
        linear = C * (C + 2 * KV * (C // a.heads)) + C * C + C * 2 * H + H * C
    else:
        linear = 12 * C * C
    flops = 6.0 * B * T * (linear * L + C * V) + 12.0 * L * C * T * B * T
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, {flops * 1e-12:.1f} TFLOP per step")
    idx = torch.randint(0, V, (B, T), device="cuda")
    tgt = torch.randint(0, V, (B, T), device="cuda")
    for mode in a.modes.split(","):
        # Compiled graphs are not guarded on Linear.fp8: without a reset, a compiled mode
        # after another reuses the first one's graphs.
        torch._dynamo.reset()
        torch.manual_seed(1)
        model = (Llama(L, C, a.heads, KV, V, T, a.rope_theta) if a.arch == "llama" else GPT(L, C, a.heads, V, T)).cuda()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1, fused=True)
        Linear.fp8 = mode.startswith("fp8")
        step_model = torch.compile(model) if mode.endswith("compile") else model

        def step():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = step_model(idx, tgt)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.item()

        times = []
        for s in range(a.warmup + a.steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss = step()
            torch.cuda.synchronize()
            if s >= a.warmup:
                times.append((time.perf_counter() - t0) * 1e3)
        ms = statistics.median(times)
        print(f"{mode:14s} {ms:8.1f} ms/step  MFU {100 * flops / (ms * 1e-3) / (a.peak * 1e12):5.1f}%  loss {loss:.4f}",
              flush=True)
        del model, opt, step_model
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
