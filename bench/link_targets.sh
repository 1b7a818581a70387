#!/usr/bin/env bash
# Issue 26's slow-link targets in one command: runs bench/bench_link.sh at
# 10 Mbit/s (policies none, fwd=q4,bwd=q8 and auto, train's defaults) and
# without a link limit (none, fwd=q4,bwd=q8), 3 runs of 5 steps each, then
# prints the four checks of bench/link_targets.py with PASS/FAIL, the CPU
# and the load average. About 6 minutes on a quiet 2-vCPU machine (24 runs).
#   usage: bench/link_targets.sh [PIPEZIP]
#   LINK_TARGETS_DIR=DIR keeps the runs there (a complete run is not repeated)
# Exit status 0 only when all four pass.
set -euo pipefail
cd "$(dirname "$0")/.."
pz=${1:-build/pipezip}
if [ -n "${LINK_TARGETS_DIR:-}" ]; then dir=$LINK_TARGETS_DIR; mkdir -p "$dir"
else dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT; fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)
t0=$(date +%s)
BENCH_LINK_DIR=$dir bash bench/bench_link.sh "$pz" 10 0 defaults 'none;fwd=q4,bwd=q8;auto' 3 5 "$dir/link.png" \
  > "$dir/link.txt"
# the same policy indices, so the compute-only runs above are reused
BENCH_LINK_DIR=$dir bash bench/bench_link.sh "$pz" 0 0 defaults 'none;fwd=q4,bwd=q8' 3 5 "$dir/nolink.png" \
  > "$dir/nolink.txt"
grep -v '^plot:' "$dir/link.txt"
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load average $load0 before, $(cut -d' ' -f1-3 /proc/loadavg) after; $(( $(date +%s) - t0 )) s"
python3 bench/link_targets.py "$dir" 3
