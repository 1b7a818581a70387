#!/usr/bin/env bash
# What compression buys on a slow link: tokens/s of a 2-stage pipeline with
# `fwd=aq(q4),bwd=q8` against uncompressed (`none`) at simulated link rates
# (--link-mbps), in the same run, with the speedup compared to the ratio of
# the bytes each sends.
#
# Setup: the tiny preset (C = 96), B=8 T=64, 8 micro-batches per step, one
# thread per stage, on a 512-sample dataset, so an epoch is 8 steps: AQ-SGD
# sends each sample at full precision the first time it sees it, so only
# steps after the first epoch are timed (steps 9..STEPS), for both policies.
# Bytes on the link: the edge's activations and gradients (from the step
# lines) plus the tied-embedding gradient exchange between the first and last
# stage (256 x 96 floats each way per step, uncompressed), which crosses the
# same link. Links are full duplex (each direction its own rate), so the
# speedup is bounded by the direction that shrinks least: the bound is
# reported next to the total-bytes ratio.
# Each configuration runs RUNS times (default 3); medians are reported.
#   usage: bench/bench_link.sh [PIPEZIP] [RATES (comma list, Mbit/s)] [RUNS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
pz=${1:-build/pipezip}
rates=${2:-10,100}
runs=${3:-3}
steps=${4:-24}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat runtime/*.c stages/*.c compress/*.c > "$tmp/text.txt"
head -c $((512 * 65)) "$tmp/text.txt" > "$tmp/small.txt"
"$pz" tokenize --out "$tmp/train.bin" "$tmp/small.txt" >/dev/null
args=(--preset tiny --data "$tmp/train.bin" --batch 8 --seq 64 --micro-batches 8 --steps "$steps"
      --threads 1 --stages 2 --val-every 0 --seed 3 --error-metrics off --peer-timeout 600)
for r in ${rates//,/ }; do
  for k in $(seq 1 "$runs"); do
    "$pz" train "${args[@]}" --link-mbps "$r" > "$tmp/none-$r-$k.jsonl" 2>/dev/null
    "$pz" train "${args[@]}" --link-mbps "$r" --compress 'fwd=aq(q4),bwd=q8' > "$tmp/aq-$r-$k.jsonl" 2>/dev/null
  done
done
python3 - "$tmp" "$rates" "$runs" <<'PY'
import json, statistics, sys
tmp, rates, runs = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
tied = 256 * 96 * 4  # bytes each way per step
def load(name):
    rows = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl") if '"loss"' in l]
    return [r for r in rows if r["step"] > 8]  # after AQ's first epoch
print("tiny, 2 stages, B=8 T=64 m=8, steps after the first epoch; medians of %d runs each" % runs)
print("%8s %12s %12s %8s %13s %13s %10s" % ("Mbit/s", "none tok/s", "aq/q8 tok/s", "speedup",
      "bytes ratio", "bound (dir)", "speedup/ratio"))
for r in rates:
    tn, ta, ratio_tot, ratio_dir = [], [], [], []
    for k in range(1, runs + 1):
        n, a = load(f"none-{r}-{k}"), load(f"aq-{r}-{k}")
        tn.append(statistics.median(x["tok_s"] for x in n))
        ta.append(statistics.median(x["tok_s"] for x in a))
        def per_step(rows, key): return statistics.mean(x[key] for x in rows)
        nf, nb = per_step(n, "fwd_wire") + tied, per_step(n, "bwd_wire") + tied
        af, ab = per_step(a, "fwd_wire") + tied, per_step(a, "bwd_wire") + tied
        ratio_tot.append((nf + nb) / (af + ab))
        ratio_dir.append(max(nf, nb) / max(af, ab))
    sp = statistics.median(ta) / statistics.median(tn)
    rt, rd = statistics.median(ratio_tot), statistics.median(ratio_dir)
    print("%8s %12.0f %12.0f %7.2fx %12.2fx %12.2fx %9.0f%% of bytes ratio, %.0f%% of bound" % (
        r, statistics.median(tn), statistics.median(ta), sp, rt, rd, 100 * sp / rt, 100 * sp / rd))
PY
