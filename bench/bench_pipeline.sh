#!/usr/bin/env bash
# Pipeline speed of the demo preset as a user runs it: S = 2 stages,
# m = 8 micro-batches of 4 x 128 tokens, default flags, against the same
# pipeline with --threads 1 and against the single-process engine (default
# flags: every CPU), all in the same run. Runs alternate, RUNS of each; a
# run's figure is the median over its steps after the first 2 (warm-up); the
# table gives the median over runs. Efficiency = busy compute time /
# (S x wall time) per step, from the stages' own timers.
#   usage: bench/bench_pipeline.sh [PIPEZIP] [STEPS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_args.sh
bench_args pz=build/pipezip steps=8 runs=3 -- "$@"
bash tools/make_corpus.sh data >/dev/null
args=(--preset demo --data data/pydoc_train.bin --batch 4 --seq 128 --micro-batches 8 --steps "$steps" --seed 1)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$runs"); do
  "$pz" train "${args[@]}" > "$tmp/single.$r.jsonl" 2>/dev/null
  "$pz" train "${args[@]}" --stages 2 > "$tmp/default.$r.jsonl" 2>"$tmp/default.$r.err"
  "$pz" train "${args[@]}" --stages 2 --threads 1 > "$tmp/t1.$r.jsonl" 2>/dev/null
done
grep -h '^\[rank [0-9]*\] rank' "$tmp/default.1.err" | sed 's/^/default flags: /' || true
python3 - "$tmp" "$runs" <<'PY'
import json, statistics as st, sys
tmp, runs = sys.argv[1], int(sys.argv[2])
def steps(kind, r):
    return [json.loads(l) for l in open(f"{tmp}/{kind}.{r}.jsonl") if '"loss"' in l][2:]
def per_run(kind, f):
    return st.median(st.median(f(s) for s in steps(kind, r)) for r in range(1, runs + 1))
tok = {k: per_run(k, lambda s: s["tok_s"]) for k in ("single", "default", "t1")}
ms = {k: per_run(k, lambda s: s["ms"]) for k in ("single", "default", "t1")}
eff = {k: per_run(k, lambda s: sum(x["compute_ms"] for x in s["stages"]) / (len(s["stages"]) * s["ms"]))
       for k in ("default", "t1")}
print(f"demo, B=4 T=128, m=8, medians over {runs} runs of the steps after the first 2")
print(f"single process, default flags:   {tok['single']:7.0f} tok/s {ms['single']:7.0f} ms/step")
print(f"pipeline S=2, default flags:     {tok['default']:7.0f} tok/s {ms['default']:7.0f} ms/step  efficiency {eff['default']:.3f}")
print(f"pipeline S=2, --threads 1:       {tok['t1']:7.0f} tok/s {ms['t1']:7.0f} ms/step  efficiency {eff['t1']:.3f}")
print(f"bubble bound at m=8, S=2: {8/9:.3f}")
print(f"pipeline default / --threads 1: {tok['default'] / tok['t1']:.2f}x (target >= 0.90)")
print(f"pipeline default / single process: {tok['default'] / tok['single']:.2f}x")
PY
