#!/usr/bin/env bash
# Sets everything up and runs every test suite:
#   1. the release build (the user's build, tools/setup.sh, -Dcuda=auto): all
#      suites; the gpu suite is built when nvcc is found and its tests SKIP
#      without a GPU; meanwhile tools/warnings.sh compiles everything with
#      -Werror under gcc -O2/-O3 and clang -O2, native and portable (one
#      counted check per configuration);
#   2. an AddressSanitizer + UndefinedBehaviorSanitizer build (-Dcuda=disabled):
#      the unit and pipeline suites;
#   3. with clang (-Dcuda=disabled), a bounded libFuzzer run of each fuzz target
#      (20 s each).
# The warning builds, the ASan build and the libFuzzer build compile in the
# background at the lowest CPU priorities while the release suites run: most of
# those tests wait on peers, sockets and timeouts, one at a time, so a core of
# CI's two is often idle, and these compilers get only the cycles the tests
# leave. The ASan build, needed first, runs at nice 15, the other two at nice
# 19 (about 2 to 1 between them, each a few % of a test's share on a busy core;
# not SCHED_IDLE, which on a machine busy with other work could starve them).
# Each build is waited for where its result is needed.
# Ends with one line "N passed, N failed, N skipped" (exit 1 if anything failed).
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --tests || { echo "0 passed, 1 failed"; exit 1; }

