#!/usr/bin/env bash
# GPT-2 byte-level BPE (stages/bpe/bpe.c, `pipezip tokenize --tokenizer`) against
# HF `tokenizers` on a BPE trained in the test (tests/stages/make_bpe_case.py:
# ByteLevel pre-tokenizer, add_prefix_space=False, vocabulary 4000):
#  - the ids of ~4 MB of mixed text (accents, CJK, emoji, tabs, runs of spaces
#    and newlines, digits in words, contractions, <|endoftext|>) and of every
#    code point up to U+2FFFF equal HF's, read from tokenizer.json, from
#    vocab.json + merges.txt and from the directory; decode(encode(text)) == text;
#  - `pipezip tokenize` writes those ids as an llm.c shard, with 1 and 2
#    threads, and --eot-between-files puts <|endoftext|> between files.
# Skips (77) when the tests' Python ($PZ_TORCH_PYTHON, else /usr/bin/python3,
# as for the torch tests) cannot import tokenizers (bash tools/setup.sh --tests).
#   usage: bpe_vs_hf.sh PATH/TO/pipezip PATH/TO/test_bpe
set -u
pz="$1"; tb="$2"
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"
"$py" "$here/make_bpe_case.py" "$dir/case" 4; rc=$?
[ "$rc" = 77 ] && exit 77
[ "$rc" = 0 ] || { echo "FAIL: make_bpe_case.py"; exit 1; }
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
c="$dir/case"
for tok in "$c/tokenizer.json" "$c/vocab.json" "$c"; do
  "$tb" --compare "$tok" "$c/text.txt" "$c/ids.u32" || fail "ids of text.txt with $tok"
done
"$tb" --compare "$c/tokenizer.json" "$c/allcp.txt" "$c/allcp.u32" || fail "ids of every code point"

# shard == ids (uint32 LE) ?
same_ids() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
h = struct.unpack("<256i", d[:1024])
ok = h[0] == 20240520 and h[1] == 1 and len(d) == 1024 + 2 * h[2]
t = struct.unpack("<%dH" % h[2], d[1024:1024 + 2 * h[2]]) if ok else ()
w = open(sys.argv[2], "rb").read()
w = struct.unpack("<%dI" % (len(w) // 4), w)
sys.exit(0 if ok and list(t) == list(w) else 1)
PY
}
for th in 1 2; do
  "$pz" tokenize --tokenizer "$c" --threads $th --out "$dir/text$th.bin" "$c/text.txt" >/dev/null || fail "tokenize text.txt"
  same_ids "$dir/text$th.bin" "$c/ids.u32" || fail "the shard of text.txt ($th threads) differs from HF's ids"
  "$pz" tokenize --tokenizer "$c/tokenizer.json" --eot-between-files --threads $th --out "$dir/docs$th.bin" \
    "$c/docs/0.txt" "$c/docs/1.txt" "$c/docs/2.txt" >/dev/null || fail "tokenize docs"
  same_ids "$dir/docs$th.bin" "$c/docs.u32" || fail "the shard of docs/ with --eot-between-files ($th threads) differs"
done
[ "$fails" = 0 ] && echo "bpe-vs-hf: all equal" || echo "bpe-vs-hf: $fails failed"
[ "$fails" = 0 ]
