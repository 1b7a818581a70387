#!/bin/bash
# at_isa.sh LEVEL PROGRAM [ARGS...]: runs a test program with PIPEZIP_ISA=LEVEL
# (base/isa.h), for the tests that run a second time at a level below CI's
# CPU (tests/meson.build, "at x86-64-v3"). Exit status: the program's; 77
# (SKIP) where this CPU lacks LEVEL or the build has no levels (-Dnative=true:
# PIPEZIP_ISA is ignored there, so the run was no run at LEVEL).
set -u
level=$1
shift
err=$(mktemp)
trap 'rm -f "$err"' EXIT
PIPEZIP_ISA=$level "$@" 2>"$err"
rc=$?
cat "$err" >&2
if [ "$rc" = 1 ] && grep -q "PIPEZIP_ISA=$level: this CPU supports up to" "$err"; then
  echo "SKIP: this CPU does not run $level"
  exit 77
fi
if grep -q "PIPEZIP_ISA=$level ignored: this build is -Dnative=true" "$err"; then
  echo "SKIP: a -Dnative=true build has no $level copies (the run above was at the native level)"
  exit 77
fi
exit "$rc"
