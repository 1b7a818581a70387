#!/usr/bin/env bash
# Set-up for pipezip on Debian 12: installs missing Debian packages (when root;
# otherwise prints the exact apt-get command and stops) and builds into build/.
#   bash tools/setup.sh            packages for building and the main job, then build
#   bash tools/setup.sh --tests    also the packages the test suite needs
#   bash tools/setup.sh --tests --python-only
#                                  only the pip packages of the tests, for the interpreter they run
#                                  ($PZ_TORCH_PYTHON, else /usr/bin/python3; not the first python3 on PATH)
# Idempotent: a second run installs nothing and rebuilds only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

want_tests=0 python_only=0
for a in "$@"; do
  case "$a" in
    --tests) want_tests=1 ;;
    --python-only) python_only=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown argument '$a'" >&2; exit 2 ;;
  esac
done

# build: compiler, meson, OpenBLAS (its OpenMP build, see meson.build), OpenMP runtime (part of gcc), UCX, zstd,
# PCRE2 (GPT-2's pre-tokenization pattern in the BPE tokenizer), libcrypto (OpenSSL: the HMAC by which
# ranks prove they hold the job secret)
pkgs=(gcc g++ pkg-config meson ninja-build libopenblas-openmp-dev libucx-dev libzstd-dev libpcre2-dev libssl-dev)
# the built-in corpora (see tools/make_corpus.sh)
pkgs+=(python3.11-doc fortunes)
# the fine-tuning example and the sweep's table and plots (examples/)
pkgs+=(python3 python3-matplotlib)
if [ "$want_tests" = 1 ]; then
  # PyTorch reference checks; clang's sanitizer/fuzzer runtimes; mpirun (launch tests); MPI's headers
  # (bench/bench_allreduce against MPI_Allreduce, built only when meson finds MPI)
  pkgs+=(python3-torch python3-numpy clang libclang-rt-14-dev openmpi-bin libopenmpi-dev)
  # pip, for HF tokenizers below
  pkgs+=(python3-pip)
fi

# HF `tokenizers` (PyPI only; no Debian package): the reference of the BPE
# tokenizer test (tests/stages/bpe_vs_hf.sh) and finetune-hf's tokenizer
# trainer, which skip without it. Installed for the interpreter the tests run
# (the torch tests' $PZ_TORCH_PYTHON, else Debian's /usr/bin/python3, which
# has python3-torch), not the first python3 on PATH (pyenv, a venv), which
# the tests never use for them.
python_packages() {
  local py="${PZ_TORCH_PYTHON:-/usr/bin/python3}"
  if [ ! -x "$py" ]; then
    echo "setup: $py (the tests' Python) is missing: apt-get install python3, or set PZ_TORCH_PYTHON" >&2
    return 1
  fi
  if "$py" -c 'import tokenizers' 2>/dev/null; then
    echo "setup: $py has tokenizers" >&2
    return 0
  fi
  echo "setup: pip installing tokenizers for $py" >&2
  [ "${PZ_SETUP_DRY_RUN:-0}" = 1 ] && return 0   # tests/tools/setup_python.sh: say it, install nothing
  "$py" -m pip install -q --break-system-packages tokenizers ||
    echo "setup: could not install tokenizers ($py -m pip install tokenizers); bpe-vs-hf and finetune-hf will skip" >&2
}
if [ "$python_only" = 1 ]; then
  [ "$want_tests" = 1 ] || { echo "setup.sh: --python-only goes with --tests" >&2; exit 2; }
  python_packages
  exit
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "setup: missing Debian packages; run as root:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if [ "$want_tests" = 1 ]; then python_packages || true; fi

# the CUDA toolkit's usual home; meson finds nvcc only on PATH
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
if [ ! -f build/build.ninja ]; then
  # -Dcuda=auto: the CUDA backend is built when nvcc is on PATH (no GPU needed).
  # No -Dwerror here: this is the user's build, and a warning that another
  # compiler or CPU brings up must not stop it (tools/warnings.sh checks them).
  meson setup build --buildtype=release -Dcuda=auto >/dev/null
fi
ninja -C build
echo "setup: built build/pipezip" >&2
