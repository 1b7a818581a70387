#!/usr/bin/env bash
# Compressed pipelines (runtime/edge/policy.c, runtime/edge/edge.c, runtime/observe/metrics.c,
# the throttle in runtime/net/transport.c):
#  1. fp32 on every edge is lossless: the same losses, bit for bit, as none.
#  2. A per-edge policy on 3 stages: each edge and direction uses its codec
#     (metrics file), wire bytes match the codec's size formula, relative
#     errors are in the codec's range, AQ sends deltas from the second epoch
#     on (sample ids crossed the middle stage), and the last step reports
#     validation with and without compression.
#  3. --link-mbps: a step takes at least the serialization time of its
#     messages at that rate, and about that much more than unthrottled.
#  4. Bad policies and policy files fail before any process starts, naming
#     the place; a failed run leaves no metrics files.
#   usage: pipeline_compress.sh PATH/TO/pipezip
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
py=python3
pz_corpus --val-out "$dir/val.bin" --val-fraction 0.2 || exit 1

# tiny: C = 96; B=2, T=32 -> 6144 floats = 24576 bytes per micro-batch tensor
common=(--preset tiny --data "$dir/train.bin" --val-data "$dir/val.bin" --batch 2 --seq 32
        --micro-batches 2 --lr 1e-3 --val-batches 2 --threads 1 --seed 11)

# 1. lossless codec == raw floats
"$pz" train "${common[@]}" --stages 2 --steps 5 --val-every 5 > "$dir/none.jsonl" 2>"$dir/none.err" \
  || { cat "$dir/none.err"; fail "run with no policy"; }
"$pz" train "${common[@]}" --stages 2 --steps 5 --val-every 5 --compress 'both=fp32' > "$dir/fp32.jsonl" 2>"$dir/fp32.err" \
  || { cat "$dir/fp32.err"; fail "run with both=fp32"; }
"$py" - "$dir/none.jsonl" "$dir/fp32.jsonl" <<'PY' || fail "fp32 policy changed the losses"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
la = [r["loss"] for r in a if "loss" in r]; lb = [r["loss"] for r in b if "loss" in r]
assert len(la) == 5 and la == lb, (la, lb)
va = [r["val_loss"] for r in a if "val_loss" in r]; vb = [r["val_loss"] for r in b if "val_loss" in r and r["compressed"]]
assert va and va[0] == vb[0], (va, vb)
# raw floats plus 16 bytes of sample ids per activation message (B=2)
s = [r for r in a if "fwd_raw" in r][0]
assert s["fwd_raw"] == 2 * 24576 and s["fwd_wire"] == 2 * (24576 + 16) and s["bwd_wire"] == 2 * 24576, s
print("fp32 on every edge: losses identical to raw floats:", la[-1])
PY

# 2. per-edge policy on 3 stages, over several epochs of a small dataset
head -c 2400 "$dir/text.txt" > "$dir/small.txt"   # 74 samples: ~18 steps per epoch
"$pz" tokenize --out "$dir/small.bin" "$dir/small.txt" >/dev/null || exit 1
printf '# edge 0-1 quantizes, edge 1-2 keeps AQ buffers\n0-1:fwd=q8,bwd=q4 \n\n1-2:fwd=aq(q4)  # deltas\n*:bwd=topk:0.25\n' > "$dir/policy.txt"
# (--schedule 1f1b: auto would send half micro-batches, B=1, whose q8 channel
# scales take twice the share of a message: ratio 3.48)
if "$pz" train "${common[@]}" --data "$dir/small.bin" --stages 3 --steps 40 --val-every 20 --schedule 1f1b \
     --policy-file "$dir/policy.txt" --metrics "$dir/m" > "$dir/p3.jsonl" 2>"$dir/p3.err"; then
  "$py" - "$dir/p3.jsonl" "$dir/m.jsonl" "$dir/m.csv" <<'PY' || fail "3-stage policy metrics"
import csv, json, math, sys
out = [json.loads(l) for l in open(sys.argv[1])]
met = [json.loads(l) for l in open(sys.argv[2])]
rows = list(csv.DictReader(open(sys.argv[3])))
assert len(met) == 40 and len(rows) == 4, (len(met), len(rows))
want = {("0-1", "fwd"): "q8:", ("0-1", "bwd"): "q4:", ("1-2", "fwd"): "aq(q4:", ("1-2", "bwd"): "topk:0.25"}
for r in rows:
    assert r["codec"].startswith(want[(r["edge"], r["dir"])]), r
    for k in ("raw_bytes", "wire_bytes", "ratio", "bits_per_elem", "enc_ms_mean", "dec_ms_mean"):
        assert math.isfinite(float(r[k])) and float(r[k]) > 0, (k, r)
