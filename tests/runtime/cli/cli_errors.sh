#!/usr/bin/env bash
# Bad input to the pipezip command line must give a clear message naming the
# problem and a non-zero exit, and leave no half-written file.
#   usage: cli_errors.sh PATH/TO/pipezip
set -u
pz="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0; n=0

# expect_fail "description" "regex the message must match" cmd...
expect_fail() {
  local what="$1" pattern="$2"; shift 2
  n=$((n + 1))
  local out rc
  out=$("$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" = 0 ]; then
    echo "FAIL: $what: exit 0"; fails=$((fails + 1))
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: message does not match /$pattern/: $out"; fails=$((fails + 1))
  else
    echo "ok: $what -> $(head -n 1 <<<"$out")"
  fi
}

printf 'hello world, this is a small corpus of text.\n%.0s' $(seq 1 200) > "$dir/text.txt"
"$pz" tokenize --out "$dir/tok.bin" --val-out "$dir/val.bin" --val-fraction 0.1 "$dir/text.txt" \
  || { echo "FAIL: tokenize of a good file"; exit 1; }

expect_fail "unknown command" "unknown command 'trian'" "$pz" trian
expect_fail "unknown flag" "unknown flag '--bogus'" "$pz" train --preset tiny --data "$dir/tok.bin" --bogus 1
expect_fail "flag without value" "--steps needs a value" "$pz" train --preset tiny --data "$dir/tok.bin" --steps
expect_fail "a flag where a value belongs" "--save needs a value: the next argument, --steps, is a flag" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --save --steps 3
expect_fail "a flag= where a value belongs" "--compress needs a value: the next argument, --val-every=3, is a flag" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --compress --val-every=3
expect_fail "a number just over its bound, as written" "--lr: 10.000001 is out of range \[0, 10\]" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --lr 10.000001
expect_fail "a large bound in full" "--grad-clip: 1000000001 is out of range \[0, 1000000000\]" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --grad-clip 1000000001
expect_fail "non-numeric value" "not an integer" "$pz" train --preset tiny --data "$dir/tok.bin" --steps ten
expect_fail "out-of-range value" "out of range" "$pz" train --preset tiny --data "$dir/tok.bin" --batch 0
expect_fail "unknown preset" "unknown preset 'huge'" "$pz" train --preset huge --data "$dir/tok.bin"
expect_fail "both preset and init" "exactly one of --preset" "$pz" train --preset tiny --init x.safetensors --data "$dir/tok.bin"
expect_fail "missing data flag" "--data is required" "$pz" train --preset tiny
expect_fail "missing data file" "nothing.bin" "$pz" train --preset tiny --data "$dir/nothing.bin" --steps 1
expect_fail "seq longer than the position table" "sequence length 65 must be in \[1, 64\]" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --seq 65 --steps 1
head -c 2000 /dev/urandom > "$dir/garbage.bin"
expect_fail "shard with bad magic" "garbage.bin.*magic" "$pz" train --preset tiny --data "$dir/garbage.bin" --steps 1
head -c 1500 "$dir/tok.bin" > "$dir/short.bin"
expect_fail "truncated shard" "short.bin" "$pz" train --preset tiny --data "$dir/short.bin" --steps 1
expect_fail "split naming too many stages" "names more than 2 stages" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --split 1,1,0 --steps 1
expect_fail "split not covering the model" "covers 1 of the model's 2 blocks" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --split 1,0 --steps 1
expect_fail "split leaving a middle stage empty" "--split '1,0,1': stage 1 would own nothing" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 3 --split 1,0,1 --steps 1
expect_fail "split with garbage" "expected block counts" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --split 1,x --steps 1
expect_fail "more stages than blocks allow" "at most 4 stages" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 5 --steps 1
expect_fail "unknown schedule" "1f1b" "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --schedule zigzag
expect_fail "trace without stages" "--trace needs --stages" "$pz" train --preset tiny --data "$dir/tok.bin" --trace t.json
# probing findings (issue 13): outputs that are not regular files are not
# replaced, the same file twice, readers that would never end, NaN weights
expect_fail "--save onto a device" "--save /dev/null is a device, not a regular file" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --save /dev/null
[ -c /dev/null ] || { echo "FAIL: /dev/null is no longer a character device"; fails=$((fails + 1)); }
expect_fail "--out and --val-out the same file" "name the same file" \
  "$pz" tokenize --out "$dir/same.bin" --val-out "$dir/./same.bin" --val-fraction 0.1 "$dir/text.txt"
