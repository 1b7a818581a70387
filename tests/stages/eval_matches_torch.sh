#!/usr/bin/env bash
# `pipezip eval` must agree with an independent PyTorch evaluation
# (tools/torch_eval.py, float64) of the same checkpoint on the same data, to a
# relative 1e-4. The checkpoint is the tiny preset trained 3 steps by pipezip
# and saved as safetensors, so this also covers the saver's HF layout.
#   usage: eval_matches_torch.sh PATH/TO/pipezip PATH/TO/tools/torch_eval.py
# Exits 77 (skipped) when the Python (PZ_TORCH_PYTHON, default Debian's
# /usr/bin/python3, which has python3-torch) cannot import torch.
set -u
pz="$1"
torch_eval="$2"
py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"
rtol=1e-4

if ! "$py" -c 'import torch' >/dev/null 2>&1; then
  echo "SKIP: $py cannot import torch (install python3-torch or set PZ_TORCH_PYTHON)"
  exit 77
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# a deterministic, varied text of ~12 kB
for i in $(seq 1 300); do
  printf 'Line %d: the quick brown fox %d jumps over %d lazy dogs; x=%d.\n' \
    "$i" $((i * 7 % 13)) $((i * i % 101)) $((i * 31 % 997))
done > "$dir/text.txt"

run() {
  echo "+ $*" >&2
  "$@" || { echo "FAIL: command exited $?"; exit 1; }
}
run "$pz" tokenize --out "$dir/tok.bin" "$dir/text.txt"
run "$pz" train --preset tiny --data "$dir/tok.bin" --steps 3 --batch 2 --seq 32 \
  --save "$dir/m.safetensors" > "$dir/train.log"

# evaluate with a batch shape different from training's
B=3 T=24 N=5
pz_out=$("$pz" eval --model "$dir/m.safetensors" --data "$dir/tok.bin" --batch $B --seq $T --batches $N) \
  || { echo "FAIL: pipezip eval exited $?"; exit 1; }
echo "pipezip eval: $pz_out"
torch_out=$("$py" "$torch_eval" --model "$dir/m.safetensors" --data "$dir/tok.bin" \
  --batch $B --seq $T --batches $N) || { echo "FAIL: torch_eval.py exited $?"; exit 1; }
echo "torch_eval:   $torch_out"

"$py" - "$pz_out" "$torch_out" "$rtol" "$N" <<'EOF'
import json, sys
pz, ref = json.loads(sys.argv[1]), json.loads(sys.argv[2])
rtol, n = float(sys.argv[3]), int(sys.argv[4])
if "batches" in pz and pz["batches"] != n:
    sys.exit("FAIL: pipezip evaluated %s batches, asked for %d" % (pz["batches"], n))
a, b = float(pz["loss"]), float(ref["loss"])
rel = abs(a - b) / abs(b)
print("%s: pipezip %.7f torch %.9f relative difference %.2e (tolerance %.0e)"
      % ("ok" if rel <= rtol else "FAIL", a, b, rel, rtol))
sys.exit(0 if rel <= rtol else 1)
EOF
