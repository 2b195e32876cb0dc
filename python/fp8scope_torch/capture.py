"""Capture of a PyTorch run's GEMM operands for `fp8scope-engine import`.

Hooks exist only during capture steps: they are registered when a capture step begins
and removed when it ends, so every other step runs the model untouched (its cost is the
counter check in step()). At a capture step, the first forward call of each selected
linear hands over x (as the GEMM reads it: cast to autocast's dtype when autocast is on)
and w, and a hook on its output tensor hands over dy during backward. Each is copied to
host memory (CUDA: non_blocking into pinned buffers, then an event); a writer thread
waits for the copies, writes one .safetensors file per linear and step, and rewrites
manifest.json (a temporary file renamed over it, so a reader never sees half of one).

Folder layout (format fp8scope-torch-capture, version 1):
  manifest.json
  step_000001/transformer.h.3.attn.c_attn.safetensors   tensors "<linear>.x", ".w", ".dy"
The tensors are stored as the layer holds them: x (N, K), w (M, K), dy (N, M) with the
leading dimensions of x and dy flattened into N. fprop reads x and w, dgrad dy and w^T,
wgrad dy^T and x^T (core/operands.h).
"""

import atexit
import datetime
import json
import os
import queue
import threading
import time
import warnings

import torch

from . import modules, safetensors_file

FORMAT = "fp8scope-torch-capture"
VERSION = 1
# The GEMMs that read each operand, and in which orientation the second one reads it.
ROLES = {"x": ["fprop", "wgrad"], "w": ["fprop", "dgrad"], "dy": ["dgrad", "wgrad"]}
MANIFEST_EVERY_S = 1.0  # losses of steps without capture reach the manifest this often


def capture(model, folder, every=100, linears=None, max_bytes=10 * 2**30, name="torch"):
    """Starts capturing `model`'s linears into `folder`; returns the Capture handle.

    every      capture steps are 1, 1 + every, 1 + 2 every, ... (steps count from 1, one
               step per handle.step() call)
    linears    which linears, by module path: a glob (`*.attn.*`), a list of globs or a
               compiled regular expression (matched in full); None: all
    max_bytes  budget of tensor bytes written; capture stops (the manifest says why)
               before a step that would pass it, or at the tensor that would
    name       the run's name in the trace
    """
    return Capture(model, folder, every=every, linears=linears, max_bytes=max_bytes, name=name)


class _StepState:
    def __init__(self, step):
        self.step = step
        self.seen = set()  # linears whose first forward call was taken
        self.hooked = set()  # linears whose output's gradient will be taken
        self.pending = {}  # linear -> {operand: (host tensor, event or None)}
        self.bytes = 0


