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
#              (the edge's messages plus the tied-embedding message,
#              tied_wire, from the step lines) over the rate
#   overlap    max(compute, link) / step: 1.00 = communication fully hidden
#              behind the larger of the two, ~0.5 = the step costs their sum
#   +delay     the same against max(compute, link) + 5 one-way delays that no
#              schedule hides: the first activation down, the last gradient
#              up, the tied exchange, and the step's loss/norm reduction (to
#              rank 0 and back); the pipeline drains at every optimizer step
#   vs none    tok/s over the uncompressed policy's at the same link and
#              schedule
# The schedule "defaults" is train's defaults (issue 26): no --schedule and no
# --compress-tied (even with TIED), only --compress and the link; the report
# ends with each defaults row beside the best hand-set schedule's.
# Each configuration runs RUNS times (default 3); the median run counts.
#   usage: bench/bench_link.sh [PIPEZIP] [RATES] [LATENCIES] [SCHEDULES] [POLICIES] [RUNS] [STEPS] [PLOT] [TIED]
#   lists are comma-separated; POLICIES separated by ';' (the first is the
#   baseline of "vs none"). Defaults: 10,100,1000  0,25
#   defaults,1f1b,1f1b:warmup=auto,zb-h1,gpipe  'none;fwd=aq(q4),bwd=q8;fwd=q4,bwd=q8'  3  5
#   runs/bench_link.png. TIED: the --compress-tied codec of every policy but
#   the first, spelled out (default none: the exact exchange, train's
#   default before issue 26) in every run but the "defaults" rows. A rate
#   of 0 runs without a link limit. BENCH_LINK_DIR=DIR keeps the runs' step
#   lines (NAME.jsonl) and stderr (NAME.err) in DIR; a run whose file there
#   already holds all STEPS step lines is not run again (resume a matrix, or
#   reuse the baseline policy's runs for another TIED).
# The data is 64 samples of the fortunes corpus, two steps per epoch: aq()
# sends each sample at full precision the first time it sees it, so the timed
# steps (3..) are all in its delta epochs.
# The plot (matplotlib): speed-up over the baseline policy against the link
# rate, one panel per compressed policy, one line per schedule and delay.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_args.sh
bench_args pz=build/pipezip rates=10,100,1000 lats=0,25 scheds=defaults,1f1b,1f1b:warmup=auto,zb-h1,gpipe \
            'policies=none;fwd=aq(q4),bwd=q8;fwd=q4,bwd=q8' runs=3 steps=5 plot=runs/bench_link.png tied=none -- "$@"
[ -f data/fortunes_train.bin ] || bash tools/make_corpus.sh >&2
# BENCH_LINK_DIR keeps every run's step lines there (to report again or profile)
if [ -n "${BENCH_LINK_DIR:-}" ]; then tmp=$BENCH_LINK_DIR; mkdir -p "$tmp"
else tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; fi
# 64 samples of 128 tokens (+1 for the last target): byte-level tokens are bytes
{ xargs -d '\n' cat < data/fortunes_files.txt 2>/dev/null | head -c $((64 * 128 + 1)) > "$tmp/small.txt"; } || true
[ "$(wc -c < "$tmp/small.txt")" = $((64 * 128 + 1)) ] || { echo "bench_link: cannot read the fortunes corpus" >&2; exit 1; }
"$pz" tokenize --out "$tmp/small.bin" "$tmp/small.txt" >/dev/null
data=$tmp/small.bin
args=(--preset demo --data "$data" --batch 4 --seq 128 --micro-batches 8 --stages 2 --steps "$steps"
      --val-every 0 --seed 3 --error-metrics off --peer-timeout 600)
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs" >&2
IFS=';' read -r -a pols <<<"$policies"
# complete FILE: it holds all $steps step lines (a kept run, not run again)
complete() { [ -f "$1" ] && [ "$(grep -c '"loss"' "$1")" -ge "$steps" ]; }
n=0
for pi in "${!pols[@]}"; do
  pol=${pols[$pi]}
  tflag=(--compress-tied none); [ "$pi" -gt 0 ] && tflag=(--compress-tied "$tied")
  for k in $(seq 1 "$runs"); do   # compute only: no link limit
    complete "$tmp/c-$pi-$k.jsonl" && continue
    "$pz" train "${args[@]}" --compress "$pol" "${tflag[@]}" --schedule 1f1b > "$tmp/c-$pi-$k.jsonl" 2> "$tmp/c-$pi-$k.err"
    n=$((n + 1))
  done
  for r in ${rates//,/ }; do
    for l in ${lats//,/ }; do
      for s in ${scheds//,/ }; do
        for k in $(seq 1 "$runs"); do
          complete "$tmp/l-$pi-$r-$l-$s-$k.jsonl" && continue
          sflag=(--schedule "$s"); tf=("${tflag[@]}")
          [ "$s" = defaults ] && sflag=() && tf=()   # train's defaults: only --compress and the link
          "$pz" train "${args[@]}" --compress "$pol" "${tf[@]}" --link-mbps "$r" --link-latency-ms "$l" "${sflag[@]}" \
            > "$tmp/l-$pi-$r-$l-$s-$k.jsonl" 2> "$tmp/l-$pi-$r-$l-$s-$k.err"
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
"$py" bench/link_report.py "$tmp" "$rates" "$lats" "$scheds" "$policies" "$runs" "$plot"
