#!/usr/bin/env bash
# Interleaved 1F1B (--schedule interleaved:v=V, the executor of runtime/exec/pipeline.c with V chunks per rank):
#  1. S = 2 ranks x V = 2 chunks (the tiny preset's 2 blocks as 0,1,1,0:
#     embedding | block 0 | block 1 | head), m = 4: per-step and validation
#     losses within 1e-5 relative of the single process and of 1F1B on 2
#     stages; final parameters and AdamW moments (the runs' last checkpoints,
#     compare_ckpt.py) as close as pipeline_equiv.sh asks of 1F1B; the saved
#     model evaluates the same; v=1 is 1F1B bit for bit. --virtual-stages 2 runs the same schedule
#     (the same losses, bit for bit), and so does it behind simulated links
#     (--link-latency-ms, --link-mbps); one slower than --peer-timeout is refused;
#     --trace has every chunk's forwards and backwards from both ranks.
#  2. Compressed: with a policy per boundary (edge I-J = the boundary between
#     global chunks I and J), interleaved on 2 ranks gives the losses of plain
#     1F1B on 4 stages cut the same way (the same boundaries, codec contexts
#     and codec state; the tied exchange through --compress-tied q8), within
#     1e-5 relative; --metrics reports per boundary.
#  3. Resume: a run stopped at step 10 (its checkpoint) and resumed gives the
#     uninterrupted run's losses bit for bit; a 1F1B run on 2 stages resumes
#     from the interleaved checkpoint (by tensor name, another layout);
#     SIGTERM stops all ranks at a step boundary, checkpointed, and the
#     resumed run saves the uninterrupted run's model bit for bit; so does a
#     run whose rank 1 died, restarted by the launcher (--max-restarts).
#  4. More ranks and chunks on the demo preset (6 blocks), 6 steps: S=3 V=2
#     m=6, S=2 V=3 m=4, S=4 V=2 m=4 (--progress inline): losses within 1e-5
#     relative of the single process.
#   usage: interleaved_equiv.sh PATH/TO/pipezip
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
py=python3
cmp_ckpt="$(dirname "$0")/compare_ckpt.py"
pz_corpus --val-out "$dir/val.bin" --val-fraction 0.2 || exit 1

common=(--preset tiny --data "$dir/train.bin" --val-data "$dir/val.bin" --batch 2 --seq 32
        --micro-batches 4 --steps 20 --lr 1e-3 --val-every 10 --val-batches 3 --threads 1 --seed 7)

run() {   # NAME FLAGS...: a 20-step run into $dir/NAME.jsonl, checkpoint $dir/ck-NAME
  local name="$1"; shift
  rm -rf "$dir/ck-$name"
  if ! timeout 300 "$pz" train "${common[@]}" --checkpoint-dir "$dir/ck-$name" "$@" > "$dir/$name.jsonl" \
       2>"$dir/$name.err"; then
    cat "$dir/$name.err"; fail "$name: run failed"; return 1
  fi
}

# LOSSES A B BOUND: every step's loss and validation loss of B within BOUND relative of A's
losses() {
  "$py" - "$dir/$1.jsonl" "$dir/$2.jsonl" "$3" "$1" "$2" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
bound, na, nb = float(sys.argv[3]), sys.argv[4], sys.argv[5]
ok, worst, n = True, 0.0, 0
for key in ("loss", "val_loss"):
    sa = [(r["step"], r[key]) for r in a if key in r]
    sb = [(r["step"], r[key]) for r in b if key in r]
    if [s for s, _ in sa] != [s for s, _ in sb] or not sa:
        print(f"FAIL: {nb} vs {na}: {key} steps differ: {sa} vs {sb}"); ok = False; continue
    for (s, x), (_, y) in zip(sa, sb):
        rel = abs(x - y) / max(abs(x), 1e-30)
        worst, n = max(worst, rel), n + 1
        if rel > bound:
            print(f"FAIL: {nb}: step {s} {key} {y} vs {na} {x} (rel {rel:.2e})"); ok = False
if ok:
    print(f"ok: {nb} vs {na}: {n} losses within {worst:.2e} relative (bound {bound:g})")
sys.exit(0 if ok else 1)
PY
}

