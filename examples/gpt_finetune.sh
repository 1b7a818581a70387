#!/usr/bin/env bash
# gpt_finetune.sh: fine-tune a pretrained GPT-2 as a pipeline of S stages with
# compressed stage boundaries, evaluate it and save it.
#
# usage: examples/gpt_finetune.sh [flags]
#
# With no flags this is pipezip's main job: it makes a small base model by
# pre-training the `demo` preset (10.8M parameters, byte vocabulary) on the
# built-in pydoc corpus (cached under runs/cache/, keyed by its settings and
# data, so only the first run pays), then fine-tunes it on the built-in
# fortunes corpus with 2 stages and the policy fwd=aq(q4),bwd=q8, and ends
# with a report: validation loss before (the base model, `pipezip eval`) and
# after fine-tuning (evaluated with the forward codecs and uncompressed),
# bytes sent per direction against the uncompressed size, tokens/s, greedy
# and sampled continuations of a validation prompt by both models
# (samples.json), and the loss curves (loss.png).
#
# flags (defaults in brackets):
#   --init FILE|DIR      start from this checkpoint (HF GPT-2 model.safetensors,
#                        an HF model directory with config.json, or an llm.c
#                        .bin) instead of the cached demo base model; a
#                        directory with tokenizer.json or vocab.json+merges.txt
#                        also tokenizes the fortunes text with that tokenizer
#                        (unless --data is given) and decodes the samples
#   --data SHARDS        fine-tuning token shards [data/fortunes_train.bin]
#   --val-data SHARDS    validation token shards [data/fortunes_val.bin]
#   --train-tokens N     fine-tune on N tokens of --data, taken as evenly spaced
#                        blocks of 4096 tokens, so that training sees every
#                        sample several times (AQ-SGD sends a sample's first
#                        activation uncompressed and later ones as deltas);
#                        0 = all of --data [65536]
#   --stages S           pipeline stages, one process each [2]
#   --replicas D         data-parallel copies of the pipeline (S x D processes,
#                        each step D x M micro-batches, the gradients averaged;
#                        the report shows what the average cost) [1]
#   --dp-compress SPEC   with --replicas 2 or more: the codec of the gradient
#                        average, e.g. sign, q4:group=512, jointsq:2
#                        (docs/data-parallel.md; the reduction's default for
#                        D, with its own error feedback) or none [none]
#   --compress POLICY    per-edge codec policy, e.g. 'fwd=aq(q4),bwd=q8',
#                        '0-1:fwd=topk:0.2;*:bwd=q8' or none [fwd=aq(q4),bwd=q8]
#   --eval-compress on|off  validate with the forward codecs too [on]
#   --steps N            fine-tuning steps [120]
#   --batch B            sequences per micro-batch [4]
#   --micro-batches M    micro-batches per step [4]
#   --seq T              tokens per sequence [128]
#   --lr LR              peak learning rate (linear warm-up, cosine decay) [3e-4]
#   --warmup W           warm-up steps [steps/10]
#   --seed X             seed for shuffling and stochastic rounding [1337]
#   --val-every K        validate every K steps (and after the last) [30]
#   --val-batches V      validation batches of B x T tokens; 0 = no
#                        validation and no evaluation [32]
#   --link-mbps RATE     simulated link rate in Mbit/s: N for every edge or
#                        per edge '0-1=100;1-2=1000'; 0 = unlimited [0]
#   --error-metrics on|off  senders decode their own messages to measure the
#                        relative error (costs time; off for speed runs) [on]
#   --threads N          CPU threads per stage; 0 = pipezip's default: the CPUs
#                        it may use / stages on this host, each stage pinned [0]
#   --out DIR            where the run goes: train.jsonl, metrics.{csv,jsonl},
#                        model.safetensors, report.json, report.txt [runs/finetune]
#   --no-save            do not write the fine-tuned model
#   --no-before-eval     skip evaluating the starting model (the report then
#                        has no "before" loss; the sweep evaluates it once)
#   --quiet              print only the report (the step lines go to DIR/train.jsonl)
#   --pipezip PATH       the pipezip binary [$PIPEZIP, else build/pipezip]
#   base model (used when --init is not given):
#   --base-steps N       pre-training steps of the demo base model [300]
#   --base-data SHARDS   pre-training shards [data/pydoc_train.bin]
#   --base-val-data SHARDS  its validation shards [data/pydoc_val.bin]
#   --cache DIR          where base models and training subsets are cached [runs/cache]
#   --base-only          make (or find) the base model, print its path, exit
#   -h, --help           this text
#
# The built-in corpora come from tools/make_corpus.sh (tools/run-main.sh runs
# it). Relative paths are taken from the current directory; the defaults live
# in the repository. Exit status: 0 on success, 1 on a bad flag or a failure.
set -euo pipefail
export LC_ALL=C

