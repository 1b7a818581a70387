#!/usr/bin/env bash
# Stage processes fit the host (runtime/plan/cores.c, runtime/net/launcher.c):
#  - with default flags each of S local stages runs max(1, CPUs / S) threads
#    and, when the CPUs divide evenly, is pinned to its own slice: the
#    start-up line says so and /proc/PID/status agrees, slices disjoint;
#  - --threads N overrides the count; --bind none leaves the mask alone;
#  - each stage process is named "pipezip rN" (ps -e, top, /proc/PID/comm);
#  - a bad --bind is an error before any process starts.
#   usage: pipeline_host.sh PATH/TO/pipezip
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
pz_corpus || exit 1
cpus=$(nproc)   # the CPUs this process may use, as sched_getaffinity sees them
prefix=()       # a command to start the launcher under (taskset)

# start S stages with extra flags, wait until they step, check, stop them
# run_check S EXPECT_THREADS EXPECT_PINNED(1|0) [flags...]
run_check() {
  local S=$1 want_t=$2 want_pin=$3; shift 3
  rm -f "$dir/out"   # else the wait below can read the last run's step 2 before this launcher starts
  "${prefix[@]}" "$pz" train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --micro-batches 2 \
      --steps 100000 --stages "$S" "$@" > "$dir/out" 2> "$dir/err" &
  local launcher=$!
  for _ in $(seq 1 300); do grep -q '"step":2' "$dir/out" 2>/dev/null && break; sleep 0.1; done
  local kids; kids=$(pgrep -P "$launcher" | sort -n)
  local n; n=$(wc -w <<<"$kids")
  [ "$n" = "$S" ] || { fail "S=$S $*: $n stage processes, expected $S"; tail -n 5 "$dir/err"; }
  local r=0 seen=""
  for pid in $kids; do
    local comm; comm=$(cat "/proc/$pid/comm" 2>/dev/null)
    [ "$comm" = "pipezip r$r" ] || fail "S=$S $*: process $pid is named '$comm', expected 'pipezip r$r'"
    ps -e -o comm= | grep -qx "pipezip r$r" || fail "ps -e does not list 'pipezip r$r'"
    local line; line=$(grep "^\[rank $r\] rank $r: " "$dir/err" | head -n 1)
    [ -n "$line" ] || fail "S=$S $*: no start-up line for rank $r"
    local t; t=$(sed -n 's/.*rank [0-9]*: \([0-9]*\) threads\{0,1\} on.*/\1/p' <<<"$line")
    [ "$t" = "$want_t" ] || fail "S=$S $*: rank $r runs '$t' threads, expected $want_t: $line"
    local allowed; allowed=$(awk '/^Cpus_allowed_list/ {print $2}' "/proc/$pid/status")
    if [ "$want_pin" = 1 ]; then
      grep -q ', pinned' <<<"$line" || fail "S=$S $*: rank $r not pinned: $line"
      grep -q "on CPUs\{0,1\} $allowed, pinned" <<<"$line" || fail "rank $r: line says '$line', kernel says $allowed"
      grep -qx "$allowed" <<<"$seen" && fail "ranks share CPUs $allowed"
      seen="$seen"$'\n'"$allowed"
    else
      grep -q ', pinned' <<<"$line" && fail "S=$S $*: rank $r pinned though it should not be: $line"
    fi
    r=$((r + 1))
  done
  kill -TERM "$launcher" 2>/dev/null; wait "$launcher" 2>/dev/null
  echo "S=$S ${prefix[*]} ${*:-(default flags)}: ok ($(grep -h '^\[rank 0\] rank 0: ' "$dir/err"))"
}

share=$((cpus / 2)); [ "$share" -ge 1 ] || share=1
pin=0; [ $((cpus % 2)) = 0 ] && pin=1
run_check 2 "$share" "$pin"
run_check 2 1 "$pin" --threads 1
run_check 2 "$share" 0 --bind none
run_check 2 3 0 --threads 3 --bind cores
if [ "$cpus" -ge 2 ] && command -v taskset >/dev/null; then
  # one CPU for two stages: one thread each, not pinned (nothing to divide)
  prefix=(taskset -c "$(taskset -pc $$ | sed 's/.*: //; s/[,-].*//')")
  run_check 2 1 0
  prefix=()
fi
if command -v mpirun >/dev/null; then
  # under mpirun the local rank count comes from OMPI_COMM_WORLD_LOCAL_SIZE;
  # with --bind-to none pipezip pins, with mpirun's own binding it keeps the mask
  for mode in none core; do
    port=$(python3 "$(dirname "$0")/free_port.py")
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
      mpirun --oversubscribe --bind-to "$mode" -np 2 -x MASTER_ADDR=127.0.0.1 -x MASTER_PORT="$port" \
      "$pz" train --preset tiny --data "$dir/train.bin" --batch 2 --seq 32 --steps 2 --stages 2 \
      > "$dir/mpi.out" 2> "$dir/mpi.err"
    rc=$?
    # both ranks' start-up lines, wherever mpirun's merge of the streams put them
    n=$(grep -o -E "rank [01]: [0-9]+ threads? on [^;]*local ranks: mpirun" "$dir/mpi.err" | cut -c1-7 | sort -u | wc -l)
    if [ "$rc" != 0 ] || [ "$n" != 2 ]; then
      fail "mpirun --bind-to $mode: exit $rc, $n start-up lines naming mpirun"; cat "$dir/mpi.err"
    else
      echo "mpirun --bind-to $mode: ok ($(grep -h '^rank 0: ' "$dir/mpi.err"))"
    fi
  done
else
  echo "mpirun not installed: the mpirun cases were not run (bash tools/setup.sh --tests installs openmpi-bin)"
fi
"$pz" train --preset tiny --data "$dir/train.bin" --stages 2 --bind sockets >/dev/null 2>"$dir/errb"
rc=$?
{ [ "$rc" = 1 ] && grep -q -- "--bind: expected cores or none, got 'sockets'" "$dir/errb"; } ||
  fail "--bind sockets: exit $rc, $(cat "$dir/errb")"
[ "$(pgrep -c -f "$dir/")" = 0 ] || fail "processes left behind"
[ "$fails" = 0 ] && echo "pipeline-host: ok" || { echo "pipeline-host: $fails failed"; exit 1; }
