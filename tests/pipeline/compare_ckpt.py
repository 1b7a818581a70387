#!/usr/bin/env python3
"""Compares the newest checkpoints of two runs (runtime/ckpt/resume.h layout):
every parameter and both AdamW moments, by tensor name, whatever the stage
layouts. Copies of one tensor in several shards (the tied wte in the first and
the last) must be bitwise equal. Prints the largest difference per kind,
relative to the tensor's largest magnitude, and fails above the bound of
its kind (0 = bitwise).
  usage: compare_ckpt.py DIR_A DIR_B PARAMS_BOUND MOMENTS_BOUND"""
import array, glob, json, os, struct, sys


def newest(d):
    steps = sorted(p for p in glob.glob(os.path.join(d, "step-*")) if os.path.exists(os.path.join(p, "manifest.json")))
    if not steps:
        sys.exit(f"FAIL: no complete checkpoint in {d}")
    return steps[-1]


def load(d):
    out = {}
    for path in sorted(glob.glob(os.path.join(newest(d), "rank-*.safetensors"))):
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            head = json.loads(f.read(n))
            base = 8 + n
            for name, t in head.items():
                if name == "__metadata__":
                    continue
                assert t["dtype"] == "F32", (path, name)
                b, e = t["data_offsets"]
                f.seek(base + b)
                a = array.array("f")
                a.frombytes(f.read(e - b))
                if name in out and out[name] != a:
                    sys.exit(f"FAIL: {d}: the copies of {name} in two shards differ")
                out[name] = a
    return out


a, b = load(sys.argv[1]), load(sys.argv[2])
bounds = {"params": float(sys.argv[3]), "adam_m": float(sys.argv[4]), "adam_v": float(sys.argv[4])}
if sorted(a) != sorted(b):
    sys.exit(f"FAIL: tensor names differ: {sorted(set(a) ^ set(b))[:5]}")
worst = {}
for name in a:
    x, y = a[name], b[name]
    scale = max((abs(v) for v in x), default=0.0) or 1.0
    diff = max((abs(p - q) for p, q in zip(x, y)), default=0.0) / scale
    kind = name.split("/")[0]
    if diff > worst.get(kind, (-1, ""))[0]:
        worst[kind] = (diff, name)
ok = all(w[0] <= bounds[k] for k, w in worst.items())
print(("ok" if ok else "FAIL") + ": " + ", ".join(f"{k} {w[0]:.1e} ({w[1].split('/', 1)[1]}; bound {bounds[k]:g})"
                                               for k, w in sorted(worst.items())) + f", {len(a)} tensors")
sys.exit(0 if ok else 1)
