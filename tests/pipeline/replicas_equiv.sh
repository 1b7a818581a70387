#!/usr/bin/env bash
# Data-parallel replicas (--replicas D, issue 25): on the tiny preset, D
# replicas of an S-stage pipeline with M micro-batches each give the same
# per-step losses, for 20 steps, within 1e-6 relative, as one process with
# D x M micro-batches (replica r takes the global batch's micro-batches
# r*M .. r*M+M-1, docs/data-parallel.md), and the replicas' parameters and
# AdamW moments are byte-identical after every step (PIPEZIP_DP_CHECK=step:
# the executor compares their digests and fails otherwise). Runs S=2 x D=2
# (both layouts), S=1 x D=2 and S=2 x D=3; then a resume: an S=2 x D=2 run
# that loses a rank after step 10's checkpoint, resumed, logs steps 11..20
# bit for bit as the run that was not interrupted.
# With PART = compress (a test of its own, to keep each short): --dp-compress
# instead, replicas identical every step with each reduction mode, --dp-warmup's
# steps on the ring and the later ones through the codec (dp_wire), q8 close
# to uncompressed, resume with the error feedback bit for bit (sign+EF, and
# 1-bit Adam with its momentum and frozen v). With PART =
# lifted: interleaving, warmup=auto, --compress auto, the tied exchange through a
# codec and --dump-edge with replicas (the replicas' choices identical every step).
#   usage: replicas_equiv.sh PATH/TO/pipezip [equiv|compress|lifted]
set -u
pz="$1"
part="${2:-equiv}"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
py=python3

