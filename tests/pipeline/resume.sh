#!/usr/bin/env bash
# Checkpoints and --resume (runtime/ckpt/resume.h): a run killed after step 5 and
# resumed from its step-4 checkpoint repeats the uninterrupted run bit for
# bit (per-step losses and the saved model); a rank killed while writing a
# checkpoint leaves the previous one the newest, and the run resumes from it;
# SIGTERM to the launcher checkpoints at the next step boundary and exits
# 143; --max-restarts restarts every rank from the newest checkpoint; bad
# resumes fail with a clear message.
#   usage: resume.sh PATH/TO/pipezip
set -u
pz="$1"
py=python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
source "$(dirname "$0")/../lib.sh"   # fail, pz_sigterm

cat "$(dirname "$0")"/../../runtime/*/*.c > "$dir/text.txt"
"$pz" tokenize --out "$dir/train.bin" "$dir/text.txt" >/dev/null || { echo "FAIL: tokenize"; exit 1; }
job=(train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 4 --steps 8 --lr 1e-3
     --val-every 0 --threads 1 --seed 11 --compress 'fwd=q4,bwd=q8')

losses() { "$py" -c "
import json, sys
for l in open(sys.argv[1]):
    if '\"loss\"' in l:
        r = json.loads(l); print(r['step'], repr(r['loss']))" "$1"; }

for S in 1 2; do
  pol=(); [ "$S" = 1 ] && pol=() || pol=(--stages "$S")
  j=("${job[@]}")
  [ "$S" = 1 ] && j=(train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 4 --steps 8
                     --lr 1e-3 --val-every 0 --threads 1 --seed 11)
  ck="$dir/ck$S"
  "$pz" "${j[@]}" "${pol[@]}" --save "$dir/ref$S.safetensors" > "$dir/ref$S.jsonl" 2>"$dir/err" \
    || { cat "$dir/err"; fail "S=$S: uninterrupted run"; continue; }
  # killed after step 5 (the last stage's rank), checkpoints every 2 steps
  last=$((S - 1))
  PIPEZIP_FAULT=step:5:$last "$pz" "${j[@]}" "${pol[@]}" --checkpoint-dir "$ck" --checkpoint-every 2 \
    > "$dir/a.jsonl" 2>"$dir/err"
  rc=$?
  [ "$rc" != 0 ] || fail "S=$S: the run killed after step 5 exited 0"
  [ -f "$ck/step-00000004/manifest.json" ] || { ls -R "$ck"; fail "S=$S: no complete checkpoint of step 4"; }
  "$pz" "${j[@]}" "${pol[@]}" --checkpoint-dir "$ck" --checkpoint-every 2 --resume auto \
    --save "$dir/res$S.safetensors" > "$dir/b.jsonl" 2>"$dir/err" || { cat "$dir/err"; fail "S=$S: resume"; continue; }
  grep -q "resumed from .* step 4" "$dir/err" || fail "S=$S: resume did not say it continued from step 4"
  if diff <(losses "$dir/ref$S.jsonl" | awk '$1 > 4') <(losses "$dir/b.jsonl") >/dev/null &&
     [ "$(losses "$dir/b.jsonl" | wc -l)" = 4 ] && cmp -s "$dir/ref$S.safetensors" "$dir/res$S.safetensors"; then
    echo "ok: S=$S: killed after step 5, resumed from step 4: steps 5-8 and the saved model equal the uninterrupted run bit for bit"
  else
    diff <(losses "$dir/ref$S.jsonl") <(losses "$dir/b.jsonl"); fail "S=$S: resumed run differs"
  fi
  n=$(ls -d "$ck"/step-* | wc -l)
  [ "$n" = 2 ] || { ls "$ck"; fail "S=$S: $n checkpoints kept, --keep-checkpoints defaults to 2"; }
done

# a rank killed while writing the step-6 checkpoint: step 4 stays the newest
ck="$dir/ckw"
PIPEZIP_FAULT=checkpoint:6:1 "$pz" "${job[@]}" --stages 2 --checkpoint-dir "$ck" --checkpoint-every 2 \
  > /dev/null 2>"$dir/err"
[ $? != 0 ] || fail "killed during a checkpoint: exit 0"
if [ -d "$ck/step-00000006" ] && [ ! -f "$ck/step-00000006/manifest.json" ] && [ -f "$ck/step-00000004/manifest.json" ]; then
  echo "ok: a rank killed while writing step 6's checkpoint leaves it without a manifest and step 4 complete"
else
  ls -R "$ck"; fail "killed during a checkpoint: unexpected directory state"
fi
"$pz" "${job[@]}" --stages 2 --checkpoint-dir "$ck" --checkpoint-every 2 --resume auto \
  --save "$dir/resw.safetensors" > "$dir/c.jsonl" 2>"$dir/err" || { cat "$dir/err"; fail "resume after the torn checkpoint"; }
if grep -q "resumed from .* step 4" "$dir/err" && cmp -s "$dir/ref2.safetensors" "$dir/resw.safetensors"; then
  echo "ok: resumed from step 4 past the torn checkpoint; the model equals the uninterrupted run's"
else
  fail "resume past the torn checkpoint"
fi

# preemption: SIGTERM to the launcher stops every rank at the next step
# boundary with a checkpoint and exits 143; the resumed run ends like the
# uninterrupted one (the 2 Mbit/s link only slows the steps down)
ck="$dir/ckt"
if pz_sigterm "SIGTERM" "$ck" "$dir/t.jsonl" "$dir/err" 300 "$pz" "${job[@]}" --stages 2 --link-mbps 2 \
     --checkpoint-dir "$ck"; then
  "$pz" "${job[@]}" --stages 2 --checkpoint-dir "$ck" --resume auto --save "$dir/rest.safetensors" \
    > /dev/null 2>"$dir/err" && cmp -s "$dir/ref2.safetensors" "$dir/rest.safetensors" &&
    echo "ok: resumed after SIGTERM: the model equals the uninterrupted run's" ||
    { cat "$dir/err"; fail "resume after SIGTERM"; }
fi

# codec state: aq(q4) activations with ef(q8) gradients on 2 stages, and
# with ef21(q4) on 3 stages and aq's buffers spilled to a file (mem=4K), over
# 16 samples (two steps per epoch, so steps 3.. send aq deltas against the
# buffers); killed after step 5, resumed from 4: bit for bit again
head -c $((16 * 32 + 1)) "$dir/text.txt" > "$dir/small.txt"
"$pz" tokenize --out "$dir/small.bin" "$dir/small.txt" >/dev/null || fail "tokenize small"
for cfg in "2 fwd=aq(q4),bwd=ef(q8)" "3 fwd=aq(q4,mem=4K),bwd=ef21(q4)"; do
  read -r S pol <<<"$cfg"
  aqjob=(train --preset tiny --data "$dir/small.bin" --batch 2 --seq 32 --micro-batches 4 --steps 8 --lr 1e-3
         --val-every 0 --threads 1 --seed 11 --stages "$S" --compress "$pol")
  "$pz" "${aqjob[@]}" --save "$dir/refaq.safetensors" > "$dir/refaq.jsonl" 2>"$dir/err" || { cat "$dir/err"; fail "aq run"; }
  ck="$dir/ckaq$S"
  PIPEZIP_FAULT=step:5:$((S - 1)) "$pz" "${aqjob[@]}" --checkpoint-dir "$ck" --checkpoint-every 2 > /dev/null 2>"$dir/err"
  "$pz" "${aqjob[@]}" --checkpoint-dir "$ck" --resume auto --save "$dir/resaq.safetensors" > "$dir/aq.jsonl" 2>"$dir/err" ||
    { cat "$dir/err"; fail "$pol resume"; }
  codecs=$(ls "$ck"/step-00000008/rank-*.codecs 2>/dev/null | wc -l)
  if diff <(losses "$dir/refaq.jsonl" | awk '$1 > 4') <(losses "$dir/aq.jsonl") >/dev/null &&
     cmp -s "$dir/refaq.safetensors" "$dir/resaq.safetensors" && [ "$codecs" = "$S" ]; then
    echo "ok: $pol, $S stages: resumed from step 4 with the codec state, bit for bit"
  else
    diff <(losses "$dir/refaq.jsonl") <(losses "$dir/aq.jsonl"); fail "$pol resume differs ($codecs codec files)"
  fi
done
# the codec state is checked: a damaged byte is refused
ck="$dir/ckaq3"
cp -r "$ck" "$dir/ckaqbad"
f="$dir/ckaqbad/step-00000008/rank-1.codecs"
printf '\xff' | dd of="$f" bs=1 seek=40 conv=notrunc 2>/dev/null
expect_fail_early() { local out; out=$("$@" 2>&1 >/dev/null); [ $? != 0 ] && grep -q "CRC mismatch\|codec state" <<<"$out"; }
if expect_fail_early "$pz" "${aqjob[@]}" --steps 9 --resume "$dir/ckaqbad"; then
  echo "ok: a damaged codec-state file is refused"
else fail "a damaged codec-state file was accepted"; fi
# another layout: the codec state is dropped with a warning
"$pz" "${aqjob[@]}" --stages 2 --steps 9 --resume "$ck" > /dev/null 2>"$dir/err" &&
  grep -q "starts with empty state (aq: its first epoch again)" "$dir/err" &&
  echo "ok: resumed on 2 stages: the edges' codec state dropped with a warning" ||
  { cat "$dir/err"; fail "aq re-partition"; }

# another layout: the 2-stage checkpoint of step 4 resumed as 3 stages, as
# 2 stages with another split, and as one process; the parameters and AdamW
# moments are re-partitioned by block. Uncompressed (a codec on other edges
# would change the numbers), against the uninterrupted single process: not
# bit for bit (the gradient norm sums the ranks in another order), so steps
# 5-8 within 1e-5 relative.
plain=(train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 4 --steps 8 --lr 1e-3
       --val-every 0 --threads 1 --seed 11)
ckp="$dir/ckp"
# (the same 8-step run, stopped after step 4: the learning-rate schedule spans --steps)
PIPEZIP_FAULT=step:4:0 "$pz" "${plain[@]}" --stages 2 --checkpoint-dir "$ckp" --checkpoint-every 4 > /dev/null 2>"$dir/err"
[ -f "$ckp/step-00000004/manifest.json" ] || { cat "$dir/err"; fail "no step-4 checkpoint to re-partition"; }
for lay in "--stages 3" "--stages 2 --split 0,2" "--stages 1"; do
  read -r -a la <<<"$lay"
  cp -r "$ckp" "$dir/ckl"
  if "$pz" "${plain[@]}" "${la[@]}" --resume "$dir/ckl" > "$dir/l.jsonl" 2>"$dir/err" &&
     grep -q "re-partitioned by block" "$dir/err" &&
     "$py" - "$dir/ref1.jsonl" "$dir/l.jsonl" <<'PY'
import json, sys
def load(p): return {json.loads(l)["step"]: json.loads(l)["loss"] for l in open(p) if '"loss"' in l}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert sorted(b) == [5, 6, 7, 8], sorted(b)
worst = max(abs(a[s] - b[s]) / abs(a[s]) for s in b)
assert worst <= 1e-5, worst
print(f"   steps 5-8 within {worst:.1e} relative of the uninterrupted single process")
PY
  then echo "ok: the 2-stage checkpoint resumed as '$lay'"
  else cat "$dir/err"; fail "resume as '$lay'"; fi
  rm -rf "$dir/ckl"
done

# --max-restarts: rank 1 dies after step 5; the launcher restarts every
# rank from the step-4 checkpoint and the run ends like the uninterrupted one
ck="$dir/ckr"
PIPEZIP_FAULT=step:5:1 "$pz" "${job[@]}" --stages 2 --checkpoint-dir "$ck" --checkpoint-every 2 --max-restarts 2 \
  --save "$dir/resr.safetensors" > "$dir/r.jsonl" 2>"$dir/err"
rc=$?
if [ "$rc" = 0 ] && grep -q "restart 1 of 2" "$dir/err" && grep -q "resumed from .* step 4" "$dir/err" &&
   cmp -s "$dir/ref2.safetensors" "$dir/resr.safetensors"; then
  echo "ok: --max-restarts 2: rank 1 died after step 5, $(grep -m1 -o 'restart 1 of 2[^:]*' "$dir/err"), resumed at step 4; the model equals the uninterrupted run's"
else
  cat "$dir/err"; fail "--max-restarts: exit $rc"
fi

# errors
expect_fail() {
  local what="$1" pattern="$2"; shift 2
  local out; out=$("$@" 2>&1 >/dev/null)
  if [ $? = 0 ]; then fail "$what: exit 0"
  elif ! grep -qE -- "$pattern" <<<"$out"; then fail "$what: message does not match /$pattern/: $out"
  else echo "ok: $what -> $(grep -m1 -E -- "$pattern" <<<"$out")"; fi
}
mkdir -p "$dir/empty"
expect_fail "resume from a directory without checkpoints" "no complete checkpoint" \
  "$pz" "${job[@]}" --stages 2 --resume "$dir/empty"
expect_fail "resume into another model" "is of another job .*: model is L=6 .* here, L=2 .* there" \
  "$pz" "${job[@]}" --stages 2 --preset demo --resume "$dir/ck2"
expect_fail "--checkpoint-every without a directory" "needs --checkpoint-dir" "$pz" "${job[@]}" --checkpoint-every 2
expect_fail "--max-restarts without a directory" "--max-restarts needs --checkpoint-dir" \
  "$pz" "${job[@]}" --stages 2 --max-restarts 1
expect_fail "--resume auto without a directory" "--resume auto looks in --checkpoint-dir" "$pz" "${job[@]}" --resume auto
# a shard that is not ours: garbage instead of rank 1's; the newest
# checkpoint does not load, the one before it (step 6) does
cp -r "$dir/ck2" "$dir/ckbad"
printf 'garbage' > "$dir/ckbad/step-00000008/rank-1.safetensors"
if "$pz" "${job[@]}" --stages 2 --resume "$dir/ckbad" > /dev/null 2>"$dir/err" &&
   grep -q "step 8 does not load: .*rank-1.safetensors" "$dir/err" && grep -q "falling back" "$dir/err" &&
   grep -q "resumed from .* step 6" "$dir/err"; then
  echo "ok: a corrupt shard of step 8: named, and the run resumed from step 6"
else cat "$dir/err"; fail "a corrupt shard"; fi
rm -rf "$dir/ckbad/step-00000006"
expect_fail "a corrupt shard and nothing older" "none of its 1 checkpoint of this job loads; the newest: .*rank-1.safetensors" \
  "$pz" "${job[@]}" --stages 2 --resume "$dir/ckbad"
# --resume auto on an empty directory starts fresh
"$pz" "${job[@]}" --stages 2 --steps 2 --checkpoint-dir "$dir/fresh" --resume auto > /dev/null 2>"$dir/err" &&
  grep -q "starting fresh" "$dir/err" && [ -f "$dir/fresh/step-00000002/manifest.json" ] &&
  echo "ok: --resume auto with no checkpoint starts fresh and checkpoints after the last step" ||
  { cat "$dir/err"; fail "--resume auto on an empty directory"; }

if [ "$fails" = 0 ]; then echo "resume: all passed"; else echo "resume: $fails failed"; fi
[ "$fails" = 0 ]
