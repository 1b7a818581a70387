#!/usr/bin/env bash
# examples/gpt_finetune.sh --init DIR on a model as HF publishes GPT-2 (a
# random one here: config.json + model.safetensors, made with PyTorch) with a
# byte-level BPE beside it (trained here with HF `tokenizers`): the example
# tokenizes the fortunes text with that tokenizer, fine-tunes as 2 stages and
# reports losses before and after, greedy and sampled continuations of a
# validation prompt from both models, decoded with the tokenizer, and the
# loss curves' PNG.
#   usage: finetune_hf.sh PATH/TO/pipezip
set -u
pz="$1"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"
"$py" -c 'import torch' >/dev/null 2>&1 || { echo "SKIP: $py cannot import torch"; exit 77; }
"$py" -c 'import tokenizers' >/dev/null 2>&1 || { echo "SKIP: $py cannot import tokenizers"; exit 77; }
[ -f "$root/data/fortunes_files.txt" ] || PIPEZIP="$pz" bash "$root/tools/make_corpus.sh" >/dev/null
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$py" "$here/../stages/make_bpe_case.py" "$dir/bpe" 1 > /dev/null || { echo "FAIL: make_bpe_case.py"; exit 1; }
V=$("$py" -c 'import json,sys; t=json.load(open(sys.argv[1])); print(len(t["model"]["vocab"]) + len(t.get("added_tokens", [])))' \
    "$dir/bpe/tokenizer.json")
"$py" "$here/../stages/make_hf_dir.py" "$dir/gpt2" --embd 64 --heads 4 --layers 2 --vocab "$V" --positions 128 --seed 5 \
  > /dev/null || { echo "FAIL: make_hf_dir.py"; exit 1; }
cp "$dir/bpe/tokenizer.json" "$dir/gpt2/"
PIPEZIP="$pz" bash "$root/examples/gpt_finetune.sh" --init "$dir/gpt2" --steps 6 --val-every 3 --val-batches 2 \
  --batch 2 --seq 64 --stages 2 --train-tokens 0 --out "$dir/run" --cache "$dir/cache" --quiet > "$dir/report.txt" 2>"$dir/err" \
  || { cat "$dir/err"; echo "FAIL: gpt_finetune.sh --init DIR"; exit 1; }
cat "$dir/report.txt"
"$py" - "$dir/run/report.json" "$dir/cache" <<'PY'
import glob, json, math, sys
r = json.load(open(sys.argv[1]))
bad = []
if not glob.glob(sys.argv[2] + "/fortunes-bpe-*-train.bin"): bad.append("the fortunes text was not tokenized with the tokenizer")
for k in ("val_loss_before", "val_loss_after_uncompressed"):
    if not (isinstance(r.get(k), float) and math.isfinite(r[k])): bad.append(f"{k} = {r.get(k)}")
s = r.get("samples", {})
for who in ("before", "after"):
    for mode in ("greedy", "sampled"):
        t = s.get(who, {}).get(mode)
        if not t: bad.append(f"no {who} {mode} sample")
if bad: sys.exit("FAIL: " + "; ".join(bad))
print("ok: tokenized with the directory's tokenizer, losses before %.3f after %.3f, 4 samples" %
      (r["val_loss_before"], r["val_loss_after_uncompressed"]))
PY
[ $? = 0 ] || exit 1
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || python3 -c 'import matplotlib' 2>/dev/null; then
  [ -s "$dir/run/loss.png" ] && grep -q "loss curves" "$dir/report.txt" || { echo "FAIL: no loss.png"; exit 1; }
  echo "ok: loss curves in loss.png"
fi
echo "finetune-hf: all passed"