prog=examples/gpt_finetune.sh
repo=$(cd "$(dirname "$0")/.." && pwd)
die() { echo "$prog: error: $*" >&2; exit 1; }
note() { echo "$prog: $*" >&2; }

init="" data=$repo/data/fortunes_train.bin val_data=$repo/data/fortunes_val.bin
train_tokens=65536 stages=2 replicas=1 dp_compress=none policy='fwd=aq(q4),bwd=q8' eval_compress=on
steps=120 batch=4 micro=4 seq=128 lr=3e-4 warmup="" seed=1337 val_every=30 val_batches=32
link_mbps=0 error_metrics=on threads=0 out=$repo/runs/finetune save=1 quiet=0 before_eval=1
pipezip=${PIPEZIP:-$repo/build/pipezip}
base_steps=300 base_preset=demo base_data=$repo/data/pydoc_train.bin base_val_data=$repo/data/pydoc_val.bin
cache=$repo/runs/cache base_only=0 data_given=0

is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }
is_pos() { [[ $1 =~ ^[0-9]+$ ]] && [ "$1" -gt 0 ]; }
is_num() { [[ $1 =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$ ]]; }

while [ $# -gt 0 ]; do
    flag=$1 val="" has_val=0
    case $flag in
        --*=*) val=${flag#*=}; flag=${flag%%=*}; has_val=1 ;;
    esac
    case $flag in
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        --no-save|--quiet|--base-only|--no-before-eval)
            [ $has_val = 0 ] || die "$flag takes no value"
            case $flag in --no-save) save=0 ;; --quiet) quiet=1 ;; --base-only) base_only=1 ;; --no-before-eval) before_eval=0 ;; esac
            shift; continue ;;
        --init|--data|--val-data|--train-tokens|--stages|--replicas|--dp-compress|--compress|--eval-compress|--steps|--batch|\
        --micro-batches|--seq|--lr|--warmup|--seed|--val-every|--val-batches|--link-mbps|--error-metrics|--threads|\
        --out|--pipezip|--base-steps|--base-data|--base-val-data|--cache)
            if [ $has_val = 0 ]; then
                [ $# -ge 2 ] || die "$flag needs a value"
                val=$2; shift
            fi
            shift
            [ -n "$val" ] || die "$flag: empty value" ;;
        *) die "unknown flag '$flag' (see --help)" ;;
    esac
    case $flag in
        --init) init=$val ;;
        --data) data=$val; data_given=1 ;;
        --val-data) val_data=$val; data_given=1 ;;
        --train-tokens) is_uint "$val" || die "--train-tokens: '$val' is not a whole number"; train_tokens=$val ;;
        --stages) is_pos "$val" || die "--stages: '$val' is not a positive whole number"; stages=$val ;;
        --replicas) is_pos "$val" || die "--replicas: '$val' is not a positive whole number"; replicas=$val ;;
        --dp-compress) dp_compress=$val ;;   # the codec spec is checked by pipezip
        --compress) policy=$val ;;
        --eval-compress) case $val in on|off) eval_compress=$val ;; *) die "--eval-compress: '$val' must be on or off" ;; esac ;;
        --steps) is_pos "$val" || die "--steps: '$val' is not a positive whole number"; steps=$val ;;
        --batch) is_pos "$val" || die "--batch: '$val' is not a positive whole number"; batch=$val ;;
        --micro-batches) is_pos "$val" || die "--micro-batches: '$val' is not a positive whole number"; micro=$val ;;
        --seq) is_pos "$val" || die "--seq: '$val' is not a positive whole number"; seq=$val ;;
        --lr) is_num "$val" || die "--lr: '$val' is not a number"; lr=$val ;;
        --warmup) is_uint "$val" || die "--warmup: '$val' is not a whole number"; warmup=$val ;;
        --seed) is_uint "$val" || die "--seed: '$val' is not a whole number"; seed=$val ;;
        --val-every) is_uint "$val" || die "--val-every: '$val' is not a whole number"; val_every=$val ;;
        --val-batches) is_uint "$val" || die "--val-batches: '$val' is not a whole number"; val_batches=$val ;;
        --link-mbps) link_mbps=$val ;;   # checked by pipezip (per-edge syntax)
        --error-metrics) case $val in on|off) error_metrics=$val ;; *) die "--error-metrics: '$val' must be on or off" ;; esac ;;
        --threads) is_uint "$val" || die "--threads: '$val' is not a whole number"; threads=$val ;;
        --out) out=$val ;;
        --pipezip) pipezip=$val ;;
        --base-steps) is_pos "$val" || die "--base-steps: '$val' is not a positive whole number"; base_steps=$val ;;
        --base-data) base_data=$val ;;
        --base-val-data) base_val_data=$val ;;
        --cache) cache=$val ;;
    esac
