#!/bin/bash
# bench_args.sh BENCH_CODECS: the codec benchmark's options. A mistyped option
# used to be taken as a codec spec, printed as "skipped" in every ISA table,
# and exited 0, so a script calling it with a typo reported nothing and passed.
set -u
b="$1"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$("$b" --help 2>&1); rc=$?
[ "$rc" = 0 ] || fail "--help exits $rc"
grep -q '^usage: bench_codecs' <<<"$out" || fail "--help prints no usage: $out"
grep -q 'skipped' <<<"$out" && fail "--help ran the benchmark"

err=$("$b" --runs 1 --bogus fp16 2>&1); rc=$?
[ "$rc" = 2 ] || fail "an unknown option exits $rc, not 2"
grep -q "unknown option '--bogus'" <<<"$err" || fail "the unknown option is not named: $err"

err=$("$b" --runs 0 2>&1); rc=$?
[ "$rc" != 0 ] || fail "--runs 0 accepted"
grep -q -- '--runs' <<<"$err" || fail "--runs 0 not named: $err"

[ "$fails" = 0 ] && echo "bench-args: ok"
exit "$fails"
