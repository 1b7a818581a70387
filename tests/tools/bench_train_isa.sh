#!/bin/bash
# bench_train_isa.sh BENCH_TRAIN: `PIPEZIP_ISA=x86-64-v3 bench_train` (one
# level, asked for by hand) runs OpenBLAS's AVX2 sgemm, as the x86-64-v3
# child of a plain run does and as a CPU without AVX-512 would; it used to
# keep the AVX-512 kernel OpenBLAS picks on an AVX-512 CPU (Cooperlake on a
# Zen 5), so its "% of the sgemm peak" measured another machine's sgemm. A
# kernel the caller names in OPENBLAS_CORETYPE is kept. Only the header is
# read: the benchmark dies of SIGPIPE at its next line (it prints by line).
set -u
b="$1"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# header KEY=VALUE...: bench_train's first line in that environment (no OPENBLAS_CORETYPE of ours)
header() { env -u OPENBLAS_CORETYPE "$@" "$b" --threads 1 --steps 1 --only demo 2>&1 | head -n 1; }

# this CPU runs x86-64-v3, and this OpenBLAS lets OPENBLAS_CORETYPE choose its kernel
h=$(header PIPEZIP_ISA=x86-64-v3)
case "$h" in *"supports up to"*) echo "SKIP: this CPU has no x86-64-v3 ($h)"; exit 77 ;; esac
grep -q 'OpenBLAS sgemm kernel: Prescott' <<<"$(header PIPEZIP_ISA=x86-64 OPENBLAS_CORETYPE=Prescott)" ||
  { echo "SKIP: this OpenBLAS ignores OPENBLAS_CORETYPE (not a DYNAMIC_ARCH build)"; exit 77; }

grep -q '^kernels compiled for: x86-64-v3 (.*PIPEZIP_ISA=x86-64-v3); OpenBLAS sgemm kernel: Haswell$' <<<"$h" ||
  fail "PIPEZIP_ISA=x86-64-v3 by hand: '$h' (expected x86-64-v3 kernels and OpenBLAS's Haswell sgemm)"
h=$(header PIPEZIP_ISA=x86-64-v3 OPENBLAS_CORETYPE=Prescott)
grep -q 'OpenBLAS sgemm kernel: Prescott$' <<<"$h" || fail "the caller's OPENBLAS_CORETYPE=Prescott not kept: '$h'"

[ "$fails" = 0 ] && echo "bench-train-isa: ok"
exit "$fails"