done

[ -x "$pipezip" ] || die "pipezip binary not found at '$pipezip': build it (bash tools/setup.sh), or pass --pipezip PATH"
command -v python3 >/dev/null || die "python3 not found (apt-get install python3)"
mkdir -p "$cache" || die "cannot create cache directory $cache"
[ -z "$warmup" ] && warmup=$((steps / 10))
[ "$stages" -ge 2 ] || [ "$policy" = none ] || die "--compress needs --stages 2 or more (compression happens between stages)"
[ "$replicas" -ge 2 ] || [ "$dp_compress" = none ] || die "--dp-compress needs --replicas 2 or more (it compresses the average between replicas)"

# The fine-tuning command: args=(train --init MODEL --data SHARDS ...) from
# the flags. MODEL is a --preset word for the up-front check below.
train_args() {
    local model=(--init "$1"); [ "${1#--preset=}" = "$1" ] || model=(--preset "${1#--preset=}")
    args=(train "${model[@]}" --data "$2" --stages "$stages"
          --batch "$batch" --micro-batches "$micro" --seq "$seq" --steps "$steps"
          --lr "$lr" --warmup "$warmup" --seed "$seed" --threads "$threads"
          --eval-compress "$eval_compress" --error-metrics "$error_metrics" --metrics "$out/metrics")
    # one stage has no link to slow: train refuses --link-mbps there, even 0
    [ "$stages" = 1 ] && [ "$link_mbps" = 0 ] || args+=(--link-mbps "$link_mbps")
    [ "$replicas" = 1 ] || args+=(--replicas "$replicas")
    [ "$dp_compress" = none ] || args+=(--dp-compress "$dp_compress")
    # pipezip's default is no compression; it takes 'none' only as a codec (fwd=none)
    [ "$policy" = none ] || args+=(--compress "$policy")
    if [ "$val_batches" != 0 ]; then
        args+=(--val-data "$val_data" --val-every "$val_every" --val-batches "$val_batches")
    else
        args+=(--val-every 0)
    fi
    [ "$save" = 1 ] && args+=(--save "$out/model.safetensors")
    return 0
}
# pipezip's own check of the fine-tuning flags (the policy, link rates, the
# split against the model's configuration), before the base model and the
# "before" evaluation take minutes: the base model is the $base_preset preset's
# shape, --init's configuration is read from its header
[ "$base_only" = 1 ] || {
    if [ -n "$init" ]; then train_args "$init" "$data"; else train_args "--preset=$base_preset" "$data"; fi
    check=$("$pipezip" "${args[@]}" --check 2>&1) || die "${check#pipezip train: error: }"
}

