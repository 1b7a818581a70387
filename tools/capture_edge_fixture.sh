#!/usr/bin/env bash
# capture_edge_fixture.sh: regenerate tests/fixtures/edge/ (test_quant_error's
# captured tensors) from the fine-tuning example, examples/gpt_finetune.sh.
#
# usage: tools/capture_edge_fixture.sh [PIPEZIP]   (default build/pipezip)
#
# 1. examples/gpt_finetune.sh --steps 1 (no validation, no save) makes or
#    finds its cached demo base model and its 65536-token fine-tuning subset
#    under runs/cache/, and names both in its report.json;
# 2. pipezip train with the example's default fine-tuning arguments (2
#    stages, fwd=aq(q4),bwd=q8, 4 micro-batches of 4 x 128, 120 steps, lr
#    3e-4, warm-up 12, seed 1337; validation off: it does not change the
#    training) and --dump-edge 60, stopped once step 60's tensors are out;
# 3. the first 2 of the 4 sequences of micro-batch 0 of each direction, as
#    float32 .npy (2 x 128 x 384, 393 KB each), into tests/fixtures/edge/.
# The fixture in the repository was made by this script at the commit named
# in tests/fixtures/README.md. Needs python3 with numpy for step 3.
set -euo pipefail
export LC_ALL=C
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
pipezip=${1:-build/pipezip}
[ -x "$pipezip" ] || { echo "capture_edge_fixture.sh: no pipezip at $pipezip" >&2; exit 1; }
py=/usr/bin/python3
"$py" -c 'import numpy' 2>/dev/null || py=python3
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
pid=""

examples/gpt_finetune.sh --pipezip "$pipezip" --steps 1 --val-batches 0 --no-save --quiet --out "$work/prep" > /dev/null
read -r base shards < <("$py" -c 'import json,sys; r = json.load(open(sys.argv[1])); print(r["base_model"], r["train_shards"][0])' "$work/prep/report.json")

"$pipezip" train --init "$base" --data "$shards" --stages 2 --batch 4 --micro-batches 4 --seq 128 --steps 120 \
    --lr 3e-4 --warmup 12 --seed 1337 --threads 0 --eval-compress on --link-mbps 0 --error-metrics on \
    --compress 'fwd=aq(q4),bwd=q8' --val-every 0 --dump-edge 60 --dump-dir "$work/dump" \
    > "$work/train.jsonl" 2> "$work/train.err" &
pid=$!
# the dump is complete when step 60's line is out (the senders write before they encode)
while kill -0 "$pid" 2>/dev/null && ! grep -q '^{"step":60,' "$work/train.jsonl" 2>/dev/null; do sleep 2; done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
for d in fwd bwd; do
    [ -f "$work/dump/step60-edge0-1-$d-micro0.npy" ] || { echo "capture_edge_fixture.sh: no $d tensor; log:" >&2; tail "$work/train.err" >&2; exit 1; }
done

mkdir -p tests/fixtures/edge
"$py" - "$work/dump" tests/fixtures/edge <<'PY'
import sys, numpy as np
src, dst = sys.argv[1:]
for d in ("fwd", "bwd"):
    x = np.load(f"{src}/step60-edge0-1-{d}-micro0.npy")
    assert x.dtype == np.float32 and x.shape == (4, 128, 384), (x.dtype, x.shape)
    np.save(f"{dst}/finetune-step60-{d}.npy", np.ascontiguousarray(x[:2]))
    print(f"{dst}/finetune-step60-{d}.npy", x[:2].shape)
PY
