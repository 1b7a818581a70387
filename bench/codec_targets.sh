#!/usr/bin/env bash
# codec_targets.sh: issue 26's codec done-when in one command.
#
#   bench/codec_targets.sh [BENCH_CODECS]      (default build/bench/bench_codecs)
#
# For each of x86-64-v3 and x86-64-v4+vbmi2 that this CPU runs (a level it
# lacks is named and skipped), runs bench_codecs forced to that level
# (PIPEZIP_ISA) on one core (taskset -c 0 where there is taskset) with the
# thread CPU clock and 9 runs, and prints for each codec of the targets its
# encode and decode speed as a multiple of memcpy (the medians of the 9 runs,
# memcpy timed in the same runs), the target, and PASS when both reach it.
# The CPU's model name and the load average come first: on a shared machine
# the ratios move with the load, so compare figures taken under like load.
# A benchmark: it prints and exits 0 whatever the figures; it exits 1 only
# when it cannot run.
set -uo pipefail
cd "$(dirname "$0")/.."

bench=${1:-build/bench/bench_codecs}
[ -x "$bench" ] || { echo "codec_targets: $bench not found or not executable: build first (ninja -C build)" >&2; exit 1; }

# spec and target (x memcpy, both ways), as issue 26 sets them
specs=(jointsq:2 jointsq:4 nuq4:code=elias topk:0.1 q4 q8 sign fp16)
targets=(0.15 0.15 0.1 0.2 0.5 0.5 0.5 0.5)

pin=()
command -v taskset >/dev/null && pin=(taskset -c 0)
model=$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | sed 's/^[^:]*: *//')
echo "codec_targets: CPU ${model:-unknown}; $(date -u '+%Y-%m-%d %H:%M UTC'); load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "each figure: median of 9 runs on one core, thread CPU clock, x memcpy timed in the same runs"

pass=0 fail=0
for level in x86-64-v3 x86-64-v4+vbmi2; do
    echo
    echo "== $level =="
    out=$(PIPEZIP_ISA=$level "${pin[@]}" "$bench" --runs 9 --clock cpu "${specs[@]}" 2>&1)
    if [ $? -ne 0 ]; then
        if grep -q "this CPU supports up to" <<<"$out"; then
            echo "skipped: $(grep -m1 'this CPU supports up to' <<<"$out" | sed 's/^pipezip: error: //')"
            continue
        fi
        echo "$out" >&2
        echo "codec_targets: bench_codecs failed at $level" >&2
        exit 1
    fi
    grep -m1 '^codecs compiled for' <<<"$out"
    # the bench's rows, in the order of the specs: codec, ratio, enc GB/s,
    # enc/cpy, dec GB/s, dec/cpy, cpy GB/s, ...: the ratios with 3 decimals
    mapfile -t rows < <(awk 'f && NF >= 9 && $3 + 0 > 0 {print $3 / $7, $5 / $7} /^codec +ratio/ {f = 1}' <<<"$out")
    if [ ${#rows[@]} -ne ${#specs[@]} ]; then
        echo "$out" >&2
        echo "codec_targets: expected ${#specs[@]} rows from bench_codecs at $level, got ${#rows[@]}" >&2
        exit 1
    fi
    echo "memcpy in the same runs: $(awk 'f && NF >= 9 && $7 + 0 > 0 {if (!n || $7 < lo) lo = $7; if ($7 > hi) hi = $7; n++}
        /^codec +ratio/ {f = 1} END {printf "%.1f-%.1f GB/s", lo, hi}' <<<"$out")"
    printf '%-18s %8s %8s %8s  %s\n' codec encode decode target result
    for i in "${!specs[@]}"; do
        read -r enc dec <<<"${rows[$i]}"
        res=$(awk -v e="$enc" -v d="$dec" -v t="${targets[$i]}" 'BEGIN {print (e >= t && d >= t) ? "PASS" : "FAIL"}')
        [ "$res" = PASS ] && pass=$((pass + 1)) || fail=$((fail + 1))
        printf '%-18s %8.3f %8.3f %7sx  %s\n' "${specs[$i]}" "$enc" "$dec" "${targets[$i]}" "$res"
    done
done
echo
echo "codec_targets: $pass PASS, $fail FAIL"