cat "$(dirname "$0")"/../../runtime/*/*.c > "$dir/text.txt"
"$pz" tokenize --out "$dir/train.bin" "$dir/text.txt" > /dev/null || exit 1
common=(--preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --steps 20 --lr 1e-3 --val-every 0 --threads 1
        --seed 7 --grad-clip 1.0)
[ "$part" = equiv ] && common+=(--val-data "$dir/train.bin" --val-every 10 --val-batches 2)
export PIPEZIP_DP_CHECK=step
fails=0

if [ "$part" = equiv ]; then
# refused before anything starts, naming the flag
refuse() {   # expected-words flags...
    local want="$1"; shift
    if "$pz" train "${common[@]}" "$@" > "$dir/x.out" 2>"$dir/x.err"; then
        echo "FAIL: '$*' was accepted"; fails=$((fails + 1))
    elif ! grep -q -- "$want" "$dir/x.err" || [ -s "$dir/x.out" ]; then
        cat "$dir/x.err"; echo "FAIL: '$*': no '$want' in the error, or output written"; fails=$((fails + 1))
    fi
}
refuse "--replicas" --replicas 0
refuse "over the 255 ranks" --stages 16 --replicas 16
refuse "--layout needs --replicas" --layout replica-major
refuse "--layout must be" --replicas 2 --layout diagonal
refuse "--metrics needs --stages 2 or more" --metrics "$dir/m"   # one process: neither edges nor replicas
refuse "--dp-hosts H dividing --replicas 3" --replicas 3 --dp-compress sign --dp-reduce hierarchical --dp-hosts 2
refuse "--dp-compress 'ef(sign)': its ef() wrapper keeps state" --replicas 2 --dp-compress 'ef(sign)'
refuse "--dp-compress 'hadamard(aq(q4))': its aq() wrapper keeps state" --replicas 2 --dp-compress 'hadamard(aq(q4))'
refuse "--dp-warmup needs --dp-compress" --replicas 2 --dp-warmup 2
refuse "--dp-compress needs --replicas 2" --dp-compress sign
refuse "--dp-reduce must be" --replicas 2 --dp-compress sign --dp-reduce ring
refuse "--dp-bucket-mb: 0 is out of range" --replicas 2 --dp-bucket-mb 0
refuse "--dp-bucket-mb: 'lots' is not a finite number" --replicas 2 --dp-bucket-mb lots
refuse "--dp-bucket-mb needs --replicas 2" --dp-bucket-mb 1
# a rank started by mpirun/srun/env: the world must be stages x replicas
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 \
    refuse "WORLD_SIZE 2 does not match --stages 2 x --replicas 2 = 4 processes" --stages 2 --replicas 2 --micro-batches 2
OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=6 \
    refuse "WORLD_SIZE 6 does not match --stages 2 x --replicas 2 = 4 processes" --stages 2 --replicas 2 --micro-batches 2
SLURM_PROCID=0 SLURM_NTASKS=3 \
    refuse "WORLD_SIZE 3 does not match --stages 1 x --replicas 2 = 2 processes" --replicas 2


fi
compare() {   # ref.jsonl got.jsonl label first_step
    "$py" - "$@" <<'PY'
import json, sys
ref = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r}
got = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2])) if "loss" in r}
label, first = sys.argv[3], int(sys.argv[4])
want = list(range(first, 21))
if sorted(got) != want:
    print(f"FAIL: {label}: steps logged {sorted(got)}, expected {first}..20"); sys.exit(1)
worst = max(abs(got[s] - ref[s]) / abs(ref[s]) for s in want)
if worst > 1e-6:
    bad = [s for s in want if abs(got[s] - ref[s]) > 1e-6 * abs(ref[s])]
    print(f"FAIL: {label}: step {bad[0]} loss {got[bad[0]]} vs {ref[bad[0]]} (worst rel {worst:.2e})"); sys.exit(1)
vref = {r["step"]: r["val_loss"] for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r}
vgot = {r["step"]: r["val_loss"] for r in map(json.loads, open(sys.argv[2])) if "val_loss" in r}
if sorted(vgot) != sorted(vref) or any(abs(vgot[s] - vref[s]) > 1e-6 * vref[s] for s in vref):
    print(f"FAIL: {label}: validation losses {vgot} vs {vref}"); sys.exit(1)
print(f"ok: {label}: {len(want)} step losses within {worst:.2e} relative, {len(vref)} validation losses")
PY
}
resumed_same() {   # label uninterrupted.jsonl resumed.jsonl: steps 11..20 resumed, each loss to the bit
    "$py" - "$2" "$3" "$1" <<'PY' || fails=$((fails + 1))
import json, sys
a = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r}
b = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2])) if "loss" in r}
if sorted(b) != list(range(11, 21)) or any(a[s] != b[s] for s in b):
    print(f"FAIL: resumed {sys.argv[3]}: {b} vs {a}"); sys.exit(1)
print(f"ok: resumed {sys.argv[3]}: steps 11..20 bit for bit")
PY
}

# Never lose a run: a replica killed in the middle of step 13
# (PIPEZIP_FAULT=sync: its backward done, the other replicas waiting in the
# gradient average) is named by the launcher with its stage and replica
# (the replicas that lost it exit as well, with PZ_EXIT_PEER, which the
# launcher names last), which restarts every rank from step 10's checkpoint
# (--max-restarts 1); the final model is the uninterrupted run's, byte for byte
restarted() {   # label victim name ref.safetensors ckdir flags...
    local label="$1" victim="$2" name="$3" ref="$4" ck="$5"; shift 5
    if ! PIPEZIP_FAULT=sync:13:$victim timeout 120 "$pz" train "${common[@]}" "$@" --checkpoint-dir "$ck" \
         --max-restarts 1 --save "$dir/restarted.safetensors" > /dev/null 2>"$dir/k.err"; then
        tail -20 "$dir/k.err"; echo "FAIL: $label: the run with a restart failed"; fails=$((fails + 1))
    elif ! grep -q "PIPEZIP_FAULT=sync:13:$victim: exiting at sync 13" "$dir/k.err" ||
         ! grep -qF "pipezip: $name exited with status 3; stopping" "$dir/k.err" ||
         ! grep -q "^pipezip: restart 1 of 1" "$dir/k.err"; then
        grep "^pipezip" "$dir/k.err"; echo "FAIL: $label: no fault in step 13, '$name' not named, or no restart"; fails=$((fails + 1))
    elif ! cmp -s "$ref" "$dir/restarted.safetensors"; then
        echo "FAIL: $label: the final model differs from the uninterrupted run's"; fails=$((fails + 1))
    else
        echo "ok: $label: $name killed in step 13 and named, restarted: the final model is the uninterrupted run's, byte for byte"
    fi
}

for D in 2 3; do
    [ "$part" != equiv ] && [ "$D" = 3 ] && continue
    "$pz" train "${common[@]}" --micro-batches $((2 * D)) > "$dir/ref$D.jsonl" 2>"$dir/ref.err" \
        || { cat "$dir/ref.err"; echo "FAIL: single-process run, $((2 * D)) micro-batches"; exit 1; }
done
runs=("2 2 stage-major" "2 2 replica-major" "1 2 stage-major" "2 3 stage-major")
[ "$part" = equiv ] || runs=()
for run in "${runs[@]}"; do
    read -r S D layout <<<"$run"
    label="S=$S x D=$D $layout"
    if ! timeout 120 "$pz" train "${common[@]}" --micro-batches 2 --stages "$S" --replicas "$D" --layout "$layout" \
         > "$dir/r.jsonl" 2>"$dir/r.err"; then
        tail -20 "$dir/r.err"; echo "FAIL: $label: the run failed"; fails=$((fails + 1)); continue
    fi
    compare "$dir/ref$D.jsonl" "$dir/r.jsonl" "$label" 1 || fails=$((fails + 1))
done

# buckets (--dp-bucket-mb, runtime/dp/sync.h) that start during the last backward: with 2 replicas the
# model is bit for bit that of one bucket per chunk, whatever the cut and the schedule (zb-h1: the last
# micro-batch's weight pass finishes the blocks' buckets); 3 replicas within 1e-6 of one process
if [ "$part" = equiv ]; then
for run in "2 4096 1f1b" "2 0.01 1f1b" "2 0.01 zb-h1" "3 0.01 zb-h1"; do
    read -r D mb sch <<<"$run"
    label="S=2 x D=$D, --dp-bucket-mb $mb, $sch"
    if ! timeout 120 "$pz" train "${common[@]}" --micro-batches 2 --stages 2 --replicas "$D" --dp-bucket-mb "$mb" \
         --schedule "$sch" --save "$dir/b-$D-$mb-$sch.safetensors" > "$dir/r.jsonl" 2>"$dir/r.err"; then
        tail -20 "$dir/r.err"; echo "FAIL: $label: the run failed"; fails=$((fails + 1)); continue
    fi
    compare "$dir/ref$D.jsonl" "$dir/r.jsonl" "$label" 1 || fails=$((fails + 1))
done
for m in "0.01-1f1b" "0.01-zb-h1"; do
    if cmp -s "$dir/b-2-4096-1f1b.safetensors" "$dir/b-2-$m.safetensors"; then
        echo "ok: S=2 x D=2 buckets $m: the model of one bucket per chunk, bit for bit"
    else
        echo "FAIL: S=2 x D=2 buckets $m: the model differs from one bucket per chunk's"; fails=$((fails + 1))
    fi
done
fi

# --metrics and --trace with replicas: the data-parallel bytes and times per step (step lines, metrics
# JSONL, summary), and trace spans of the buckets, named by stage and replica, some inside the last backward
if [ "$part" = equiv ]; then
for run in "2 2" "1 3"; do
    read -r S D <<<"$run"
    label="S=$S x D=$D --metrics --trace"
    if ! timeout 120 "$pz" train "${common[@]}" --steps 3 --micro-batches 2 --stages "$S" --replicas "$D" \
         --dp-bucket-mb 0.01 --metrics "$dir/m" --trace "$dir/t.json" > "$dir/r.jsonl" 2>"$dir/r.err"; then
        tail -20 "$dir/r.err"; echo "FAIL: $label: the run failed"; fails=$((fails + 1)); continue
    fi
    grep -q "data-parallel average over 3 steps" "$dir/r.err" || { echo "FAIL: $label: no table"; fails=$((fails + 1)); }
    "$py" - "$dir/r.jsonl" "$dir/m.jsonl" "$dir/t.json" "$label" "$S" "$D" <<'PY' || fails=$((fails + 1))
import json, sys
out, mj, tj, label, S, D = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
rows = [json.loads(l) for l in open(out) if l.startswith("{")]
steps = [r for r in rows if "loss" in r]
summ = [r for r in rows if r.get("summary")]
def bad(msg): print(f"FAIL: {label}: {msg}"); sys.exit(1)
if len(steps) != 3 or len(summ) != 1: bad(f"{len(steps)} step lines, {len(summ)} summaries")
raw = steps[0]["dp_raw"]
for r in steps:
    # the ring sends 2(D-1)/D of the gradient: with 2 replicas exactly its bytes
    want = raw * 2 * (D - 1) / D
    if r["dp_raw"] != raw or abs(r["dp_wire"] - want) > 0.01 * want: bad(f"bytes {r}")
    if not (r["dp_sync_ms"] > 0 and 0 <= r["dp_hidden_ms"] <= r["dp_sync_ms"]): bad(f"times {r}")
s = summ[0]
if s["dp_raw"] != 3 * raw or not 0 <= s["dp_hidden_s"] <= s["dp_sync_s"]: bad(f"summary {s}")
ml = [json.loads(l) for l in open(mj)]
if len(ml) != 3 or any(len(m["dp"]["stages"]) != S or m["dp"]["raw_bytes"] != raw for m in ml): bad(f"metrics {ml[0]}")
ev = json.load(open(tj))["traceEvents"]
names = {e["args"]["name"] for e in ev if e.get("ph") == "M"}
if names != {f"stage {s} replica {r}" for s in range(S) for r in range(D)}: bad(f"trace processes {names}")
# a bucket that starts inside the last micro-batch's backward (micro 1), on the same rank
# (--schedule auto, the default, splits it: its weight half finishes the blocks)
last = [(e["pid"], e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("name") in ("backward 1", "weight 1")]
inside = [e for e in ev if e.get("cat") == "dp bucket" and any(p == e["pid"] and a < e["ts"] < b for p, a, b in last)]
if not inside: bad("no dp bucket starts during a last backward")
print(f"ok: {label}: dp bytes {raw} raw per step, sync {s['dp_sync_s'] * 1e3:.1f} ms, "
      f"{s['dp_hidden_s'] * 1e3:.1f} ms hidden; {len(inside)} buckets started inside a last backward")
PY
done
fi

# resume with replicas, bit for bit
if [ "$part" = equiv ]; then
rp=(--micro-batches 2 --stages 2 --replicas 2 --checkpoint-every 10)
"$pz" train "${common[@]}" "${rp[@]}" --checkpoint-dir "$dir/cka" --save "$dir/a.safetensors" > "$dir/a.jsonl" \
    2>"$dir/a.err" || { tail -20 "$dir/a.err"; echo "FAIL: uninterrupted run"; exit 1; }
restarted "S=2 x D=2" 3 "rank 3 (stage 1, replica 1)" "$dir/a.safetensors" "$dir/ckc" "${rp[@]}"
if PIPEZIP_FAULT=step:10:3 "$pz" train "${common[@]}" "${rp[@]}" --checkpoint-dir "$dir/ckb" > "$dir/b1.jsonl" 2>"$dir/b1.err"; then
    echo "FAIL: the run with rank 3 killed after step 10 succeeded"; fails=$((fails + 1))
elif ! "$pz" train "${common[@]}" "${rp[@]}" --checkpoint-dir "$dir/ckb" --resume auto > "$dir/b2.jsonl" 2>"$dir/b2.err"; then
    tail -20 "$dir/b2.err"; echo "FAIL: the resumed run failed"; fails=$((fails + 1))
else
    resumed_same "S=2 x D=2" "$dir/a.jsonl" "$dir/b2.jsonl"
fi
fi
# --dp-compress: replicas identical after every step (PIPEZIP_DP_CHECK), q8
# close to the uncompressed losses, and resume with the error feedback bit for bit
if [ "$part" = compress ]; then
crun() {   # label out flags...
    local label="$1" out="$2"; shift 2
    timeout 120 "$pz" train "${common[@]}" --micro-batches 2 "$@" > "$out" 2>"$dir/c.err" \
        || { tail -20 "$dir/c.err"; echo "FAIL: $label: the run failed"; fails=$((fails + 1)); return 1; }
}
if crun "S=2 x D=2 q8 allgather" "$dir/q8.jsonl" --stages 2 --replicas 2 --dp-compress q8:group=512; then
    "$py" - "$dir/ref2.jsonl" "$dir/q8.jsonl" <<'PY' || fails=$((fails + 1))
import json, sys
a = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[1])) if "loss" in r}
b = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2])) if "loss" in r}
worst = max(abs(a[s] - b[s]) / a[s] for s in a)
if sorted(b) != sorted(a) or worst > 0.01:
    print(f"FAIL: q8 replicas: losses {b} against uncompressed {a}"); sys.exit(1)
print(f"ok: S=2 x D=2 --dp-compress q8:group=512: 20 losses within {worst:.2e} of uncompressed, replicas identical")
PY
fi
crun "S=1 x D=3 sign twophase" "$dir/s3.jsonl" --replicas 3 --dp-compress sign --dp-warmup 2 --dp-bucket-mb 0.1 \
    && echo "ok: S=1 x D=3 sign twophase, warm-up 2, buckets of 0.1 MiB: replicas identical every step"
# --dp-warmup 2: steps 1-2 send the ring's 2(D-1)/D of the gradient, the later ones sign's bits
"$py" - "$dir/s3.jsonl" <<'PY' || fails=$((fails + 1))
import json, sys
st = [r for r in map(json.loads, open(sys.argv[1])) if "loss" in r]
ring = [r["dp_wire"] / r["dp_raw"] for r in st]
if len(st) != 20 or not all(1.3 < x < 1.4 for x in ring[:2]) or not all(x < 0.1 for x in ring[2:]):
    print(f"FAIL: --dp-warmup 2: wire/raw per step {ring}"); sys.exit(1)
print(f"ok: --dp-warmup 2: steps 1-2 sent {ring[0]:.3f} x the gradient (the ring), steps 3-20 {max(ring[2:]):.3f} x (sign)")
PY
crun "S=1 x D=4 sign hierarchical" "$dir/h4.jsonl" --replicas 4 --dp-compress sign --dp-reduce hierarchical --dp-hosts 2 \
    && echo "ok: S=1 x D=4 sign hierarchical over 2 hosts: replicas identical every step"
# Hosts from the launch: 4 ranks started by hand (as mpirun would), each in a
# UTS namespace of its own with its own host name. Without --dp-hosts,
# hierarchical finds the hosts from the names: ranks 0, 1 on one host and
# 2, 3 on another compute what --dp-hosts 2 computes, bit for bit; names that
# interleave the replicas are refused, naming the replica out of place.
by_hosts() {   # out host-of-rank-0 .. host-of-rank-3; rank 0's stderr in $dir/host0.err
    local out="$1" port r=0 rc=0 pids=()
    shift
    port=$("$py" "$(dirname "$0")/free_port.py")
    for h in "$@"; do
        PIPEZIP_JOB_SECRET=replicas-hosts-test-secret-0123456789 RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port timeout 120 unshare --uts sh -c 'hostname "$0" && exec "$@"' "$h" "$pz" train \
            "${common[@]}" --micro-batches 2 --replicas 4 --dp-compress sign --dp-reduce hierarchical \
            > "$dir/host$r.out" 2>"$dir/host$r.err" &
        pids+=($!)
        r=$((r + 1))
    done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    cp "$dir/host0.out" "$out"
    return $rc
}
if ! unshare --uts true 2>/dev/null; then
    echo "skip: hosts from the launch: no UTS namespaces here (unshare --uts needs root)"
elif ! by_hosts "$dir/hn.jsonl" pz-host-a pz-host-a pz-host-b pz-host-b; then
    tail -5 "$dir"/host*.err; echo "FAIL: hierarchical, hosts from the names: the run failed"; fails=$((fails + 1))
elif ! grep -q "stage 0's 4 replicas run on 2 hosts (their host names), 2 each" "$dir/host0.err" ||
     ! "$py" -c 'import json, sys
f = lambda p: [(r["step"], r["loss"], r["norm"]) for r in map(json.loads, open(p)) if "loss" in r]
a, b = f(sys.argv[1]), f(sys.argv[2])
sys.exit(not (len(a) == 20 and a == b))' "$dir/h4.jsonl" "$dir/hn.jsonl"; then
    grep host "$dir/host0.err"; echo "FAIL: hierarchical, hosts from the names: not --dp-hosts 2's losses"; fails=$((fails + 1))
elif by_hosts /dev/null pz-host-a pz-host-b pz-host-a pz-host-b ||
     ! grep -q "holds members that are not consecutive" "$dir/host0.err"; then
    tail -3 "$dir/host0.err"; echo "FAIL: interleaved host names were not refused"; fails=$((fails + 1))
else
    echo "ok: S=1 x D=4 sign hierarchical, hosts from the ranks' host names (2 x 2): --dp-hosts 2's losses and norms, bit for bit; interleaved hosts refused"
fi
# (in buckets of 0.1 MiB, several per chunk: each bucket's error feedback is saved and restored)
ep=(--replicas 2 --dp-compress sign --checkpoint-every 10 --dp-bucket-mb 0.1)
if crun "sign EF uninterrupted" "$dir/ea.jsonl" "${ep[@]}" --checkpoint-dir "$dir/cea" --save "$dir/ea.safetensors"; then
    restarted "S=1 x D=2 sign with error feedback" 1 "rank 1 (stage 0, replica 1)" "$dir/ea.safetensors" "$dir/cec" \
        --micro-batches 2 "${ep[@]}"
    if PIPEZIP_FAULT=step:10:1 "$pz" train "${common[@]}" --micro-batches 2 "${ep[@]}" --checkpoint-dir "$dir/ceb" \
        > /dev/null 2>&1; then
        echo "FAIL: the sign run with rank 1 killed succeeded"; fails=$((fails + 1))
    elif crun "sign EF resumed" "$dir/eb.jsonl" "${ep[@]}" --checkpoint-dir "$dir/ceb" --resume auto; then
        [ "$(find "$dir/ceb" -name "rank-0.dpef[01]" | wc -l)" -ge 4 ] || { echo "FAIL: no error-feedback files in the checkpoints"; fails=$((fails + 1)); }
        resumed_same "S=1 x D=2 sign with error feedback" "$dir/ea.jsonl" "$dir/eb.jsonl"
        # the error feedback is per bucket: another cut is refused, naming the flag
        if "$pz" train "${common[@]}" --micro-batches 2 "${ep[@]}" --dp-bucket-mb 0.2 --checkpoint-dir "$dir/ceb" \
            --resume auto > /dev/null 2>"$dir/cb.err" || ! grep -q -- "--dp-bucket-mb must be the checkpoint's" "$dir/cb.err"; then
            tail -3 "$dir/cb.err"; echo "FAIL: a resume with another --dp-bucket-mb was not refused"; fails=$((fails + 1))
        else
            echo "ok: a resume of the error feedback with another --dp-bucket-mb is refused"
        fi
    fi
fi
# 1-bit Adam (--dp-compress-what momentum): v freezes after step 3, so step
# 10's checkpoint must carry m and the frozen v (the shards) and the error
# feedback (dpef) for the resumed steps 11..20 to match bit for bit
op=(--replicas 2 --dp-compress sign --dp-reduce twophase --dp-compress-what momentum --dp-warmup 3 --checkpoint-every 10)
if crun "1-bit Adam uninterrupted" "$dir/oa.jsonl" "${op[@]}" --checkpoint-dir "$dir/coa"; then
    if PIPEZIP_FAULT=step:10:1 "$pz" train "${common[@]}" --micro-batches 2 "${op[@]}" --checkpoint-dir "$dir/cob" \
        > /dev/null 2>&1; then
        echo "FAIL: the 1-bit Adam run with rank 1 killed succeeded"; fails=$((fails + 1))
    elif crun "1-bit Adam resumed" "$dir/ob.jsonl" "${op[@]}" --checkpoint-dir "$dir/cob" --resume auto; then
        resumed_same "S=1 x D=2 1-bit Adam (m, frozen v, error feedback)" "$dir/oa.jsonl" "$dir/ob.jsonl"
    fi
fi
fi
# PART = lifted: what --replicas used to refuse. The autos decide from the
# step's reduction over all ranks, so replicas must agree; PIPEZIP_DP_CHECK
# compares their choices (warm-up K, auto's codecs) with the parameters
if [ "$part" = lifted ]; then
lrun() {   # label out flags...: S=2 x D=2, 2 micro-batches each
    local label="$1" out="$2"; shift 2
    timeout 120 "$pz" train "${common[@]}" --stages 2 --replicas 2 --micro-batches 2 "$@" > "$out" 2>"$dir/l.err" \
        || { tail -20 "$dir/l.err"; echo "FAIL: $label: the run failed"; fails=$((fails + 1)); return 1; }
}
lrun "interleaved:v=2" "$dir/il.jsonl" --schedule interleaved:v=2 \
    && { compare "$dir/ref2.jsonl" "$dir/il.jsonl" "S=2 x D=2 interleaved:v=2" 1 || fails=$((fails + 1)); }
# (4 micro-batches per replica: with 2, no extra warm-up fits 2 stages)
"$pz" train "${common[@]}" --micro-batches 8 > "$dir/ref8.jsonl" 2>"$dir/ref.err" || { echo "FAIL: 8 micro-batches"; exit 1; }
if lrun "warmup=auto" "$dir/wa.jsonl" --micro-batches 4 --schedule 1f1b:warmup=auto --link-mbps 20; then
    compare "$dir/ref8.jsonl" "$dir/wa.jsonl" "S=2 x D=2 1f1b:warmup=auto at 20 Mbit/s" 1 || fails=$((fails + 1))
    grep -q "warmup=auto: K = [1-9]" "$dir/l.err" || { grep warmup "$dir/l.err"; echo "FAIL: warmup=auto chose no K > 0"; fails=$((fails + 1)); }
fi
if lrun "--compress auto" "$dir/ca.jsonl" --compress auto --link-mbps 20; then
    grep -q "auto after step 10: edge 0-1 bwd" "$dir/l.err" && echo "ok: S=2 x D=2 --compress auto: the replicas chose alike every step" \
        || { grep auto "$dir/l.err"; echo "FAIL: --compress auto decided nothing"; fails=$((fails + 1)); }
fi
# the tied exchange through a codec (the default since issue 26 follows edge 0-1's bwd q8): the replicas
# stay identical every step, and each one's two copies of wte (first and last stage) equal in its checkpoint
if lrun "tied q8" /dev/null --steps 6 --compress bwd=q8 --checkpoint-dir "$dir/ckt"; then
    if ! grep -q "tied exchange: q8 (as edge 0-1's bwd" "$dir/l.err"; then
        echo "FAIL: S=2 x D=2 bwd=q8: the tied exchange does not follow the edge"; fails=$((fails + 1))
    elif out=$("$py" "$(dirname "$0")/compare_ckpt.py" "$dir/ckt" "$dir/ckt" 0 0); then
        echo "ok: S=2 x D=2 tied exchange q8: replicas identical every step, the copies of wte equal"
    else
        echo "$out"; echo "FAIL: S=2 x D=2 tied exchange q8: the copies of wte differ"; fails=$((fails + 1))
    fi
fi
# --dump-edge: the files of one pipeline with D x M micro-batches (replica r's
# are the global batch's r x M ..): activations bit for bit, gradients D times
# theirs (each replica's loss is its own M micro-batches' mean); 1f1b: auto
# would run one pipeline's micro-batches as halves (replicas keep them whole)
"$pz" train "${common[@]}" --stages 2 --micro-batches 4 --steps 1 --dump-edge 1 --dump-dir "$dir/d1" --schedule 1f1b \
    > /dev/null 2>&1 \
    || { echo "FAIL: --dump-edge of one pipeline"; fails=$((fails + 1)); }
if lrun "--dump-edge" /dev/null --steps 1 --dump-edge 1 --dump-dir "$dir/d2"; then
    "${PZ_TORCH_PYTHON:-/usr/bin/python3}" - "$dir/d1" "$dir/d2" <<'PY' || fails=$((fails + 1))
import os, sys
import numpy as np
a, b = sys.argv[1], sys.argv[2]
names = sorted(os.listdir(a))
if len(names) != 8 or sorted(os.listdir(b)) != names:
    print(f"FAIL: --dump-edge with replicas wrote {sorted(os.listdir(b))}, one pipeline {names}"); sys.exit(1)
for n in names:
    x, y = np.load(os.path.join(a, n)), np.load(os.path.join(b, n))
    if not np.array_equal(y, x if "-fwd-" in n else 2 * x):
        print(f"FAIL: --dump-edge {n}: not {'equal to' if '-fwd-' in n else '2 x'} one pipeline's"); sys.exit(1)
print("ok: S=2 x D=2 --dump-edge: micro-batches 0..3 of the global batch, as one pipeline with 4 writes them")
PY
fi
fi
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "replicas-equivalence: all passed"
