#!/usr/bin/env bash
# HF model directories (stages/hf_dir.c, stages/gpt2_checkpoint.c):
#  - `pipezip eval --model DIR` of random GPT-2s written as HF publishes them
#    (config.json + model.safetensors without n_head metadata, or sharded with
#    model.safetensors.index.json) with head sizes 16, 32 and 64 matches the
#    independent PyTorch model (tools/torch_eval.py, float64) to 1e-4 relative;
#  - no silent guesses: without config.json a head count the shapes cannot
#    tell is an error naming --heads and config.json; --heads then works;
#  - config.json that contradicts the tensors, or asks for what the engine
#    does not compute, is an error naming the key; a malformed one too;
#  - a bad index (path outside the directory, a tensor missing from its
#    shard, a duplicate) is an error; a directory without weights says what
#    it looked for;
#  - `train --save DIR/` writes model.safetensors + config.json that load
#    back in pipezip and in PyTorch.
#   usage: hf_dirs.sh PATH/TO/pipezip
set -u
pz="$1"
here=$(cd "$(dirname "$0")" && pwd)
py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
  echo "SKIP: $py cannot import torch (install python3-torch or set PZ_TORCH_PYTHON)"; exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
for i in $(seq 1 400); do printf 'Line %d: %d foxes, %d dogs; x=%d.\n' "$i" $((i * 7 % 13)) $((i * i % 101)) $((i * 31 % 997)); done > "$dir/text.txt"
"$pz" tokenize --out "$dir/tok.bin" "$dir/text.txt" >/dev/null || exit 1
make() { "$py" "$here/make_hf_dir.py" "$@" || { echo "make_hf_dir.py $* failed"; exit 1; }; }
B=2 T=32 N=4
ev() { "$pz" eval --data "$dir/tok.bin" --batch $B --seq $T --batches $N "$@"; }
ref() { "$py" "$here/../../tools/torch_eval.py" --model "$1" --data "$dir/tok.bin" --batch $B --seq $T --batches $N; }
# compare NAME MODEL [pipezip flags]: pipezip eval vs PyTorch within 1e-4
compare() {
  local name=$1 model=$2; shift 2
  local a b
  a=$(ev --model "$model" "$@" 2>"$dir/err") || { fail "$name: pipezip eval failed: $(cat "$dir/err")"; return; }
  b=$(ref "$model") || { fail "$name: torch_eval failed"; return; }
  "$py" - "$name" "$a" "$b" <<'PY' || fails=$((fails + 1))
import json, sys
name, a, b = sys.argv[1], json.loads(sys.argv[2])["loss"], json.loads(sys.argv[3])["loss"]
rel = abs(a - b) / abs(b)
print(f"{name}: pipezip {a:.7f} torch {b:.7f} rel {rel:.2e}")
sys.exit(0 if rel <= 1e-4 else 1)
PY
}
# refuse NAME WANT_TEXT [pipezip eval flags]: non-zero exit, message contains WANT_TEXT
refuse() {
  local name=$1 want=$2; shift 2
  if ev "$@" >/dev/null 2>"$dir/err"; then fail "$name: accepted"; return; fi
  grep -qF -- "$want" "$dir/err" && echo "$name: refused ($(head -c 200 "$dir/err"))" ||
    fail "$name: message lacks '$want': $(cat "$dir/err")"
}

make "$dir/hs16" --embd 64 --heads 4 --seed 1
make "$dir/hs32" --embd 64 --heads 2 --seed 2
make "$dir/hs64" --embd 128 --heads 2 --seed 3
make "$dir/sharded" --embd 64 --heads 4 --seed 4 --shards 3
compare "head size 16 (C=64, 4 heads)" "$dir/hs16"
compare "head size 32 (C=64, 2 heads)" "$dir/hs32"
compare "head size 64 (C=128, 2 heads)" "$dir/hs64"
compare "3 shards + index (C=64, 4 heads)" "$dir/sharded"
compare "weights file with config.json beside it" "$dir/hs16/model.safetensors"

# no config.json: the head count must be asked for, never guessed
make "$dir/nocfg" --embd 64 --heads 4 --seed 1 --no-config
refuse "no config.json, C=64" "--heads" --model "$dir/nocfg"
grep -qF "config.json" "$dir/err" || fail "the no-config message does not name config.json"
cp "$dir/hs16/config.json" "$dir/hs16.json"
a=$(ev --model "$dir/nocfg" --heads 4) && b=$(ev --model "$dir/hs16") && [ "$a" = "$b" ] ||
  fail "--heads 4 without config.json: '$a' vs '$b' with it"