# 1. uncompressed: against the single process and 1F1B
run ref --save "$dir/ref.safetensors" || exit 1
run p1f1b --stages 2 --schedule 1f1b
run il --stages 2 --schedule interleaved:v=2 --split 0,1,1,0 --save "$dir/il.safetensors" --trace "$dir/il-trace.json"
run ilv --stages 2 --schedule interleaved --virtual-stages 2
losses ref il 1e-5 || fails=$((fails + 1))
losses p1f1b il 1e-5 || fails=$((fails + 1))
losses il ilv 0 || fails=$((fails + 1))
# v=1 is plain 1F1B (the same lists, the one-chunk executor)
run il1 --stages 2 --schedule interleaved:v=1 && { losses p1f1b il1 0 || fails=$((fails + 1)); }
# simulated links (per boundary, like --compress; the wrap link rank 1 -> 0 too) delay, change nothing
run ilink --stages 2 --schedule interleaved:v=2 --link-latency-ms 5 --link-mbps 1000 && { losses il ilink 0 || fails=$((fails + 1)); }
if out=$(timeout 60 "$pz" train "${common[@]}" --stages 2 --schedule interleaved:v=2 --link-mbps 0.01 --peer-timeout 1 2>&1); then
  fail "interleaved: a link slower than --peer-timeout was not refused"
elif grep -q "on the link carrying edge .* longer than --peer-timeout" <<<"$out"; then
  echo "ok: interleaved: a link slower than --peer-timeout is refused"
else echo "$out" | tail -3; fail "interleaved: slow link: unexpected message"; fi
# --trace: both ranks, every chunk's forward and backward of every micro-batch
if "$py" - "$dir/il-trace.json" <<'PY'
import collections, json, sys
ev = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
n = collections.Counter((e["pid"], e["cat"]) for e in ev)
for r in (0, 1):
    assert n[(r, "forward")] == n[(r, "backward")] == 20 * 4 * 2, n   # steps x micro-batches x chunks
    assert n[(r, "send")] > 0 and n[(r, "tied")] > 0 and n[(r, "optimizer")] == 20, n
print(f"ok: interleaved --trace: {len(ev)} events, 160 forwards and backwards per rank")
PY
then :; else fail "interleaved --trace"; fi
grep -q "2 stages x 2 chunks" "$dir/il.err" || fail "il: no '2 stages x 2 chunks' line: $(head -c 2000 "$dir/il.err")"
if out=$("$py" "$cmp_ckpt" "$dir/ck-ref" "$dir/ck-il" 1e-3 1e-5); then
  echo "$out" | sed "s/^ok:/ok: interleaved v=2 vs single process: parameters and moments:/"
else
  echo "$out"; fail "interleaved v=2: parameters or moments differ from the single process"
fi
if ! "$pz" eval --model "$dir/il.safetensors" --data "$dir/val.bin" --batch 2 --seq 32 --batches 3 > "$dir/ie.json" ||
   ! "$pz" eval --model "$dir/ref.safetensors" --data "$dir/val.bin" --batch 2 --seq 32 --batches 3 > "$dir/re.json" ||
   ! "$py" -c "import json,sys; a=json.load(open('$dir/ie.json'))['loss']; b=json.load(open('$dir/re.json'))['loss']; sys.exit(0 if abs(a-b)<=1e-5*abs(b) else 1)"; then
  fail "interleaved v=2: the saved model evaluates differently"
else
  echo "ok: interleaved v=2: --save evaluates as the single process's model"
fi

