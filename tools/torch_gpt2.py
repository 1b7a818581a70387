"""torch_gpt2.py: a small, independent GPT-2 in plain PyTorch, used as the
reference that pipezip's C engine is checked against (tools/make_fixtures.py,
tools/torch_eval.py). It does not import transformers and shares no code with
the C engine.

The model is GPT-2 as llm.c implements it: pre-LN blocks, LayerNorm eps 1e-5,
GELU with the tanh approximation, causal attention scaled by 1/sqrt(hs), the
classifier tied to wte, mean cross-entropy over the V real tokens.

Module and parameter names follow the HF GPT-2 checkpoint exactly, so
model.state_dict() keys are the safetensors names ("wte.weight",
"h.0.attn.c_attn.weight", "ln_f.bias", ...). The four projections are HF
Conv1D: weight stored (in, out), y = x @ W + b.

Also here: a minimal safetensors reader and writer (F32 only), and an llm.c
token-shard reader. Run with Debian's /usr/bin/python3 (python3-torch).
"""
import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

SHARD_MAGIC = 20240520
SHARD_VERSION = 1
LN_EPS = 1e-5


class Conv1D(nn.Module):
    """HF Conv1D: weight (nin, nout), y = x @ weight + bias."""

    def __init__(self, nin, nout):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(nin, nout))
        self.bias = nn.Parameter(torch.zeros(nout))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.shape[-1]), self.weight).reshape(
            *x.shape[:-1], self.weight.shape[1])


class Attention(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        assert C % NH == 0
        self.NH = NH
        self.c_attn = Conv1D(C, 3 * C)
        self.c_proj = Conv1D(C, C)

    def forward(self, x):
        B, T, C = x.shape
        NH, hs = self.NH, C // self.NH
        q, k, v = self.c_attn(x).split(C, dim=2)  # columns [q | k | v]
        q = q.view(B, T, NH, hs).transpose(1, 2)  # (B, NH, T, hs)
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = Conv1D(C, 4 * C)
        self.c_proj = Conv1D(4 * C, C)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=LN_EPS)
        self.attn = Attention(C, NH)
        self.ln_2 = nn.LayerNorm(C, eps=LN_EPS)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """V real tokens (wte is (V, C), unpadded), maxT positions, L blocks."""

    def __init__(self, V, maxT, L, NH, C):
        super().__init__()
        self.V, self.maxT, self.L, self.NH, self.C = V, maxT, L, NH, C
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(maxT, C)
        self.h = nn.ModuleList([Block(C, NH) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=LN_EPS)

    def forward(self, idx, targets=None):
        """idx (B, T) int64. Returns logits (B, T, V) and, with targets, the
        mean cross-entropy (natural log) over B*T positions."""
        B, T = idx.shape
        assert T <= self.maxT
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)[None]
        for blk in self.h:
            x = blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # tied head
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, self.V), targets.reshape(-1))
        return logits, loss

    def hf_names(self):
        """Parameter names in pipezip's order (pz_gpt2_params_tensors)."""
        names = ["wte.weight", "wpe.weight"]
        per = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
        for i in range(self.L):
            names += ["h.%d.%s" % (i, s) for s in per]
        return names + ["ln_f.weight", "ln_f.bias"]


def is_decayed(name):
    """AdamW weight decay applies to 2-D weights only (embeddings and the four
    projections), never to biases or LayerNorm parameters."""
    return name in ("wte.weight", "wpe.weight") or name.endswith(
        ("c_attn.weight", "c_proj.weight", "c_fc.weight"))


# ---------------------------------------------------------------- safetensors

def save_safetensors(path, tensors, metadata=None):
    """Write F32 tensors (name -> tensor) in the safetensors format: u64 LE
    header length N, N bytes of JSON padded with spaces so the data starts
    8-byte aligned, then the row-major little-endian data. Tensors are laid
    out sorted by name, as the reference Rust writer does for one dtype."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        t = tensors[name].detach().to(torch.float32).contiguous().cpu()
        data = t.numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * ((8 - (8 + len(js)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


def load_safetensors(path):
    """Read a safetensors file holding F32 tensors. Returns (dict name ->
    float32 tensor, metadata dict)."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError("%s: too short for a safetensors header" % path)
    (n,) = struct.unpack_from("<Q", raw, 0)
    if n > 100_000_000 or 8 + n > len(raw):
        raise ValueError("%s: bad header length %d" % (path, n))
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    buf = memoryview(raw)[8 + n:]
    out = {}
    for name, e in header.items():
        if e["dtype"] != "F32":
            raise ValueError("%s: tensor %s has dtype %s, only F32 is supported"
                             % (path, name, e["dtype"]))
        b, end = e["data_offsets"]
        shape = list(e["shape"])
        numel = 1
        for d in shape:
            numel *= d
        if end - b != 4 * numel or end > len(buf):
            raise ValueError("%s: tensor %s: offsets [%d, %d) do not fit shape %s"
                             % (path, name, b, end, shape))
        arr = np.frombuffer(buf[b:end], dtype="<f4").reshape(shape)
        out[name] = torch.from_numpy(arr.astype(np.float32))
    return out, meta


