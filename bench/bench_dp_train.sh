#!/usr/bin/env bash
# Data-parallel speed on a slow link (issue 25, "Speed"): does compressing the
# replicas' gradient average let a step run at its compute time? Trains the
# demo preset (10.8M parameters) as S=1 x D=2 replicas, one micro-batch of
# 8 x 128 tokens per replica per step, default threads, and times three
# configurations, RUNS runs each, the runs interleaved so that all three see
# the same load:
#   compute    no link limit, uncompressed: the replicas average over
#              loopback at memory speed; this is the "compute-only" step
#              (the step with D = 2 and an unlimited link)
#   fp32       uncompressed (ring all-reduce) over --dp-link-mbps RATE
#   SPEC       --dp-compress SPEC --dp-reduce REDUCE over the same link
# and prints per row the median over runs of each run's median step (steps
# 2.. ; the first warms up), then the compressed step over the compute-only
# step (target <= 1.15), the bound max(compute, fp32 sync) / max(compute,
# compressed sync), where a sync's time is its bytes per rank over the rate
# (fp32: the ring's 2(D-1)/D x 4n bytes; compressed: REDUCE's messages, sized
# by the codec, see dp_train_report.py), the measured speed-up fp32 step /
# compressed step, and its fraction of the bound (target >= 0.85).
#   usage: bench/bench_dp_train.sh [PIPEZIP] [RATE] [RUNS] [STEPS] [SPEC] [REDUCE]
#   defaults: build/pipezip 100 3 5 sign twophase
# BENCH_DP_DIR=DIR keeps the runs' step lines there; a run whose file already
# holds all STEPS step lines is not run again (dp_train_report.py reports a
# kept DIR again). The machine's load average is printed before and after:
# other work on the machine slows the compute, not the simulated link.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/bench_args.sh
bench_args pz=build/pipezip rate=100 runs=3 steps=5 spec=sign reduce=twophase -- "$@"
D=2
case $reduce in twophase|allgather) ;; *) echo "bench_dp_train: REDUCE is twophase or allgather" >&2; exit 2 ;; esac
[ -f data/fortunes_train.bin ] || bash tools/make_corpus.sh >&2
if [ -n "${BENCH_DP_DIR:-}" ]; then tmp=$BENCH_DP_DIR; mkdir -p "$tmp"
else tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT; fi
args=(--preset demo --data data/fortunes_train.bin --batch 8 --seq 128 --micro-batches 1 --replicas "$D"
      --steps "$steps" --val-every 0 --seed 3 --error-metrics off --peer-timeout 600)
cpu="$(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs"
echo "CPU: $cpu; load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
complete() { [ -f "$1" ] && [ "$(grep -c '"loss"' "$1")" -ge "$steps" ]; }
n=0
for k in $(seq 1 "$runs"); do
  for c in compute fp32 comp; do
    out="$tmp/$c-$k.jsonl"
    complete "$out" && continue
    case $c in
      compute) extra=() ;;
      fp32) extra=(--dp-link-mbps "$rate") ;;
      comp) extra=(--dp-compress "$spec" --dp-reduce "$reduce" --dp-link-mbps "$rate") ;;
    esac
    "$pz" train "${args[@]}" "${extra[@]}" > "$out" 2> "$tmp/$c-$k.err" || { cat "$tmp/$c-$k.err" >&2; exit 1; }
    n=$((n + 1))
  done
done
echo "$n runs; load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# the gradient's length (S = 1: every parameter) and the size of one codec
# message: of a replica's chunk (n / D floats; twophase sends 2(D-1) of them)
# or of the whole gradient (allgather sends it to the D-1 others)
params=$(sed -n 's/.*pipezip train: \([0-9]*\) parameters.*/\1/p' "$tmp/compute-1.err" | head -n 1)
[ -n "$params" ] || { echo "bench_dp_train: no parameter count in $tmp/compute-1.err" >&2; exit 1; }
len=$(( (params + D - 1) / D ))
[ "$reduce" = allgather ] && len=$params
python3 -c "import array, random, sys; r = random.Random(1); sys.stdout.buffer.write(array.array('f', (r.gauss(0, 1e-3) for _ in range(int(sys.argv[1])))).tobytes())" \
  "$len" > "$tmp/grad.f32"
wire=$("$pz" codec --spec "$spec" --in "$tmp/grad.f32" --raw --shape "$len" --out "$tmp/grad.msg" |
       sed -n 's/.*"wire_bytes": *\([0-9]*\).*/\1/p')
rm -f "$tmp/grad.f32" "$tmp/grad.msg"
[ -n "$wire" ] || { echo "bench_dp_train: no wire_bytes from pipezip codec --spec $spec" >&2; exit 1; }
python3 bench/dp_train_report.py "$tmp" "$rate" "$runs" "$D" "$spec" "$reduce" "$params" "$wire" "$cpu"