# 2. a policy per boundary: interleaved on 2 ranks == 1F1B on 4 stages cut the same way
pol='*:fwd=q8,bwd=q8;1-2:fwd=aq(q4),bwd=ef(topk:0.25)'
# (and the tied-embedding exchange through q8: both executors' copies of wte equal, compare_ckpt.py)
run cil --stages 2 --schedule interleaved:v=2 --split 0,1,1,0 --compress "$pol" --compress-tied q8 --metrics "$dir/cm"
run c4 --stages 4 --schedule 1f1b --split 0,1,1,0 --compress "$pol" --compress-tied q8
losses c4 cil 1e-5 || fails=$((fails + 1))
if out=$("$py" "$cmp_ckpt" "$dir/ck-c4" "$dir/ck-cil" 1e-3 1e-5); then
  echo "$out" | sed "s/^ok:/ok: compressed interleaved vs 1F1B on 4 stages: parameters and moments:/"
else
  echo "$out"; fail "compressed interleaved: parameters or moments differ from 1F1B on 4 stages"
fi
if "$py" - "$dir/cil.jsonl" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
s = [x for x in r if "fwd_wire" in x][0]
assert s["fwd_wire"] < s["fwd_raw"] and s["bwd_wire"] < s["bwd_raw"], s
PY
then echo "ok: compressed interleaved sends fewer bytes than raw"; else fail "compressed interleaved: byte counts"; fi
# --metrics: one row per boundary and direction; the summary line names the policy per boundary
if "$py" - "$dir/cm.csv" "$dir/cil.jsonl" <<'PY'
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [(r["edge"], r["dir"]) for r in rows] == [(e, d) for e in ("0-1", "1-2", "2-3") for d in ("fwd", "bwd")], rows
assert rows[2]["codec"].startswith("aq(q4") and rows[3]["codec"].startswith("ef(topk"), rows
summ = [json.loads(l) for l in open(sys.argv[2]) if '"summary"' in l]
assert len(summ) == 1 and "1-2:fwd=aq(q4)" in summ[0]["policy"] and len(summ[0]["codec_state_bytes"]) == 2, summ
PY
then echo "ok: interleaved --metrics: a row per boundary and direction, and the summary line"
else fail "interleaved --metrics"; fi

# 3. resume: stop at 10 (the first run's checkpoint of step 10), continue to 20
rm -rf "$dir/ck-r"
if timeout 300 "$pz" train "${common[@]}" --stages 2 --schedule interleaved:v=2 --compress "$pol" \
     --checkpoint-dir "$dir/ck-r" --checkpoint-every 10 --keep-checkpoints 5 > "$dir/r-full.jsonl" 2>"$dir/r-full.err"; then
  rm -rf "$dir/ck-r/step-00000020"
  if timeout 300 "$pz" train "${common[@]}" --stages 2 --schedule interleaved:v=2 --compress "$pol" \
       --checkpoint-dir "$dir/ck-r" --resume auto > "$dir/r-res.jsonl" 2>"$dir/r-res.err"; then
    grep -q "resumed from .*step 10" "$dir/r-res.err" || fail "resume: no 'resumed from ... step 10' line"
    "$py" - "$dir/r-full.jsonl" "$dir/r-res.jsonl" <<'PY' || fail "interleaved resume: losses differ from the uninterrupted run"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