expect_fail "--policy-file /dev/zero" "more than the 1048576 bytes" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --policy-file /dev/zero
expect_fail "tokenize /dev/zero" "more than the 1073741824 bytes" "$pz" tokenize --out "$dir/z.bin" /dev/zero
[ ! -e "$dir/z.bin" ] || { echo "FAIL: tokenize /dev/zero left $dir/z.bin"; fails=$((fails + 1)); }
"$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --save "$dir/m.safetensors" >/dev/null 2>&1
python3 - "$dir/m.safetensors" "$dir/nan.safetensors" <<'PY'
import json, struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
name = next(k for k in h if k.endswith("h.1.mlp.c_fc.bias"))
off = 8 + n + h[name]["data_offsets"][0] + 8
b[off:off + 4] = struct.pack("<f", float("inf"))
open(sys.argv[2], "wb").write(b)
PY
out=$("$pz" eval --model "$dir/nan.safetensors" --data "$dir/tok.bin" --batches 1 2>"$dir/err"); rc=$?
n=$((n + 1))
if [ "$rc" != 0 ] && grep -qE '^\{"loss":null,"batches":1,"tokens":[0-9]+\}$' <<<"$out" && grep -q "h.1.mlp.c_fc.bias\[2\] = inf" "$dir/err"; then
  echo "ok: eval of a model with an infinite weight -> $out, $(cat "$dir/err")"
else
  echo "FAIL: eval with an infinite weight: rc $rc, '$out', $(cat "$dir/err")"; fails=$((fails + 1))
fi
expect_fail "training from non-finite weights names the tensor" "weights are not finite: h.1.mlp.c_fc.bias" \
  "$pz" train --init "$dir/nan.safetensors" --data "$dir/tok.bin" --steps 1
expect_fail "interleaved from non-finite weights names the rank" "rank [01]'s weights are not finite" \
  "$pz" train --init "$dir/nan.safetensors" --data "$dir/tok.bin" --steps 1 --stages 2 --schedule interleaved:v=2 \
  --micro-batches 2 --split 0,1,1,0
expect_fail "--metrics into a missing directory names --metrics" "^pipezip train: error: --metrics " \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --metrics "$dir/no/such/m"
expect_fail "aq mem=0" "mem=0 would mean the default" "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 \
  --compress 'fwd=aq(q4,mem=0)'
expect_fail "a link too slow for --peer-timeout" "takes .* s on it, longer than --peer-timeout" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --steps 1 --link-mbps 1e-6
# a writer killed before its rename left NAME.tmp.PID: the next save sweeps
# it (its process is gone); a live process's temporary stays
touch "$dir/sw.safetensors.tmp.999999" "$dir/sw.safetensors.tmp.1"
n=$((n + 1))
if "$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --save "$dir/sw.safetensors" >/dev/null 2>&1 &&
   [ ! -e "$dir/sw.safetensors.tmp.999999" ] && [ -e "$dir/sw.safetensors.tmp.1" ]; then
  echo "ok: --save swept a dead writer's temporary and kept a live one's"
else
  echo "FAIL: stale temporaries: $(ls "$dir"/sw.*)"; fails=$((fails + 1))
fi
rm -f "$dir"/sw.safetensors.tmp.*
expect_fail "link delay without stages" "--link-latency-ms needs --stages" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --link-latency-ms 25
expect_fail "negative link delay" "expected a one-way delay in milliseconds" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --link-latency-ms=-5
expect_fail "link delay on a missing edge" "1-2" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --link-latency-ms '1-2=5'
expect_fail "an edge's rate given twice" "--link-mbps: edge 0-1 is given twice \\(5, then 6\\)" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --link-mbps '0-1=5;0-1=6'
# --check: the same checks, then exit 0 without reading the data or training
expect_fail "--check refuses what train refuses" "--link-mbps: expected a rate" \
  "$pz" train --preset tiny --data "$dir/no-such.bin" --stages 2 --link-mbps=-5 --check
