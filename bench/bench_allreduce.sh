#!/usr/bin/env bash
# The data-parallel all-reduce against Open MPI's MPI_Allreduce in one
# command: bench/bench_allreduce.c under `mpirun -np D` (default 2), REPEATS
# invocations back to back (default 3), then per size the median over them
# of each invocation's median ratio ours / MPI (bus bandwidth), with the CPU
# and the load average before and after. Issue 25's target: >= 0.8x from
# 1 MiB up at D = 2.
#   usage: bench/bench_allreduce.sh [BUILD] [REPEATS] [BENCH FLAGS...]
#   e.g.   bench/bench_allreduce.sh build 3 --runs 7 --min 1M --max 64M   (the defaults)
# VARIANTS='--seg 1M;--seg 256K' compares settings of ours back to back: each
# repeat runs every variant in turn (its flags after BENCH FLAGS), and the
# summary has a column per variant. NP=D sets the ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
reps=${2:-3}
shift $(( $# < 2 ? $# : 2 ))
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=("--runs" 7 "--min" 1M "--max" 64M)   # bench_allreduce's flags
# (also "--seg", "--mean", "--batch-ms", ...: bench/bench_allreduce.c)
IFS=';' read -r -a variants <<<"${VARIANTS:-}"
[ ${#variants[@]} -gt 0 ] || variants=("")
bin=$build/bench/bench_allreduce
[ -x "$bin" ] || { echo "bench_allreduce.sh: no $bin (built when Open MPI's headers are installed)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# mpirun refuses root unless told; these say it for this command only
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for k in $(seq 1 "$reps"); do
  for v in "${!variants[@]}"; do
    read -r -a vf <<<"${variants[$v]}"
    mpirun -np "${NP:-2}" "$bin" "${flags[@]}" "${vf[@]}" > "$tmp/$v-$k.txt"
    echo "repeat $k, variant '${variants[$v]}':"
    sed -n '/bytes/,$p' "$tmp/$v-$k.txt"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" "$reps" "${variants[@]}" <<'PY'
import statistics, sys
tmp, reps, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
table = {}   # (variant, bytes) -> [ratio per repeat]
for v in range(len(variants)):
    for k in range(1, reps + 1):
        for line in open(f"{tmp}/{v}-{k}.txt"):
            f = line.split()
            if len(f) > 7 and f[0].isdigit() and f[7].endswith("x"):
                table.setdefault((v, int(f[0])), []).append(float(f[7][:-1]))
sizes = sorted({b for _, b in table})
print("median over %d repeats of ours / MPI (bus bandwidth); per repeat in brackets" % reps)
print("%10s  %s" % ("bytes", "  ".join("%-32s" % ("variant '%s'" % v if v else "ours") for v in variants)))
for b in sizes:
    cells = []
    for v in range(len(variants)):
        r = table.get((v, b), [])
        cells.append("%-32s" % ("%.2fx [%s]" % (statistics.median(r), " ".join("%.2f" % x for x in r)) if r else "-"))
    print("%10d  %s" % (b, "  ".join(cells)))
PY
