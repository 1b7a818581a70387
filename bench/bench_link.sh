#!/usr/bin/env bash
# Slow links: does a compressed pipeline run at the larger of its compute and
# its link time, or at their sum? Runs the demo preset (10.8M parameters) as
# a 2-stage pipeline, 8 micro-batches of 4 x 128 tokens per step, default
# threads, over simulated links (--link-mbps, --link-latency-ms), for each
# schedule and policy, and prints per configuration:
#   tok/s      median over the timed steps (steps 3.., so warmup=auto has
#              settled) of the median run
#   compute    the same policy's step with no link limit (same run set)
#   link       the busiest link direction's time per step: its wire bytes
#              (the edge's messages from the step lines plus the tied-
#              embedding gradient, 256 x 384 floats each way, uncompressed)
#              over the rate
#   overlap    max(compute, link) / step: 1.00 = communication fully hidden
#              behind the larger of the two, ~0.5 = the step costs their sum
#   +delay     the same against max(compute, link) + 5 one-way delays that no
#              schedule hides: the first activation down, the last gradient
#              up, the tied exchange, and the step's loss/norm reduction (to
#              rank 0 and back); the pipeline drains at every optimizer step
#   vs none    tok/s over the uncompressed policy's at the same link and
#              schedule
# Each configuration runs RUNS times (default 3); the median run counts.
#   usage: bench/bench_link.sh [PIPEZIP] [RATES] [LATENCIES] [SCHEDULES] [POLICIES] [RUNS] [STEPS] [PLOT]
#   lists are comma-separated; POLICIES separated by ';' (the first is the
#   baseline of "vs none"). Defaults: 10,100,1000  0,25
#   1f1b,1f1b:warmup=auto,zb-h1,gpipe  'none;fwd=aq(q4),bwd=q8;fwd=q4,bwd=q8'  3  5
#   runs/bench_link.png
# The data is 64 samples of the fortunes corpus, two steps per epoch: aq()
# sends each sample at full precision the first time it sees it, so the timed
# steps (3..) are all in its delta epochs.
# The plot (matplotlib): speed-up over the baseline policy against the link
# rate, one panel per compressed policy, one line per schedule and delay.
set -euo pipefail
cd "$(dirname "$0")/.."
pz=${1:-build/pipezip}
rates=${2:-10,100,1000}
lats=${3:-0,25}
scheds=${4:-1f1b,1f1b:warmup=auto,zb-h1,gpipe}
policies=${5:-none;fwd=aq(q4),bwd=q8;fwd=q4,bwd=q8}
runs=${6:-3}
steps=${7:-5}
plot=${8:-runs/bench_link.png}
[ -f data/fortunes_train.bin ] || bash tools/make_corpus.sh >&2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
# 64 samples of 128 tokens (+1 for the last target): byte-level tokens are bytes
{ xargs -d '\n' cat < data/fortunes_files.txt 2>/dev/null | head -c $((64 * 128 + 1)) > "$tmp/small.txt"; } || true
[ "$(wc -c < "$tmp/small.txt")" = $((64 * 128 + 1)) ] || { echo "bench_link: cannot read the fortunes corpus" >&2; exit 1; }
"$pz" tokenize --out "$tmp/small.bin" "$tmp/small.txt" >/dev/null
data=$tmp/small.bin
args=(--preset demo --data "$data" --batch 4 --seq 128 --micro-batches 8 --stages 2 --steps "$steps"
      --val-every 0 --seed 3 --error-metrics off --peer-timeout 600)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs" >&2