la = [(r["step"], r["loss"]) for r in a if "loss" in r and r["step"] > 10]
lb = [(r["step"], r["loss"]) for r in b if "loss" in r]
assert la == lb and len(la) == 10, (la, lb)
print("ok: interleaved resumed at step 10 (compressed, codec state per boundary): steps 11-20 bit for bit")
PY
  else cat "$dir/r-res.err"; fail "interleaved resume run failed"; fi
  # another layout (1F1B, 2 stages) from the interleaved checkpoint of step 10: another job
  # (runtime/ckpt/job.h), which --resume DIR continues (--resume auto takes this job's only)
  rm -rf "$dir/ck-x" && mkdir -p "$dir/ck-x" && cp -r "$dir/ck-r/step-00000010" "$dir/ck-x/"
  if timeout 300 "$pz" train "${common[@]}" --stages 2 --schedule 1f1b --checkpoint-dir "$dir/ck-x" --resume "$dir/ck-x" \
       > "$dir/x.jsonl" 2>"$dir/x.err"; then
    grep -q "re-partitioned by block" "$dir/x.err" && grep -q "continuing job [0-9a-f]* (step 10) as job" "$dir/x.err" &&
      echo "ok: 1F1B on 2 stages resumed from the interleaved checkpoint (another layout, said on stderr)" \
      || fail "1F1B from the interleaved checkpoint: no re-partition or continuing-job line"
  else cat "$dir/x.err"; fail "1F1B could not resume from the interleaved checkpoint"; fi
else
  cat "$dir/r-full.err"; fail "interleaved run with checkpoints failed"
fi

# preemption: SIGTERM to the launcher stops every rank at the next step boundary, checkpointed,
# exit 143; resuming ends with the uninterrupted run's model (the 2 Mbit/s links slow the steps)
ck="$dir/ck-t"
if pz_sigterm "interleaved SIGTERM" "$ck" "$dir/t.jsonl" "$dir/t.err" 600 "$pz" train "${common[@]}" --stages 2 \
     --schedule interleaved:v=2 --link-mbps 2 --checkpoint-dir "$ck" --save "$dir/t.safetensors"; then
  if timeout 300 "$pz" train "${common[@]}" --stages 2 --schedule interleaved:v=2 --checkpoint-dir "$ck" --resume auto \
       --save "$dir/t.safetensors" > /dev/null 2>"$dir/t.err" && cmp -s "$dir/il.safetensors" "$dir/t.safetensors"; then
    echo "ok: interleaved resumed after SIGTERM: the model equals the uninterrupted run's"
  else cat "$dir/t.err"; fail "interleaved resume after SIGTERM"; fi
fi

# restarts: rank 1 dies after step 7; the launcher restarts the job, which
# resumes from the checkpoint of step 5 and saves the uninterrupted run's model
ck="$dir/ck-m"
PIPEZIP_FAULT=step:7:1 timeout 300 "$pz" train "${common[@]}" --stages 2 --schedule interleaved:v=2 --checkpoint-dir "$ck" \
  --checkpoint-every 5 --max-restarts 1 --save "$dir/m.safetensors" > /dev/null 2>"$dir/m.err"
rc=$?
if [ "$rc" = 0 ] && grep -q "restart 1 of 1" "$dir/m.err" && grep -q "resumed from .* step 5" "$dir/m.err" &&
   cmp -s "$dir/il.safetensors" "$dir/m.safetensors"; then
  echo "ok: interleaved --max-restarts 1: rank 1 died after step 7, resumed at step 5; the model equals the uninterrupted run's"
else
  cat "$dir/m.err"; fail "interleaved --max-restarts: exit $rc"
fi

# 4. more ranks and chunks (demo: 6 blocks, enough for 8 chunks)
common=(--preset demo --data "$dir/train.bin" --val-data "$dir/val.bin" --batch 2 --seq 32 --steps 6 --lr 1e-3
        --val-every 3 --val-batches 2 --threads 1 --seed 3)
run dref6 --micro-batches 6 && run dref4 --micro-batches 4 && {
  run d32 --micro-batches 6 --stages 3 --schedule interleaved:v=2 && { losses dref6 d32 1e-5 || fails=$((fails + 1)); }
  run d23 --micro-batches 4 --stages 2 --schedule interleaved:v=3 && { losses dref4 d23 1e-5 || fails=$((fails + 1)); }
  run d42 --micro-batches 4 --stages 4 --schedule interleaved:v=2 --progress inline &&
    { losses dref4 d42 1e-5 || fails=$((fails + 1)); }
}

[ "$fails" = 0 ] && echo "interleaved equivalence: all passed"
[ "$fails" = 0 ]
