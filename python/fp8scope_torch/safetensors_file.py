"""Writing .safetensors files without the safetensors package: an 8-byte little-endian
header length, a JSON header ({name: {dtype, shape, data_offsets}}), then the raw bytes
of every tensor in order. The header is padded with spaces to a multiple of 8 bytes, as
the reference implementation does, so the data after it stays aligned."""

import ctypes
import json
import struct

import torch

DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}


def dtype_name(dtype):
    """The safetensors name of a torch dtype; None for a dtype the format here does not take."""
    return DTYPES.get(dtype)


def write(path, tensors):
    """Writes `tensors` (a list of (name, CPU tensor)) to `path`, in that order."""
    header, offset, parts = {}, 0, []
    for name, t in tensors:
        t = t.contiguous()
        n = t.numel() * t.element_size()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + n]}
        parts.append((t, n))
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for t, n in parts:
            if n:  # the tensor's own memory, without a copy (little-endian hosts)
                f.write(memoryview((ctypes.c_char * n).from_address(t.data_ptr())).cast("B"))
