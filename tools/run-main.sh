#!/usr/bin/env bash
# The main job on its built-in default: set up, build, make the built-in
# corpora (no download), then run the fine-tuning example
# (examples/gpt_finetune.sh): pre-train a small base model (the `demo` GPT-2,
# ~10.8M parameters, byte vocabulary) on the Python 3.11 documentation (cached
# under runs/cache/ after the first run), fine-tune it on the fortunes corpus
# as a 2-stage pipeline with compressed activations and gradients
# (fwd=aq(q4),bwd=q8), evaluate, save runs/finetune/model.safetensors and print
# a report. Extra arguments go to the example (see
# bash examples/gpt_finetune.sh --help), e.g. --compress none --steps 100.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bash tools/make_corpus.sh data
bash examples/gpt_finetune.sh "$@"
