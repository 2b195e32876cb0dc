"""The engine's forward of a pretrained checkpoint against an independent one in PyTorch.

Writes small checkpoints with random weights in Hugging Face's layouts (a GPT-2 file with
the "transformer." prefix, a tied head and the attention-mask buffers; a GPT-2 folder of
bfloat16/float16 shards with an index, an untied head and config.json; a Llama folder),
trains one step at learning rate 0 with `fp8scope-engine train --init-from`, and compares
its held-out loss with the loss of the same weights on the same held-out windows computed
here in float64. A loss computed with one weight deliberately mis-mapped must miss the
engine's by far: the comparison can tell.

usage: forward_vs_torch.py ENGINE {gpt2,llama} [--device cuda] [--d-model 768 --layers 12
       --heads 12 --vocab 50257 --seq 1024 --tol 1e-3]      exit 77: skipped (with the reason)
The defaults are the small CPU test ctest runs; the options give a realistic size on a GPU.
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

import torch

# Set from the command line in main(): vocabulary, sequence length, batch rows, tolerance.
V, T, B, TOL, DEVICE = 96, 16, 4, 2e-5, "cpu"  # DEVICE: the engine's; the float64 reference runs there too
BATCHES, VAL = 2, 0.1
REF = "cpu"
STORED = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def save_safetensors(path, tensors):
    header, data = {}, bytearray()
    for name, t in tensors.items():
        raw = t.detach().cpu().contiguous().reshape(-1).view(torch.int16 if t.element_size() == 2 else torch.int32)
        raw = raw.numpy().tobytes()
        header[name] = {"dtype": STORED[t.dtype], "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(data))


def save_tokens(path, tokens):
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header) + torch.tensor(tokens, dtype=torch.int32).to(torch.int16).numpy().tobytes())


def eval_windows(tokens):
    """The engine's held-out batches (BatchSampler::eval_batch): windows spread evenly."""
    n_val = int(len(tokens) * VAL)
    n_train, windows, span = len(tokens) - n_val, BATCHES * B, n_val - T - 1
    rows = [n_train + k * span // (windows - 1) for k in range(windows)]
    x = torch.tensor([tokens[r:r + T] for r in rows])
    y = torch.tensor([tokens[r + 1:r + T + 1] for r in rows])
    return x, y


def attention(q, k, v):
    """q (B, NH, T, hd), k and v (B, NH, T, hd): causal softmax attention."""
    att = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool, device=q.device), 1), float("-inf"))
    y = torch.softmax(att, -1) @ v
    return y.transpose(1, 2).reshape(q.shape[0], T, -1)


def heads(x, n):
    return x.view(x.shape[0], T, n, -1).transpose(1, 2)


def layernorm(x, w, b):
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_loss(w, n_head, x, y, prefix="", flip_proj=False):
    """GPT-2 in float64; Conv1D weights are (in, out): y = x @ W + b."""
    g = lambda name: w[prefix + name].to(REF, torch.float64)
    C = g("wte.weight").shape[1]
    h = g("wte.weight")[x] + g("wpe.weight")[:T]
    for l in range(sum(1 for n in w if n.startswith(prefix + "h.") and n.endswith(".ln_1.weight"))):
        p = "h.%d." % l
        a = layernorm(h, g(p + "ln_1.weight"), g(p + "ln_1.bias"))
        q, k, v = (a @ g(p + "attn.c_attn.weight") + g(p + "attn.c_attn.bias")).split(C, -1)
        proj = g(p + "attn.c_proj.weight")
        h = h + attention(heads(q, n_head), heads(k, n_head), heads(v, n_head)) @ (proj.T if flip_proj else proj) + g(
            p + "attn.c_proj.bias")
        m = gelu_tanh(layernorm(h, g(p + "ln_2.weight"), g(p + "ln_2.bias")) @ g(p + "mlp.c_fc.weight") + g(p + "mlp.c_fc.bias"))
        h = h + m @ g(p + "mlp.c_proj.weight") + g(p + "mlp.c_proj.bias")
    h = layernorm(h, g("ln_f.weight"), g("ln_f.bias"))
    head = w["lm_head.weight"].to(REF, torch.float64) if "lm_head.weight" in w else g("wte.weight")
    return torch.nn.functional.cross_entropy((h @ head.T).reshape(-1, V), y.reshape(-1)).item()


