#!/usr/bin/env bash
# `pipezip generate`: every bad input is a clear error and a non-zero exit
# (prompt past the context, ids outside the vocabulary, malformed ids, bad
# numbers, missing or conflicting flags, a --prompt without a tokenizer for a
# non-byte model, a missing model), and sampling behaves: greedy is
# deterministic, --top-k 1 and a tiny --top-p are greedy, one seed gives one
# sequence, and every output ends with the JSON line.
#   usage: generate_errors.sh PATH/TO/pipezip
set -u
. "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
for i in $(seq 1 100); do echo "Line $i: the quick brown fox jumps over the lazy dog."; done > "$dir/t.txt"
"$pz" tokenize --out "$dir/tok.bin" "$dir/t.txt" >/dev/null || exit 1
"$pz" train --preset tiny --data "$dir/tok.bin" --steps 1 --batch 2 --seq 32 --save "$dir/m.safetensors" >/dev/null 2>&1 \
  || { echo "FAIL: train"; exit 1; }
m="$dir/m.safetensors"   # tiny: 64 positions, vocabulary 256 (bytes)

# expect_err NAME PATTERN ARGS...: generate fails (exit != 0) and stderr holds PATTERN
expect_err() {
  local name=$1 pat=$2; shift 2
  if "$pz" generate "$@" >"$dir/out" 2>"$dir/err"; then fail "$name: exited 0"; return; fi
  grep -q -- "$pat" "$dir/err" || fail "$name: stderr lacks '$pat': $(cat "$dir/err")"
}
long=$(printf 'x%.0s' $(seq 1 70))
expect_err "prompt past context" "exceed the model's context of 64" --model "$m" --prompt "$long" --max-new-tokens 1
expect_err "prompt + new past context" "60 tokens plus --max-new-tokens 5 exceed" --model "$m" --prompt "${long:0:60}" --max-new-tokens 5
expect_err "id above vocab" "vocabulary is \[0, 256)" --model "$m" --prompt-ids 1,256 --max-new-tokens 1
expect_err "negative id" "item 2" --model "$m" --prompt-ids 1,-3 --max-new-tokens 1
expect_err "empty id" "item 2 is empty" --model "$m" --prompt-ids 1,,2 --max-new-tokens 1
expect_err "trailing comma" "item 3 is empty" --model "$m" --prompt-ids 1,2, --max-new-tokens 1
expect_err "not a number" "--prompt-ids" --model "$m" --prompt-ids 1,x --max-new-tokens 1
expect_err "empty prompt" "empty value" --model "$m" --prompt "" --max-new-tokens 1
expect_err "both prompts" "exactly one of --prompt" --model "$m" --prompt a --prompt-ids 1 --max-new-tokens 1
expect_err "no prompt" "exactly one of --prompt" --model "$m" --max-new-tokens 1
expect_err "no max" "--max-new-tokens are required" --model "$m" --prompt a
expect_err "no model" "--model and --max-new-tokens are required" --prompt a --max-new-tokens 1
expect_err "bad max" "--max-new-tokens" --model "$m" --prompt a --max-new-tokens 3x
expect_err "negative temperature" "--temperature" --model "$m" --prompt a --max-new-tokens 1 --temperature -1
expect_err "nan temperature" "--temperature" --model "$m" --prompt a --max-new-tokens 1 --temperature nan
expect_err "top-p 0" "--top-p" --model "$m" --prompt a --max-new-tokens 1 --top-p 0
expect_err "top-p above 1" "--top-p" --model "$m" --prompt a --max-new-tokens 1 --top-p 1.5
expect_err "negative top-k" "--top-k" --model "$m" --prompt a --max-new-tokens 1 --top-k -1
expect_err "bad seed" "--seed" --model "$m" --prompt a --max-new-tokens 1 --seed -4
expect_err "missing model" "nope.safetensors" --model "$dir/nope.safetensors" --prompt a --max-new-tokens 1
expect_err "missing tokenizer" "nope.json" --model "$m" --tokenizer "$dir/nope.json" --prompt a --max-new-tokens 1
expect_err "unknown flag" "unknown flag '--stages'" --model "$m" --prompt a --max-new-tokens 1 --stages 2

# gen ARGS...: the JSON line's ids, one line
gen() { "$pz" generate --model "$m" "$@" 2>"$dir/err" | tail -n 1 | sed -n 's/^{"ids":\[\([0-9,]*\)\].*/\1/p'; }
g1=$(gen --prompt "Line 7" --max-new-tokens 20 --temperature 0)
g2=$(gen --prompt "Line 7" --max-new-tokens 20 --temperature 0 --seed 99)
k1=$(gen --prompt "Line 7" --max-new-tokens 20 --top-k 1 --seed 5)
p0=$(gen --prompt "Line 7" --max-new-tokens 20 --top-p 1e-6 --seed 5)
[ -n "$g1" ] && [ "$(echo "$g1" | tr , '\n' | wc -l)" -eq 26 ] || fail "greedy: expected 26 ids, got '$g1' ($(cat "$dir/err"))"
[ "$g1" = "$g2" ] || fail "greedy depends on the seed: $g1 vs $g2"
[ "$g1" = "$k1" ] || fail "--top-k 1 is not greedy: $g1 vs $k1"
[ "$g1" = "$p0" ] || fail "--top-p 1e-6 is not greedy: $g1 vs $p0"
s1=$(gen --prompt "Line 7" --max-new-tokens 30 --seed 11 --temperature 1.5)
s2=$(gen --prompt "Line 7" --max-new-tokens 30 --seed 11 --temperature 1.5)
s3=$(gen --prompt "Line 7" --max-new-tokens 30 --seed 12 --temperature 1.5)
[ -n "$s1" ] && [ "$s1" = "$s2" ] || fail "one seed, two samples: $s1 vs $s2"
[ "$s1" != "$s3" ] || fail "seeds 11 and 12 drew the same 30 tokens"
out=$("$pz" generate --model "$m" --prompt-ids 76,105 --max-new-tokens 0)
[ "$out" = "$(printf 'Li\n{"ids":[76,105],"prompt_tokens":2,"new_tokens":0,"kv_cache":true,"seconds":0.000000,"tok_s":0.00}')" ] \
  || echo "$out" | tail -n 1 | grep -q '^{"ids":\[76,105\],"prompt_tokens":2,"new_tokens":0,' || fail "--max-new-tokens 0: $out"
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all generate checks passed"