# Files of a shard list (a file, a comma list or a glob), one per line, for
# hashing; errors name what is missing.
shard_files() {
    local item f found
    local IFS=,
    for item in $1; do
        found=0
        for f in $item; do [ -f "$f" ] && { echo "$f"; found=1; }; done
        [ $found = 1 ] || return 1
    done
}
need_shards() {  # need_shards FLAG SHARDS
    shard_files "$2" >/dev/null ||
        die "$1: no token shards at '$2'$( [[ $2 == "$repo/data/"* ]] && echo ' (make the built-in corpora: bash tools/make_corpus.sh)')"
}
content_hash() {  # sha256 of the named shards' contents
    local files
    mapfile -t files < <(shard_files "$1")
    sha256sum -- "${files[@]}" | cut -d' ' -f1 | sha256sum | cut -c1-12
}

# Progress filter for pipezip's JSON lines: validation lines, the summary, and
# every 20th step (everything still goes to the log file).
progress() {
    if [ "$quiet" = 1 ]; then cat > /dev/null
    else awk -F'[:,]' '/val_loss|summary/ || ($1 == "{\"step\"" && ($2 % 20 == 0 || $2 == 1)) {
                 sub(/,"stages".*$/, "}"); print; fflush() }' >&2
    fi
}

# ---- the base model ----------------------------------------------------------
# Pre-training settings; any change (or a change of the data) gives another cache entry.
base_model() {
    need_shards --base-data "$base_data"
    need_shards --base-val-data "$base_val_data"
    local settings key name
    settings="preset=$base_preset steps=$base_steps batch=8 seq=128 lr=1e-3 warmup=20 seed=1337 data=$(content_hash "$base_data") val=$(content_hash "$base_val_data")"
    key=$(printf '%s' "$settings" | sha256sum | cut -c1-12)
    name=$cache/base-$base_preset-$base_steps-$key
    if [ -f "$name.safetensors" ]; then
        note "base model: $name.safetensors (cached)"
    else
        note "base model: pre-training the $base_preset preset for $base_steps steps on $base_data (cached afterwards as $name.safetensors)"
        local tmp=$name.tmp.$$
        trap 'rm -f "'"$tmp"'".*' EXIT
        local t0=$SECONDS
        "$pipezip" train --preset "$base_preset" --data "$base_data" --val-data "$base_val_data" \
            --batch 8 --seq 128 --steps "$base_steps" --lr 1e-3 --warmup 20 --seed 1337 \
            --val-every 100 --val-batches 16 --threads 0 --save "$tmp.safetensors" \
            2> "$tmp.err" | tee "$tmp.jsonl" | progress ||
            { cat "$tmp.err" >&2; die "pre-training the base model failed"; }
        printf '%s\n' "$settings" > "$tmp.txt"
        # the model last: its presence marks a complete entry
        mv "$tmp.jsonl" "$name.jsonl"; mv "$tmp.txt" "$name.txt"; rm -f "$tmp.err"
        mv "$tmp.safetensors" "$name.safetensors"
        trap - EXIT
        note "base model: done in $((SECONDS - t0)) s"
    fi
    base_path=$name.safetensors
}

if [ "$base_only" = 1 ]; then
    base_model
    echo "$base_path"
    exit 0
fi

# An HF model directory with its tokenizer (tokenizer.json, or vocab.json and
# merges.txt): unless --data says otherwise, the fine-tuning text (the
# fortunes corpus's files) is tokenized with it, the last file for validation.
tokenizer=""
if [ -n "$init" ] && [ -d "$init" ] && { [ -f "$init/tokenizer.json" ] || [ -f "$init/vocab.json" ]; }; then
    tokenizer=$init
