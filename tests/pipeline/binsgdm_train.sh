#!/usr/bin/env bash
# --optimizer binsgdm (BinSGDM/Birder, docs/data-parallel.md) through
# `pipezip train` on the tiny preset: refused where it does not apply, naming
# why; the loss falls over 30 steps alone (D = 1), with 2 replicas
# (all-gather), 4 (hierarchical, 2 simulated hosts) and 2 of a 2-stage
# pipeline, the replicas' parameters byte-identical after every step
# (PIPEZIP_DP_CHECK=step); the tied embedding's two copies stay equal; a run
# killed after step 10's checkpoint and resumed logs steps 11..20 bit for bit
# as the uninterrupted one (D = 1: m and b in the shard; D = 2: each
# replica's in step-N/rank-0.bsgdR, which differ: each replica folds in its
# own gradients, --dp-warmup's steps too), and a checkpoint without replica
# 1's state is refused.
#   usage: binsgdm_train.sh PATH/TO/pipezip
set -u
pz="$1" py=python3 dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# a corpus: the runtime's C sources
cat "$(dirname "$0")"/../../runtime/*/*.c > "$dir/text.txt" && "$pz" tokenize --out "$dir/train.bin" "$dir/text.txt" > /dev/null || exit 1
common=(--preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --lr 1e-3 --val-every 0 --threads 1 --seed 7
        --micro-batches 2 --optimizer binsgdm)
export PIPEZIP_DP_CHECK=step
fails=0

refuse() {   # expected-words flags...
    local want="$1"; shift
    if "$pz" train "${common[@]}" --steps 2 "$@" > "$dir/x.out" 2>"$dir/x.err"; then
        echo "FAIL: '$*' was accepted"; fails=$((fails + 1))
    elif ! grep -q -- "$want" "$dir/x.err" || [ -s "$dir/x.out" ]; then
        cat "$dir/x.err"; echo "FAIL: '$*': no '$want' in the error, or output written"; fails=$((fails + 1))
    fi
}
refuse "binsgdm sends its own 1-bit messages" --replicas 2 --dp-compress sign
refuse "--dp-compress 'ef(sign)'" --replicas 2 --dp-compress 'ef(sign)'
refuse "--optimizer must be adamw or binsgdm" --optimizer lamb
"$pz" train --help 2>&1 | grep -q -- "--optimizer" || { echo "FAIL: --help does not list --optimizer"; fails=$((fails + 1)); }

falls() {   # label jsonl: the mean of the last 5 losses at least 1.0 under the first
    "$py" - "$@" <<'PY'
import json, sys
label, path = sys.argv[1], sys.argv[2]
l = [r["loss"] for r in map(json.loads, open(path)) if "loss" in r]
end = sum(l[-5:]) / 5
if len(l) != 30 or not end < l[0] - 1.0:
    print(f"FAIL: {label}: {len(l)} losses, first {l[0]:.3f}, last five {end:.3f}"); sys.exit(1)
print(f"ok: {label}: loss {l[0]:.3f} -> {end:.3f} (mean of the last 5 of 30 steps)")
PY
}
for run in "D=1:--replicas 1" "D=2 allgather:--replicas 2" "D=4 hierarchical:--replicas 4 --dp-reduce hierarchical --dp-hosts 2" \
           "S=2 x D=2:--stages 2 --replicas 2"; do
    label="${run%%:*}"
    read -r -a flags <<<"${run#*:}"
    if ! timeout 120 "$pz" train "${common[@]}" --steps 30 "${flags[@]}" > "$dir/r.jsonl" 2>"$dir/r.err"; then
        tail -20 "$dir/r.err"; echo "FAIL: $label: the run failed"; fails=$((fails + 1)); continue
    fi
    falls "binsgdm $label" "$dir/r.jsonl" || fails=$((fails + 1))
done

# the tied wte: the first and the last stage's copies (and their m, b) stay
# equal bit for bit: S=2 x D=6 twophase cuts each stage's vector into chunks
# whose bounds fall inside wte at other places on the two stages, so only
# wte's own messages keep the random bits alike
tied_equal() {   # label checkpoint-step-dir first-shard last-shard
    "$py" - "$@" <<'PY'
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in h.items() if k != "__metadata__"}
label, d = sys.argv[1], sys.argv[2]
a, z = tensors(f"{d}/{sys.argv[3]}"), tensors(f"{d}/{sys.argv[4]}")
keys = [k for k in a if k.endswith("wte.weight")]
bad = [k for k in keys if a[k] != z.get(k)]
if len(keys) != 3 or bad:
    print(f"FAIL: {label}: the tied copies differ: {bad} (of {keys})"); sys.exit(1)
print(f"ok: {label}: both stages' wte, m and b equal bit for bit")
PY
}
if timeout 120 "$pz" train "${common[@]}" --steps 4 --micro-batches 1 --stages 2 --replicas 6 --checkpoint-dir "$dir/t6" \
    > /dev/null 2>"$dir/t.err"; then
    tied_equal "binsgdm S=2 x D=6 twophase" "$dir/t6/step-00000004" rank-0.safetensors rank-1.safetensors || fails=$((fails + 1))
else
    tail -20 "$dir/t.err"; echo "FAIL: S=2 x D=6: the run failed"; fails=$((fails + 1))
fi

same() {   # label a.jsonl b.jsonl
    "$py" - "$@" <<'PY'
import json, sys
label = sys.argv[1]
a = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[2])) if "loss" in r}
b = {r["step"]: r["loss"] for r in map(json.loads, open(sys.argv[3])) if "loss" in r}
if sorted(b) != list(range(11, 21)) or any(a[s] != b[s] for s in b):
    print(f"FAIL: {label}: {b} vs {a}"); sys.exit(1)
print(f"ok: {label}: steps 11..20 bit for bit")
PY
}
for D in 1 2; do
    rp=(--steps 20 --replicas "$D" --checkpoint-every 10 --dp-warmup 2)
    label="binsgdm D=$D resumed"
    if ! "$pz" train "${common[@]}" "${rp[@]}" --checkpoint-dir "$dir/a$D" > "$dir/a.jsonl" 2>"$dir/a.err"; then
        tail -20 "$dir/a.err"; echo "FAIL: $label: the uninterrupted run failed"; fails=$((fails + 1)); continue
    fi
    if PIPEZIP_FAULT=step:10:$((D - 1)) "$pz" train "${common[@]}" "${rp[@]}" --checkpoint-dir "$dir/b$D" \
        > /dev/null 2>&1; then
        echo "FAIL: $label: the run with rank $((D - 1)) killed after step 10 succeeded"; fails=$((fails + 1))
    elif ! "$pz" train "${common[@]}" "${rp[@]}" --checkpoint-dir "$dir/b$D" --resume auto > "$dir/b.jsonl" 2>"$dir/b.err"; then
        tail -20 "$dir/b.err"; echo "FAIL: $label: the resumed run failed"; fails=$((fails + 1))
    else
        same "$label" "$dir/a.jsonl" "$dir/b.jsonl" || fails=$((fails + 1))
    fi
done
# each replica folds in its own gradients (also in --dp-warmup's steps): their m and b differ
if cmp -s "$dir"/a2/step-00000020/rank-0.bsgd0 "$dir"/a2/step-00000020/rank-0.bsgd1; then
    echo "FAIL: the replicas hold the same m and b: were the gradients averaged before binsgdm's step?"; fails=$((fails + 1))
fi
# replica 1's m and b missing: refused, naming the file (rp: the D = 2 run's flags)
rm -f "$dir"/a2/step-00000010/rank-0.bsgd1 "$dir"/a2/step-00000020/rank-0.bsgd1
if "$pz" train "${common[@]}" "${rp[@]}" --checkpoint-dir "$dir/a2" --resume auto > /dev/null 2>"$dir/c.err"; then
    echo "FAIL: resumed without replica 1's binsgdm state"; fails=$((fails + 1))
elif ! grep -q "rank-0.bsgd1 is missing" "$dir/c.err"; then
    tail -5 "$dir/c.err"; echo "FAIL: the missing state is not named"; fails=$((fails + 1))
else
    echo "ok: a checkpoint without replica 1's binsgdm state is refused"
fi
[ "$fails" -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "binsgdm-train: all passed"
