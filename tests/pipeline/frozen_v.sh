#!/usr/bin/env bash
# --dp-compress-what grad-frozen-v (runtime/dp/onebit.c): sign+EF over the
# gradient average, AdamW's v frozen when --dp-warmup ends. On the tiny
# preset, S=1 x D=2, warm-up 3, 12 steps, a checkpoint every 6:
#  - v in the step-6 and step-12 checkpoints is the same, bit for bit, in
#    every tensor, while m and the parameters moved; the same run with
#    --dp-compress-what grad (v not frozen) must differ there, or the check
#    could not fail;
#  - a run that loses rank 1 after step 6's checkpoint, resumed, logs steps
#    7..12 bit for bit as the uninterrupted run and ends in the same
#    checkpoint (m, the frozen v, the parameters, bitwise);
#  - the replicas stay identical every step (PIPEZIP_DP_CHECK=step).
#   usage: frozen_v.sh PATH/TO/pipezip
set -u
pz="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
here="$(dirname "$0")"
cat "$here"/../../runtime/dp/*.c > "$dir/text.txt"
"$pz" tokenize --out "$dir/train.bin" "$dir/text.txt" > /dev/null || exit 1
common=(--preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --steps 12 --lr 1e-3 --val-every 0 --threads 1
        --seed 7 --grad-clip 1.0 --replicas 2 --dp-compress sign --dp-reduce twophase --dp-warmup 3
        --checkpoint-every 6)
export PIPEZIP_DP_CHECK=step
fails=0
run() {   # what out ckdir [extra...]
    local what="$1" out="$2" ck="$3"; shift 3
    timeout 60 "$pz" train "${common[@]}" --dp-compress-what "$what" --checkpoint-dir "$ck" "$@" > "$out" 2>"$dir/err"
}
# which kinds of tensor (params, adam_m, adam_v) the checkpoints of steps 6 and 12 hold alike in every tensor
same_kinds() {   # ckdir
    python3 - "$1" <<'PY'
import array, json, struct, sys
def load(p):
    with open(p, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        out = {}
        for k, t in head.items():
            if k != "__metadata__":
                b, e = t["data_offsets"]
                f.seek(8 + n + b)
                out[k] = array.array("f", f.read(e - b))
        return out
a, b = (load(f"{sys.argv[1]}/step-{s:08d}/rank-0.safetensors") for s in (6, 12))
kinds = sorted({k.split("/")[0] for k in a})
print(" ".join(k for k in kinds if all(a[n] == b[n] for n in a if n.startswith(k + "/"))) or "-")
PY
}
if ! run grad-frozen-v "$dir/a.jsonl" "$dir/ca"; then
    tail -5 "$dir/err"; echo "FAIL: the grad-frozen-v run failed"; exit 1
fi
kinds=$(same_kinds "$dir/ca")
[ "$kinds" = adam_v ] && echo "ok: grad-frozen-v: v frozen from step 6 to 12, m and the parameters moved" \
    || { echo "FAIL: grad-frozen-v: alike from step 6 to 12: $kinds (want adam_v only)"; fails=$((fails + 1)); }
if run grad "$dir/g.jsonl" "$dir/cg"; then
    kinds=$(same_kinds "$dir/cg")
    [ "$kinds" = - ] && echo "ok: grad (control): v moved from step 6 to 12" \
        || { echo "FAIL: grad: alike from step 6 to 12: $kinds (v should move)"; fails=$((fails + 1)); }
else
    tail -5 "$dir/err"; echo "FAIL: the grad run failed"; fails=$((fails + 1))
fi
if PIPEZIP_FAULT=step:6:1 run grad-frozen-v /dev/null "$dir/cb"; then
    echo "FAIL: the run with rank 1 killed succeeded"; fails=$((fails + 1))
elif ! run grad-frozen-v "$dir/b.jsonl" "$dir/cb" --resume auto; then
    tail -5 "$dir/err"; echo "FAIL: the resumed run failed"; fails=$((fails + 1))
else
    python3 - "$dir/a.jsonl" "$dir/b.jsonl" <<'PY' || fails=$((fails + 1))
import json, sys
a, b = ({r["step"]: r["loss"] for r in map(json.loads, open(p)) if "loss" in r} for p in sys.argv[1:3])
if sorted(b) != list(range(7, 13)) or any(a[s] != b[s] for s in b):
    print(f"FAIL: resumed grad-frozen-v: {b} vs {a}"); sys.exit(1)
print("ok: resumed grad-frozen-v: steps 7..12 bit for bit")
PY
    python3 "$here/compare_ckpt.py" "$dir/ca" "$dir/cb" 0 0 > "$dir/cmp" \
        && echo "ok: resumed grad-frozen-v: the last checkpoint (parameters, m, frozen v) bit for bit" \
        || { cat "$dir/cmp"; echo "FAIL: resumed grad-frozen-v: the last checkpoints differ"; fails=$((fails + 1)); }
fi
[ "$fails" -eq 0 ] && echo "frozen_v: all passed" || echo "frozen_v: $fails failed"
exit $((fails > 0))
