#!/usr/bin/env bash
# bench_tokenize.sh TOKENIZER FILE... [--runs N]: `pipezip tokenize
# --tokenizer` over the files with 1 thread and with one per core,
# alternated, N runs each (default 5); prints each run's MB/s, the medians,
# and the parallel speed-up (median MB/s with all cores / with one). Files
# are encoded one per thread, so give at least as many files as cores.
#   bash bench/bench_tokenize.sh /tmp/case part*      (tests/stages/make_bpe_case.py makes a tokenizer)
set -uo pipefail
cd "$(dirname "$0")/.."
PZ=${PIPEZIP:-build/pipezip}; RUNS=5; files=()
[ $# -ge 2 ] || { sed -n '2,7p' "$0"; exit 2; }
tok="$1"; shift
while [ $# -gt 0 ]; do
  case "$1" in --runs) RUNS="$2"; shift 2 ;; *) files+=("$1"); shift ;; esac
done
cores=$(nproc)
out=$(mktemp); trap 'rm -f "$out"' EXIT
declare -a one all
for r in $(seq 1 "$RUNS"); do
  for t in 1 "$cores"; do
    line=$("$PZ" tokenize --tokenizer "$tok" --threads "$t" --out "$out" "${files[@]}" 2>/dev/null | tail -n 1) || exit 1
    mbs=$(sed -n 's/.*"mb_per_s":\([0-9.]*\).*/\1/p' <<<"$line")
    if [ "$t" = 1 ]; then one+=("$mbs"); else all+=("$mbs"); fi
    echo "run $r, $t thread(s): $mbs MB/s"
  done
done
python3 - "$cores" "${one[*]}" "${all[*]}" <<'PY'
import statistics, sys
cores = int(sys.argv[1]); one = [float(x) for x in sys.argv[2].split()]; many = [float(x) for x in sys.argv[3].split()]
m1, mn = statistics.median(one), statistics.median(many)
print(f"median: 1 thread {m1:.1f} MB/s, {cores} threads {mn:.1f} MB/s: speed-up {mn/m1:.2f}x on {cores} cores")
PY
