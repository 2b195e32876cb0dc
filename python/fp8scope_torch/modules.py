"""Which modules are linears, and the GEMM operands of one forward call: the input x as
the GEMM reads it, the weight w, and the output whose gradient is dy.

torch.nn.Linear covers its subclasses too (torchao's Float8Linear is one). Transformer
Engine's Linear and LayerNormLinear are not subclasses: they are found by class when
transformer_engine.pytorch imports. Their hooks are written from Transformer Engine's
module attributes and were not run here (it does not install without a GPU)."""

import re

import torch
import torch.nn.functional as F


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def _linear(module, inputs, output):
    return inputs[0], module.weight, _first(output)


def _te_layernorm_linear(module, inputs, output):
    # The GEMM reads the normalized input, which the module does not return by default:
    # it is computed again (capture steps only) as the module's normalization does.
    x = inputs[0]
    gamma = module.layer_norm_weight
    if getattr(module, "zero_centered_gamma", False):
        gamma = gamma + 1
    with torch.no_grad():
        xf = x.float()
        if getattr(module, "normalization", "LayerNorm") == "RMSNorm":
            ln = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + module.eps) * gamma.float()
        else:
            bias = getattr(module, "layer_norm_bias", None)
            ln = F.layer_norm(xf, (x.shape[-1],), gamma.float(), None if bias is None else bias.float(), module.eps)
    out = _first(output)
    return ln.to(out.dtype), module.weight, out


def kinds():
    """(class, operands function, label) for every linear class importable here; the first
    match wins, so subclasses come before their bases."""
    found = []
    try:
        import transformer_engine.pytorch as te  # noqa: F401

        found.append((te.LayerNormLinear, _te_layernorm_linear, "te.LayerNormLinear"))
        found.append((te.Linear, _linear, "te.Linear"))
    except Exception:  # not installed, or installed without a usable GPU
        pass
    try:
        from torchao.float8.float8_linear import Float8Linear

        found.append((Float8Linear, _linear, "torchao.Float8Linear"))
    except Exception:
        pass
    found.append((torch.nn.Linear, _linear, "Linear"))
    return found


def kind_of(module, known):
    for cls, operands, label in known:
        if isinstance(module, cls):
            return operands, label
    return None


_LAYER = re.compile(r"(?:^|\.)(\d+)(?:\.|$)")


def layer_of(path):
    """The transformer block of a module path: its first all-digit component
    (`transformer.h.3.attn.c_attn` -> 3, `model.layers.12.mlp.up_proj` -> 12); -1 when it
    has none (`lm_head`)."""
    m = _LAYER.search(path)
    return int(m.group(1)) if m else -1


def selector(linears):
    """A predicate over module paths: None takes every linear; a string is a glob (`*` any
    run of characters, dots included, `?` one, `[...]` a set); a list takes a path any of
    its globs match; a compiled regular expression takes a path it matches in full."""
    import fnmatch

    if linears is None:
        return lambda path: True
    if isinstance(linears, re.Pattern):
        return lambda path: linears.fullmatch(path) is not None
    if isinstance(linears, str):
        linears = [linears]
    globs = list(linears)
    for g in globs:
        if not isinstance(g, str):
            raise TypeError("fp8scope_torch: linears must be a glob, a list of globs or a re.Pattern, got %r" % (g,))
    return lambda path: any(fnmatch.fnmatchcase(path, g) for g in globs)


def autocast_dtype(t):
    """The dtype autocast makes a GEMM read `t` in, or None when autocast is off."""
    dev = t.device.type
    try:  # torch >= 2.4
        return torch.get_autocast_dtype(dev) if torch.is_autocast_enabled(dev) else None
    except (TypeError, AttributeError):
        pass
    if dev == "cuda":
        return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None
    if dev == "cpu":
        return torch.get_autocast_cpu_dtype() if torch.is_autocast_cpu_enabled() else None
    return None
