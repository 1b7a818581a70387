#!/usr/bin/env bash
# Pipeline efficiency of the demo preset: S = 2 stages, m = 8 micro-batches,
# one thread per stage, against the single-process engine on 2 threads, in
# the same run. Efficiency = busy compute time / (S x wall time) per step,
# from the stages' own timers; reported as the median over the timed steps
# (the first 2 steps are warm-up and not counted).
#   usage: bench/bench_pipeline.sh [PIPEZIP] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
pz=${1:-build/pipezip}
steps=${2:-8}
bash tools/make_corpus.sh data >/dev/null
args=(--preset demo --data data/pydoc_train.bin --batch 4 --seq 128 --micro-batches 8 --steps "$steps" --seed 1)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$pz" train "${args[@]}" --threads 2 > "$tmp/single.jsonl" 2>/dev/null
"$pz" train "${args[@]}" --threads 1 --stages 2 > "$tmp/pipe.jsonl" 2>/dev/null
python3 - "$tmp/single.jsonl" "$tmp/pipe.jsonl" <<'PY'
import json, statistics, sys
single = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][2:]
pipe = [json.loads(l) for l in open(sys.argv[2]) if '"loss"' in l][2:]
eff = [sum(s["compute_ms"] for s in r["stages"]) / (len(r["stages"]) * r["ms"]) for r in pipe]
tok_p = statistics.median(r["tok_s"] for r in pipe)
tok_s = statistics.median(r["tok_s"] for r in single)
wait = [statistics.median(r["stages"][k]["wait_ms"] for r in pipe) for k in range(len(pipe[0]["stages"]))]
print(f"demo, B=4 T=128, m=8, {len(pipe)} timed steps (medians)")
print(f"single process, 2 threads: {tok_s:.0f} tok/s, {statistics.median(r['ms'] for r in single):.0f} ms/step")
print(f"pipeline S=2, 1 thread per stage: {tok_p:.0f} tok/s, {statistics.median(r['ms'] for r in pipe):.0f} ms/step, "
      f"waits per stage {', '.join(f'{w:.0f} ms' for w in wait)}")
print(f"pipeline efficiency (busy / (S x wall)): {statistics.median(eff):.3f} (bubble bound at m=8: {8/9:.3f})")
print(f"pipeline tok/s / single-process tok/s: {tok_p / tok_s:.2f}")
PY
