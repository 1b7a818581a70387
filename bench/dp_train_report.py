#!/usr/bin/env python3
"""Table of bench/bench_dp_train.sh from its runs' step lines.

  usage: dp_train_report.py DIR RATE RUNS D SPEC REDUCE PARAMS WIRE CPU
DIR holds compute-K.jsonl, fp32-K.jsonl and comp-K.jsonl (K = 1..RUNS);
PARAMS is the gradient's length n, WIRE the bytes of one codec message (of
n / D floats for twophase, of n for allgather). bench_dp_train.sh calls it;
run it again on a BENCH_DP_DIR to report kept runs.

Sync times from bytes over the rate, per rank (each direction of a link its
own; every rank sends as much as it receives):
  fp32 (ring all-reduce):  2(D-1)/D x 4n bytes
  twophase: 2(D-1) messages of a chunk (D-1 to the owners, then D-1 copies
            of the owner's re-encoded chunk), each WIRE + the 40-byte
            data-parallel header
  allgather: D-1 messages of the whole gradient, each WIRE + 40
Where the step lines carry the measured data-parallel bytes sent
("dp_wire", per rank and step), those are used instead and the source is
printed; their measured sync time and the part of it hidden behind the
backward ("dp_sync_ms", "dp_hidden_ms") are printed beside (medians over the
median run's timed steps).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steps  # noqa: E402

DPMSG_HDR = 40   # runtime/dp/dpmsg.h: PZ_DPMSG_HDR
FIRST = 2        # timed steps: 2.. (the first warms up)

d, rate, runs, D = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
spec, reduce, n, wire, cpu = sys.argv[5], sys.argv[6], int(sys.argv[7]), int(sys.argv[8]), sys.argv[9]


spread = {}


def run(name):
    paths = [f"{d}/{name}-{k}.jsonl" for k in range(1, runs + 1)]
    step, rows = steps.median_run(paths, FIRST)
    if step is None:
        sys.exit(f"dp_train_report: the {name} runs in {d} are missing or have no step {FIRST}")
    spread[name] = " / ".join("%.2f" % steps.median_run([p], FIRST)[0] for p in paths)
    return step, rows


def secs(nbytes):
    return nbytes * 8 / (rate * 1e6)


comp_s, _ = run("compute")
fp32_s, fp32_rows = run("fp32")
cmp_s, cmp_rows = run("comp")
fp32_bytes = 2 * (D - 1) / D * 4 * n
msgs = 2 * (D - 1) if reduce == "twophase" else D - 1
cmp_bytes, source = msgs * (wire + DPMSG_HDR), "codec message size"
if all("dp_wire" in r for r in cmp_rows):
    cmp_bytes, source = statistics.mean(r["dp_wire"] for r in cmp_rows), "measured (dp_wire)"
if all("dp_wire" in r for r in fp32_rows):
    fp32_bytes = statistics.mean(r["dp_wire"] for r in fp32_rows)
fp32_sync, cmp_sync = secs(fp32_bytes), secs(cmp_bytes)
bound = max(comp_s, fp32_sync) / max(comp_s, cmp_sync)
speedup = fp32_s / cmp_s

print(f"CPU: {cpu}")
print(f"demo preset, S=1 x D={D}, 1 micro-batch of 8 x 128 per replica, n = {n} floats; "
      f"link {rate:g} Mbit/s; medians of {runs} runs (each: median of steps {FIRST}..)")
print("compute-only = the step with D = 2 and an unlimited link, uncompressed (the average over loopback)")


def measured(rows):   # the run's measured sync and hidden seconds, if the step lines carry them
    if not all("dp_sync_ms" in r and "dp_hidden_ms" in r for r in rows):
        return "%8s %8s" % ("-", "-")
    return "%8.3f %8.3f" % (statistics.median(r["dp_sync_ms"] for r in rows) / 1e3,
                            statistics.median(r["dp_hidden_ms"] for r in rows) / 1e3)


comp_rows = run("compute")[1]
print(f"{'configuration':<34} {'step s':>8} {'sync bytes/rank':>16} {'sync s':>8} {'measured':>8} {'hidden':>8}"
      f"   runs' steps, s")
print(f"{'compute-only (no link limit)':<34} {comp_s:8.3f} {'':>16} {'':>8} {measured(comp_rows)}   "
      f"{spread['compute']}")
print(f"{'fp32 ring @ %g Mbit/s' % rate:<34} {fp32_s:8.3f} {fp32_bytes:16.0f} {fp32_sync:8.3f} {measured(fp32_rows)}   "
      f"{spread['fp32']}")
print(f"{'%s %s @ %g Mbit/s' % (spec, reduce, rate):<34} {cmp_s:8.3f} {cmp_bytes:16.0f} {cmp_sync:8.3f} "
      f"{measured(cmp_rows)}   {spread['comp']}")
print(f"sync bytes of the compressed row: {source}; sync s = bytes / rate; measured, hidden: the step lines' "
      f"dp_sync_ms, dp_hidden_ms")
ratio = cmp_s / comp_s
frac = speedup / bound
print(f"compressed / compute-only: {ratio:.3f} (target <= 1.15: {'met' if ratio <= 1.15 else 'NOT met'})")
print(f"bound max(compute, fp32 sync) / max(compute, compressed sync) = max({comp_s:.3f}, {fp32_sync:.3f}) / "
      f"max({comp_s:.3f}, {cmp_sync:.3f}) = {bound:.3f}")
print(f"speed-up fp32 / compressed: {speedup:.3f} = {frac:.3f} of the bound "
      f"(target >= 0.85: {'met' if frac >= 0.85 else 'NOT met'})")