fi
if [ -n "$tokenizer" ] && [ "$data_given" = 0 ]; then
    [ -f "$repo/data/fortunes_files.txt" ] || die "the fortunes corpus is not built (bash tools/make_corpus.sh)"
    mapfile -t texts < "$repo/data/fortunes_files.txt"
    [ "${#texts[@]}" -ge 2 ] || die "the fortunes corpus lists fewer than 2 files"
    tkey=$( { cat "$tokenizer"/tokenizer.json "$tokenizer"/vocab.json "$tokenizer"/merges.txt 2>/dev/null; cat "${texts[@]}"; } |
            sha256sum | cut -c1-12)
    mkdir -p "$cache" || die "cannot create --cache $cache"
    data=$cache/fortunes-bpe-$tkey-train.bin val_data=$cache/fortunes-bpe-$tkey-val.bin
    if [ ! -f "$val_data" ]; then
        note "tokenizing the fortunes text with $tokenizer's tokenizer (cached as $data)"
        "$pipezip" tokenize --tokenizer "$tokenizer" --out "$data.tmp.$$" "${texts[@]:0:${#texts[@]}-1}" >&2 &&
            "$pipezip" tokenize --tokenizer "$tokenizer" --out "$val_data.tmp.$$" "${texts[-1]}" >&2 ||
            { rm -f "$data.tmp.$$" "$val_data.tmp.$$"; die "tokenizing with $tokenizer failed"; }
        mv "$data.tmp.$$" "$data" && mv "$val_data.tmp.$$" "$val_data"
    fi
fi
need_shards --data "$data"
[ "$val_batches" = 0 ] || need_shards --val-data "$val_data"
if [ -n "$init" ]; then
    [ -e "$init" ] || die "--init: no such file or directory '$init'"
    base_path=$init
else
    base_model
fi

# ---- the fine-tuning set ------------------------------------------------------
train_shards=$data
subset_note="all of it"
if [ "$train_tokens" != 0 ]; then
    key=$(printf '%s %s' "$(content_hash "$data")" "$train_tokens" | sha256sum | cut -c1-12)
    train_shards=$cache/subset-$train_tokens-$key.bin
    if [ ! -f "$train_shards" ]; then
        mapfile -t files < <(shard_files "$data")
        python3 - "$train_shards" "$train_tokens" "${files[@]}" <<'PY' || die "cannot make the fine-tuning subset of $data"
# N tokens of the shards as evenly spaced blocks of 4096 tokens (fewer when N is
# smaller), written as one llm.c shard (256 int32 header; uint16 tokens).
import array, os, sys
out, n, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
toks = array.array("H")
for f in files:
    with open(f, "rb") as fh:
        hdr = array.array("i"); hdr.fromfile(fh, 256)
        if hdr[0] != 20240520 or hdr[1] != 1: sys.exit(f"{f}: not an llm.c token shard")
        t = array.array("H"); t.fromfile(fh, hdr[2]); toks.extend(t)
if n > len(toks): sys.exit(f"--train-tokens {n}: the data has only {len(toks)} tokens")
blk = min(4096, n)
nblk = (n + blk - 1) // blk
stride = (len(toks) - blk) // max(nblk - 1, 1)
sub = array.array("H")
for b in range(nblk):
    s = b * stride
    sub.extend(toks[s:s + min(blk, n - len(sub))])
hdr = array.array("i", [0] * 256); hdr[0], hdr[1], hdr[2] = 20240520, 1, len(sub)
tmp = f"{out}.tmp.{os.getpid()}"
with open(tmp, "wb") as fh: hdr.tofile(fh); sub.tofile(fh)
os.replace(tmp, out)
PY
    fi
    subset_note="a $train_tokens-token subset ($(( (train_tokens + 4095) / 4096 )) evenly spaced blocks)"
fi

# ---- fine-tuning -------------------------------------------------------------
mkdir -p "$out" || die "cannot create --out directory $out"
rm -f "$out"/{train.jsonl,train.err,metrics.csv,metrics.jsonl,report.json,report.txt,before.json}
train_args "$base_path" "$train_shards"

before="null"
if [ "$val_batches" != 0 ] && [ "$before_eval" = 1 ]; then
    note "evaluating the starting model on $val_data ($val_batches batches of $batch x $seq)"
    "$pipezip" eval --model "$base_path" --data "$val_data" --batch "$batch" --seq "$seq" \
        --batches "$val_batches" --threads 0 > "$out/before.json" 2> "$out/before.err" ||
        { cat "$out/before.err" >&2; die "pipezip eval of $base_path failed"; }
    before=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["loss"])' "$out/before.json")
    rm -f "$out/before.err"
    note "validation loss before fine-tuning: $before"
