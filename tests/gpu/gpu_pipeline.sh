#!/usr/bin/env bash
# A 2-stage pipeline with stage 0 on the CPU and stage 1 on a GPU
# (--device cpu,cuda) against the same pipeline all on the CPU: per-step
# losses must agree to 1e-4 relative (fp32 on both; sums run in other orders).
# Exits 77 (SKIP) when no usable GPU is present.
#   gpu_pipeline.sh PIPEZIP
set -euo pipefail
PZ="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! msg=$("$PZ" train --device cuda --preset tiny --data /nonexistent 2>&1) && grep -q "no usable CUDA GPU\|built without the CUDA backend\|cannot use CUDA device\|cublasCreate" <<<"$msg"; then
  echo "SKIP: $msg"
  exit 77
fi
# a small token shard (llm.c format) from this script's own text
"$PZ" tokenize --out "$tmp/train.bin" "$0" "$0" "$0" "$0" >/dev/null
common=(train --preset tiny --data "$tmp/train.bin" --stages 2 --micro-batches 2 --batch 2 --seq 32
        --steps 5 --lr 1e-3 --seed 3 --threads 1)
"$PZ" "${common[@]}" --device cpu >"$tmp/cpu.jsonl"
"$PZ" "${common[@]}" --device cpu,cuda >"$tmp/mixed.jsonl"
python3 - "$tmp/cpu.jsonl" "$tmp/mixed.jsonl" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
b = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l]
assert len(a) == len(b) == 5, (len(a), len(b))
worst = 0.0
for x, y in zip(a, b):
    rel = abs(x["loss"] - y["loss"]) / abs(x["loss"])
    worst = max(worst, rel)
    print(f'step {x["step"]}: cpu {x["loss"]:.8f}  cpu+cuda {y["loss"]:.8f}  rel {rel:.2e}')
if worst > 1e-4:
    sys.exit(f"losses differ by {worst:.2e} relative (limit 1e-4)")
PY

# generation: the ids of the fixture model on the GPU (one process, and stage
# 1 of 2 on the GPU) equal the CPU's, greedy and sampled with the same seed
# (a draw changes only if fp32 summation order moves a probability across
# the uniform draw: about 1e-6 per token)
model="$(dirname "$0")/../fixtures/tiny_ref.safetensors"
ids() { tail -n 1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["ids"])'; }
for temp in 0 1; do
  gen=(generate --model "$model" --prompt-ids 5,17,42,60 --max-new-tokens 12 --temperature $temp --seed 7)
  want=$("$PZ" "${gen[@]}" --device cpu | ids)
  got1=$("$PZ" "${gen[@]}" --device cuda | ids)
  got2=$("$PZ" "${gen[@]}" --device cpu,cuda --stages 2 | ids)
  echo "generate T=$temp cpu: $want"; echo "  cuda: $got1"; echo "  cpu,cuda (2 stages): $got2"
  [ "$want" = "$got1" ] && [ "$want" = "$got2" ] || { echo "FAIL: GPU generation differs from the CPU's"; exit 1; }
done
