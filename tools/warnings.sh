#!/usr/bin/env bash
# Builds pipezip (library, executables, tests, benches) with -Werror in the
# configurations another machine's compiler may see, so that a warning shows
# up here first rather than in a user's build: gcc -O2 and clang -O2, each for
# this CPU (-Dnative=true) and portable (-Dnative=false), and gcc -O3 portable
# with assertions compiled out (NDEBUG, as a packager may build; -O3's extra
# inlining and NDEBUG's unused variables each warn on their own, and one build
# sees both). CPU only
# (-Dcuda=disabled; the CUDA sources are compiled by the release build).
# Build trees live in build-warn/NAME and are reused.
# Prints one line per configuration, "warnings NAME: ok" or
# "warnings NAME: FAILED" followed by the compiler's first errors, and a last
# line "N passed, N failed". Exit status 1 if any configuration failed.
#   usage: tools/warnings.sh [NAME...]   (default: all; names as printed)
set -uo pipefail
cd "$(dirname "$0")/.."
configs=(
  "gcc-O2-native   gcc   2 true  false"
  "gcc-O2-portable gcc   2 false false"
  "clang-O2-native   clang 2 true  false"
  "clang-O2-portable clang 2 false false"
  "gcc-O3-portable-ndebug gcc 3 false true"
)
passed=0; failed=0
for c in "${configs[@]}"; do
  read -r name compiler opt native ndebug <<<"$c"
  if [ "$#" -gt 0 ] && ! printf '%s\n' "$@" | grep -qx "$name"; then continue; fi
  if ! command -v "$compiler" >/dev/null; then
    echo "warnings $name: FAILED ($compiler not installed: bash tools/setup.sh --tests)"; failed=$((failed + 1)); continue
  fi
  dir=build-warn/$name
  log=$(mktemp)
  if [ ! -f "$dir/build.ninja" ]; then
    CC=$compiler meson setup "$dir" --buildtype=release -Doptimization="$opt" -Dwerror=true -Dcuda=disabled \
      -Dnative="$native" -Db_ndebug="$ndebug" >"$log" 2>&1
  else
    meson setup --reconfigure "$dir" >"$log" 2>&1
  fi
  if [ $? = 0 ] && ninja -C "$dir" >>"$log" 2>&1; then
    echo "warnings $name: ok"; passed=$((passed + 1))
  else
    echo "warnings $name: FAILED"; grep -E -A6 'error|FAILED' "$log" | head -n 40; failed=$((failed + 1))
  fi
  rm -f "$log"
done
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
