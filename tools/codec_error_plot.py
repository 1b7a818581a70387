#!/usr/bin/python3
"""codec_error_plot.py: relative L2 error against bits per element of every
codec on some tensors, one panel per tensor, as a PNG and a CSV.

usage: /usr/bin/python3 tools/codec_error_plot.py [--pipezip P] [--out DIR] X.npy...

Each codec runs through `pipezip codec --spec S --in X.npy --out MSG` (one
JSON line: bits_per_elem, rel_l2_error). A spec the shape refuses (tah
below its overhead, e.g. tah:3.5 with 64-tiles; tah:3, which needs more
than 3 bits) is retried with tile=128 and tile=256 and labelled so; if none
fits it is listed as refused in the CSV. Writes DIR/error_vs_bits.png and
DIR/error_vs_bits.csv (default DIR: runs/codec_errors). Issue 14's tensors:
tests/fixtures/edge/*.npy (captured from the fine-tuning example) and the
synthetic heavy-tailed ones that `build/tests/test_quant_error --write-synthetic
DIR` writes.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

FAMILIES = [
    ("q<b> (defaults: nearest)", [f"q{b}" for b in range(2, 9)]),
    ("nuq<b>", [f"nuq{b}" for b in range(2, 9)]),
    ("jointsq", ["jointsq:1.5", "jointsq:2", "jointsq:4"]),
    ("topk", ["topk:0.01", "topk:0.05", "topk:0.1", "topk:0.2"]),
    ("hadamard(q<b>)", ["hadamard(q2)", "hadamard(q4)"]),
    ("tah", ["tah:3", "tah:3.5", "tah:4"]),
    ("sign", ["sign"]),
]


def run(pipezip, spec, path, msg):
    p = subprocess.run([pipezip, "codec", "--spec", spec, "--in", path, "--out", msg],
                       capture_output=True, text=True)
    if p.returncode != 0:
        lines = [l.strip() for l in p.stderr.splitlines() if l.strip()]
        return None, lines[0] if lines else "failed"
    d = json.loads(p.stdout.strip().splitlines()[-1])
    return (d["bits_per_elem"], d["rel_l2_error"]), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pipezip", default="build/pipezip")
    ap.add_argument("--out", default="runs/codec_errors")
    ap.add_argument("inputs", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        msg = os.path.join(tmp, "msg")
        for path in a.inputs:
            name = os.path.splitext(os.path.basename(path))[0]
            for fam, specs in FAMILIES:
                for spec in specs:
                    tries = [spec]
                    if spec.startswith("tah:"):
                        tries += [spec + ",tile=128", spec + ",tile=256"]
                    got, err = None, None
                    for s in tries:
                        got, e = run(a.pipezip, s, path, msg)
                        err = err or e
                        if got:
                            break
                    if got:
                        rows.append({"tensor": name, "family": fam, "spec": s, "bits": got[0], "rel_l2": got[1]})
                        print(f"{name:32s} {s:28s} {got[0]:7.3f} bits  {got[1]:.4f}")
                    else:
                        rows.append({"tensor": name, "family": fam, "spec": spec, "bits": "", "rel_l2": "",
                                     "refused": err})
                        print(f"{name:32s} {spec:28s} refused: {err}")
    with open(os.path.join(a.out, "error_vs_bits.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["tensor", "family", "spec", "bits", "rel_l2", "refused"])
        w.writeheader()
        w.writerows(rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("no matplotlib (apt-get install python3-matplotlib): wrote only the CSV")
    names = list(dict.fromkeys(r["tensor"] for r in rows))
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.4), squeeze=False, sharey=True)
    marks = "os^vDPX*"
    for ax, name in zip(axes[0], names):
        for i, (fam, _) in enumerate(FAMILIES):
            pts = sorted((r["bits"], r["rel_l2"], r["spec"]) for r in rows
                         if r["tensor"] == name and r["family"] == fam and r["bits"] != "")
            if not pts:
                continue
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marks[i % len(marks)], label=fam)
            for b, e, s in pts:
                if fam in ("jointsq", "tah", "hadamard(q<b>)"):
                    ax.annotate(s.split("(")[-1].rstrip(")").replace(",tile=", "/t"), (b, e), fontsize=6,
                                xytext=(3, 3), textcoords="offset points")
        ax.set_yscale("log")
        ax.set_xlabel("bits per element (message, header included)")
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3, which="both")
    axes[0][0].set_ylabel("relative L2 error ||x - x'|| / ||x||")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    png = os.path.join(a.out, "error_vs_bits.png")
    fig.savefig(png, dpi=110)
    print(png)


if __name__ == "__main__":
    main()
