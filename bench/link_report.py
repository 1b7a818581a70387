#!/usr/bin/env python3
"""Table and plot of bench/bench_link.sh from its runs' step lines.

  usage: link_report.py DIR RATES LATENCIES SCHEDULES POLICIES RUNS PLOT
(the lists as bench_link.sh takes them; DIR holds c-P-K.jsonl, the compute-only
runs, and l-P-RATE-LAT-SCHED-K.jsonl, the linked ones; rate 0: no link limit).
bench_link.sh calls it; run it again on a BENCH_LINK_DIR to report kept runs.
bench/link_targets.py imports configs() for issue 26's checks.
"""
import os, statistics, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import steps  # noqa: E402
TIED_RAW = 256 * 384 * 4   # bytes of the raw tied-embedding gradient, each way per step
TOKENS = 8 * 4 * 128
nan = float("nan")


def median_run(tmp, prefix, runs):
    # timed steps: 3.., so warmup=auto has settled
    return steps.median_run([f"{tmp}/{prefix}-{k}.jsonl" for k in range(1, runs + 1)], 3)


def configs(tmp, rates, lats, scheds, pols, runs):
    """One dict per configuration run: policy index and name, rate, latency,
    schedule, tok/s, step s, compute-only step s, link s, overlap, speed-up over
    the first policy (vs) and its bound (cap).
    bound: the speed-up over the baseline a compressed policy can reach at a
    link: min(the busiest direction's byte ratio, tied exchange included, and
    the policy's compute-only tokens/s over the baseline's tokens/s there)."""
    base, base_wire, out = {}, {}, []
    for pi, pol in enumerate(pols):
        comp, _ = median_run(tmp, f"c-{pi}", runs)
        if comp is None:
            continue
        for r in rates:
            for l in lats:
                for s in scheds:
                    step, rows = median_run(tmp, f"l-{pi}-{r}-{l}-{s}", runs)
                    if step is None:
                        continue
                    wire = max(statistics.mean(x["fwd_wire"] for x in rows), statistics.mean(x["bwd_wire"] for x in rows))
                    # the tied exchange as measured (step lines since --compress-tied), else its raw size
                    tied = statistics.mean(x.get("tied_wire", TIED_RAW) for x in rows)
                    link = (wire + tied) * 8 / (float(r) * 1e6) if float(r) > 0 else 0.0
                    tok = TOKENS / step
                    if pi == 0:
                        base[(r, l, s)] = tok
                        base_wire[(r, l, s)] = wire + tied
                    vs = tok / base[(r, l, s)] if (r, l, s) in base else nan
                    cap = min(base_wire[(r, l, s)] / (wire + tied), (TOKENS / comp) / base[(r, l, s)]) \
                        if (r, l, s) in base and pi > 0 else nan
                    out.append(dict(pi=pi, pol=pol, r=r, l=l, s=s, tok=tok, step=step, comp=comp, link=link,
                                    overlap=max(comp, link) / step, vs=vs, cap=cap))
    return out


def main():
    tmp, rates, lats, scheds, pols, runs, plot = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), \
        sys.argv[4].split(","), sys.argv[5].split(";"), int(sys.argv[6]), sys.argv[7]
    print("demo preset, 2 stages, 8 micro-batches of 4 x 128 per step; medians of %d runs" % runs)
    print("%-20s %6s %5s %-21s %8s %8s %8s %8s %8s %8s %8s %8s %7s" % ("policy", "Mbit/s", "ms", "schedule", "tok/s",
          "step s", "compute", "link s", "overlap", "+delay", "vs " + pols[0], "bound", "of bnd"))
    speedup, table = {}, {}
    for c in configs(tmp, rates, lats, scheds, pols, runs):
        key = (c["pol"], c["r"], c["l"], c["s"])
        speedup[key] = c["vs"]
        table[key] = (c["tok"], c["overlap"])
        bound = max(c["comp"], c["link"])
        print("%-20s %6s %5s %-21s %8.0f %8.2f %8.2f %8.2f %8.2f %8.2f %7.2fx %7.2fx %7.2f" % (*key, c["tok"], c["step"],
              c["comp"], c["link"], c["overlap"], (bound + 5 * float(c["l"]) / 1e3) / c["step"], c["vs"], c["cap"],
              c["vs"] / c["cap"]))
    # issue 26: train's defaults (no --schedule, no --compress-tied) beside the
    # fastest hand-set schedule of the same policy and link
    if "defaults" in scheds:
        print("defaults (no --schedule, no --compress-tied) beside the best hand-set row:")
        for (pol, r, l, s), (tok, ov) in table.items():
            if s != "defaults":
                continue
            hand = [(t, o, x) for (p2, r2, l2, x), (t, o) in table.items() if (p2, r2, l2) == (pol, r, l) and x != "defaults"]
            best = max(hand) if hand else None
            print("  %-20s %6s Mbit/s %3s ms: defaults %6.0f tok/s, overlap %.2f | best hand-set %s" % (pol, r, l, tok, ov,
                  "%s %.0f tok/s, overlap %.2f" % (best[2], best[0], best[1]) if best else "(none run)"))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no plot: matplotlib is not installed (apt-get install python3-matplotlib)")
        sys.exit(0)
    comp_pols = pols[1:]
    fig, axes = plt.subplots(1, max(1, len(comp_pols)), figsize=(5 * max(1, len(comp_pols)), 4), squeeze=False)
    for ax, pol in zip(axes[0], comp_pols):
        for s in scheds:
            for l in lats:
                pts = [(float(r), speedup[(pol, r, l, s)]) for r in rates if (pol, r, l, s) in speedup and float(r) > 0]
                if not pts:
                    continue
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", linestyle="-" if float(l) == 0 else "--",
                        label=f"{s}, {l} ms")
        ax.set_xscale("log")
        ax.set_xlabel("link rate, Mbit/s (simulated)")
        ax.set_ylabel(f"tokens/s over {pols[0]}")
        ax.set_title(pol)
        ax.axhline(1.0, color="gray", linewidth=0.5)
        ax.legend(fontsize=7)
    fig.suptitle(f"demo preset, 2 stages, 8 x (4 x 128) per step, medians of {runs} runs")
    fig.tight_layout()
    fig.savefig(plot, dpi=110)
    print(f"plot: {plot}")


if __name__ == "__main__":
    main()