by = {(e["edge"], e["dir"]): e for e in met[0]["edges"]}
# q8 with per-channel fp32 scales: 1 byte per element plus header and scales
assert 3.5 < by[("0-1", "fwd")]["ratio"] < 4.0, by[("0-1", "fwd")]
assert 6.5 < by[("0-1", "bwd")]["ratio"] < 8.0, by[("0-1", "bwd")]
assert 0 < by[("0-1", "fwd")]["rel_err"] < 0.02 and 0 < by[("0-1", "bwd")]["rel_err"] < 0.3
# AQ: the first sight of a sample goes at full precision, later ones as q4 deltas
first = met[0]["edges"][2]; last = met[-1]["edges"][2]
assert first["codec"].startswith("aq(") and first["ratio"] < 1.01, first
assert last["ratio"] > 6.0 and 0 <= last["rel_err"] < 0.2, last
# the last step: validation compressed and not
v = [r for r in out if "val_loss" in r and r["step"] == 40]
assert sorted(r["compressed"] for r in v) == [False, True], v
s = [r for r in out if r.get("summary")][0]
assert s["steps"] == 40 and s["fwd_wire"] < s["fwd_raw"] and s["bwd_wire"] < s["bwd_raw"], s
assert s["codec_state_bytes"][1] > 0 and s["codec_state_bytes"][2] > 0, s  # AQ buffers on both sides of 1-2
print("3 stages: q8 %.2fx, q4 %.2fx, aq(q4) %.2fx -> %.2fx, topk %.2fx; final val %s" % (
    by[("0-1", "fwd")]["ratio"], by[("0-1", "bwd")]["ratio"], first["ratio"], last["ratio"],
    by[("1-2", "bwd")]["ratio"], [(r["compressed"], round(r["val_loss"], 4)) for r in v]))
PY
else
  cat "$dir/p3.err"; fail "3-stage run with a policy file"
fi

# 3. simulated link: 4 Mbit/s. Per step, stage 0 sends 2 activations of 24592
# bytes and its tied-embedding gradient (256 x 96 floats = 98304 bytes) over
# the same link, one after the other: >= 147488 * 8 / 4e6 = 295 ms per step
"$pz" train "${common[@]}" --stages 2 --steps 6 --val-every 0 --link-mbps 4 > "$dir/slow.jsonl" 2>"$dir/slow.err" \
  || { cat "$dir/slow.err"; fail "run with --link-mbps"; }
"$pz" train "${common[@]}" --stages 2 --steps 6 --val-every 0 > "$dir/fast.jsonl" 2>"$dir/fast.err" \
  || { cat "$dir/fast.err"; fail "run without --link-mbps"; }
"$py" - "$dir/slow.jsonl" "$dir/fast.jsonl" <<'PY' || fail "--link-mbps timing"
import json, statistics, sys
slow = [json.loads(l) for l in open(sys.argv[1])]; fast = [json.loads(l) for l in open(sys.argv[2])]
ms_s = statistics.median(r["ms"] for r in slow if "ms" in r); ms_f = statistics.median(r["ms"] for r in fast if "ms" in r)
floor = (2 * 24592 + 98304) * 8 / 4e6 * 1e3
print("4 Mbit/s: median step %.1f ms (serialization floor %.1f ms), unthrottled %.1f ms" % (ms_s, floor, ms_f))
assert ms_s >= 0.95 * floor, "a step beat the link"
# the gradients (other direction) add at most their own 98 ms on the critical path
assert ms_s < ms_f + floor + 2 * 24576 * 8 / 4e6 * 1e3 + 60, "slower than the link explains"
assert [r["loss"] for r in slow if "loss" in r] == [r["loss"] for r in fast if "loss" in r], "throttling changed the numbers"
PY

# 4. errors: before any process starts, with a pointer; no metrics files left
check_err() {  # expected-text args...
  local want="$1"; shift
  if "$pz" train "${common[@]}" --steps 2 "$@" > "$dir/e.out" 2> "$dir/e.err"; then
    fail "accepted: $*"; return
  fi
  grep -qF -- "$want" "$dir/e.err" || { cat "$dir/e.err"; fail "message for '$*' lacks '$want'"; }
  grep -q '\[rank' "$dir/e.err" && fail "'$*' started ranks before failing"
}
check_err "edge 1-2 does not exist" --stages 2 --compress '1-2:fwd=q4'
check_err "bits must be 1..8" --stages 2 --compress 'fwd=q4,bwd=q0'
check_err "expected fwd=CODEC" --stages 2 --compress '0-1:up=q4'
check_err "needs --stages 2" --compress 'fwd=q4'
check_err "expected on or off" --stages 2 --eval-compress maybe
check_err "expected a rate in Mbit/s" --stages 2 --link-mbps fast
printf 'fwd=q4\n0-1:fwd=nuq9\n' > "$dir/bad.txt"
check_err "bad.txt:2" --stages 2 --policy-file "$dir/bad.txt"
check_err "No such file" --stages 2 --policy-file "$dir/missing.txt"
# a run that fails mid-way (a stage killed) leaves no metrics files
"$pz" train "${common[@]}" --stages 2 --steps 100000 --val-every 0 --compress 'fwd=q4' --metrics "$dir/dead" \
  > "$dir/dead.out" 2>/dev/null &
launcher=$!
for _ in $(seq 1 200); do grep -q '"step":3' "$dir/dead.out" 2>/dev/null && break; sleep 0.1; done
victim=$(pgrep -P "$launcher" | sort -n | sed -n 2p)
if [ -n "$victim" ]; then
  kill -KILL "$victim"
  wait "$launcher" && fail "launcher exited 0 after a rank was killed"
  ls "$dir/dead.jsonl" "$dir/dead.csv" 2>/dev/null && fail "metrics files of a failed run were left"
else
  kill -KILL "$launcher"; fail "no rank 1 process to kill"
fi

echo "pipeline-compress: $fails failure(s)"
[ "$fails" = 0 ]