IFS=';' read -r -a pols <<<"$policies"
n=0
for pi in "${!pols[@]}"; do
  pol=${pols[$pi]}
  for k in $(seq 1 "$runs"); do   # compute only: no link limit
    "$pz" train "${args[@]}" --compress "$pol" > "$tmp/c-$pi-$k.jsonl" 2>/dev/null; n=$((n + 1))
  done
  for r in ${rates//,/ }; do
    for l in ${lats//,/ }; do
      for s in ${scheds//,/ }; do
        for k in $(seq 1 "$runs"); do
          "$pz" train "${args[@]}" --compress "$pol" --link-mbps "$r" --link-latency-ms "$l" --schedule "$s" \
            > "$tmp/l-$pi-$r-$l-$s-$k.jsonl" 2>/dev/null
          n=$((n + 1))
        done
      done
    done
  done
done
echo "$n runs" >&2
mkdir -p "$(dirname "$plot")"
# Debian's python3 has matplotlib after tools/setup.sh; another python3 first on PATH may not
py=python3
if ! python3 -c 'import matplotlib' 2>/dev/null && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  py=/usr/bin/python3
fi
"$py" - "$tmp" "$rates" "$lats" "$scheds" "$policies" "$runs" "$plot" <<'PY'
import json, statistics, sys
tmp, rates, lats, scheds, pols, runs, plot = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), \
    sys.argv[4].split(","), sys.argv[5].split(";"), int(sys.argv[6]), sys.argv[7]
tied = 256 * 384 * 4   # bytes of the tied-embedding gradient, each way per step
tokens = 8 * 4 * 128
def load(name):
    rows = [json.loads(l) for l in open(f"{tmp}/{name}.jsonl") if '"loss"' in l]
    return [r for r in rows if r["step"] >= 3]
def median_run(prefix):
    per_run = []
    for k in range(1, runs + 1):
        rows = load(f"{prefix}-{k}")
        per_run.append((statistics.median(r["ms"] for r in rows) / 1e3, rows))
    per_run.sort(key=lambda x: x[0])
    return per_run[len(per_run) // 2]
print("demo preset, 2 stages, 8 micro-batches of 4 x 128 per step; medians of %d runs" % runs)
print("%-20s %6s %5s %-21s %8s %8s %8s %8s %8s %8s %8s" % ("policy", "Mbit/s", "ms", "schedule", "tok/s",
      "step s", "compute", "link s", "overlap", "+delay", "vs " + pols[0]))
base, speedup = {}, {}
for pi, pol in enumerate(pols):
    comp, _ = median_run(f"c-{pi}")
    for r in rates:
        for l in lats:
            for s in scheds:
                step, rows = median_run(f"l-{pi}-{r}-{l}-{s}")
                wire = max(statistics.mean(x["fwd_wire"] for x in rows), statistics.mean(x["bwd_wire"] for x in rows))
                link = (wire + tied) * 8 / (float(r) * 1e6)
                bound = max(comp, link)
                tok = tokens / step
                if pi == 0: base[(r, l, s)] = tok
                vs = tok / base[(r, l, s)] if (r, l, s) in base else float("nan")
                speedup[(pol, r, l, s)] = vs
                print("%-20s %6s %5s %-21s %8.0f %8.2f %8.2f %8.2f %8.2f %8.2f %7.2fx" % (pol, r, l, s, tok, step,
                      comp, link, bound / step, (bound + 5 * float(l) / 1e3) / step, vs))
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("no plot: matplotlib is not installed (apt-get install python3-matplotlib)")
    sys.exit(0)
comp_pols = pols[1:]
fig, axes = plt.subplots(1, max(1, len(comp_pols)), figsize=(5 * max(1, len(comp_pols)), 4), squeeze=False)
for ax, pol in zip(axes[0], comp_pols):
    for s in scheds:
        for l in lats:
            ys = [speedup[(pol, r, l, s)] for r in rates]
            ax.plot([float(r) for r in rates], ys, marker="o", linestyle="-" if float(l) == 0 else "--",
                    label=f"{s}, {l} ms")
    ax.set_xscale("log")
    ax.set_xlabel("link rate, Mbit/s (simulated)")
    ax.set_ylabel(f"tokens/s over {pols[0]}")
    ax.set_title(pol)
    ax.axhline(1.0, color="gray", linewidth=0.5)
    ax.legend(fontsize=7)
fig.suptitle(f"demo preset, 2 stages, 8 x (4 x 128) per step, medians of {runs} runs")
fig.tight_layout()
fig.savefig(plot, dpi=110)
print(f"plot: {plot}")
PY
