"""The PyTorch hook end to end: a small transformer trains a few steps with the hook;
the captured tensors are checked against values computed here (the initial weights, the
first block's input, an output gradient torch's retain_grad gives), the folder is
imported, and every figure of the trace (export --csv) must equal `analyze` of the same
tensors in the orientation each GEMM reads. Then the bounds: a linear filter and byte
budgets that stop capture between steps and within one.

Usage: torch_capture_test.py ENGINE WORK_DIR
FP8SCOPE_TORCH_DEVICE=cuda runs the models on a GPU (the hook's pinned copies and events);
the default is the CPU."""

import copy
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
import warnings

import torch
import torch.nn as nn

import fp8scope_torch
from fp8scope_torch import safetensors_file

ENGINE, WORK = sys.argv[1], sys.argv[2]
DEV = torch.device(os.environ.get("FP8SCOPE_TORCH_DEVICE", "cpu"))
D, HEADS, VOCAB, T, B, STEPS, EVERY = 32, 2, 64, 16, 4, 5, 2
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (z.view(b, t, HEADS, D // HEADS).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(D // HEADS)
        att = att.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf")).softmax(-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, D))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(D, 4 * D)
        self.fc2 = nn.Linear(4 * D, D)

    def forward(self, x):
        return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = nn.LayerNorm(D), Attention(), nn.LayerNorm(D), Mlp()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Gpt(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.pos = nn.Parameter(torch.randn(T, D) * 0.02)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx):
        x = self.emb(idx) + self.pos
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln_f(x))


def batch(step):
    g = torch.Generator().manual_seed(step)
    idx = torch.randint(0, VOCAB, (B, T + 1), generator=g).to(DEV)
    return idx[:, :-1], idx[:, 1:]


def make(cls):
    """The model with the same initial weights on every call, on DEV."""
    torch.manual_seed(0)
    return cls().to(DEV)


def train(folder, autocast=False, **kw):
    model = make(Gpt)
    initial = copy.deepcopy(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    cap = fp8scope_torch.capture(model, folder, every=EVERY, **kw)
    losses = []
    for step in range(1, STEPS + 1):
        idx, target = batch(step)
        with torch.autocast(DEV.type, dtype=torch.bfloat16, enabled=autocast):
            logits = model(idx)
            loss = nn.functional.cross_entropy(logits.float().view(-1, VOCAB), target.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()
        cap.step(loss=loss)
        losses.append(loss.item())
    cap.close()
    with open(os.path.join(folder, "manifest.json")) as f:
        return json.load(f), initial, losses


def load(folder, entry):
    """A captured tensor read back with the engine-independent reader below."""
    import struct

    with open(os.path.join(folder, entry["file"]), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    h = header[entry["name"]]
    begin, end = h["data_offsets"]
    dtype = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}[h["dtype"]]
    raw = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.uint8)
    return raw.view(dtype).reshape(h["shape"])


def run(*args):
    p = subprocess.run([ENGINE, *args], capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit("%s exited %d" % (args[0], p.returncode))
    return p.stdout


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def same(csv_text, json_value):
    """A CSV cell (%.17g, '' for NaN, inf) and a JSON value (null for NaN and Inf) agree."""
    v = float(csv_text) if csv_text else float("nan")
    if json_value is None:
        return not math.isfinite(v)
    return v == float(json_value)


def flat(d):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update({kk: vv for kk, vv in v.items() if not isinstance(vv, (list, dict))})
        elif not isinstance(v, list):
            out[k] = v
    return out


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
LINEARS = ["blocks.%d.%s" % (b, n) for b in (0, 1) for n in ("attn.qkv", "attn.proj", "mlp.fc1", "mlp.fc2")] + ["head"]
N = B * T

# --- a run with every linear --------------------------------------------------------
full = os.path.join(WORK, "full")
man, initial, losses = train(full)
check(man["format"] == "fp8scope-torch-capture" and man["version"] == 1 and man["complete"], "manifest header")
check([l["name"] for l in man["linears"]] == LINEARS, "linears: %s" % [l["name"] for l in man["linears"]])
check([l["layer"] for l in man["linears"]] == [0, 0, 0, 0, 1, 1, 1, 1, -1], "layers from the module paths")
check([s["step"] for s in man["steps"]] == list(range(1, STEPS + 1)), "every step reported")
check([s["loss"] for s in man["steps"]] == losses, "losses as reported")
check([s["step"] for s in man["steps"] if s["captured"]] == [1, 3, 5], "capture steps 1, 1 + every, ...")
modules = dict(initial.named_modules())
expected = set()
for step in (1, 3, 5):
    for name in LINEARS:
        lin = modules[name]
        for op, shape, gemms in (("x", [N, lin.in_features], ["fprop", "wgrad"]),
                                 ("w", [lin.out_features, lin.in_features], ["fprop", "dgrad"]),
                                 ("dy", [N, lin.out_features], ["dgrad", "wgrad"])):
            expected.add((step, name, op, tuple(shape), tuple(gemms), "F32"))
got = {(t["step"], t["linear"], t["operand"], tuple(t["shape"]), tuple(t["gemms"]), t["dtype"]) for t in man["tensors"]}
check(got == expected, "tensors: names, operands, shapes and GEMM roles (%d of %d)" % (len(got & expected), len(expected)))
check(man["bytes"] == sum(4 * t["shape"][0] * t["shape"][1] for t in man["tensors"]), "bytes counted")

by_key = {(t["step"], t["linear"], t["operand"]): t for t in man["tensors"]}
# Step 1 runs the initial weights on batch 1: w is the initial weight, x of the first
# block's qkv is ln1 of the embedding, dy of blocks.1.mlp.fc2 is torch's own gradient.
with torch.no_grad():
    idx, target = batch(1)
    x0 = initial.blocks[0].ln1(initial.emb(idx) + initial.pos).reshape(N, D).cpu()
check(torch.equal(load(full, by_key[(1, "blocks.0.attn.qkv", "x")]), x0), "x = the GEMM's input")
check(torch.equal(load(full, by_key[(1, "blocks.1.mlp.fc1", "w")]), initial.blocks[1].mlp.fc1.weight.detach().cpu()), "w = the weight")
ref = copy.deepcopy(initial)
kept = {}


def keep_output(module, inputs, output):
    output.retain_grad()
    kept["out"] = output


ref.blocks[1].mlp.fc2.register_forward_hook(keep_output)
nn.functional.cross_entropy(ref(idx).view(-1, VOCAB), target.reshape(-1)).backward()
check(torch.equal(load(full, by_key[(1, "blocks.1.mlp.fc2", "dy")]), kept["out"].grad.reshape(N, D).cpu()), "dy = the output's gradient")

# Reentrant activation checkpointing: the first forward runs without grad, so dy comes
# from the forward that recomputes the block in backward; it is the same dy as above.
class CheckpointedGpt(Gpt):
    def forward(self, idx):
        import torch.utils.checkpoint as cp

        x = self.emb(idx) + self.pos
        for blk in self.blocks:
            x = cp.checkpoint(blk, x, use_reentrant=True)
        return self.head(self.ln_f(x))


ckpt_model = make(CheckpointedGpt)
ckpt = os.path.join(WORK, "checkpointed")
cap = fp8scope_torch.capture(ckpt_model, ckpt, every=EVERY)
idx, target = batch(1)
nn.functional.cross_entropy(ckpt_model(idx).view(-1, VOCAB), target.reshape(-1)).backward()
cap.step()
cap.close()
with open(os.path.join(ckpt, "manifest.json")) as f:
    man_ckpt = json.load(f)
ckpt_key = {(t["step"], t["linear"], t["operand"]): t for t in man_ckpt["tensors"]}
check(len(man_ckpt["tensors"]) == 3 * len(LINEARS), "checkpointed blocks: x, w and dy of every linear")
check(torch.equal(load(ckpt, ckpt_key[(1, "blocks.1.mlp.fc2", "dy")]), load(full, by_key[(1, "blocks.1.mlp.fc2", "dy")])),
      "checkpointed blocks: dy from the recomputed forward")
check(torch.equal(load(ckpt, ckpt_key[(1, "blocks.0.attn.qkv", "x")]), x0), "checkpointed blocks: x from the first forward")

# --- import, export, and analyze of the same tensors ---------------------------------
trace = os.path.join(WORK, "full.h5")
run("import", full, "--out", trace, "--recipes", "delayed")
csv_dir = os.path.join(WORK, "csv")
run("export", trace, "--csv", csv_dir)
operands = read_csv(os.path.join(csv_dir, "operands.csv"))
errors = read_csv(os.path.join(csv_dir, "errors.csv"))
steps = read_csv(os.path.join(csv_dir, "steps.csv"))
quantizers = list(dict.fromkeys(e["quantizer"] for e in errors))
run_names = list(dict.fromkeys(o["run"] for o in operands))
check(run_names == ["torch", "delayed (replay)"], "runs: %s" % run_names)
captured = [o for o in operands if o["run"] == "torch"]
roles = {(int(o["step"]), o["linear"], o["gemm"], o["operand"]) for o in captured}
want_roles = {(s, l, g, op) for s in (1, 3, 5) for l in LINEARS
              for g, op in (("fprop", "x"), ("fprop", "w"), ("dgrad", "dy"), ("dgrad", "w"), ("wgrad", "dy"), ("wgrad", "x"))}
check(roles == want_roles, "trace operands: every linear's six GEMM operands at each capture step")
loss_rows = [s for s in steps if s["run"] == "torch"]
check([float(s["loss"]) for s in loss_rows] == losses, "the Loss view's losses are the run's")

# Each tensor as stored and transposed (what dgrad reads of w, wgrad of dy and x).
files = []
for i, t in enumerate(man["tensors"]):
    v = load(full, t)
    path = os.path.join(WORK, "analyze", "%d.safetensors" % i)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    safetensors_file.write(path, [("%d" % i, v), ("%d.T" % i, v.t().contiguous())])
    files.append(path)
report = json.loads(run("analyze", *files, "--json", "--threads", "2", "--quantizers", ",".join(quantizers)))
analysed = {t["name"]: t for t in report["tensors"]}
first_gemm = {"x": "fprop", "w": "fprop", "dy": "dgrad"}
index = {(t["step"], t["linear"], t["operand"]): i for i, t in enumerate(man["tensors"])}
compared = 0
for o in captured:
    i = index[(int(o["step"]), o["linear"], o["operand"])]
    a = analysed["%d" % i if o["gemm"] == first_gemm[o["operand"]] else "%d.T" % i]
    stats = flat(a["stats"])
    common = [k for k in stats if k in o]
    check({"amax", "rms", "kurtosis", "dynamic_range"} <= set(common), "statistics compared: %s" % common)
    for k in common:
        if not same(o[k], stats[k]):
            check(False, "%s %s %s %s: %s %s != analyze %s" % (o["step"], o["linear"], o["gemm"], o["operand"], k, o[k], stats[k]))
        compared += 1
per_quantizer = {}
for q in a["quantizers"]:
    per_quantizer.setdefault("keys", [k for k in q if not isinstance(q[k], str)])



def orientation_free(q):
    """The engine's columnwise_is_transpose: per-tensor scales and square blocks cast a
    transpose as the transposed cast, so the second GEMM of an operand keeps the first
    one's figures under them (but at block-map steps, step 1 here, where it is analysed
    whole)."""
    m = re.match(r"block(\d+)x(\d+)_", q)
    return q.startswith(("current", "delayed")) or (m is not None and m.group(1) == m.group(2))


for e in errors:
    if e["run"] != "torch":
        continue
    i = index[(int(e["step"]), e["linear"], e["operand"])]
    second = e["gemm"] != first_gemm[e["operand"]]
    keeps_first = second and int(e["step"]) != 1 and orientation_free(e["quantizer"])
    a = analysed["%d.T" % i if second and not keeps_first else "%d" % i]
    q = a["quantizers"][quantizers.index(e["quantizer"])]
    for k in per_quantizer["keys"]:
        if k in e:
            if not same(e[k], q[k]):
                check(False, "%s %s %s %s under %s: %s %s != analyze %s" % (e["step"], e["linear"], e["gemm"], e["operand"], e["quantizer"], k, e[k], q[k]))
            compared += 1
check({"sqnr_db", "mse", "underflow_pct", "scale_inv_max"} <= set(per_quantizer["keys"]) & set(errors[0]), "error figures compared")
print("compared %d figures of %d operands under %d quantizers" % (compared, len(captured), len(quantizers)))

# Each GEMM's output error (the test of the import library works one out by hand): the
# captured run's GEMMs quantize nothing, the replay's do.
gemm_errors = read_csv(os.path.join(csv_dir, "gemm_error.csv"))
keys = {(g["run"], int(g["step"]), g["linear"], g["gemm"]) for g in gemm_errors}
check(keys == {(r, s, l, g) for r in run_names for s in (1, 3, 5) for l in LINEARS for g in ("fprop", "dgrad", "wgrad")},
      "an output error per run, capture step, linear and GEMM")
check(all(g["sqnr_db"] == "inf" for g in gemm_errors if g["run"] == "torch"), "the captured run's GEMMs are exact")
check(all(0 < float(g["sqnr_db"]) < 100 for g in gemm_errors if g["run"] != "torch"), "the replay's GEMMs lose some")

# The delayed replay: the scale of each capture step is fp8_max over the largest amax of
# the earlier capture steps (448 for x and w, 57344 for dy); step 1 casts with 1.
replay = {(int(o["step"]), o["linear"], o["gemm"], o["operand"]): o for o in operands if o["run"] == "delayed (replay)"}
for name in LINEARS:
    for op, fmax in (("x", 448.0), ("w", 448.0), ("dy", 57344.0)):
        amaxes = [load(full, by_key[(s, name, op)]).abs().max() for s in (1, 3, 5)]
        for k, s in enumerate((1, 3, 5)):
            want = 1.0 if k == 0 else (torch.tensor(fmax) / max(amaxes[:k])).item()
            got_scale = float(replay[(s, name, first_gemm[op], op)]["scale"])
            check(got_scale == want, "delayed scale of %s %s at step %d: %r, want %r" % (name, op, s, got_scale, want))

# --- bounds: the filter, autocast's BF16, a budget between steps and one within a step ---
mlp = os.path.join(WORK, "mlp")
man_mlp, _, _ = train(mlp, autocast=True, linears="blocks.*.mlp.*")
check({l["name"] for l in man_mlp["linears"]} == {n for n in LINEARS if ".mlp." in n}, "the filter keeps the MLP linears")
check(set(man_mlp["excluded"]) == {n for n in LINEARS if ".mlp." not in n}, "the filter excludes the others")
check({t["dtype"] for t in man_mlp["tensors"]} == {"BF16"}, "autocast: operands as the GEMM reads them, BF16")
step_bytes = sum(2 * t["shape"][0] * t["shape"][1] for t in man_mlp["tensors"] if t["step"] == 1)

between = os.path.join(WORK, "between")
budget = step_bytes * 3 // 2
man_b, _, _ = train(between, autocast=True, linears="blocks.*.mlp.*", max_bytes=budget)
check(man_b["stopped"] is not None and man_b["stopped"]["step"] == 3 and "max_bytes" in man_b["stopped"]["reason"],
      "a budget of 1.5 steps stops before step 3: %s" % man_b["stopped"])
check({t["step"] for t in man_b["tensors"]} == {1} and man_b["bytes"] == step_bytes <= budget, "only step 1 written")

within = os.path.join(WORK, "within")
budget = step_bytes // 2
man_w, _, _ = train(within, autocast=True, linears="blocks.*.mlp.*", max_bytes=budget)
check(man_w["stopped"] is not None and man_w["stopped"]["step"] == 1, "half a step's budget stops within step 1")
check(0 < man_w["bytes"] <= budget and man_w["bytes"] == sum(2 * t["shape"][0] * t["shape"][1] for t in man_w["tensors"]),
      "the budget holds: %d <= %d" % (man_w["bytes"], budget))
run("import", within, "--out", os.path.join(WORK, "within.h5"), "--recipes", "none")
inspect = run("inspect", os.path.join(WORK, "within.h5"))
check("capture stopped at step 1" in inspect, "the trace's events say capture stopped")

try:
    fp8scope_torch.capture(make(Gpt), os.path.join(WORK, "nomatch"), linears="*.mlp.fc3")
    check(False, "a filter that matches no linear is refused")
except ValueError as e:
    check("*.mlp.fc3" in str(e) and "blocks.0.attn.qkv" in str(e), "the refusal names the filter and the linears: %s" % e)

# --- the command's errors: a bad manifest names the file and field (exit 1), bad options exit 2
broken = os.path.join(WORK, "broken")
shutil.copytree(within, broken)
with open(os.path.join(broken, "manifest.json")) as f:
    bad = json.load(f)
bad["tensors"][0]["shape"] = [bad["tensors"][0]["shape"][0], 5]
with open(os.path.join(broken, "manifest.json"), "w") as f:
    json.dump(bad, f)
p = subprocess.run([ENGINE, "import", broken, "--out", os.path.join(WORK, "broken.h5")], capture_output=True, text=True)
check(p.returncode == 1 and os.path.join(broken, "manifest.json") in p.stderr and "'tensors[0].shape'" in p.stderr,
      "a bad manifest: exit 1 naming the file and field: %d %s" % (p.returncode, p.stderr))
for args in (["--recipes", "bogus"], ["--device", "tpu"], ["--quantizers", "nope"]):
    p = subprocess.run([ENGINE, "import", within, "--out", os.path.join(WORK, "x.h5"), *args], capture_output=True, text=True)
    check(p.returncode == 2 and args[1] in p.stderr, "%s: exit 2 naming it: %d %s" % (args, p.returncode, p.stderr))

# --- a call the hook does not understand: that linear is skipped, training goes on --------
class KeywordCall(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 2)

    def forward(self, x):
        return self.b(input=self.a(x))  # the forward hook sees no positional input


kw = make(KeywordCall)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cap = fp8scope_torch.capture(kw, os.path.join(WORK, "keyword"), every=1)
    for step in range(2):
        kw(torch.randn(3, 4, device=DEV)).sum().backward()
        cap.step(loss=0.0)
    cap.close()
with open(os.path.join(WORK, "keyword", "manifest.json")) as f:
    man_kw = json.load(f)
check([s["linear"] for s in man_kw["skipped"]] == ["b"], "the failing linear is skipped: %s" % man_kw["skipped"])
check(sum("b not captured" in str(w.message) for w in caught) == 1, "one warning names it")
check({t["linear"] for t in man_kw["tensors"]} == {"a"} and len(man_kw["tensors"]) == 6, "the other linear is captured")

# --- import --follow while the run goes on ---------------------------------------------
followed = os.path.join(WORK, "followed")
model = make(Gpt)
opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
cap = fp8scope_torch.capture(model, followed, every=1, linears="blocks.0.*")
follow_trace = os.path.join(WORK, "followed.h5")
importer = subprocess.Popen([ENGINE, "import", followed, "--out", follow_trace, "--follow", "--poll-ms", "20",
                             "--recipes", "none"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
follow_losses = []
for step in range(1, STEPS + 1):
    idx, target = batch(step)
    loss = nn.functional.cross_entropy(model(idx).view(-1, VOCAB), target.reshape(-1))
    loss.backward()
    opt.step()
    opt.zero_grad()
    cap.step(loss=loss)
    follow_losses.append(loss.item())
    time.sleep(0.2)  # the importer reads the steps as they come
cap.close()
try:
    out, err = importer.communicate(timeout=120)
except subprocess.TimeoutExpired:
    importer.kill()
    out, err = importer.communicate()
check(importer.returncode == 0, "import --follow ends when the capture closes: %s %s" % (importer.returncode, err))
run("export", follow_trace, "--csv", os.path.join(WORK, "followed_csv"))
f_steps = read_csv(os.path.join(WORK, "followed_csv", "steps.csv"))
check([float(s["loss"]) for s in f_steps] == follow_losses, "every step followed, with its loss")
f_ops = read_csv(os.path.join(WORK, "followed_csv", "operands.csv"))
check(sorted({int(o["step"]) for o in f_ops}) == list(range(1, STEPS + 1)), "every step's operands followed")
check(len(f_ops) == STEPS * 4 * 6, "six operands of block 0's four linears per step: %d" % len(f_ops))

if failures:
    print("%d checks failed" % len(failures))
    sys.exit(1)
print("all checks passed")
