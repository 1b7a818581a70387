#!/usr/bin/env python3
"""make_gpt2_layout.py OUT

Writes OUT, a safetensors file with the tensor names, shapes, dtypes and
header layout of the published openai-community/gpt2 model.safetensors
(GPT-2 124M): keys without the "transformer." prefix, the h.N.attn.bias
causal-mask buffers (1, 1, 1024, 1024), __metadata__ {"format": "pt"} first,
tensors ordered like the Rust writer orders them (dtype alignment, then name,
so h.10 comes before h.2), header padded with spaces to 8-byte alignment.

Values are sentinels the loader test (tests/stages/test_gpt2_layout.c) recomputes:
a tensor with id I holds, at HF position (row r, column c),
    I * 65536 + (r % 16) * 4096 + c        (2-D)
    I * 65536 + c                          (1-D)
all exact in fp32 (below 2^24). Ids: wte 1, wpe 2, ln_f.weight 3,
ln_f.bias 4, h.i.<k-th block tensor> 8 + 12 * i + k in the order of
BLOCK below. The masks hold the lower-triangular ones GPT-2 uses.

Standard library only; each tensor is built by tiling a 16-row pattern.
"""
import json
import os
import struct
import sys

L, C, V, T = 12, 768, 50257, 1024
BLOCK = [  # HF name suffix, shape in units of C
    ("ln_1.weight", (1,)), ("ln_1.bias", (1,)),
    ("attn.c_attn.weight", (1, 3)), ("attn.c_attn.bias", (3,)),
    ("attn.c_proj.weight", (1, 1)), ("attn.c_proj.bias", (1,)),
    ("ln_2.weight", (1,)), ("ln_2.bias", (1,)),
    ("mlp.c_fc.weight", (1, 4)), ("mlp.c_fc.bias", (4,)),
    ("mlp.c_proj.weight", (4, 1)), ("mlp.c_proj.bias", (1,)),
]


def tensors():
    """(name, shape, sentinel id or None for the mask buffers)."""
    out = [("wte.weight", [V, C], 1), ("wpe.weight", [T, C], 2),
           ("ln_f.weight", [C], 3), ("ln_f.bias", [C], 4)]
    for i in range(L):
        out.append(("h.%d.attn.bias" % i, [1, 1, T, T], None))
        for k, (suffix, mult) in enumerate(BLOCK):
            out.append(("h.%d.%s" % (i, suffix), [m * C for m in mult], 8 + 12 * i + k))
    return out


def sentinel_bytes(shape, tid):
    base = tid * 65536
    if len(shape) == 1:
        return struct.pack("<%df" % shape[0], *[base + c for c in range(shape[0])])
    rows, cols = shape
    pattern = b"".join(struct.pack("<%df" % cols, *[base + (r % 16) * 4096 + c for c in range(cols)])
                       for r in range(16))
    row_bytes = 4 * cols
    return pattern * (rows // 16) + pattern[:(rows % 16) * row_bytes]


def mask_bytes():
    one, zero = struct.pack("<f", 1.0), struct.pack("<f", 0.0)
    return b"".join(one * (r + 1) + zero * (T - r - 1) for r in range(T))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_gpt2_layout.py OUT")
    ts = sorted(tensors(), key=lambda t: t[0])  # all F32: the Rust order is by name (byte order)
    header = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, shape, _ in ts:
        n = 4
        for d in shape:
            n *= d
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    mask = mask_bytes()
    tmp = sys.argv[1] + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape, tid in ts:
            f.write(mask if tid is None else sentinel_bytes(shape, tid))
    if os.path.getsize(tmp) != 8 + len(text) + offset:
        sys.exit("make_gpt2_layout.py: size mismatch")
    os.replace(tmp, sys.argv[1])


if __name__ == "__main__":
    main()