n=$((n + 1))
if ! out=$("$pz" train --preset tiny --data "$dir/no-such.bin" --stages 2 --split 2,0 --check 2>&1) ||
   ! grep -q "the command line is valid" <<<"$out"; then
  echo "FAIL: --check of a valid command line: $out"; fails=$((fails + 1))
fi
# a PIPEZIP_ISA the run would refuse (x86-64-v4 is spelled x86-64-v4+vbmi2 here): --check used to call the
# command line valid (a -Dnative=true build ignores the variable, saying so)
if ! PIPEZIP_ISA=x86-64-v4 "$pz" train --preset tiny --data "$dir/no-such.bin" --check 2>&1 | grep -q 'ignored: this build is -Dnative=true'; then
  expect_fail "--check of a bad PIPEZIP_ISA" "PIPEZIP_ISA=x86-64-v4: expected x86-64, x86-64-v2, x86-64-v3 or x86-64-v4\\+vbmi2" \
    env PIPEZIP_ISA=x86-64-v4 "$pz" train --preset tiny --data "$dir/no-such.bin" --stages 2 --check
fi
expect_fail "an edge's codec given twice" "--compress: edge 0-1 bwd is given twice \\(q8, then q4\\)" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --compress '0-1:bwd=q8;0-1:both=q4'
# the data-parallel links (--dp-link-mbps, --dp-link-latency-ms): replicas only, in range, not slower than the peer timeout
expect_fail "data-parallel link rate without replicas" "--dp-link-mbps needs --replicas 2 or more .*--link-mbps" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --dp-link-mbps 100
expect_fail "data-parallel link delay without replicas" "--dp-link-latency-ms needs --replicas 2 or more" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --dp-link-latency-ms 5
expect_fail "negative data-parallel link rate" "--dp-link-mbps.*out of range" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --replicas 2 --dp-link-mbps=-1
expect_fail "data-parallel link rate not a number" "--dp-link-mbps" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --replicas 2 --dp-link-mbps fast
expect_fail "data-parallel link delay over a minute" "--dp-link-latency-ms.*out of range" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --replicas 2 --dp-link-latency-ms 1e6
expect_fail "a data-parallel link too slow for --peer-timeout" "takes .* s on the link between replicas, longer than --peer-timeout" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --replicas 2 --steps 1 --dp-link-mbps 0.01 --peer-timeout 5
expect_fail "unknown progress mode" "--progress must be thread or inline" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --progress poll
expect_fail "bad warm-up" "warmup must be 'auto' or an integer" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --schedule 1f1b:warmup=x
expect_fail "interleaved in train on one stage" "interleaving needs --stages 2 or more" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --schedule interleaved:v=2
expect_fail "interleaved in train, M not a multiple of S" "must be a multiple of --stages 2" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --micro-batches 3 --schedule interleaved:v=2
expect_fail "interleaved in train without V" "needs the model chunks per stage" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --schedule interleaved
expect_fail "train --virtual-stages without interleaved" "needs --schedule interleaved" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --virtual-stages 2
expect_fail "train --virtual-stages contradicting v=" "contradicts --schedule" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --schedule interleaved:v=2 --virtual-stages 3
expect_fail "interleaved: --split counts chunks" "cuts the model into 4 chunks" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --micro-batches 2 --schedule interleaved:v=2 --split 1,1
expect_fail "interleaved without V" "needs the model chunks per stage" \
  "$pz" schedule --stages 2 --micro-batches 4 --schedule interleaved
expect_fail "interleaved with M not a multiple of S" "multiple of the stages" \
  "$pz" schedule --stages 4 --micro-batches 6 --schedule interleaved --virtual-stages 2
expect_fail "virtual stages without interleaved" "needs --schedule interleaved" \
  "$pz" schedule --stages 2 --micro-batches 4 --virtual-stages 2
expect_fail "warm-up auto in the table" "'auto' is chosen by 'pipezip train'" \
  "$pz" schedule --stages 2 --micro-batches 4 --schedule 1f1b:warmup=auto
