#!/usr/bin/env python3
"""Where a pipeline's step time goes, from a `pipezip train --trace` file.

  usage: trace_profile.py TRACE.json [--skip N]

Each rank's timeline is cut into steps at its optimizer events (step k ends
where the rank's k-th optimizer event ends). Per rank, over the steps after
the first N (default 2: start-up, and aq's first epoch in the benchmarks),
prints the mean seconds per step of each event category the trace holds
(forward, backward, weight, encode, decode, send, wait, tied, optimizer,
...), "compute" (forward + backward + weight + optimizer), and "idle": the
step less compute, i.e. what the rank spent on anything but the model's
arithmetic (waiting for a peer, the codecs, the tied exchange, bubbles).
The last line compares the ranks' mean idle fraction.
"""
import json
import statistics
import sys
from collections import defaultdict

COMPUTE = ("forward", "backward", "weight", "optimizer")


def main():
    args = sys.argv[1:]
    skip = 2
    if "--skip" in args:
        i = args.index("--skip")
        skip = int(args[i + 1])
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    t = json.load(open(args[0]))
    ev = t["traceEvents"] if isinstance(t, dict) else t
    ranks = defaultdict(list)
    for e in ev:
        if e.get("ph") == "X":
            ranks[e["pid"]].append(e)
    cats = sorted({e.get("cat", e["name"]) for r in ranks.values() for e in r})
    order = [c for c in COMPUTE + ("encode", "decode", "send", "wait", "tied") if c in cats]
    order += [c for c in cats if c not in order]
    print("%-6s %6s %8s" % ("rank", "steps", "step s") + "".join(" %9s" % c[:9] for c in order) +
          " %9s %9s %6s" % ("compute", "idle", "idle%"))
    idle_frac = {}
    for pid in sorted(ranks):
        r = sorted(ranks[pid], key=lambda e: e["ts"])
        ends = [e["ts"] + e["dur"] for e in r if e.get("cat") == "optimizer"]
        if len(ends) <= skip:
            print(f"rank {pid}: {len(ends)} steps in the trace, need more than --skip {skip}")
            continue
        per = defaultdict(list)
        steps = []
        for k in range(skip, len(ends)):
            t0, t1 = ends[k - 1] if k > 0 else r[0]["ts"], ends[k]
            sums = defaultdict(float)
            for e in r:
                if e["ts"] >= t0 and e["ts"] + e["dur"] <= t1:
                    sums[e.get("cat", e["name"])] += e["dur"]
            steps.append((t1 - t0) / 1e6)
            for c in order:
                per[c].append(sums[c] / 1e6)
        step = statistics.mean(steps)
        mean = {c: statistics.mean(per[c]) for c in order}
        comp = sum(mean[c] for c in COMPUTE if c in mean)
        idle_frac[pid] = (step - comp) / step
        print("%-6s %6d %8.3f" % (pid, len(steps), step) + "".join(" %9.3f" % mean[c] for c in order) +
              " %9.3f %9.3f %5.1f%%" % (comp, step - comp, 100 * idle_frac[pid]))
    if idle_frac:
        print("mean idle fraction over ranks: %.1f%%" % (100 * statistics.mean(idle_frac.values())))


if __name__ == "__main__":
    main()
