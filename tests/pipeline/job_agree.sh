#!/usr/bin/env bash
# Ranks agree on the job (runtime/plan/fingerprint.c): a rank started with another
# --lr, or with another data file of the same size, used to train silently
# with wrong losses and exit 0. Now both ranks stop before the first step,
# exit 1, and name the flag or file that differs; the same command on both
# ranks still trains. The same for two replicas of one stage, named with
# their stage and replica.
#   job_agree.sh PIPEZIP
set -uo pipefail
PZ="$1"
tmp=$(mktemp -d); trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT
"$PZ" tokenize --out "$tmp/a.bin" "$0" "$0" "$0" "$0" >/dev/null || { echo "FAIL: tokenize"; exit 1; }
# the same size, one token changed in the middle
cp "$tmp/a.bin" "$tmp/b.bin"
python3 - "$tmp/b.bin" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); i = 1024 + (len(b) - 1024) // 4 * 2
b[i] = (b[i] + 1) % 128; open(p, 'wb').write(bytes(b))
PY
export PIPEZIP_JOB_SECRET=job-agree-test-secret-0123456789
common=(train --stages 2 --preset tiny --batch 2 --seq 16 --steps 2 --peer-timeout 20)
# run_pair "RANK0 ARGS" "RANK1 ARGS": rc of each in $rc0 $rc1, stderr in $tmp/err0 $tmp/err1
run_pair() {
  local port; port=$(python3 "$(dirname "$0")/free_port.py")
  RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$PZ" "${common[@]}" $1 >/dev/null 2>"$tmp/err0" &
  local p0=$!
  RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 60 "$PZ" "${common[@]}" $2 >/dev/null 2>"$tmp/err1"
  rc1=$?; wait $p0; rc0=$?
}
run_pair "--data $tmp/a.bin" "--data $tmp/a.bin"
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { echo "FAIL: the same job on both ranks: exit $rc0 $rc1"; cat "$tmp/err0" "$tmp/err1"; exit 1; }
echo "ok: the same flags and files train"

run_pair "--data $tmp/a.bin --lr 1e-3" "--data $tmp/a.bin --lr 1e-2"
grep -h "does not agree" "$tmp/err0" "$tmp/err1"
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || { echo "FAIL: another --lr: exit $rc0 $rc1"; exit 1; }
for e in err0 err1; do
  grep -q "rank 1 does not agree with rank 0: --lr is 0.01 on rank 1, 0.001 on rank 0" "$tmp/$e" \
    || { echo "FAIL: $e does not name --lr"; cat "$tmp/$e"; exit 1; }
done
grep -q '"step"' "$tmp/err0" && { echo "FAIL: a step ran"; exit 1; }

run_pair "--data $tmp/a.bin" "--data $tmp/b.bin"
grep -h "does not agree" "$tmp/err0" "$tmp/err1"
[ "$rc0" = 1 ] && [ "$rc1" = 1 ] || { echo "FAIL: another data file of the same size: exit $rc0 $rc1"; exit 1; }
grep -q "rank 1 does not agree with rank 0: --data shard 0 is $(stat -c %s "$tmp/a.bin") bytes, sampled hash" "$tmp/err1" \
  || { echo "FAIL: the data file is not named"; cat "$tmp/err1"; exit 1; }
echo "ok: another data file of the same size"

# replicas (S=1 x D=2, started by hand as mpirun would): the same refusals,
# before step 1, naming both ranks with their stage and replica
dp="--stages 1 --replicas 2"
for what in lr data; do
  if [ $what = lr ]; then
    run_pair "$dp --data $tmp/a.bin --lr 1e-3" "$dp --data $tmp/a.bin --lr 1e-2"
    want="rank 1 (stage 0, replica 1) does not agree with rank 0 (stage 0, replica 0): --lr is 0.01 on rank 1, 0.001 on rank 0"
  else
    run_pair "$dp --data $tmp/a.bin" "$dp --data $tmp/b.bin"
    want="rank 1 (stage 0, replica 1) does not agree with rank 0 (stage 0, replica 0): --data shard 0 is"
  fi
  [ "$rc0" = 1 ] && [ "$rc1" = 1 ] || { echo "FAIL: replicas with another --$what: exit $rc0 $rc1"; cat "$tmp/err0" "$tmp/err1"; exit 1; }
  for e in err0 err1; do
    grep -qF "$want" "$tmp/$e" || { echo "FAIL: replicas, another --$what: $e does not name both"; cat "$tmp/$e"; exit 1; }
  done
  grep -q '"step"' "$tmp/err0" && { echo "FAIL: replicas, another --$what: a step ran"; exit 1; }
  echo "ok: replicas with another --$what: $(grep -m1 -oF "$want" "$tmp/err0")"
done
run_pair "$dp --data $tmp/a.bin" "$dp --data $tmp/a.bin"
[ "$rc0" = 0 ] && [ "$rc1" = 0 ] || { echo "FAIL: the same job on both replicas: exit $rc0 $rc1"; cat "$tmp/err0" "$tmp/err1"; exit 1; }
echo ok