passed=0; failed=0; skipped=0
elapsed() { echo "at $SECONDS s"; }  # since the script started (setup included)
count() {  # add the counts of a meson test run from its JSON log
  local log="$1/meson-logs/testlog.json"
  [ -f "$log" ] || { failed=$((failed + 1)); return; }
  local p f s
  p=$(grep -c '"result": "OK"' "$log"); f=$(grep -c -E '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log")
  s=$(grep -c '"result": "SKIP"' "$log")
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
}

echo "== gpu suite: built with the CUDA backend (-Dcuda=auto finds nvcc); its tests SKIP (77) without a GPU ($(elapsed))"
if meson introspect build --targets 2>/dev/null | grep -q '"name": "test_gpu_ops"'; then
  ninja -C build tests/gpu/test_gpu_ops tests/gpu/bench_gpu >/dev/null \
    && echo "gpu suite executables built" || { echo "gpu suite build failed"; failed=$((failed + 1)); }
else
  echo "gpu suite not built: no nvcc on PATH, so this build has no CUDA backend"
fi

# the background builds (see the top); their ninja output goes to build-*/ci-build.log
mkdir -p build-warn build-asan build-fuzz
nice -n 19 bash tools/warnings.sh >build-warn/warnings.log 2>&1 &
warn_pid=$!
asan_build() {
  # the sanitizer and clang builds are CPU-only: nvcc does not take gcc's or
  # clang's sanitizer flags, and these builds check the host code
  if [ ! -f build-asan/build.ninja ]; then
    meson setup build-asan --buildtype=debugoptimized -Dwerror=true -Dcuda=disabled \
      -Db_sanitize=address,undefined -Db_lundef=false
  else
    meson setup --reconfigure build-asan -Dcuda=disabled
  fi && ninja -C build-asan -j 2
}
nice -n 15 bash -c "$(declare -f asan_build); asan_build" >build-asan/ci-build.log 2>&1 &
asan_pid=$!
have_fuzz=0
if command -v clang >/dev/null && [ -n "$(ls tests/fuzz/fuzz_*.c 2>/dev/null)" ]; then have_fuzz=1; fi
fuzz_build() {
  if [ ! -f build-fuzz/build.ninja ]; then
    CC=clang meson setup build-fuzz --buildtype=debugoptimized -Dwerror=true -Dcuda=disabled \
      -Db_sanitize=address,undefined -Db_lundef=false
  else
    meson setup --reconfigure build-fuzz -Dcuda=disabled
  fi || return 1
  # only the libFuzzer targets: the rest of this clang build is what
  # warnings.sh and the ASan build already compile
  fuzz_targets=$(meson introspect build-fuzz --targets | python3 -c '
import json, os, sys
for t in json.load(sys.stdin):
    for f in t["filename"]:
        b = os.path.basename(f)
        if t["type"] == "executable" and b.startswith("fuzz_") and not b.endswith("_replay"):
            print(os.path.relpath(f, os.path.abspath("build-fuzz")))')
  [ -n "$fuzz_targets" ] && ninja -C build-fuzz -j 2 $fuzz_targets
}
if [ "$have_fuzz" = 1 ]; then
  nice -n 19 bash -c "$(declare -f fuzz_build); fuzz_build" >build-fuzz/ci-build.log 2>&1 &
  fuzz_pid=$!
fi

echo "== release build: all suites ($(elapsed))"
meson test -C build --print-errorlogs --num-processes 2
count build

echo "== ASan + UBSan build: unit and pipeline suites ($(elapsed))"
if wait "$asan_pid"; then
  echo "ASan build done ($(elapsed))"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    meson test -C build-asan --suite unit --suite pipeline --print-errorlogs --num-processes 2 --timeout-multiplier 4
  count build-asan
else
  echo "ASan build failed"; grep -E -A6 'error|FAILED' build-asan/ci-build.log | head -n 40; failed=$((failed + 1))
fi

echo "== warnings: gcc -O2 and clang -O2 native and portable, gcc -O3 NDEBUG, with -Werror (tools/warnings.sh) ($(elapsed))"
wait "$warn_pid"
grep -v -E '^[0-9]+ passed, [0-9]+ failed$' build-warn/warnings.log
wp=$(tail -n 1 build-warn/warnings.log | sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1 \2/p')
if [ -n "$wp" ]; then read -r a b <<<"$wp"; passed=$((passed + a)); failed=$((failed + b)); else failed=$((failed + 1)); fi

if [ "$have_fuzz" = 1 ]; then
  echo "== libFuzzer (clang), 20 s per target, one per core ($(elapsed))"
  if wait "$fuzz_pid"; then
    # one fuzzer per core at a time (each is single-threaded): the same 20 s
    # per target, in about half the wall time on the 2-core runners
    jobs=$(nproc 2>/dev/null || echo 2); [ "$jobs" -ge 1 ] || jobs=1
    fuzz_out=$(mktemp -d); started=0
    for f in build-fuzz/tests/fuzz_*; do
      # the libFuzzer binaries only: not meson's *.p object folders, not the gcc replay drivers
      [ -f "$f" ] && [ -x "$f" ] || continue
      case "$f" in *_replay) continue ;; esac
      while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
      started=$((started + 1))
      (
        name=$(basename "$f"); corpus="$fuzz_out/$name.corpus"; mkdir -p "$corpus"
        # undefined behaviour a fuzz input reaches is a failure, as under the ASan suite
        if UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "$f" -max_total_time=20 -rss_limit_mb=2048 "$corpus" \
            >"$fuzz_out/$name.log" 2>&1; then
          echo "fuzz $name: ok ($(grep -o 'stat::number_of_executed_units: [0-9]*' "$fuzz_out/$name.log" || tail -n 1 "$fuzz_out/$name.log"))" >"$fuzz_out/$name.result"
        else
          { echo "fuzz $name: FAILED"; tail -n 30 "$fuzz_out/$name.log"; } >"$fuzz_out/$name.result"
        fi
      ) &
    done
    wait
    for r in "$fuzz_out"/*.result; do
      [ -f "$r" ] || continue
      cat "$r"
      if head -n 1 "$r" | grep -q ": ok ("; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
    done
    results=$(find "$fuzz_out" -name '*.result' | wc -l)
    if [ "$started" = 0 ] || [ "$results" != "$started" ]; then
      echo "fuzz: $results results for $started targets started"; failed=$((failed + 1))
    fi
    rm -rf "$fuzz_out"
  else
    echo "fuzz build failed"; grep -E -A6 'error|FAILED' build-fuzz/ci-build.log | head -n 40; failed=$((failed + 1))
  fi
fi

echo "== done ($(elapsed))"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
