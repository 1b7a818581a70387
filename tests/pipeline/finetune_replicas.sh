#!/usr/bin/env bash
# The fine-tuning example with replicas (issue 25: "the fine-tuning example
# gains --replicas"; "the summary line and the example report show" the
# data-parallel bytes and sync): examples/gpt_finetune.sh --stages 2
# --replicas 2 --dp-compress sign from a small model trained here. The
# report names the replicas and the codec, report.json carries the run's
# dp_raw, dp_wire, dp_sync_s and dp_hidden_s (sign: under a tenth of the raw
# bytes on the wire), and report.txt prints its "data parallel" line;
# --dp-compress without --replicas is refused before anything runs, and so
# is a value pipezip refuses (--link-mbps -5), before the base model.
#   usage: finetune_replicas.sh PATH/TO/pipezip
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
pz_corpus || exit 1
ex="$(dirname "$0")/../../examples/gpt_finetune.sh"
"$pz" train --preset tiny --data "$dir/train.bin" --steps 1 --batch 2 --seq 32 --threads 1 --save "$dir/init.safetensors" \
    > /dev/null 2>"$dir/init.err" || { cat "$dir/init.err"; echo "FAIL: the starting model"; exit 1; }
args=(--init "$dir/init.safetensors" --data "$dir/train.bin" --val-data "$dir/train.bin" --train-tokens 0 --steps 4
      --val-every 2 --val-batches 2 --batch 2 --seq 32 --micro-batches 2 --threads 1 --out "$dir/run" --cache "$dir/cache"
      --quiet)
if ! PIPEZIP="$pz" timeout 150 bash "$ex" "${args[@]}" --stages 2 --replicas 2 --dp-compress sign > "$dir/report.txt" \
     2>"$dir/err"; then
    tail -20 "$dir/err"; fail "gpt_finetune.sh --replicas 2 --dp-compress sign"
else
    cat "$dir/report.txt"
    grep -q "^pipeline .*2 stages x 2 replicas" "$dir/report.txt" || fail "the report does not name the replicas"
    grep -q "^data parallel .* sent to average .* of gradients; .* ms/step in flight" "$dir/report.txt" \
        || fail "no 'data parallel' line in the report"
    grep -q "2 replicas (gradient average: sign)" "$dir/err" || fail "the example did not pass --dp-compress sign"
    python3 - "$dir/run/report.json" <<'PY' || fail "report.json's data_parallel"
import json, sys
r = json.load(open(sys.argv[1]))
dp = r.get("data_parallel") or {}
assert r.get("replicas") == 2, r.get("replicas")
assert set(dp) == {"dp_raw", "dp_wire", "dp_sync_s", "dp_hidden_s"}, dp
assert dp["dp_raw"] > 0 and 0 < dp["dp_wire"] < dp["dp_raw"] / 10, dp   # sign: 1 bit an element and the scales
assert dp["dp_sync_s"] > 0 and 0 <= dp["dp_hidden_s"] <= dp["dp_sync_s"], dp
print(f"ok: report.json: {dp['dp_wire']} bytes on the wire for {dp['dp_raw']} of gradients, sync {dp['dp_sync_s']:.3f} s")
PY
fi
if PIPEZIP="$pz" bash "$ex" "${args[@]}" --dp-compress sign > /dev/null 2>"$dir/no.err" ||
   ! grep -q -- "--dp-compress needs --replicas 2 or more" "$dir/no.err"; then
    cat "$dir/no.err"; fail "--dp-compress without --replicas was not refused"
fi
# uncompressed: the activations' wire bytes exceed the raw ones by the sample
# ids, which the report must not print as "saved -0.0 MB"
if ! PIPEZIP="$pz" timeout 60 bash "$ex" "${args[@]}" --stages 2 --compress none --steps 2 --val-batches 0 --no-save \
       --out "$dir/run-none" > "$dir/none.txt" 2>"$dir/none.err"; then
    tail -20 "$dir/none.err"; fail "gpt_finetune.sh --compress none"
elif ! grep -qE "^activations \(fwd\) .*: saved none \([0-9]+ bytes more: sample ids" "$dir/none.txt" ||
     ! grep -qE "^gradients \(bwd\) .*: saved none, 32.00 bits" "$dir/none.txt" || grep -q -- "-0\.0" "$dir/none.txt"; then
    cat "$dir/none.txt"; fail "the uncompressed report's 'saved'"
else
    grep "saved none" "$dir/none.txt"
fi
# a bad flag pipezip checks (--link-mbps -5) fails in the first seconds,
# before the demo base model's 300 pre-training steps (minutes) and the
# "before" evaluation: the example runs pipezip train --check first
t0=$SECONDS
if PIPEZIP="$pz" timeout 30 bash "$ex" --data "$dir/train.bin" --val-data "$dir/train.bin" --base-data "$dir/train.bin"        --base-val-data "$dir/train.bin" --cache "$dir/cache-bad" --out "$dir/run-bad" --link-mbps -5 > /dev/null 2>"$dir/bad.err" ||
   ! grep -q "^examples/gpt_finetune.sh: error: --link-mbps: expected a rate" "$dir/bad.err" ||
   ls "$dir/cache-bad"/base-* > /dev/null 2>&1 || [ -e "$dir/run-bad/before.json" ]; then
    cat "$dir/bad.err"; fail "--link-mbps -5 was not refused up front ($((SECONDS - t0)) s)"
else
    echo "ok: --link-mbps -5 refused in $((SECONDS - t0)) s, before the base model: $(head -n 1 "$dir/bad.err")"
fi
[ "$fails" = 0 ] && echo "finetune-replicas: all passed" || { echo "finetune-replicas: $fails failed"; exit 1; }
