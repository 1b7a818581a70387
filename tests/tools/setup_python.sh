#!/usr/bin/env bash
# tools/setup.sh installs the tests' pip packages for the interpreter the
# tests run ($PZ_TORCH_PYTHON, else /usr/bin/python3), not for the first
# python3 on PATH (issue 24: with pyenv first, tokenizers went to pyenv's
# Python and finetune-hf skipped). A python3 wrapper first on PATH records
# every call: set-up must not call it, and must name the tests' interpreter
# (PZ_SETUP_DRY_RUN=1: it installs nothing).
#   usage: setup_python.sh SOURCE_ROOT
set -u
root="$1"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"
[ -x "$py" ] || { echo "SKIP: $py (the tests' Python) is not installed"; exit 77; }
mkdir "$dir/bin"
printf '#!/bin/sh\necho "$0 $*" >> "%s/calls"\nexit 1\n' "$dir" > "$dir/bin/python3"
chmod +x "$dir/bin/python3"
out=$(PATH="$dir/bin:$PATH" PZ_SETUP_DRY_RUN=1 bash "$root/tools/setup.sh" --tests --python-only 2>&1); rc=$?
echo "$out"
fails=0
[ "$rc" = 0 ] || { echo "FAIL: setup.sh --tests --python-only exited $rc"; fails=$((fails + 1)); }
[ ! -e "$dir/calls" ] || { echo "FAIL: set-up ran the first python3 on PATH: $(cat "$dir/calls")"; fails=$((fails + 1)); }
grep -q -- "$py" <<<"$out" || { echo "FAIL: set-up did not name $py"; fails=$((fails + 1)); }
# the tests that need tokenizers ask the same interpreter
for t in stages/bpe_vs_hf.sh pipeline/finetune_hf.sh; do
  grep -q 'py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"' "$root/tests/$t" || { echo "FAIL: $t asks another Python"; fails=$((fails + 1)); }
done
[ "$fails" = 0 ] && echo "setup-python: ok"
[ "$fails" = 0 ]
