#!/bin/bash
# golden_losses.sh PIPEZIP GOLDEN [--write]: the per-step losses, validation
# losses and wire bytes of fixed training runs (one process, and a compressed
# 2-stage pipeline) against a committed golden file, character for character.
# Written before the code was reorganised (issue 11; the zb-h1 and interleaved
# runs before the executors became one, issue 23); a refactor leaves it unchanged.
#
# The runs must give the same floats on any x86-64 CPU, so the per-CPU choices
# are pinned: pipezip's baseline code (PIPEZIP_ISA), OpenBLAS's Prescott sgemm
# kernels (OPENBLAS_CORETYPE), glibc's exp/log without the FMA variants
# (GLIBC_TUNABLES), and one thread per stage. A default run picks faster paths
# whose sums round differently in the last bits.
pz=${1:?usage: golden_losses.sh PIPEZIP GOLDEN [--write]}
golden=${2:?usage: golden_losses.sh PIPEZIP GOLDEN [--write]}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export PIPEZIP_ISA=x86-64 OPENBLAS_CORETYPE=Prescott GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2,-FMA,-AVX512F
# fixed text: nothing in the tree that edits would change
seq 1 6000 | awk '{print "line " $1 ": stage " $1 % 4 " sends " ($1 * $1) % 97 " activations over the link"}' > "$dir/text.txt"
"$pz" tokenize --out "$dir/train.bin" "$dir/text.txt" >/dev/null || exit 1
common=(--preset tiny --data "$dir/train.bin" --val-data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 2
        --steps 6 --val-every 3 --val-batches 2 --threads 1)
# The defaults before issue 26 are spelled out (--schedule 1f1b, --compress-tied
# none: since then auto and the bwd codec where it has no state), so that the
# file stays what it pins; the "# ..." lines are part of the golden file.
{
  echo "# stages=1"
  "$pz" train "${common[@]}" --schedule 1f1b 2>"$dir/err1" | grep -o '"step":[0-9]*,"\(loss\|val_loss\)":[0-9.]*' ||
    { echo "one-process run failed:" >&2; cat "$dir/err1" >&2; exit 1; }
  echo "# stages=2 fwd=ef(q4) bwd=topk:0.1"   # q4:round=stochastic,grid=midrise: q4's defaults when the file was written
  "$pz" train "${common[@]}" --stages 2 --schedule 1f1b --compress-tied none \
      --compress 'fwd=ef(q4:round=stochastic,grid=midrise),bwd=topk:0.1' 2>"$dir/err2" |
    grep -o '"step":[0-9]*,"\(loss\|val_loss\)":[0-9.]*\|"fwd_wire":[0-9]*\|"bwd_wire":[0-9]*' ||
    { echo "pipeline run failed:" >&2; cat "$dir/err2" >&2; exit 1; }
  # issue 23 (one executor for every schedule): zb-h1 on 3 stages and
  # interleaved:v=2 on 2 ranks, each with codecs on every boundary
  echo "# stages=3 zb-h1 fwd=q8 bwd=topk:0.1"
  "$pz" train "${common[@]}" --stages 3 --micro-batches 4 --split 0,1,1 --schedule zb-h1 \
      --compress 'fwd=q8,bwd=topk:0.1' --compress-tied none 2>"$dir/err3" |
    grep -o '"step":[0-9]*,"\(loss\|val_loss\)":[0-9.]*\|"fwd_wire":[0-9]*\|"bwd_wire":[0-9]*' ||
    { echo "zb-h1 run failed:" >&2; cat "$dir/err3" >&2; exit 1; }
  echo "# stages=2 interleaved:v=2 fwd=q8 bwd=topk:0.1 tied=q8"
  "$pz" train "${common[@]}" --stages 2 --micro-batches 4 --schedule interleaved:v=2 --split 0,1,1,0 \
      --compress 'fwd=q8,bwd=topk:0.1' --compress-tied q8 2>"$dir/err4" |
    grep -o '"step":[0-9]*,"\(loss\|val_loss\)":[0-9.]*\|"fwd_wire":[0-9]*\|"bwd_wire":[0-9]*\|"tied_wire":[0-9]*' ||
    { echo "interleaved run failed:" >&2; cat "$dir/err4" >&2; exit 1; }
} > "$dir/got.txt"
if [ "$3" = --write ]; then
  cp "$dir/got.txt" "$golden" && echo "wrote $golden ($(wc -l < "$golden") lines)"
  exit
fi
if diff -u "$golden" "$dir/got.txt"; then
  echo "golden losses: $(grep -c loss "$golden") losses and $(grep -c wire "$golden") wire sizes equal to $golden"
  echo "1 passed, 0 failed"
else
  echo "FAIL: losses or wire bytes differ from $golden (diff above: - golden, + this build)"
  echo "0 passed, 1 failed"
  exit 1
fi