refuse "--heads against config.json" "--heads 2" --model "$dir/hs16" --heads 2

# config.json that does not fit, or that the engine cannot honour
bad_config() {   # NAME WANT PYTHON-EXPR-ON-c
  rm -rf "$dir/bad"; cp -r "$dir/hs16" "$dir/bad"
  "$py" -c "import json,sys; p=sys.argv[1]; c=json.load(open(p)); $3; json.dump(c, open(p,'w'))" "$dir/bad/config.json"
  refuse "$1" "$2" --model "$dir/bad"
}
bad_config "n_embd disagrees" "n_embd" "c['n_embd']=96"
bad_config "n_layer disagrees" "n_layer" "c['n_layer']=3"
bad_config "n_positions disagrees" "n_positions" "c['n_positions']=128"
bad_config "vocab_size disagrees" "vocab_size" "c['vocab_size']=301"
bad_config "n_head does not divide" "num_heads 5" "c['n_head']=5"
bad_config "exact GELU" "activation_function" "c['activation_function']='gelu'"
bad_config "other LayerNorm epsilon" "layer_norm_epsilon" "c['layer_norm_epsilon']=1e-6"
bad_config "n_inner not 4C" "n_inner" "c['n_inner']=100"
bad_config "n_head a string" "n_head" "c['n_head']='4'"
rm -rf "$dir/bad"; cp -r "$dir/hs16" "$dir/bad"; printf '{"n_head": 4, "n_head": 4}' > "$dir/bad/config.json"
refuse "duplicate key" "duplicate key" --model "$dir/bad"
printf '{"n_head": 4,' > "$dir/bad/config.json"
refuse "truncated config.json" "bad JSON" --model "$dir/bad"

# bad indexes
bad_index() {   # NAME WANT PYTHON-EXPR-ON-ix
  rm -rf "$dir/badix"; cp -r "$dir/sharded" "$dir/badix"
  "$py" -c "import json,sys; p=sys.argv[1]; ix=json.load(open(p)); wm=ix['weight_map']; $3; json.dump(ix, open(p,'w'))" \
    "$dir/badix/model.safetensors.index.json"
  refuse "$1" "$2" --model "$dir/badix"
}
bad_index "shard outside the directory" "not a plain file name" "wm['wte.weight']='../sharded/model-00001-of-00003.safetensors'"
bad_index "tensor not in its shard" "is not in" "k=next(n for n in wm if wm[n].startswith('model-00001')); wm[k]='model-00002-of-00003.safetensors'"
bad_index "tensor missing from the index" "not in the index" "del wm['ln_f.bias']"
bad_index "shard missing" "model-00009" "wm['ln_f.bias']='model-00009-of-00009.safetensors'"
mkdir -p "$dir/empty"; : > "$dir/empty/pytorch_model.bin"
refuse "directory without weights" "model.safetensors" --model "$dir/empty"
grep -qF "pickle" "$dir/err" || fail "pytorch_model.bin is not explained"

# save to a directory, load back in pipezip and PyTorch
"$pz" train --preset tiny --data "$dir/tok.bin" --steps 2 --batch 2 --seq 32 --val-every 0 --save "$dir/saved/" \
  >/dev/null 2>"$dir/err" || fail "train --save DIR/: $(cat "$dir/err")"
[ -f "$dir/saved/model.safetensors" ] && [ -f "$dir/saved/config.json" ] || fail "--save DIR/ wrote $(ls "$dir/saved" 2>&1)"
"$py" -c "
import json, sys
c = json.load(open(sys.argv[1]))
assert c['model_type'] == 'gpt2' and c['architectures'] == ['GPT2LMHeadModel'], c
assert c['activation_function'] == 'gelu_new' and c['layer_norm_epsilon'] == 1e-05, c
for k in ('n_layer', 'n_head', 'n_embd', 'n_positions', 'vocab_size'):
    assert isinstance(c[k], int) and c[k] > 0, k
" "$dir/saved/config.json" || fail "config.json of the saved directory: $(cat "$dir/saved/config.json")"
compare "saved directory" "$dir/saved"
"$pz" train --init "$dir/saved" --data "$dir/tok.bin" --steps 1 --batch 2 --seq 32 --val-every 0 \
  --save "$dir/saved2.safetensors" >/dev/null 2>"$dir/err" || fail "train --init DIR: $(cat "$dir/err")"
[ "$fails" = 0 ] && echo "hf-dirs: ok" || { echo "hf-dirs: $fails failed"; exit 1; }