def load_model_files(path):
    """A safetensors file, or an HF model directory (model.safetensors, or
    model.safetensors.index.json and its shards, with config.json). Returns
    (tensors, metadata, config dict or {})."""
    if not os.path.isdir(path):
        tensors, meta = load_safetensors(path)
        beside = os.path.join(os.path.dirname(os.path.abspath(path)), "config.json")
        return tensors, meta, json.load(open(beside)) if os.path.exists(beside) else {}
    cfg_path = os.path.join(path, "config.json")
    config = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
    single = os.path.join(path, "model.safetensors")
    if os.path.exists(single):
        tensors, meta = load_safetensors(single)
        return tensors, meta, config
    index = json.load(open(os.path.join(path, "model.safetensors.index.json")))
    tensors = {}
    for shard in sorted(set(index["weight_map"].values())):
        t, _ = load_safetensors(os.path.join(path, shard))
        tensors.update(t)
    return tensors, {}, config


def model_from_safetensors(path, dtype=torch.float64):
    """Build a GPT2 from an HF-named safetensors file or HF model directory.
    NH comes from config.json's n_head, else __metadata__["n_head"]. If wte
    has more rows than the vocab_size given there (a padded table), only the
    first vocab_size rows are used."""
    tensors, meta, config = load_model_files(path)
    if "n_head" in config:
        NH = int(config["n_head"])
        meta = dict(meta, vocab_size=config.get("vocab_size", meta.get("vocab_size", tensors["wte.weight"].shape[0])))
    elif "n_head" in meta:
        NH = int(meta["n_head"])
    else:
        raise ValueError("%s: no n_head in config.json or __metadata__" % path)
    wte = tensors["wte.weight"]
    V = int(meta.get("vocab_size", wte.shape[0]))
    if V > wte.shape[0]:
        raise ValueError("%s: vocab_size %d > wte rows %d" % (path, V, wte.shape[0]))
    if V < wte.shape[0]:
        if torch.any(wte[V:] != 0):
            raise ValueError("%s: padded wte rows %d.. are not zero" % (path, V))
        tensors["wte.weight"] = wte[:V]
    C = wte.shape[1]
    maxT = tensors["wpe.weight"].shape[0]
    L = 0
    while "h.%d.ln_1.weight" % L in tensors:
        L += 1
    model = GPT2(V, maxT, L, NH, C)
    sd = model.state_dict()
    missing = [k for k in sd if k not in tensors]
    if missing:
        raise ValueError("%s: missing tensors %s" % (path, missing))
    for k in sd:
        if tuple(tensors[k].shape) != tuple(sd[k].shape):
            raise ValueError("%s: %s has shape %s, expected %s"
                             % (path, k, tuple(tensors[k].shape), tuple(sd[k].shape)))
    model.load_state_dict({k: tensors[k] for k in sd})
    return model.to(dtype)


# ---------------------------------------------------------------- token shards

def load_shard(path):
    """llm.c token shard: 256 int32 header (magic 20240520, version 1, count),
    then count uint16 tokens. Returns an int64 tensor."""
    import numpy as np
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 1024:
        raise ValueError("%s: shorter than the 1024-byte header" % path)
    hdr = struct.unpack_from("<256i", raw, 0)
    if hdr[0] != SHARD_MAGIC:
        raise ValueError("%s: magic %d, expected %d" % (path, hdr[0], SHARD_MAGIC))
    if hdr[1] != SHARD_VERSION:
        raise ValueError("%s: version %d, expected %d" % (path, hdr[1], SHARD_VERSION))
    n = hdr[2]
    if len(raw) != 1024 + 2 * n:
        raise ValueError("%s: size %d, expected 1024 + 2*%d" % (path, len(raw), n))
    toks = np.frombuffer(raw, dtype="<u2", count=n, offset=1024)
    return torch.from_numpy(toks.astype(np.int64))
