#!/usr/bin/env bash
# `pipezip generate --temperature 0` (stages/generate.c, KV cache) against an
# independent greedy decode in PyTorch (tools/torch_gpt2.py, float64, the
# whole prefix recomputed per token) of the same random models, and against
# pipezip's own --no-kv-cache (the whole prefix recomputed per token):
#  - an HF directory (vocabulary 264) with vocab.json + merges.txt beside the
#    weights: --prompt is encoded with them, and the streamed text is the
#    decoding of the ids in the JSON line;
#  - an HF directory of a byte model (vocabulary 256, no tokenizer files):
#    --prompt is bytes, and so is the streamed text;
#  - --prompt-ids.
# Where the float64 decode's two best logits are within 1e-3 of each other
# the float32 engine may pick either; the comparison stops there (said so).
#   usage: generate_vs_torch.sh PATH/TO/pipezip
set -u
here=$(cd "$(dirname "$0")" && pwd)
py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"
"$py" -c 'import torch' >/dev/null 2>&1 || { echo "SKIP: $py cannot import torch (python3-torch, or PZ_TORCH_PYTHON)"; exit 77; }
. "$here/../lib.sh"
pz_test_init "$1"
make() { "$py" "$here/make_hf_dir.py" "$@" || { echo "make_hf_dir.py $* failed"; exit 1; }; }

make "$dir/bpe" --embd 64 --heads 4 --layers 2 --vocab 264 --positions 64 --seed 3
make "$dir/bytes" --embd 96 --heads 2 --layers 3 --vocab 256 --positions 80 --seed 4
# a byte-level BPE: the 256 bytes (id = byte) and 8 merges (ids 256..263)
"$py" - "$dir/bpe" <<'PY'
import json, os, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
m = dict(zip(bs, map(chr, cs)))
vocab = {m[b]: b for b in range(256)}
merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a"), ("e", "r"), ("o", "n"), ("\u0120", "s")]
for i, (a, b) in enumerate(merges):
    vocab[a + b] = 256 + i
json.dump(vocab, open(os.path.join(sys.argv[1], "vocab.json"), "w"))
with open(os.path.join(sys.argv[1], "merges.txt"), "w") as f:
    f.write("#version: 0.2\n" + "".join("%s %s\n" % p for p in merges))
PY

# check NAME MODEL NEW [pipezip flags]: cached == uncached == torch
check() {
  local name=$1 model=$2 new=$3; shift 3
  "$pz" generate --model "$model" --max-new-tokens "$new" --temperature 0 "$@" > "$dir/out.cache" 2>"$dir/err" \
    || { fail "$name: generate failed: $(cat "$dir/err")"; return; }
  "$pz" generate --model "$model" --max-new-tokens "$new" --temperature 0 --no-kv-cache "$@" > "$dir/out.full" 2>"$dir/err" \
    || { fail "$name: generate --no-kv-cache failed: $(cat "$dir/err")"; return; }
  "$py" - "$name" "$model" "$new" "$dir/out.cache" "$dir/out.full" <<'PY' || fails=$((fails + 1))
import json, os, sys
import torch
sys.path.insert(0, os.environ["PZ_TOOLS"])
import torch_gpt2 as tg
name, model_path, new = sys.argv[1], sys.argv[2], int(sys.argv[3])

def split(path):
    out = open(path, "rb").read()
    idx = out.rstrip(b"\n").rfind(b"\n")
    return out[:idx], json.loads(out[idx + 1:])

text, res = split(sys.argv[4])
text_full, res_full = split(sys.argv[5])
ids, npr = res["ids"], res["prompt_tokens"]
if len(ids) != npr + new or res["new_tokens"] != new:
    sys.exit("FAIL: %s: %d ids for %d prompt + %d new tokens" % (name, len(ids), npr, new))
if res_full["ids"] != ids or text_full != text:
    sys.exit("FAIL: %s: with the KV cache %s, without %s" % (name, ids, res_full["ids"]))
# the streamed text is the decoding of the ids
if os.path.exists(os.path.join(model_path, "vocab.json")):
    vocab = json.load(open(os.path.join(model_path, "vocab.json")))
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b); cs.append(256 + n); n += 1
    unbyte = {chr(c): b for b, c in zip(bs, cs)}
    inv = {i: bytes(unbyte[ch] for ch in tok) for tok, i in vocab.items()}
    want = b"".join(inv[i] for i in ids)
else:
    want = bytes(ids)
if text != want:
    sys.exit("FAIL: %s: streamed text %r is not the decoding of the ids %r" % (name, text, want))
model = tg.model_from_safetensors(model_path, torch.float64)
model.eval()
seq = ids[:npr]
with torch.no_grad():
    for step in range(new):
        logits, _ = model(torch.tensor([seq]))
        last = logits[0, -1]
        top2 = torch.topk(last, 2)
        gap = float(top2.values[0] - top2.values[1])
        want_id = int(top2.indices[0])
        if ids[npr + step] != want_id:
            if gap < 1e-3:
                print("%s: token %d: torch's best two logits are %.2e apart, a tie in float32: "
                      "compared %d of %d tokens" % (name, step, gap, step, new))
                break
            sys.exit("FAIL: %s: generated token %d is %d, torch's greedy decode %d (gap %.3g)\n  pipezip %s\n"
                     % (name, step, ids[npr + step], want_id, gap, ids))
        seq.append(want_id)
    else:
        print("ok %s: %d prompt + %d greedy tokens equal torch's, with and without the KV cache" % (name, npr, new))
PY
}
export PZ_TOOLS="$here/../../tools"
check "bpe --prompt" "$dir/bpe" 31 --prompt "the cat sat in the hat; another one on the mat"
check "bpe --prompt-ids" "$dir/bpe" 56 --prompt-ids 5,260,258,100
check "bytes --prompt" "$dir/bytes" 60 --prompt "Hello, world! "
check "bytes --prompt-ids" "$dir/bytes" 79 --prompt-ids 65
# the same weights without tokenizer files: --prompt is an error, ids stream as ids
mkdir "$dir/notok" && cp "$dir/bpe/model.safetensors" "$dir/bpe/config.json" "$dir/notok/"
if "$pz" generate --model "$dir/notok" --prompt "the cat" --max-new-tokens 2 >/dev/null 2>"$dir/err"; then
  fail "notok: --prompt without a tokenizer exited 0"
else
  grep -q "needs a tokenizer" "$dir/err" || fail "notok: unclear error: $(cat "$dir/err")"
fi
out=$("$pz" generate --model "$dir/notok" --prompt-ids 5,260,258,100 --max-new-tokens 6 --temperature 0) \
  || fail "notok: --prompt-ids failed"
ids=$(echo "$out" | tail -n 1 | sed -n 's/^{"ids":\[\([0-9,]*\)\].*/\1/p')
[ "$(echo "$out" | head -n 1)" = "$(echo "$ids" | tr , ' ') " ] || fail "notok: streamed '$(echo "$out" | head -n 1)', ids $ids"
[ $fails -eq 0 ] || { echo "$fails failure(s)"; exit 1; }
echo "all generate_vs_torch checks passed"
