#!/usr/bin/env bash
# Idle time of 1F1B against zero-bubble H1 (issue 12: zb-h1's idle at least
# 30% below 1f1b's at S = 4, m = 8), in the simulator and measured: the demo
# preset as S stages, m micro-batches of 4 x 128 tokens, default flags, no
# link limit, each schedule RUNS times with --trace. A run's idle fraction is
# the mean over ranks of (step - the rank's forward, backward, weight and
# optimizer time) / step over the steps after the first 2, from the trace
# (bench/trace_profile.py); the table gives the median run of each schedule
# and the simulator's bubble fraction (pipezip schedule) next to it. With
# S ranks on fewer cores than S the ranks share cores, so the measured idle
# also holds time a rank waited for a core: the CPU count is printed.
#   usage: bench/bench_bubble.sh [PIPEZIP] [STAGES] [MICRO] [STEPS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_args.sh
bench_args pz=build/pipezip S=4 m=8 steps=6 runs=3 -- "$@"
bash tools/make_corpus.sh data >/dev/null
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
args=(--preset demo --data data/pydoc_train.bin --batch 4 --seq 128 --micro-batches "$m" --stages "$S"
      --steps "$steps" --val-every 0 --seed 1)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
py=python3
for r in $(seq 1 "$runs"); do
  for s in 1f1b zb-h1; do   # alternating, so drift in the machine's load hits both
    "$pz" train "${args[@]}" --schedule "$s" --trace "$tmp/$s.$r.json" > "$tmp/$s.$r.jsonl" 2>"$tmp/$s.$r.err" \
      || { cat "$tmp/$s.$r.err" >&2; exit 1; }
    "$py" bench/trace_profile.py "$tmp/$s.$r.json" --skip 2 > "$tmp/$s.$r.prof"
  done
done
for s in 1f1b zb-h1; do
  sim=$("$pz" schedule --stages "$S" --micro-batches "$m" --schedule "$s" | sed -n 's/^bubble: \([0-9]*\/[0-9]*\) = \([0-9.]*\).*/\2/p')
  echo "$s $sim" >> "$tmp/sim"
done
"$py" - "$tmp" "$runs" "$S" "$m" <<'PY'
import json, re, statistics as st, sys
tmp, runs, S, m = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sim = dict(l.split() for l in open(f"{tmp}/sim"))
res = {}
for s in ("1f1b", "zb-h1"):
    per = []
    for r in range(1, runs + 1):
        idle = float(re.search(r"mean idle fraction over ranks: ([0-9.]+)%", open(f"{tmp}/{s}.{r}.prof").read()).group(1))
        rows = [json.loads(l) for l in open(f"{tmp}/{s}.{r}.jsonl") if '"loss"' in l][2:]
        per.append((idle / 100, st.median(x["tok_s"] for x in rows)))
    per.sort()
    res[s] = per[len(per) // 2]
print(f"demo, S={S}, m={m}, B=4 T=128, default flags; median of {runs} runs (steps after the first 2)")
print(f"{'schedule':10} {'sim bubble':>10} {'idle (trace)':>12} {'tok/s':>8}")
for s in ("1f1b", "zb-h1"):
    print(f"{s:10} {float(sim[s]):10.3f} {res[s][0]:12.3f} {res[s][1]:8.0f}")
a, b = res["1f1b"][0], res["zb-h1"][0]
sa, sb = float(sim["1f1b"]), float(sim["zb-h1"])
print(f"zb-h1 idle below 1f1b: simulator {100 * (1 - sb / sa):.0f}%, measured {100 * (1 - b / a):.0f}% (target >= 30%)")
PY