def rmsnorm(x, w):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w


def llama_loss(w, n_head, n_kv, theta, x, y, flip_rope=False):
    """Llama in float64: half-split RoPE (Hugging Face's rotate_half), KV heads shared."""
    g = lambda name: w[name].to(REF, torch.float64)
    C = g("model.embed_tokens.weight").shape[1]
    hd = C // n_head
    position = torch.arange(T, dtype=torch.float64, device=REF)
    freqs = torch.outer(position, theta ** (-torch.arange(0, hd, 2, dtype=torch.float64, device=REF) / hd))
    cos, sin = torch.cat((freqs, freqs), -1).cos(), torch.cat((freqs, freqs), -1).sin()
    if flip_rope:  # the interleaved convention: pairs (0,1), (2,3), ...
        cos, sin = freqs.repeat_interleave(2, -1).cos(), freqs.repeat_interleave(2, -1).sin()
    half = lambda u: torch.cat((-u[..., hd // 2:], u[..., :hd // 2]), -1)
    pairs = lambda u: torch.stack((-u[..., 1::2], u[..., ::2]), -1).flatten(-2)
    rope = lambda u: u * cos + (pairs(u) if flip_rope else half(u)) * sin
    h = g("model.embed_tokens.weight")[x]
    for l in range(sum(1 for n in w if n.endswith(".input_layernorm.weight"))):
        p = "model.layers.%d." % l
        a = rmsnorm(h, g(p + "input_layernorm.weight"))
        q = rope(heads(a @ g(p + "self_attn.q_proj.weight").T, n_head))
        k = rope(heads(a @ g(p + "self_attn.k_proj.weight").T, n_kv)).repeat_interleave(n_head // n_kv, 1)
        v = heads(a @ g(p + "self_attn.v_proj.weight").T, n_kv).repeat_interleave(n_head // n_kv, 1)
        h = h + attention(q, k, v) @ g(p + "self_attn.o_proj.weight").T
        m = rmsnorm(h, g(p + "post_attention_layernorm.weight"))
        gate, up = m @ g(p + "mlp.gate_proj.weight").T, m @ g(p + "mlp.up_proj.weight").T
        h = h + (torch.nn.functional.silu(gate) * up) @ g(p + "mlp.down_proj.weight").T
    h = rmsnorm(h, g("model.norm.weight"))
    head = g("lm_head.weight") if "lm_head.weight" in w else g("model.embed_tokens.weight")
    return torch.nn.functional.cross_entropy((h @ head.T).reshape(-1, V), y.reshape(-1)).item()


def engine_eval_loss(engine, init_from, tokens_file, extra, workdir):
    cmd = [engine, "train", "--init-from", init_from, "--data", "tokens:" + tokens_file, "--steps", "1",
           "--recipe", "baseline", "--batch", str(B), "--seq", str(T), "--device", DEVICE, "--threads", "2",
           "--json", "--quiet", "--set", "optimizer.lr=0", "--set", "schedule.min_lr=0",
           "--set", "schedule.warmup_steps=0", "--set", "eval.batches=%d" % BATCHES] + extra
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=workdir)
    return r, (json.loads(r.stdout)["runs"][0]["eval_loss"] if r.returncode == 0 else None)


def agree(name, engine, reference, wrong):
    tol = TOL * max(1.0, abs(reference))
    print("%-12s engine %.6f  torch %.6f  mis-mapped %.6f" % (name, engine, reference, wrong))
    ok = abs(engine - reference) <= tol
    if not ok:
        print("FAIL %s: |engine - torch| = %.3g > %.3g" % (name, abs(engine - reference), tol))
    if abs(wrong - engine) <= 50 * tol:
        print("FAIL %s: the mis-mapped loss is as close; the comparison cannot tell" % name)
        ok = False
    return ok


def normal(gen, *shape, std):
    return torch.randn(*shape, generator=gen) * std


def gpt2_weights(C, L, maxT, gen):
    s = 1.7 / math.sqrt(C)  # matrices and embeddings: logits and pre-activations of order 1 at any width
    r = lambda *shape, std=s: normal(gen, *shape, std=std)
    w = {"wte.weight": r(V, C), "wpe.weight": r(maxT, C), "ln_f.weight": 1 + r(C, std=0.1), "ln_f.bias": r(C, std=0.1)}
    for l in range(L):
        p = "h.%d." % l
        w.update({p + "ln_1.weight": 1 + r(C, std=0.1), p + "ln_1.bias": r(C, std=0.1),
                  p + "attn.c_attn.weight": r(C, 3 * C), p + "attn.c_attn.bias": r(3 * C, std=0.1),
                  p + "attn.c_proj.weight": r(C, C), p + "attn.c_proj.bias": r(C, std=0.1),
                  p + "ln_2.weight": 1 + r(C, std=0.1), p + "ln_2.bias": r(C, std=0.1),
                  p + "mlp.c_fc.weight": r(C, 4 * C), p + "mlp.c_fc.bias": r(4 * C, std=0.1),
                  p + "mlp.c_proj.weight": r(4 * C, C, std=s / 2), p + "mlp.c_proj.bias": r(C, std=0.1)})
    return w


def run_gpt2(args, work, tokens_file, x, y, gen):
    ok, C, L, NH = True, args.d_model, args.layers, args.heads
    # A single file: "transformer." names, tied head, the mask buffers, float32, heads from --set.
    w = gpt2_weights(C, L, T + 8, gen)
    stored = {"transformer." + n: t for n, t in w.items()}
    for l in range(L):
        stored["transformer.h.%d.attn.bias" % l] = torch.tril(torch.ones(T + 8, T + 8)).view(1, 1, T + 8, T + 8)
        stored["transformer.h.%d.attn.masked_bias" % l] = torch.tensor(-1e4)
    os.makedirs(os.path.join(work, "file"))
    path = os.path.join(work, "file", "gpt2.safetensors")
    save_safetensors(path, stored)
    r, loss = engine_eval_loss(args.engine, path, tokens_file, ["--set", "model.n_head=%d" % NH], work)
    if loss is None:
        print("FAIL gpt2 file: engine exit %d\n%s" % (r.returncode, r.stderr))
        return False
    ok &= agree("gpt2 file", loss, gpt2_loss(w, NH, x, y), gpt2_loss(w, NH, x, y, flip_proj=True))

    # A folder of shards with an index: no prefix, untied head, bf16 matrices, f16 vectors,
    # twice the heads, from config.json.
    w = gpt2_weights(C, L + 1, T + 4, gen)
    w["lm_head.weight"] = normal(gen, V, C, std=1.7 / math.sqrt(C))
    w = {n: t.to(torch.bfloat16 if t.dim() == 2 else torch.float16) for n, t in w.items()}
    folder = os.path.join(work, "shards")
    os.makedirs(folder)
    names = sorted(w)
    parts = {"model-00001-of-00002.safetensors": names[:len(names) // 2],
             "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    weight_map = {}
    for shard, members in parts.items():
        save_safetensors(os.path.join(folder, shard), {n: w[n] for n in members})
        weight_map.update({n: shard for n in members})
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "gpt2", "n_head": 2 * NH, "n_layer": L + 1, "n_embd": C, "n_positions": T + 4,
                   "activation_function": "gelu_new", "tie_word_embeddings": False}, f)
    r, loss = engine_eval_loss(args.engine, folder, tokens_file, [], work)
    if loss is None:
        print("FAIL gpt2 shards: engine exit %d\n%s" % (r.returncode, r.stderr))
        return False
    ok &= agree("gpt2 shards", loss, gpt2_loss(w, 2 * NH, x, y), gpt2_loss(w, NH, x, y))
    return ok


def run_llama(args, work, tokens_file, x, y, gen):
    C, L, NH, theta = args.d_model, args.layers, args.heads, 10000.0
    KV, H = max(1, NH // 2), (8 * C // 3 + 7) // 8 * 8
    r = lambda *shape, std=1.7 / math.sqrt(C): normal(gen, *shape, std=std)
    w = {"model.embed_tokens.weight": r(V, C), "model.norm.weight": 1 + r(C, std=0.1), "lm_head.weight": r(V, C)}
    for l in range(L):
        p = "model.layers.%d." % l
        w.update({p + "input_layernorm.weight": 1 + r(C, std=0.1), p + "self_attn.q_proj.weight": r(C, C),
                  p + "self_attn.k_proj.weight": r(KV * C // NH, C), p + "self_attn.v_proj.weight": r(KV * C // NH, C),
                  p + "self_attn.o_proj.weight": r(C, C), p + "post_attention_layernorm.weight": 1 + r(C, std=0.1),
                  p + "mlp.gate_proj.weight": r(H, C), p + "mlp.up_proj.weight": r(H, C),
                  p + "mlp.down_proj.weight": r(C, H)})
    folder = os.path.join(work, "llama")
    os.makedirs(folder)
    save_safetensors(os.path.join(folder, "model.safetensors"), w)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump({"model_type": "llama", "num_attention_heads": NH, "num_key_value_heads": KV, "hidden_size": C,
                   "num_hidden_layers": L, "intermediate_size": H, "rope_theta": theta, "rms_norm_eps": 1e-5,
                   "hidden_act": "silu", "max_position_embeddings": T + 8, "tie_word_embeddings": False}, f)
    res, loss = engine_eval_loss(args.engine, folder, tokens_file, [], work)
    if loss is None and "rotary position embeddings" in res.stderr:
        print("SKIP: this engine has no rotary position embeddings or grouped-query attention yet:\n" + res.stderr)
        return None
    if loss is None:
        print("FAIL llama: engine exit %d\n%s" % (res.returncode, res.stderr))
        return False
    return agree("llama", loss, llama_loss(w, NH, KV, theta, x, y), llama_loss(w, NH, KV, theta, x, y, flip_rope=True))


def main():
    global V, T, B, TOL, DEVICE, REF
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("engine")
    p.add_argument("family", choices=["gpt2", "llama"])
    p.add_argument("--device", default=DEVICE, choices=["cpu", "cuda"])
    p.add_argument("--d-model", type=int, default=32)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=V)
    p.add_argument("--seq", type=int, default=T)
    p.add_argument("--batch", type=int, default=B)
    p.add_argument("--tol", type=float, default=TOL, help="relative; float32 CPU agrees to about 1e-6")
    args = p.parse_args()
    V, T, B, TOL, DEVICE = args.vocab, args.seq, args.batch, args.tol, args.device
    REF = "cuda" if DEVICE == "cuda" and torch.cuda.is_available() else "cpu"
    gen = torch.Generator().manual_seed(20240520)
    tokens = torch.randint(0, V, (40 * (T + 1),), generator=gen).tolist()  # a tenth held out: 4 windows' worth
    x, y = (t.to(REF) for t in eval_windows(tokens))
    with tempfile.TemporaryDirectory() as work:
        tokens_file = os.path.join(work, "tokens.bin")
        save_tokens(tokens_file, tokens)
        ok = (run_gpt2 if args.family == "gpt2" else run_llama)(args, work, tokens_file, x, y, gen)
    if ok is None:
        return 77
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
