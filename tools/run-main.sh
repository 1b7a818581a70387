#!/usr/bin/env bash
# The main job on its built-in default: set up, build, make the built-in
# corpora (no download), train the `demo` GPT-2 (~10.8M parameters, byte
# vocabulary) on the Python 3.11 documentation, evaluate and save it.
# Extra arguments go to `pipezip train` (e.g. --steps 50 --threads 2).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/make_corpus.sh data
mkdir -p runs
build/pipezip train --preset demo \
  --data data/pydoc_train.bin --val-data data/pydoc_val.bin \
  --batch 8 --seq 128 --steps 300 --lr 1e-3 --warmup 20 \
  --val-every 50 --val-batches 16 \
  --save runs/demo.safetensors "$@" | tee runs/demo.jsonl
build/pipezip eval --model runs/demo.safetensors --data data/pydoc_val.bin --batch 8 --seq 128 --batches 64
