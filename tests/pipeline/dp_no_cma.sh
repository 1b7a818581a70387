#!/usr/bin/env bash
# The data-parallel all-reduce where the kernel refuses the single copy
# (process_vm_readv/writev, runtime/dp/shm_cma.c) with EPERM, as a container's
# seccomp filter or Yama's ptrace_scope does: under no_cma_exec (a seccomp
# filter over the whole job, tests/runtime/dp/no_cma.c) `pipezip train
# --replicas 2` (S=1 and S=2) says on stderr that it falls back to the two
# copies and why, and logs the same losses and saves the same model bytes as
# the run without the filter. Skips (77) where no filter can be installed.
#   usage: dp_no_cma.sh PATH/TO/pipezip PATH/TO/no_cma_exec
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
wrap="$2"
"$wrap" true || { echo "skip: no seccomp filter here"; exit 77; }
pz_corpus || exit 1
common=(--preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --steps 4 --lr 1e-3 --val-every 0 --threads 1
        --seed 3 --replicas 2)

losses() { grep -o '"step":[0-9]*,"loss":[^,]*' "$1"; }
for S in 1 2; do
  flags=("${common[@]}" --stages "$S")
  [ "$S" = 2 ] && flags+=(--micro-batches 2)
  "$pz" train "${flags[@]}" --save "$dir/plain$S.safetensors" > "$dir/plain$S.jsonl" 2> "$dir/plain$S.err" ||
    { cat "$dir/plain$S.err"; fail "S=$S: the run without the filter"; continue; }
  "$wrap" "$pz" train "${flags[@]}" --save "$dir/refused$S.safetensors" > "$dir/refused$S.jsonl" 2> "$dir/refused$S.err" ||
    { cat "$dir/refused$S.err"; fail "S=$S: the run with the single copy refused"; continue; }
  # one line per member of each stage's group: 2 x S
  n=$(grep -c "dp all-reduce over shared memory: two copies.*no single copy" "$dir/refused$S.err")
  grep -q "process_vm_readv of pid [0-9]*: Operation not permitted" "$dir/refused$S.err" && [ "$n" = $((2 * S)) ] ||
    { cat "$dir/refused$S.err"; fail "S=$S: $n fallback lines, or the refusal not named"; }
  grep -q "no single copy" "$dir/plain$S.err" && echo "note: S=$S: the single copy is refused here without the filter too"
  [ -n "$(losses "$dir/plain$S.jsonl")" ] && [ "$(losses "$dir/plain$S.jsonl")" = "$(losses "$dir/refused$S.jsonl")" ] ||
    fail "S=$S: the losses differ with the single copy refused"
  cmp "$dir/plain$S.safetensors" "$dir/refused$S.safetensors" || fail "S=$S: the saved models differ"
  [ "$fails" = 0 ] && echo "ok: S=$S x D=2: the two copies, named, the same losses and model bytes"
done
[ "$fails" = 0 ] && echo "dp-no-cma: ok" || echo "dp-no-cma: $fails failed"
[ "$fails" = 0 ]
