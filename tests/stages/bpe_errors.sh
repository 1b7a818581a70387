#!/usr/bin/env bash
# `pipezip tokenize --tokenizer`: malformed tokenizer files and bad input give
# a clear message naming the file and the problem, a non-zero exit, and no
# shard (an older shard at --out is left as it was). Hand-written files, no
# Python packages needed.
#   usage: bpe_errors.sh PATH/TO/pipezip
set -u
pz="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
printf 'ab ba\n' > "$dir/text.txt"
printf 'old' > "$dir/out.bin"

# expect_fail "description" "regex the message must match" TOKENIZER_TEXT [extra args...]
expect_fail() {
  local what="$1" pattern="$2" tok="$3"; shift 3
  local t="$dir/tokenizer.json"
  printf '%s' "$tok" > "$t"
  local out rc
  out=$("$pz" tokenize --tokenizer "$t" --out "$dir/out.bin" "$@" "$dir/text.txt" 2>&1 >/dev/null); rc=$?
  if [ "$rc" = 0 ]; then
    echo "FAIL: $what: exit 0"; fails=$((fails + 1))
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: $what: message does not match /$pattern/: $out"; fails=$((fails + 1))
  elif [ "$(cat "$dir/out.bin")" != old ] || ls "$dir" | grep -q tmp; then
    echo "FAIL: $what: --out was touched"; fails=$((fails + 1))
  else
    echo "ok: $what -> $out"
  fi
}
good='{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "Ġ": 2, "ab": 3, "Ċ": 5}, "merges": ["a b"]}}'
T='tokenizer.json'
expect_fail "bad JSON" "$T: bad JSON at byte 51" '{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1,}, "merges": []}}'
expect_fail "not JSON at all" "$T: bad JSON at byte 0" 'vocab a b'
expect_fail "no merges" "$T: no merges" '{"model": {"type": "BPE", "vocab": {"a": 0}}}'
expect_fail "no vocabulary" "$T: no vocabulary" '{"model": {"type": "BPE", "merges": []}}'
expect_fail "merge of an unknown token" "$T: merge 2 \(\"a c\"\): \"c\" is not in the vocabulary" \
  '{"model": {"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b", "a c"]}}'
expect_fail "merge whose result is unknown" "$T: merge 1 \(\"b a\"\): the merged token \"ba\" is not in the vocabulary" \
  '{"model": {"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["b a"]}}'
expect_fail "duplicate ids" "$T: duplicate id 1: tokens \"b\" and \"c\"" \
  '{"model": {"vocab": {"a": 0, "b": 1, "c": 1}, "merges": []}}'
expect_fail "an id too large for a shard" "text.txt: token 0 is id 70000 \(\"ab\"\), above 65535" \
  '{"model": {"vocab": {"a": 0, "b": 1, "ab": 70000, "Ġ": 4, "Ċ": 5}, "merges": ["a b"]}}'
expect_fail "a byte without a token" "text.txt: byte 0x0a at byte 5 has no token" \
  '{"model": {"vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3}, "merges": ["a b"]}}'
expect_fail "a normalizer" "$T: \"normalizer\" is set" \
  '{"normalizer": {"type": "NFKC"}, "model": {"vocab": {"a": 0}, "merges": []}}'
expect_fail "--eot-between-files without <|endoftext|>" "$T: no <\|endoftext\|> token" "$good" --eot-between-files
# vocab.json without merges.txt, and a directory with neither
printf '{"a": 0}' > "$dir/vocab.json"
out=$("$pz" tokenize --tokenizer "$dir/vocab.json" --out "$dir/out.bin" "$dir/text.txt" 2>&1)
grep -q "vocab.json: no merges.txt beside it" <<<"$out" || { echo "FAIL: vocab.json alone: $out"; fails=$((fails + 1)); }
mkdir "$dir/empty"
out=$("$pz" tokenize --tokenizer "$dir/empty" --out "$dir/out.bin" "$dir/text.txt" 2>&1)
grep -q "empty: no tokenizer.json, nor vocab.json with merges.txt" <<<"$out" || { echo "FAIL: empty dir: $out"; fails=$((fails + 1)); }
# input problems
printf '%s' "$good" > "$dir/tokenizer.json"
printf 'ab\xff\n' > "$dir/bad.txt"
out=$("$pz" tokenize --tokenizer "$dir" --out "$dir/out.bin" "$dir/text.txt" "$dir/bad.txt" 2>&1)
grep -q "bad.txt: not UTF-8 text at byte 2" <<<"$out" || { echo "FAIL: invalid UTF-8: $out"; fails=$((fails + 1)); }
out=$("$pz" tokenize --tokenizer "$dir" --out "$dir/out.bin" "$dir/text.txt" "$dir/nope.txt" 2>&1)
grep -q "nope.txt: cannot read" <<<"$out" || { echo "FAIL: missing input: $out"; fails=$((fails + 1)); }
out=$("$pz" tokenize --tokenizer "$dir" --val-out "$dir/v.bin" --val-fraction 0.1 --out "$dir/out.bin" "$dir/text.txt" 2>&1)
grep -q "are for the byte-level tokenizer" <<<"$out" || { echo "FAIL: --val-out with --tokenizer: $out"; fails=$((fails + 1)); }
out=$("$pz" tokenize --eot-between-files --out "$dir/out.bin" "$dir/text.txt" 2>&1)
grep -q "needs --tokenizer" <<<"$out" || { echo "FAIL: --eot-between-files alone: $out"; fails=$((fails + 1)); }
[ "$(cat "$dir/out.bin")" = old ] || { echo "FAIL: --out was touched"; fails=$((fails + 1)); }
# and a good run: "ab ba\n" -> ab, Ġ, b, a, Ċ
"$pz" tokenize --tokenizer "$dir" --out "$dir/out.bin" "$dir/text.txt" >/dev/null || { echo "FAIL: good tokenizer"; fails=$((fails + 1)); }
got=$(od -An -tu2 -j1024 "$dir/out.bin" | tr -s ' ' | sed 's/^ //')
[ "$got" = "3 2 1 0 5" ] || { echo "FAIL: good tokenizer wrote [$got], want [3 2 1 0 5]"; fails=$((fails + 1)); }
[ "$fails" = 0 ] && echo "bpe-errors: all ok" || echo "bpe-errors: $fails failed"
[ "$fails" = 0 ]
