#!/usr/bin/env python3
"""Issue 26's slow-link targets, PASS or FAIL, from the runs bench/link_targets.sh
keeps in DIR (bench/bench_link.sh's files; link_report.configs reads them).

  usage: link_targets.py DIR [RUNS]

demo preset, 2 stages, 8 micro-batches of 4 x 128, train's default flags
(the "defaults" rows: no --schedule, no --compress-tied), medians of RUNS:
  1. --compress 'fwd=q4,bwd=q8' --link-mbps 10: overlap = max(compute-only
     step, busiest link direction's time) / step >= 0.85
  2. the same run's speed-up over --compress none at the same link >= 0.9 of
     the bound (link_report: min(byte ratio, compute ratio))
  3. --compress auto --link-mbps 10: no codec it sends with is above
     relative error 0.5: neither a decision's pick nor the start (the steps
     before the first decision; its error as measured at that decision: the
     pick's when it keeps it, "was X at rel err E" when it switches), and its
     step is no longer than q4/q8's (3% noise)
  4. --compress 'fwd=q4,bwd=q8' without a link limit, defaults, is no slower
     (5% noise) than with the defaults before issue 26 (bench_link's
     compute-only runs: --schedule 1f1b --compress-tied none)
"""
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import link_report  # noqa: E402

POLS = ["none", "fwd=q4,bwd=q8", "auto"]
DECISION = re.compile(r"auto after step (\d+): edge (\S+) (fwd|bwd) (?:keeps|switches to) (\S+?),? .*?\(rel err ([0-9.e+-]+);")
# a switch names what the steps before it sent with and that codec's measured error
WAS = re.compile(r"auto after step (\d+): edge (\S+) (fwd|bwd) switches to \S+, was (\S+) at rel err ([0-9.e+-]+),")
START = re.compile(r"auto starts edge (\S+) (fwd|bwd) with (\S+) ")


def verdict(ok, what):
    print("%s  %s" % ("PASS" if ok else "FAIL", what))
    return ok


def main():
    tmp, runs = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3
    linked = {c["pol"]: c for c in link_report.configs(tmp, ["10"], ["0"], ["defaults"], POLS, runs)}
    nolink = {c["pol"]: c for c in link_report.configs(tmp, ["0"], ["0"], ["defaults"], POLS[:2], runs)}
    missing = [p for p in POLS if p not in linked] + ["%s without a link" % p for p in POLS[:2] if p not in nolink]
    if missing:
        sys.exit("link_targets: no complete runs in %s for %s" % (tmp, ", ".join(missing)))
    q, a, n = linked[POLS[1]], linked[POLS[2]], nolink[POLS[1]]
    ok = verdict(q["overlap"] >= 0.85, "1. overlap %.2f >= 0.85 (q4/q8 at 10 Mbit/s: step %.3f s, compute-only %.3f s, "
                 "link %.3f s)" % (q["overlap"], q["step"], q["comp"], q["link"]))
    ok &= verdict(q["vs"] / q["cap"] >= 0.9, "2. speed-up over none %.2fx = %.2f of the bound %.2fx >= 0.9 (none: "
                  "step %.3f s)" % (q["vs"], q["vs"] / q["cap"], q["cap"], linked[POLS[0]]["step"]))
    picks, starts, first = [], [], []
    for path in sorted(glob.glob(f"{tmp}/l-{POLS.index('auto')}-10-0-defaults-*.err")):
        lines = open(path).read().splitlines()
        dec = [m.groups() for m in map(DECISION.search, lines) if m]
        was = [m.groups() for m in map(WAS.search, lines) if m]
        picks += dec
        starts += [m.groups() for m in map(START.search, lines) if m]
        # the start's measured error, at the first decision of each direction
        for d in {p[2] for p in dec}:
            p0 = min((p for p in dec if p[2] == d), key=lambda p: int(p[0]))
            w = [x for x in was if x[:3] == p0[:3]]
            first.append((p0[0], p0[1], d, w[0][3], w[0][4]) if w else p0)
    sent = picks + first   # every codec a step sent with, and its measured error
    worst = max(sent, key=lambda p: float(p[4])) if sent else None
    print("      auto's starts over %d runs: %s; first steps measured: %s; decisions: %s"
          % (runs, ", ".join(sorted({"%s %s" % (p[1], p[2]) for p in starts})) or "(none said)",
             ", ".join(sorted({"%s %s %.3g" % (p[2], p[3], float(p[4])) for p in first})),
             ", ".join(sorted({"%s %s" % (p[2], p[3]) for p in picks}))))
    ok &= verdict(worst is not None and len(starts) == 2 * runs and len(first) == 2 * runs and float(worst[4]) <= 0.5
                  and a["step"] <= 1.03 * q["step"],
                  "3. auto: largest rel err sent with %s <= 0.5 (the starts and every pick); step %.3f s <= q4/q8's "
                  "%.3f s (+3%%)" % ("%.3g (%s %s)" % (float(worst[4]), worst[2], worst[3]) if worst else
                                     "(no decision found)", a["step"], q["step"]))
    ok &= verdict(n["step"] <= 1.05 * n["comp"], "4. no link limit: defaults' step %.3f s <= 1.05 x %.3f s with the "
                  "old defaults (--schedule 1f1b --compress-tied none)" % (n["step"], n["comp"]))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
