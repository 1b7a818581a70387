#!/usr/bin/env bash
# `--device cuda` where no GPU can be used must be a clear error (a message
# naming the device and the reason, exit status 1), never a crash. Checks the
# single process and a 2-stage pipeline. Without CUDA in the build the reason
# is that; on a machine with a usable GPU there is no error to check: SKIP (77).
#   device_error.sh PIPEZIP
set -uo pipefail
PZ="$1"
# pipezip loads the CUDA backend module only when --device asks for it: the
# executable itself needs none of the CUDA libraries (before, every process,
# even `pipezip --help`, mapped cuBLAS: 220 MB and 0.1 s per start)
needed=$(readelf -d "$PZ" | grep NEEDED) || { echo "FAIL: readelf -d $PZ"; exit 1; }
if grep -E "libcu(dart|blas|blasLt)" <<<"$needed"; then echo "FAIL: pipezip links the CUDA libraries"; exit 1; fi
# without its module next to it (or installed), --device cuda says so
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cp "$PZ" "$tmp/pipezip"
out=$("$tmp/pipezip" train --device cuda --preset tiny --data /nonexistent 2>&1); rc=$?
echo "$out"
[ "$rc" = 1 ] && grep -q "^pipezip train: error: --device cuda: \(cannot load the CUDA backend module: $tmp/pipezip-cuda.so: \|this pipezip was built without\|no usable CUDA GPU\)" <<<"$out" \
  || { echo "FAIL: --device cuda without the module: rc $rc"; exit 1; }
out=$("$PZ" train --device cuda --preset tiny --data /nonexistent 2>&1); rc=$?
echo "$out"
if ! grep -q "no usable CUDA GPU\|built without the CUDA backend\|cannot use CUDA device" <<<"$out"; then
  if grep -q "/nonexistent" <<<"$out"; then echo "SKIP: a CUDA GPU is usable here"; exit 77; fi
  echo "FAIL: no clear --device cuda error"; exit 1
fi
[ "$rc" = 1 ] || { echo "FAIL: exit status $rc, want 1"; exit 1; }
grep -q "^pipezip train: error: --device cuda: " <<<"$out" || { echo "FAIL: message format"; exit 1; }
# real data, so that rank 0 (cpu) cannot fail first and have rank 1 stopped before it reports
"$PZ" tokenize --out "$tmp/t.bin" "$0" "$0" "$0" >/dev/null || { echo "FAIL: tokenize"; exit 1; }
out=$(timeout 60 "$PZ" train --device cpu,cuda --stages 2 --preset tiny --data "$tmp/t.bin" --batch 2 --seq 16 2>&1); rc=$?
echo "$out"
[ "$rc" != 0 ] || { echo "FAIL: the pipeline with a CUDA stage exited 0"; exit 1; }
grep -q "rank 1.*--device cuda: " <<<"$out" || { echo "FAIL: rank 1 did not name the device"; exit 1; }
# generation: one process, and a 2-stage pipeline whose second stage asks for the GPU
model="$(dirname "$0")/../../fixtures/tiny_ref.safetensors"
out=$("$PZ" generate --device cuda --model "$model" --prompt-ids 1,2 --max-new-tokens 3 2>&1); rc=$?
echo "$out"
[ "$rc" = 1 ] && grep -q "^pipezip generate: error: --device cuda: " <<<"$out" || { echo "FAIL: generate --device cuda"; exit 1; }
out=$(timeout 60 "$PZ" generate --device cpu,cuda --stages 2 --model "$model" --prompt-ids 1,2 --max-new-tokens 3 2>&1); rc=$?
echo "$out"
[ "$rc" != 0 ] && grep -q "rank 1.*--device cuda: " <<<"$out" || { echo "FAIL: generate rank 1 did not name the device"; exit 1; }
out=$("$PZ" generate --device cpu,cuda --model "$model" --prompt-ids 1,2 --max-new-tokens 3 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "2 entries for 1 stage" <<<"$out" || { echo "FAIL: generate device list: $out"; exit 1; }
out=$("$PZ" train --device tpu --preset tiny --data /nonexistent 2>&1); rc=$?
[ "$rc" = 1 ] && grep -q "unknown device 'tpu'" <<<"$out" || { echo "FAIL: unknown device: $out"; exit 1; }
echo "ok"