expect_fail "missing checkpoint" "nope.safetensors" "$pz" eval --model "$dir/nope.safetensors" --data "$dir/tok.bin"
expect_fail "garbage checkpoint" "garbage.bin" "$pz" eval --model "$dir/garbage.bin" --data "$dir/tok.bin"
# a batch too large for the memory: refused before allocating, naming --batch and the bytes (the train
# path's estimate; the 4 GiB limit is set so the result does not depend on this machine's memory)
expect_fail "eval --batch over the memory" "not enough memory: --batch 65536 x --seq 64 needs about 95\.[0-9]+ GiB \([0-9]+ bytes.*but 4\.00 GiB \(4294967296 bytes\) is available \(PIPEZIP_MEM_AVAILABLE\)" \
  env PIPEZIP_MEM_AVAILABLE=4294967296 "$pz" eval --model "$dir/nan.safetensors" --data "$dir/tok.bin" --batch 65536 --seq 64
expect_fail "tokenize without inputs" "at least one input" "$pz" tokenize --out "$dir/x.bin"
expect_fail "tokenize missing input" "missing.txt" "$pz" tokenize --out "$dir/x.bin" "$dir/missing.txt"

# a save that cannot be written fails and leaves nothing behind
n=$((n + 1))
if "$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --batch 2 --seq 16 \
     --save "$dir/no/such/dir/m.safetensors" >/dev/null 2>"$dir/err"; then
  echo "FAIL: save into a missing directory succeeded"; fails=$((fails + 1))
elif [ -n "$(find "$dir" -name '*.tmp.*')" ] || [ -e "$dir/no" ]; then
  echo "FAIL: failed save left files behind"; fails=$((fails + 1))
else
  echo "ok: failed save -> $(tail -n 1 "$dir/err")"
fi
# a tokenize into a missing directory leaves nothing either
expect_fail "tokenize into a missing directory" "no/such" "$pz" tokenize --out "$dir/no/such/x.bin" "$dir/text.txt"

# issue 24: an output never replaces an input (also through a symbolic or a
# hard link), and every output place is checked before step 1: each refusal
# comes from the check at the start, and nothing is written
printf '{"model": {"type": "BPE", "vocab": {"h": 0, "e": 1, "l": 2, "o": 3, "Ġ": 4, "Ċ": 5, "w": 6, "r": 7, "d": 8, ",": 9, "t": 10, "i": 11, "s": 12, "a": 13, "m": 14, "f": 15, "x": 16, "c": 17, "p": 18, "u": 19, ".": 20}, "merges": []}}' > "$dir/tok.json"
cp "$dir/text.txt" "$dir/same.txt"; cp "$dir/tok.bin" "$dir/data.bin"; ln -s data.bin "$dir/data-link.bin"
ln "$dir/text.txt" "$dir/text-hard.txt"
sums() { md5sum "$dir/same.txt" "$dir/tok.json" "$dir/text.txt" "$dir/data.bin"; }
before=$(sums)
expect_fail "tokenize --out onto its input" "--out .*same.txt is the same file as input .*same.txt" \
  "$pz" tokenize --tokenizer "$dir/tok.json" --out "$dir/same.txt" "$dir/same.txt"
expect_fail "tokenize --out onto the tokenizer" "--out .*tok.json is the same file as --tokenizer" \
  "$pz" tokenize --tokenizer "$dir/tok.json" --out "$dir/tok.json" "$dir/same.txt"
expect_fail "byte-level --val-out onto a hard link of the input" "--val-out .*text-hard.txt is the same file as input" \
  "$pz" tokenize --out "$dir/o.bin" --val-out "$dir/text-hard.txt" --val-fraction 0.1 "$dir/text.txt"
expect_fail "train --save onto --data through a link" "--save .*data-link.bin is the same file as --data" \
  "$pz" train --preset tiny --data "$dir/data.bin" --steps 1 --save "$dir/data-link.bin"
expect_fail "train --trace onto --data" "--trace .*data.bin is the same file as --data" \
  "$pz" train --preset tiny --data "$dir/data.bin" --stages 2 --steps 1 --trace "$dir/data.bin"