fi

dp_note=""; [ "$replicas" = 1 ] || dp_note=" x $replicas replicas (gradient average: $dp_compress)"
note "fine-tuning: $stages stages$dp_note, policy '$policy', $steps steps of $micro x $batch x $seq tokens"
t0=$SECONDS
if ! "$pipezip" "${args[@]}" 2> "$out/train.err" | tee "$out/train.jsonl" | progress; then
    tail -n 30 "$out/train.err" >&2
    die "fine-tuning failed (command: $pipezip ${args[*]}; log $out/train.err)"
fi
wall=$((SECONDS - t0))

# ---- samples: what the model writes, before and after -------------------------
# A prompt from the validation text (its first 32 tokens), continued greedily
# and sampled (temperature 0.8, top-k 40) by the starting and the fine-tuned
# model; generate prints the text (decoded with the tokenizer, or as bytes for
# a byte model) and a JSON line last.
samples_json=$out/samples.json
rm -f "$samples_json"
mapfile -t val_files < <(shard_files "$val_data")
# the model's context (wpe's rows) bounds prompt + new tokens: 32 + 64, or
# a quarter and half of a shorter context
read -r prompt new_tokens < <(python3 - "${val_files[0]}" "$base_path" <<'PY'
import array, json, os, struct, sys
path = sys.argv[2]
if os.path.isdir(path):
    path = os.path.join(path, "model.safetensors")
ctx = 1024
try:
    with open(path, "rb") as fh:
        head = fh.read(8)
        if path.endswith(".bin"):
            ctx = struct.unpack("<256i", head + fh.read(1016))[2]
        else:
            meta = json.loads(fh.read(struct.unpack("<Q", head)[0]))
            ctx = next(v["shape"][0] for k, v in meta.items() if k.endswith("wpe.weight"))
except Exception:
    pass
n = min(32, ctx // 4)
with open(sys.argv[1], "rb") as fh:
    hdr = array.array("i"); hdr.fromfile(fh, 256)
    t = array.array("H"); t.fromfile(fh, min(hdr[2], n))
print(",".join(map(str, t)), min(64, ctx - len(t)))
PY
) || prompt=""
if [ -n "$prompt" ]; then
    tok=(); [ -n "$tokenizer" ] && tok=(--tokenizer "$tokenizer")
    models=(before "$base_path"); [ "$save" = 1 ] && models+=(after "$out/model.safetensors")
    : > "$out/samples.tsv"
    for ((i = 0; i < ${#models[@]}; i += 2)); do
        for mode in greedy sampled; do
            opts=(--temperature 0); [ $mode = sampled ] && opts=(--temperature 0.8 --top-k 40 --seed "$seed")
            if "$pipezip" generate --model "${models[i + 1]}" "${tok[@]}" --prompt-ids "$prompt" --max-new-tokens "$new_tokens" \
                   "${opts[@]}" > "$out/gen.txt" 2> "$out/gen.err"; then
                printf '%s\t%s\t%s\n' "${models[i]}" "$mode" "$(head -c -1 "$out/gen.txt" | sed '$d' | base64 -w0)" >> "$out/samples.tsv"
            else
                note "generate with ${models[i + 1]} failed: $(tail -n 1 "$out/gen.err")"
            fi
        done
    done
    rm -f "$out/gen.txt" "$out/gen.err"
    python3 - "$out/samples.tsv" "$samples_json" "$prompt" "$new_tokens" <<'PY'
import base64, json, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
out = {"prompt_ids": [int(x) for x in sys.argv[3].split(",")], "max_new_tokens": int(sys.argv[4])}
for who, mode, text in rows:
    s = base64.b64decode(text).decode("utf-8", "replace")
    out.setdefault(who, {})[mode] = s[:-1] if s.endswith("\n") else s   # the newline before the JSON line
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
    rm -f "$out/samples.tsv"
fi

# ---- the loss curves as a picture (matplotlib; Debian's python3 has it after set-up) ----
plotpy=python3
python3 -c 'import matplotlib' 2>/dev/null || { /usr/bin/python3 -c 'import matplotlib' 2>/dev/null && plotpy=/usr/bin/python3; }
rm -f "$out/loss.png"
"$plotpy" - "$out/train.jsonl" "$out/loss.png" <<'PY' 2>/dev/null || note "no loss plot: matplotlib is not installed (apt-get install python3-matplotlib)"
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
tr = [(r["step"], r["loss"]) for r in rows if "loss" in r and "step" in r]
va = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r and r.get("compressed") is not True]
vc = [(r["step"], r["val_loss"]) for r in rows if "val_loss" in r and r.get("compressed") is True]
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(*zip(*tr), label="training loss", linewidth=1)
if va: ax.plot(*zip(*va), "o-", label="validation loss")
if vc: ax.plot(*zip(*vc), "s--", label="validation loss, fwd codecs")
ax.set_xlabel("step"); ax.set_ylabel("loss (nats/token)"); ax.legend(); ax.grid(alpha=0.3)
fig.tight_layout(); fig.savefig(sys.argv[2], dpi=110)
PY

# ---- report ------------------------------------------------------------------
mapfile -t train_files < <(shard_files "$train_shards")
python3 - "$out" "$before" "$base_path" "$data" "$subset_note" "$wall" "$save" \
          "$batch" "$micro" "$seq" "$stages" "$policy" "$replicas" "${train_files[@]}" <<'PY'
import csv, json, math, os, sys
out, before, base, data, subset, wall, save, B, M, T, S, policy, D = sys.argv[1:14]
shards = sys.argv[14:]
before = None if before == "null" else float(before)
rows = []
for line in open(os.path.join(out, "train.jsonl")):
    line = line.strip()
    if line.startswith("{"):
        rows.append(json.loads(line))
steps = [r for r in rows if "loss" in r and "step" in r]
vals = [r for r in rows if "val_loss" in r]
summ = next((r for r in rows if r.get("summary")), None)
if not steps or summ is None:
    sys.exit("gpt_finetune.sh: error: pipezip printed no step or summary lines")
last = steps[-1]["step"]
after_c = next((r["val_loss"] for r in vals if r["step"] == last and r.get("compressed") is True), None)
after_u = next((r["val_loss"] for r in vals if r["step"] == last and r.get("compressed") is False), None)
if after_u is None:   # uncompressed policy: one line without (or with false) "compressed"
    after_u = next((r["val_loss"] for r in vals if r["step"] == last and not r.get("compressed")), None)
ntok = samples = 0
for f in shards:   # the loader cuts each shard into samples of T+1 tokens at multiples of T
    with open(f, "rb") as fh:
        n = int.from_bytes(fh.read(12)[8:12], "little")
    ntok += n
    samples += max(0, (n - 1) // int(T))
seen = len(steps) * int(B) * int(M) * int(D)
per_dir = {}
for d in ("fwd", "bwd"):
    raw, wire = summ.get(d + "_raw", 0), summ.get(d + "_wire", 0)
    per_dir[d] = {"raw_bytes": raw, "wire_bytes": wire,
                  "saved_frac": (1 - wire / raw) if raw else None,
                  "bits_per_elem": (32.0 * wire / raw) if raw else None}
metrics = []
mpath = os.path.join(out, "metrics.csv")
if os.path.exists(mpath):
    metrics = list(csv.DictReader(open(mpath)))
rep = {"base_model": base, "data": data, "train_shards": shards, "train_tokens": ntok,
       "train_samples": samples, "epochs": seen / samples if samples else None,
       "stages": int(S), "replicas": int(D), "policy": summ.get("policy", policy), "steps": summ.get("steps", len(steps)),
       "tokens_per_step": int(B) * int(M) * int(D) * int(T),
       "val_loss_before": before, "val_loss_after_compressed": after_c,
       "val_loss_after_uncompressed": after_u,
       "tok_s_median": summ.get("tok_s_median"), "wall_s": int(wall),
       "final_train_loss": steps[-1]["loss"], "direction": per_dir, "edges": metrics,
       "data_parallel": {k: summ[k] for k in ("dp_raw", "dp_wire", "dp_sync_s", "dp_hidden_s") if k in summ} or None,
       "val_curve": [{"step": r["step"], "val_loss": r["val_loss"], "compressed": r.get("compressed")} for r in vals],
       "model": os.path.join(out, "model.safetensors") if save == "1" else None}
json.dump(rep, open(os.path.join(out, "report.json"), "w"), indent=1)

def mb(x): return f"{x / 1e6:.1f} MB"
def saved(raw, wire):
    # uncompressed activations still carry their sample ids (8 bytes a
    # sequence), so the wire can exceed the raw size: "saved -0.0 MB" misread
    if wire >= raw:
        return "saved none" + (f" ({wire - raw} bytes more: sample ids and codec headers)" if wire > raw else "")
    return f"saved {mb(raw - wire)} ({100 * (1 - wire / raw):.1f}%)"
L = []
L.append(f"== fine-tuning report ({out}) ==")
L.append(f"starting model     {base}")
L.append(f"fine-tuning data   {data}: {subset}, {samples} samples of {T} tokens; "
         f"{len(steps)} steps x {int(B) * int(M) * int(D)} samples = {seen / samples:.1f} epochs" if samples else "")
L.append(f"pipeline           {S} stages{f' x {D} replicas' if D != '1' else ''}; policy {rep['policy']}")
def f4(x): return "n/a" if x is None else f"{x:.4f}"
if before is not None:
    L.append(f"validation loss    before {f4(before)} (pipezip eval of the starting model)")
if after_u is not None:
    pre = "validation loss    after " if before is None else "                   after "
    if after_c is not None:
        L.append(f"{pre} {f4(after_c)} evaluated with the forward codecs, {f4(after_u)} uncompressed")
    else:
        L.append(f"{pre} {f4(after_u)}")
    if before is not None:
        L.append(f"                   change {after_u - before:+.4f} ({100 * (after_u - before) / before:+.1f}%)")
for d, name in (("fwd", "activations (fwd)"), ("bwd", "gradients (bwd)")):
    p = per_dir[d]
    if p["raw_bytes"]:
        L.append(f"{name:<19}{mb(p['wire_bytes'])} sent for {mb(p['raw_bytes'])} uncompressed: "
                 f"{saved(p['raw_bytes'], p['wire_bytes'])}, {p['bits_per_elem']:.2f} bits/element")
dp = rep["data_parallel"]
if dp and dp.get("dp_sync_s"):   # one replica's figures, summed over its stages
    n = max(1, len(steps))
    L.append(f"data parallel      {mb(dp['dp_wire'])} sent to average {mb(dp['dp_raw'])} of gradients; "
             f"{1e3 * dp['dp_sync_s'] / n:.1f} ms/step in flight, {100 * dp['dp_hidden_s'] / dp['dp_sync_s']:.0f}% "
             f"of it hidden behind the backward")
L.append(f"throughput         {summ.get('tok_s_median', float('nan')):.0f} tokens/s (median step); wall {wall} s")
if rep["model"]:
    L.append(f"saved              {rep['model']}")
sp = os.path.join(out, "samples.json")
if os.path.exists(sp):
    smp = json.load(open(sp))
    rep["samples"] = smp
    json.dump(rep, open(os.path.join(out, "report.json"), "w"), indent=1)
    L.append(f"samples            prompt: the validation text's first {len(smp['prompt_ids'])} tokens, "
             f"+{smp['max_new_tokens']} generated (greedy; temperature 0.8, top-k 40)")
    for who in ("before", "after"):
        for mode in ("greedy", "sampled"):
            if mode in smp.get(who, {}):
                t = smp[who][mode].replace("\n", "\\n")
                L.append(f"  {who:<6} {mode:<8} {t}")
png = os.path.join(out, "loss.png")
if os.path.exists(png):
    L.append(f"loss curves        {png}")
txt = "\n".join(l for l in L if l)
open(os.path.join(out, "report.txt"), "w").write(txt + "\n")
print(txt)
PY
