#!/usr/bin/env bash
# Checked frames (runtime/net/frame.h): a message whose bytes changed on the way
# is refused, never used. PIPEZIP_FAULT_FLIP=WHAT:STEP:RANK[:AT] makes rank
# RANK flip one byte of the first WHAT message it sends at step STEP; the run
# must exit non-zero with a message naming the edge, the direction and the
# step, for raw float32 (no --compress) and a compressed policy, forward and
# backward, in the payload and in the header; and for the tied-embedding
# exchange. A run without the switch passes (no false alarm).
#   usage: pipeline_frames.sh PATH/TO/pipezip
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
pz_corpus || exit 1

common=(train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 2 --steps 4 --threads 1
        --stages 2 --peer-timeout 10)

# flip SPEC WANT WHY [train flags...]: the run fails, and the failed frame
# check in its stderr names WANT and says WHY
flip() {
  local spec=$1 want=$2 why=$3; shift 3
  local rc=0
  PIPEZIP_FAULT_FLIP=$spec timeout 60 "$pz" "${common[@]}" "$@" > "$dir/out" 2> "$dir/err" || rc=$?
  if [ "$rc" = 0 ]; then fail "$spec $*: exited 0"; cat "$dir/err"; return; fi
  if [ "$rc" = 124 ]; then fail "$spec $*: still running after 60 s"; return; fi
  if ! grep -q "PIPEZIP_FAULT_FLIP: flipped byte" "$dir/err"; then fail "$spec $*: nothing was flipped"; cat "$dir/err"; return; fi
  local line; line=$(grep -m1 "fails its frame check" "$dir/err")
  if [ -z "$line" ]; then fail "$spec $*: no failed frame check"; cat "$dir/err"; return; fi
  if ! grep -qF -- "$want" <<<"$line"; then fail "$spec $*: '$line' lacks '$want'"; return; fi
  if ! grep -qF -- "$why" <<<"$line"; then fail "$spec $*: '$line' does not say '$why'"; return; fi
  echo "ok: $spec $*: exit $rc: $line"
}

# raw float32 (no --compress): the frame's CRC is the only check of these bytes
crc="CRC mismatch"
flip activation:2:0 "edge 0-1 forward, step 2 micro 0" "$crc"
flip gradient:1:1 "edge 0-1 backward, step 1 micro 0" "$crc"
flip activation:1:0:header "edge 0-1 forward, step 1 micro 0" "$crc"
flip gradient:2:1:9 "edge 0-1 backward, step 2 micro 0" "$crc"       # the job id
flip gradient:3:1:0 "edge 0-1 backward, step 3 micro 0" "not a frame" # the magic
flip activation:1:0:27 "edge 0-1 forward, step 1 micro 0" "length mismatch"
# a compressed policy (the codec message's own CRC is never reached)
flip activation:1:0 "edge 0-1 forward, step 1 micro 0" "$crc" --compress 'fwd=q8,bwd=q4'
flip gradient:2:1 "edge 0-1 backward, step 2 micro 0" "$crc" --compress 'fwd=q8,bwd=q4'
flip gradient:1:1:header "edge 0-1 backward, step 1 micro 0" "$crc" --compress 'fwd=ef(q4),bwd=topk:0.1'
flip activation:2:0:70 "edge 0-1 forward, step 2 micro 0" "$crc" --compress 'fwd=ef(q4),bwd=topk:0.1'
# the tied-embedding gradient exchange between the first and the last stage
flip tied:1:1 "tied embedding gradient, ranks 0 and 1, step 1" "$crc"

# three stages: the middle edge
common=(train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 2 --steps 4 --threads 1
        --stages 3 --peer-timeout 10)
flip activation:2:1 "edge 1-2 forward, step 2 micro 0" "$crc" --compress 'fwd=q8,bwd=none'
flip gradient:1:1 "edge 0-1 backward, step 1 micro 0" "$crc"

# no false alarm: the same runs without the switch
for c in none 'fwd=q8,bwd=q4'; do
  if ! "$pz" "${common[@]}" --compress "$c" > "$dir/out" 2> "$dir/err"; then
    fail "--compress $c without a fault failed"; cat "$dir/err"
  else echo "ok: --compress $c without a fault"; fi
done
[ "$fails" = 0 ]
