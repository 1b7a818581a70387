#!/usr/bin/env bash
# --dump-edge STEP (runtime/observe/dump.c): at that step every sender writes
# the tensor it encodes as .npy, before the codec: 3 stages, 2 micro-batches:
# 2 edges x 2 directions x 2 micro-batches = 8 files (step 1 here) of shape (B, T, C),
# readable by NumPy, finite, and the fwd ones equal whatever the codec (they
# are taken before it). interleaved:v=2 on 2 ranks (4 chunks, 3 boundaries)
# writes the same 3 boundaries' tensors as 1F1B on 3 stages over the same
# blocks, byte for byte at step 1 (1f1b: auto would dump half micro-batches,
# 4 of (1, T, C)). Bad uses are refused.
#   dump_edge.sh PIPEZIP
set -uo pipefail
PZ="$1"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$PZ" tokenize --out "$tmp/t.bin" "$0" "$0" "$0" "$0" >/dev/null || { echo "FAIL: tokenize"; exit 1; }
common=(train --preset tiny --data "$tmp/t.bin" --batch 2 --seq 16 --micro-batches 2 --steps 3 --seed 4 --dump-edge 1)
"$PZ" "${common[@]}" --stages 3 --schedule 1f1b --dump-dir "$tmp/raw" >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: raw run"; exit 1; }
# 4 chunks: embedding | block 0 | block 1 | head, and 1F1B on 4 stages cut the same way
"$PZ" "${common[@]}" --stages 2 --schedule interleaved:v=2 --split 0,1,1,0 --dump-dir "$tmp/il" \
  >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: interleaved run"; exit 1; }
"$PZ" "${common[@]}" --stages 4 --schedule 1f1b --split 0,1,1,0 --dump-dir "$tmp/p4" >/dev/null 2>"$tmp/err" ||
  { cat "$tmp/err"; echo "FAIL: 4-stage run"; exit 1; }
"$PZ" "${common[@]}" --stages 3 --schedule 1f1b --dump-dir "$tmp/q4" --compress 'fwd=q4,bwd=q8' >/dev/null 2>"$tmp/err" || { cat "$tmp/err"; echo "FAIL: q4 run"; exit 1; }
"${PZ_TORCH_PYTHON:-/usr/bin/python3}" - "$tmp" <<'PY' || exit 1  # Debian's, with python3-numpy
import glob, os, sys
import numpy as np
d = sys.argv[1]
names = sorted(os.path.basename(p) for p in glob.glob(f"{d}/raw/*.npy"))
want = sorted(f"step1-edge{e}-{e+1}-{k}-micro{m}.npy" for e in (0, 1) for k in ("fwd", "bwd") for m in (0, 1))
assert names == want, names
for n in names:
    a = np.load(f"{d}/raw/{n}")
    assert a.dtype == np.float32 and a.shape[:2] == (2, 16) and np.isfinite(a).all() and np.abs(a).max() > 0, n
    # at step 1 the first stage's activations depend on its initial weights only: the
    # same with and without codecs, if they are taken before the codec
    if n.startswith("step1-edge0-1-fwd"):
        assert np.array_equal(a, np.load(f"{d}/q4/{n}")), f"{n}: taken after the codec?"
print(f"ok: {len(names)} tensors, shape {a.shape}")
il = sorted(os.path.basename(p) for p in glob.glob(f"{d}/il/*.npy"))
want = sorted(f"step1-edge{e}-{e+1}-{k}-micro{m}.npy" for e in (0, 1, 2) for k in ("fwd", "bwd") for m in (0, 1))
assert il == want, il
for n in il:
    assert np.array_equal(np.load(f"{d}/il/{n}"), np.load(f"{d}/p4/{n}")), f"{n}: interleaved differs from 4 stages"
print(f"ok: interleaved:v=2: {len(il)} tensors, equal to 1F1B on 4 stages")
PY
out=$("$PZ" train --preset tiny --data "$tmp/t.bin" --steps 2 --dump-edge 1 2>&1); [ $? = 1 ] && grep -q "needs --stages 2" <<<"$out" || { echo "FAIL: one stage: $out"; exit 1; }
out=$("$PZ" train --stages 2 --preset tiny --data "$tmp/t.bin" --steps 2 --dump-edge 5 2>&1); [ $? = 1 ] && grep -q "only 2 steps" <<<"$out" || { echo "FAIL: past the end: $out"; exit 1; }
echo ok