class Capture:
    def __init__(self, model, folder, every=100, linears=None, max_bytes=10 * 2**30, name="torch"):
        if int(every) < 1:
            raise ValueError("fp8scope_torch: every must be >= 1, got %r" % (every,))
        if max_bytes is not None and max_bytes < 0:
            raise ValueError("fp8scope_torch: max_bytes must be >= 0, got %r" % (max_bytes,))
        rank, world_size = _rank()
        if world_size > 1:  # each process of a data-parallel job writes its own folder
            folder = os.path.join(folder, "rank%d" % rank)
        self.folder = os.path.abspath(folder)
        os.makedirs(self.folder, exist_ok=True)
        self.every = int(every)
        self.max_bytes = max_bytes
        take = modules.selector(linears)
        known = modules.kinds()
        self._linears = []  # (path, module, operands function)
        info, excluded, unsupported = [], [], []
        for path, m in model.named_modules():
            kind = modules.kind_of(m, known)
            if kind is None:
                continue
            if not take(path):
                excluded.append(path)
                continue
            if not isinstance(getattr(m, "weight", None), torch.Tensor):
                unsupported.append(path)  # weights split into several parameters
                continue
            operands, label = kind
            self._linears.append((path, m, operands))
            w = m.weight
            info.append({"name": path, "layer": modules.layer_of(path), "in_features": int(w.shape[-1]),
                         "out_features": int(w.shape[0]), "module": label})
        if linears is not None and not info and excluded:
            raise ValueError("fp8scope_torch: linears=%r matches none of the model's linears (%s%s)"
                             % (linears, ", ".join(excluded[:5]), ", ..." if len(excluded) > 5 else ""))
        self._manifest = {
            "format": FORMAT, "version": VERSION, "name": name, "torch": torch.__version__,
            "rank": rank, "world_size": world_size,
            "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "every": self.every, "linears_filter": _describe(linears), "max_bytes": max_bytes,
            "bytes": 0, "stopped": None, "error": None, "complete": False,
            "linears": info, "excluded": excluded, "unsupported": unsupported, "skipped": [], "steps": [], "tensors": [],
        }
        self._step = 1
        self._state = None  # _StepState while a capture step runs
        self._hooks = []
        self._bytes = 0  # bytes taken so far (training thread)
        self._last_capture_bytes = 0
        self._stopped = False
        self._skipped = set()  # linears whose hook failed
        self._lock = threading.Lock()
        self._pool = {}  # (numel, dtype) -> free pinned buffers, flat
        self._jobs = queue.Queue()
        self._closed = False
        self._last_time = time.perf_counter()
        self._write_manifest()  # before returning: a reader started next finds this run's
        self._writer = threading.Thread(target=self._write_loop, name="fp8scope_torch writer", daemon=True)
        self._writer.start()
        atexit.register(self.close)
        self._begin_step()

    # --- the training thread ---------------------------------------------------------

    def step(self, loss=None, step_ms=None):
        """Ends the current step: records its loss (a number or a 0-d tensor, read on the
        writer thread so a CUDA loss costs no wait here) and its time (step_ms, or the wall
        time since the previous call), and begins the next one."""
        now = time.perf_counter()
        if step_ms is None:
            step_ms = (now - self._last_time) * 1e3
        self._last_time = now
        if isinstance(loss, torch.Tensor):
            with self._lock:  # the writer waits for the copy, not this thread
                loss = self._copy_to_host(loss.detach())
        state = self._end_step()
        self._jobs.put(("step", {"step": self._step, "loss": loss, "step_ms": float(step_ms),
                                 "captured": state is not None}))
        self._step += 1
        self._begin_step()

    def close(self):
        """Stops capturing, writes what is queued and the final manifest; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._end_step()
        self._jobs.put(("close",))
        self._writer.join()
        atexit.unregister(self.close)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def current_step(self):
        return self._step

    def _is_capture_step(self):
        return not self._stopped and not self._closed and (self._step - 1) % self.every == 0

    def _begin_step(self):
        if not self._is_capture_step():
            return
        if self.max_bytes is not None and self._bytes + self._last_capture_bytes > self.max_bytes:
            self._stop("max_bytes %d: step %d would need about %d bytes more, %d written"
                       % (self.max_bytes, self._step, self._last_capture_bytes, self._bytes))
            return
        self._state = _StepState(self._step)
        for path, m, operands in self._linears:
            self._hooks.append(m.register_forward_hook(self._forward_hook(path, operands)))

    def _end_step(self):
        state, self._state = self._state, None
        for h in self._hooks:
            h.remove()
        self._hooks = []
        if state is None:
            return None
        with self._lock:
            for path in list(state.pending):
                self._flush_linear(state, path)
        self._last_capture_bytes = state.bytes
        return state

    def _stop(self, reason):
        if not self._stopped:
            self._stopped = True
            self._jobs.put(("stopped", {"step": self._step, "reason": reason}))

    def _forward_hook(self, path, operands):
        def hook(module, inputs, output):
            state = self._state
            if state is None or path in state.hooked or path in self._skipped:
                return  # later calls of a step (micro-batches, recomputation) are not taken
            try:
                x, w, out = operands(module, inputs, output)
                if path not in state.seen:
                    state.seen.add(path)
                    dt = modules.autocast_dtype(x)
                    xg = x.detach()
                    wg = w.detach()
                    if dt is not None:  # what the GEMM reads under autocast
                        xg = xg.to(dt) if xg.is_floating_point() else xg
                        wg = wg.to(dt) if wg.is_floating_point() else wg
                    self._take(state, path, "x", xg.reshape(-1, xg.shape[-1]))
                    self._take(state, path, "w", wg)
                # A forward without grad (reentrant activation checkpointing) leaves dy to
                # the call that recomputes it in backward.
                if isinstance(out, torch.Tensor) and out.requires_grad:
                    state.hooked.add(path)
                    out.register_hook(self._grad_hook(state, path))
            except Exception as e:  # a module this hook does not understand: skipped, training goes on
                self._skip(path, e)

        return hook

    def _grad_hook(self, state, path):
        def hook(grad):
            if self._state is state:  # a backward after the step ended is not taken
                try:
                    self._take(state, path, "dy", grad.detach().reshape(-1, grad.shape[-1]))
                except Exception as e:
                    self._skip(path, e)

        return hook

    def _skip(self, path, error):
        if path not in self._skipped:
            self._skipped.add(path)
            warnings.warn("fp8scope_torch: %s not captured: %s: %s" % (path, type(error).__name__, error))
            self._jobs.put(("skipped", {"linear": path, "error": "%s: %s" % (type(error).__name__, error)}))

    def _take(self, state, path, operand, t):
        if safetensors_file.dtype_name(t.dtype) is None:
            return  # FP8 or integer tensors: only BF16, F16, F32 and F64 are written
        n = t.numel() * t.element_size()
        with self._lock:
            if self._stopped:
                return
            if self.max_bytes is not None and self._bytes + n > self.max_bytes:
                self._stop("max_bytes %d: %s.%s of step %d (%d bytes) would pass it, %d written"
                           % (self.max_bytes, path, operand, state.step, n, self._bytes))
                return
            self._bytes += n
            state.bytes += n
            state.pending.setdefault(path, {})[operand] = self._copy_to_host(t)
            if len(state.pending[path]) == 3:
                self._flush_linear(state, path)

    def _copy_to_host(self, t):
        if t.device.type != "cuda":
            return t.to(memory_format=torch.contiguous_format, copy=True), None
        key = (t.numel(), t.dtype)
        free = self._pool.get(key)
        flat = free.pop() if free else torch.empty(key[0], dtype=t.dtype, pin_memory=True)
        buf = flat.view(t.shape)
        buf.copy_(t, non_blocking=True)
        event = torch.cuda.Event()
        event.record(torch.cuda.current_stream(t.device))
        return buf, event

    def _flush_linear(self, state, path):  # with self._lock held
        self._jobs.put(("file", state.step, path, state.pending.pop(path)))

    # --- the writer thread -----------------------------------------------------------

    def _write_loop(self):
        dirty, last = False, 0.0
        while True:
            job = self._jobs.get()
            kind = job[0]
            try:
                if kind == "file":
                    self._write_file(*job[1:])
                    dirty = True
                elif kind == "step":
                    rec = job[1]
                    loss = rec["loss"]
                    if isinstance(loss, tuple):  # a tensor on its way to the host
                        value, event = loss
                        if event is not None:
                            event.synchronize()
                        loss = value
                    rec["loss"] = None if loss is None else _finite_or_none(float(loss))
                    self._manifest["steps"].append(rec)
                    dirty = True
                    if rec["captured"] or time.monotonic() - last > MANIFEST_EVERY_S:
                        self._write_manifest()
                        dirty, last = False, time.monotonic()
                elif kind == "stopped":
                    self._manifest["stopped"] = job[1]
                    self._write_manifest()
                elif kind == "skipped":
                    self._manifest["skipped"].append(job[1])
                elif kind == "close":
                    self._manifest["complete"] = True
                    self._write_manifest()
                    return
            except Exception as e:  # a full disk: capture stops, training goes on
                if self._manifest["error"] is None:
                    self._manifest["error"] = "%s: %s" % (type(e).__name__, e)
                    warnings.warn("fp8scope_torch: capture stopped: %s" % (self._manifest["error"],))
                self._stopped = True
                if kind == "close":
                    return
            if dirty and time.monotonic() - last > MANIFEST_EVERY_S:
                try:
                    self._write_manifest()
                    dirty, last = False, time.monotonic()
                except OSError:
                    pass

    def _write_file(self, step, path, operands):
        rel = os.path.join("step_%06d" % step, path + ".safetensors")
        full = os.path.join(self.folder, rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        tensors = []
        for operand in ("x", "w", "dy"):
            if operand in operands:
                buf, event = operands[operand]
                if event is not None:
                    event.synchronize()
                tensors.append((path + "." + operand, operand, buf))
        try:
            safetensors_file.write(full, [(name, buf) for name, _, buf in tensors])
            for name, operand, buf in tensors:
                self._manifest["tensors"].append({
                    "step": step, "linear": path, "operand": operand, "gemms": ROLES[operand], "name": name,
                    "file": rel, "dtype": safetensors_file.dtype_name(buf.dtype), "shape": list(buf.shape)})
                self._manifest["bytes"] += buf.numel() * buf.element_size()
        finally:
            with self._lock:  # the pinned buffers go back for the next capture step
                for _, _, buf in tensors:
                    if buf.is_pinned():
                        self._pool.setdefault((buf.numel(), buf.dtype), []).append(buf.view(-1))

    def _write_manifest(self):
        path = os.path.join(self.folder, "manifest.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self._manifest, f, indent=1)
        os.replace(tmp, path)


def _rank():
    """(rank, world size) of a torch.distributed job; (0, 1) outside one."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _describe(linears):
    if linears is None:
        return None
    if hasattr(linears, "pattern"):
        return "re:" + linears.pattern
    return linears if isinstance(linears, str) else list(linears)


def _finite_or_none(v):
    return v if v == v and abs(v) != float("inf") else None
