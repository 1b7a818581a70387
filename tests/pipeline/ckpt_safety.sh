#!/usr/bin/env bash
# Checkpoints belong to their job (runtime/ckpt/job.h), and survive what a
# careless user or a full disk does to them (issue 24):
#  - a fresh run refuses a --checkpoint-dir holding another job's checkpoint,
#    naming both jobs and the flag, and --max-restarts does not restart it
#    (the issue's reproduction: a crashed run with --max-restarts resumed the
#    other job's step 50);
#  - --resume auto and restarts take only this job's checkpoints;
#  - a second run on a directory another run holds (its lock) is refused;
#  - pruning removes only pipezip's files: a user's file and its directory stay;
#  - a tensor multiplied by 1e6 in the newest checkpoint is named, and resume
#    falls back to the one before it (bit for bit with the uninterrupted run);
#    so does a step directory holding another job's shard;
#  - checkpoints of the previous format are refused by name;
#  - a full disk during a checkpoint (a small tmpfs when mount works, else an
#    injected ENOSPC): the run goes on and saves its model, no step directory
#    of the failed checkpoint is left; when --save fails too, the error names
#    the last good checkpoint.
#   usage: ckpt_safety.sh PATH/TO/pipezip
set -u
pz="$1"
py=python3
dir=$(mktemp -d)
mnt=""
cleanup() { [ -n "$mnt" ] && umount "$mnt" 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

cat "$(dirname "$0")"/../../runtime/*/*.c > "$dir/text.txt"
"$pz" tokenize --out "$dir/train.bin" "$dir/text.txt" >/dev/null || { echo "FAIL: tokenize"; exit 1; }
base=(train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --val-every 0 --threads 1 --stages 2)
B=("${base[@]}" --steps 10 --seed 1 --checkpoint-every 2)

# the job B's uninterrupted model, for the bit-for-bit checks
"$pz" "${base[@]}" --steps 10 --seed 1 --save "$dir/refB.safetensors" > /dev/null 2>"$dir/err" ||
  { cat "$dir/err"; echo "FAIL: the reference run"; exit 1; }

# 1. the issue's reproduction: another job's step 50 in the directory
ckF="$dir/ckF"
"$pz" "${base[@]}" --steps 50 --seed 99 --checkpoint-dir "$ckF" > /dev/null 2>"$dir/err" ||
  { cat "$dir/err"; fail "job F (--steps 50 --seed 99)"; }
cp "$ckF/step-00000050/manifest.json" "$dir/manifestF"
PIPEZIP_FAULT=step:5:1 "$pz" "${B[@]}" --checkpoint-dir "$ckF" --max-restarts 2 --save "$dir/mine.safetensors" \
  > /dev/null 2>"$dir/err"
rc=$?
if [ "$rc" = 1 ] && grep -q "refused at start: no restart" "$dir/err" && ! grep -q "restart 1 of 2" "$dir/err" &&
   grep -q "holds the checkpoint of step 50 of another job (job [0-9a-f]\{16\}; this run is job [0-9a-f]\{16\}): --seed is 1 here, 99 there" "$dir/err" &&
   ! grep -q "resumed from" "$dir/err" && [ ! -e "$dir/mine.safetensors" ] &&
   [ "$(ls -d "$ckF"/step-* | wc -l)" = 1 ] && cmp -s "$dir/manifestF" "$ckF/step-00000050/manifest.json"; then
  echo "ok: a fresh run into another job's directory is refused: $(grep -m1 -o 'holds the checkpoint.*there\.' "$dir/err" | head -c 160)..."
else
  cat "$dir/err"; ls -R "$ckF"; fail "foreign checkpoint directory: exit $rc"
fi

# --resume DIR continues another job only for another layout, --steps or
# learning rate, and says so; another seed is refused, naming it
# with --replicas every rank of stages x replicas gets rank 0's reason (the
# second replica's ranks said only "its message says why"); launched by hand,
# as under mpirun, where no launcher stops the others when rank 0 exits
port=$($py "$(dirname "$0")/free_port.py")
for r in 0 1 2 3; do
  PIPEZIP_JOB_SECRET=ckpt-safety-secret-0123456789 RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 60 "$pz" "${base[@]}" --steps 10 --seed 1 --replicas 2 --micro-batches 2 --peer-timeout 20 \
    --checkpoint-dir "$ckF" > /dev/null 2>"$dir/err$r" &
done
wait
named=0
for r in 1 2 3; do
  grep -q "rank $r: rank 0 refused the job: --checkpoint-dir .* holds the checkpoint of step 50" "$dir/err$r" &&
    named=$((named + 1))
done
[ "$named" = 3 ] && echo "ok: with --replicas 2 each other rank names rank 0's refusal" ||
  { cat "$dir"/err[0-3]; fail "refusal with replicas: $named of 3 ranks name it"; }

out=$("$pz" "${base[@]}" --steps 10 --seed 1 --resume "$ckF" 2>&1 >/dev/null)
[ $? != 0 ] && grep -q "is of another job .*: --seed is 1 here, 99 there.* --resume continues a job with another layout" <<<"$out" &&
  echo "ok: --resume of another seed's checkpoint is refused" || { echo "$out"; fail "--resume DIR, another seed"; }
"$pz" "${base[@]}" --steps 52 --seed 99 --lr 2e-4 --resume "$ckF" > /dev/null 2>"$dir/err" &&
  grep -q "continuing job [0-9a-f]* (step 50) as job [0-9a-f]*: --steps is 52 here, 50 there" "$dir/err" &&
  grep -q -- "--lr is 0.0002 here, 0.0003 there" "$dir/err" && grep -q "resumed from .* step 50" "$dir/err" &&
  echo "ok: --resume with more --steps and another --lr continues the job and says so" ||
  { cat "$dir/err"; fail "--resume DIR with --steps and --lr"; }

# 2. --resume auto and restarts take this job's checkpoints only: B dies
# after step 5 (step 4 is its newest); then another job's step 50 is put
# beside it (copied in while the launcher waits to restart)
ckB="$dir/ckB"
PIPEZIP_FAULT=step:5:1 "$pz" "${B[@]}" --checkpoint-dir "$ckB" > /dev/null 2>"$dir/err"
[ -f "$ckB/step-00000004/manifest.json" ] || { cat "$dir/err"; fail "B: no step-4 checkpoint"; }
cp -r "$ckB" "$dir/ckB2"
cp -r "$ckF/step-00000050" "$dir/ckB2/"
if "$pz" "${B[@]}" --checkpoint-dir "$dir/ckB2" --resume auto --save "$dir/b2.safetensors" > /dev/null 2>"$dir/err" &&
   grep -q "resumed from .* step 4" "$dir/err" && cmp -s "$dir/refB.safetensors" "$dir/b2.safetensors" &&
   [ -f "$dir/ckB2/step-00000050/manifest.json" ]; then
  echo "ok: --resume auto beside another job's step 50: resumed from this job's step 4, bit for bit; step 50 left alone"
else
  cat "$dir/err"; fail "--resume auto took another job's checkpoint"
fi
rm -rf "$ckB"
(PIPEZIP_FAULT=step:5:1 "$pz" "${B[@]}" --checkpoint-dir "$ckB" --max-restarts 2 --save "$dir/b3.safetensors" \
  > /dev/null 2>"$dir/err") &
pid=$!
for _ in $(seq 1 600); do grep -q "restart 1 of 2" "$dir/err" 2>/dev/null && break; sleep 0.05; done
cp -r "$ckF/step-00000050" "$ckB/"
wait "$pid"
rc=$?
if [ "$rc" = 0 ] && grep -q "restart 1 of 2" "$dir/err" && grep -q "resumed from .* step 4" "$dir/err" &&
   ! grep -q "step 50" <(grep "resumed from" "$dir/err") && cmp -s "$dir/refB.safetensors" "$dir/b3.safetensors"; then
  echo "ok: --max-restarts with another job's step 50 copied in before the restart: resumed from step 4, bit for bit"
else
  cat "$dir/err"; fail "restart with a foreign step: exit $rc"
fi

# 3. the lock: a second run on a directory a running job holds
ckL="$dir/ckL"
"$pz" "${base[@]}" --steps 40 --seed 1 --link-mbps 2 --checkpoint-dir "$ckL" > "$dir/l1.jsonl" 2>"$dir/errl1" &
pid=$!
for _ in $(seq 1 600); do grep -q '"step":1,' "$dir/l1.jsonl" 2>/dev/null && break; sleep 0.05; done
"$pz" "${base[@]}" --steps 4 --seed 2 --checkpoint-dir "$ckL" > /dev/null 2>"$dir/err"
rc=$?
holder=$(grep -o 'pid [0-9]* on host' "$dir/err" | head -n 1)
kill -TERM "$pid" 2>/dev/null
wait "$pid"
if [ "$rc" != 0 ] && grep -q "is in use: another run (pid [0-9]* on host .*) holds its lock .*pipezip.lock" "$dir/err"; then
  echo "ok: a second run on a locked directory is refused ($holder ...)"
else
  cat "$dir/err"; fail "a second job on a locked directory: exit $rc"
fi
# the same job twice is refused as well, and says so
"$pz" "${base[@]}" --steps 40 --seed 1 --link-mbps 2 --checkpoint-dir "$ckL" --resume auto > "$dir/l1.jsonl" 2>"$dir/errl1" &
pid=$!
for _ in $(seq 1 600); do grep -q '"step":' "$dir/l1.jsonl" 2>/dev/null && break; sleep 0.05; done
"$pz" "${base[@]}" --steps 40 --seed 1 --checkpoint-dir "$ckL" --resume auto > /dev/null 2>"$dir/err"
rc=$?
kill -TERM "$pid" 2>/dev/null
wait "$pid"
[ "$rc" != 0 ] && grep -q "this same job" "$dir/err" && echo "ok: the same job started twice on one directory is refused" ||
  { cat "$dir/err"; fail "the same job twice: exit $rc"; }

# 4. pruning: a user's file in a step directory survives, and keeps it
ckP="$dir/ckP"
P=("${base[@]}" --steps 6 --seed 3 --checkpoint-every 2)
PIPEZIP_FAULT=step:2:0 "$pz" "${P[@]}" --checkpoint-dir "$ckP" > /dev/null 2>"$dir/err"
echo "my notes" > "$ckP/step-00000002/notes.txt"
"$pz" "${P[@]}" --checkpoint-dir "$ckP" --resume auto > /dev/null 2>"$dir/err" || { cat "$dir/err"; fail "pruning run"; }
if [ "$(cat "$ckP/step-00000002/notes.txt" 2>/dev/null)" = "my notes" ] &&
   [ "$(ls "$ckP/step-00000002")" = "notes.txt" ] && grep -q "did not write (notes.txt)" "$dir/err" &&
   [ -f "$ckP/step-00000006/manifest.json" ]; then
  echo "ok: pruning step 2 removed its checkpoint files, left notes.txt and the directory"
else
  ls -R "$ckP"; cat "$dir/err"; fail "pruning and a user's file"
fi

# 5. a damaged tensor: 16 weights of the newest checkpoint's rank-0 shard
# multiplied by 1e6; resume names it and falls back to step 2
ckD="$dir/ckD"
PIPEZIP_FAULT=step:4:1 "$pz" "${B[@]}" --checkpoint-dir "$ckD" > /dev/null 2>"$dir/err"
"$py" - "$ckD/step-00000004/rank-0.safetensors" <<'PY' || fail "could not damage the shard"
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
t = h["params/h.0.attn.c_attn.weight"]
at = 8 + n + t["data_offsets"][0]
for i in range(16):
    (v,) = struct.unpack_from("<f", b, at + 4 * i)
    struct.pack_into("<f", b, at + 4 * i, v * 1e6)
open(p, "wb").write(b)
PY
if "$pz" "${B[@]}" --checkpoint-dir "$ckD" --resume auto --save "$dir/d.safetensors" > /dev/null 2>"$dir/err" &&
   grep -q 'tensor "params/h.0.attn.c_attn.weight" is damaged: its CRC-32C is' "$dir/err" &&
   grep -q "falling back" "$dir/err" && grep -q "resumed from .* step 2" "$dir/err" &&
   cmp -s "$dir/refB.safetensors" "$dir/d.safetensors"; then
  echo "ok: a tensor x 1e6 in step 4: $(grep -m1 -o 'tensor "[^"]*" is damaged' "$dir/err"); resumed from step 2, bit for bit"
else
  cat "$dir/err"; fail "a damaged tensor"
fi

# a step directory holding two jobs' shards (the issue's race of two jobs
# in one directory): rank 1's shard of step 4 from another seed's run
ckM="$dir/ckM"
PIPEZIP_FAULT=step:4:1 "$pz" "${B[@]}" --checkpoint-dir "$ckM" > /dev/null 2>"$dir/err"
PIPEZIP_FAULT=step:4:1 "$pz" "${base[@]}" --steps 10 --seed 2 --checkpoint-every 2 --checkpoint-dir "$dir/ckC" \
  > /dev/null 2>"$dir/err"
cp "$dir/ckC/step-00000004/rank-1.safetensors" "$ckM/step-00000004/"
if "$pz" "${B[@]}" --checkpoint-dir "$ckM" --resume auto --save "$dir/m.safetensors" > /dev/null 2>"$dir/err" &&
   grep -q "rank-1.safetensors is of job [0-9a-f]*, its manifest of job [0-9a-f]*: not one job's checkpoint" "$dir/err" &&
   grep -q "resumed from .* step 2" "$dir/err" && cmp -s "$dir/refB.safetensors" "$dir/m.safetensors"; then
  echo "ok: a step directory with another job's shard is refused; resumed from step 2, bit for bit"
else
  cat "$dir/err"; fail "a step directory of two jobs' shards"
fi

# checkpoints of the previous format (pipezip-checkpoint-1: no job, no
# checksums) are refused by name, as --resume DIR and in --checkpoint-dir
ckO="$dir/ckO"
cp -r "$ckD" "$ckO"
for m in "$ckO"/step-*/manifest.json; do
  s=$(basename "$(dirname "$m")"); s=$((10#${s#step-}))
  printf '{"format": "pipezip-checkpoint-1", "step": %d, "stages": 2}\n' "$s" > "$m"
done
out=$("$pz" "${base[@]}" --steps 10 --seed 1 --resume "$ckO" 2>&1 >/dev/null)
[ $? != 0 ] && grep -q "format 'pipezip-checkpoint-1', written by an older pipezip" <<<"$out" &&
  echo "ok: --resume of an older format's checkpoint is refused by name" || { echo "$out"; fail "--resume of format 1"; }
out=$("$pz" "${B[@]}" --checkpoint-dir "$ckO" 2>&1 >/dev/null)
[ $? != 0 ] && grep -q "in an older format (pipezip-checkpoint-1, without a job id)" <<<"$out" &&
  echo "ok: a fresh run into a directory of an older format's checkpoints is refused" ||
  { echo "$out"; fail "--checkpoint-dir of format 1"; }

# 6. a full disk during a checkpoint. A tmpfs of 8 MiB holds two
# checkpoints of 3.3 MB: steps 2 and 4 fit, 6 and 8 do not.
full() {   # $1: what; $2: the checkpoint dir; $3: the injected fault (or ""); $4: the last good step
  local what="$1" ck="$2" fault="$3" good="$4"
  PIPEZIP_FAULT="$fault" "$pz" "${base[@]}" --steps 10 --seed 1 --checkpoint-every 2 --checkpoint-dir "$ck" \
    --save "$dir/full.safetensors" > /dev/null 2>"$dir/err"
  local rc=$? empty
  empty=$(find "$ck" -mindepth 1 -type d -empty | wc -l)
  if [ "$rc" = 0 ] && cmp -s "$dir/refB.safetensors" "$dir/full.safetensors" && [ "$empty" = 0 ] &&
     grep -q "no checkpoint of step [0-9]* .*the last good checkpoint is .*step-0000000$good" "$dir/err"; then
    echo "ok: $what: the model is saved (equal to the uninterrupted run's), no empty step directory; $(ls "$ck" | tr '\n' ' ')"
  else
    cat "$dir/err"; ls -R "$ck"; fail "$what: exit $rc, $empty empty directories"
  fi
}
mkdir -p "$dir/tmpfs"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=8m tmpfs "$dir/tmpfs" 2>/dev/null; then
  mnt="$dir/tmpfs"
  full "a full tmpfs (8 MiB)" "$mnt/ck" "" 4
  # --save onto the full disk too (4 MiB left: step 2 fits, nothing after
  # it): the error says where the last good checkpoint is
  rm -rf "$mnt/ck"
  head -c 4194304 /dev/zero > "$mnt/filler"
  "$pz" "${base[@]}" --steps 10 --seed 1 --checkpoint-every 2 --checkpoint-dir "$mnt/ck2" \
    --save "$mnt/m.safetensors" > /dev/null 2>"$dir/err"
  rc=$?
  if [ "$rc" != 0 ] && grep -q "error: .*the last good checkpoint is $mnt/ck2/step-00000002" "$dir/err"; then
    echo "ok: --save on the full disk fails: $(grep -m1 -o 'the last good checkpoint is .*' "$dir/err")"
  else
    cat "$dir/err"; fail "--save on a full disk: exit $rc"
  fi
  umount "$mnt" && mnt=""
else
  echo "note: cannot mount a tmpfs here: the full disk is an injected ENOSPC only"
fi
full "an injected ENOSPC on rank 1 at step 6" "$dir/ckN" "nospace:6:1" 4
# the last step's checkpoint lost and no --save: the model is kept nowhere,
# which exit 0 would hide (it did): an error naming the last good checkpoint
PIPEZIP_FAULT=nospace:4:1 "$pz" "${base[@]}" --steps 4 --seed 1 --checkpoint-every 2 --checkpoint-dir "$dir/cklast" \
  > /dev/null 2>"$dir/err"
rc=$?
if [ "$rc" != 0 ] && grep -q "error: the checkpoint of the last step, 4, .*no --save.*the last good checkpoint is $dir/cklast/step-00000002" "$dir/err"; then
  echo "ok: the last checkpoint lost without --save: exit $rc, $(grep -m1 -o 'the trained model is kept nowhere' "$dir/err")"
else
  cat "$dir/err"; fail "the last checkpoint lost without --save: exit $rc"
fi

if [ "$fails" = 0 ]; then echo "ckpt-safety: all passed"; else echo "ckpt-safety: $fails failed"; fi
[ "$fails" = 0 ]