n=$((n + 1))
[ "$before" = "$(sums)" ] && [ ! -e "$dir/o.bin" ] && echo "ok: no input touched" || { echo "FAIL: an input changed"; fails=$((fails + 1)); }
expect_fail "--checkpoint-dir on a regular file" "--checkpoint-dir .*text.txt is a regular file, not a directory" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --checkpoint-dir "$dir/text.txt"
expect_fail "--checkpoint-dir /dev/null" "--checkpoint-dir /dev/null is a device, not a directory" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --checkpoint-dir /dev/null
expect_fail "--checkpoint-dir under a regular file" "--checkpoint-dir .*text.txt/ck: cannot be written" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --checkpoint-dir "$dir/text.txt/ck" --checkpoint-every 1
expect_fail "--trace into a missing directory" "--trace /missing/t.json: cannot be written: directory /missing" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --steps 1 --trace /missing/t.json
expect_fail "--dump-dir in a missing directory" "--dump-dir /missing/sub: cannot be created" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --steps 1 --dump-edge 1 --dump-dir /missing/sub
expect_fail "--link-latency-ms against --peer-timeout" "--link-latency-ms: rank 0 waits 70000 ms on the delays alone .* --peer-timeout 60 s" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --steps 1 --link-latency-ms 35000
expect_fail "auto's message prefixed once" "error: --compress: every edge: auto: unknown option" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --compress auto:bogus
expect_fail "interleaved names the user's --stages" "--stages 2 with 3 model chunks per stage \(6 chunks\): .* at most 4 chunks" \
  "$pz" train --preset tiny --data "$dir/tok.bin" --stages 2 --micro-batches 2 --schedule interleaved:v=3
expect_fail "generate --stages 100 before any rank starts" "^pipezip generate: error: --stages 100: .* at most 4 stages$" \
  "$pz" generate --model "$dir/m.safetensors" --prompt-ids 1,2 --max-new-tokens 1 --stages 100
[ -z "$(ls "$dir" | grep -E '^(ck|edge-dump)')" ] || { echo "FAIL: a refused run left files: $(ls "$dir")"; fails=$((fails + 1)); }

# a FIFO given as a file to read whole waited for a writer forever: refused at once
mkfifo "$dir/fifo"
expect_fail "--data a FIFO" "fifo: not a regular file" timeout 20 "$pz" train --preset tiny --data "$dir/fifo" --steps 1
expect_fail "--init a FIFO" "fifo: not a regular file" timeout 20 "$pz" train --init "$dir/fifo" --data "$dir/tok.bin" --steps 1
expect_fail "eval --model a FIFO" "fifo: not a regular file" timeout 20 "$pz" eval --model "$dir/fifo" --data "$dir/tok.bin"
expect_fail "generate --model a FIFO" "fifo: not a regular file" \
  timeout 20 "$pz" generate --model "$dir/fifo" --prompt-ids 1 --max-new-tokens 1
expect_fail "tokenize --tokenizer a FIFO" "fifo: not a regular file" \
  timeout 20 "$pz" tokenize --tokenizer "$dir/fifo" --out "$dir/f.bin" "$dir/text.txt"

# --help tells the truth about defaults: a default it states is a value the
# flag takes (generate's --peer-timeout said 0, out of its range), and no flag
# states two (train's --warmup said "default: steps/10" and "default 0")
for sub in train eval tokenize generate schedule codec; do
  n=$((n + 1))
  bad=$("$pz" "$sub" --help | grep -E 'default.*\(default [^ )]*\)$' || true)
  while read -r flag val; do
    "$pz" "$sub" "$flag" "$val" --help >/dev/null 2>"$dir/help.err" || bad+="$flag $val: $(cat "$dir/help.err") "
  done < <("$pz" "$sub" --help | sed -nE 's/^  (--[a-z0-9-]+) N .*\(default ([^ )]*)\)$/\1 \2/p')
  [ -z "$bad" ] && echo "ok: $sub --help: the defaults it states" || { echo "FAIL: $sub --help: $bad"; fails=$((fails + 1)); }
done

echo "$((n - fails)) of $n cli error checks passed"
[ "$fails" = 0 ]
