#!/usr/bin/env bash
# soak.sh [N] [--steps S] [--seed X] [--pipezip PATH]: N runs of a 4-stage
# training job with --max-restarts, each broken once at a random moment by
# SIGKILL or SIGSTOP of a random rank. Reports how many runs finished, hung
# (no exit within the limit), the restarts they took, the steps computed
# again after restarts, and whether every final model equals, byte for byte,
# the model of the same job run without interruption.
#   bash bench/soak.sh 100            (about 15 s a run on 2 vCPUs)
set -uo pipefail
cd "$(dirname "$0")/.."
N=10; STEPS=40; SEED=1; PZ=build/pipezip
while [ $# -gt 0 ]; do
  case "$1" in
    --steps) STEPS="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --pipezip) PZ="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) [[ "$1" =~ ^[0-9]+$ ]] || { echo "soak.sh: unknown argument '$1'" >&2; exit 2; }; N="$1"; shift ;;
  esac
done
[ -x "$PZ" ] || { echo "soak.sh: no $PZ (build first: ninja -C build)" >&2; exit 2; }
RANDOM=$SEED
dir=$(mktemp -d); trap 'pkill -KILL -f "$dir/" 2>/dev/null; rm -rf "$dir"' EXIT
cat runtime/*/*.c > "$dir/text.txt"
"$PZ" tokenize --out "$dir/train.bin" "$dir/text.txt" >/dev/null || exit 1
job=(train --stages 4 --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 4 --steps "$STEPS"
     --threads 1 --seed 7 --peer-timeout 3 --checkpoint-every 5 --val-every 0)
t0=$(date +%s.%N)
"$PZ" "${job[@]}" --checkpoint-dir "$dir/ref.ck" --save "$dir/ref.safetensors" >"$dir/ref.out" 2>"$dir/ref.err" \
  || { echo "soak.sh: the uninterrupted run failed:"; tail -5 "$dir/ref.err"; exit 1; }
ref_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')
# the training part of it: the steps' own times (start-up, saving and exit excluded)
train_s=$(sed -n 's/.*"ms":\([0-9.]*\).*/\1/p' "$dir/ref.out" | awk '{t += $1} END {printf "%.2f", t / 1000}')
echo "uninterrupted run: $ref_s s, of which $train_s s in its $STEPS steps; $N broken runs follow"
finished=0; hangs=0; restarts=0; recomputed=0; equal=0; broken=0; limit=$(awk -v s="$ref_s" 'BEGIN{printf "%d", 60 + 4*s}')
for i in $(seq 1 "$N"); do
  ck="$dir/run$i.ck"; out="$dir/run$i.out"; err="$dir/run$i.err"
  "$PZ" "${job[@]}" --checkpoint-dir "$ck" --resume auto --max-restarts 5 --save "$dir/run$i.safetensors" \
    >"$out" 2>"$err" &
  launcher=$!
  # a random moment of training: from the first step's end to 90% of the steps' time
  at=$(awk -v s="$train_s" -v r=$RANDOM 'BEGIN{printf "%.2f", 0.9 * s * r / 32768}')
  rank=$((RANDOM % 4)); sig=$([ $((RANDOM % 2)) = 0 ] && echo KILL || echo STOP)
  for _ in $(seq 1 600); do grep -q '"step"' "$out" 2>/dev/null && break; sleep 0.05; done
  sleep "$at"
  pid=$(pgrep -P "$launcher" | sort -n | sed -n "$((rank + 1))p")
  [ -n "$pid" ] && kill -s "$sig" "$pid" 2>/dev/null
  waited=0; hung=0
  while kill -0 "$launcher" 2>/dev/null; do
    sleep 0.5; waited=$((waited + 1))
    if [ "$waited" -gt $((2 * limit)) ]; then hung=1; pkill -KILL -P "$launcher"; kill -9 "$launcher"; break; fi
  done
  wait "$launcher" 2>/dev/null; rc=$?
  r=$(grep -c "^pipezip: restart [0-9]* of" "$err"); restarts=$((restarts + r))
  [ "$r" -gt 0 ] && broken=$((broken + 1))
  lines=$(grep -c '"step"' "$out"); again=$((lines > STEPS ? lines - STEPS : 0)); recomputed=$((recomputed + again))
  same=no
  if [ "$hung" = 1 ]; then hangs=$((hangs + 1)); state="HANG"
  elif [ "$rc" = 0 ]; then
    finished=$((finished + 1)); state="finished"
    cmp -s "$dir/ref.safetensors" "$dir/run$i.safetensors" && { same=yes; equal=$((equal + 1)); }
  else state="FAILED (exit $rc)"; fi
  printf 'run %3d: %-4s rank %d %5.2f s into training: %s, %d restart(s), %d step(s) again, model equal: %s\n' \
    "$i" "$sig" "$rank" "$at" "$state" "$r" "$again" "$same"
  [ "$state" = finished ] || tail -3 "$err" | sed 's/^/    /'
  rm -rf "$ck" "$dir/run$i.safetensors"
done
echo "soak: $finished of $N finished, $hangs hang(s), $broken run(s) broken and restarted ($restarts restart(s) in all; the others were hit as they ended), $recomputed step(s) computed again, $equal of $finished final models equal to the uninterrupted one"
[ "$finished" = "$N" ] && [ "$equal" = "$N" ]
