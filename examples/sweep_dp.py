#!/usr/bin/env python3
"""The data-parallel codec sweep (`pipezip sweep --dp`; issue 25, "the sweep in
the seeds' own setting").

Trains the same model from the same seed with S = 1 stage x D replicas once per
data-parallel codec (--dp-compress, or --optimizer binsgdm) and once
uncompressed, over every seed of --seeds, and reports per codec:

  * val_loss: the validation loss after the last step (mean and sample std
    over the seeds), and its change against uncompressed data parallelism;
  * dp_wire: the median over steps of the step lines' dp_wire (what one
    replica sent for the step's gradient average), and bits = 32 x dp_wire /
    the uncompressed run's dp_wire: bits per gradient element, since the
    uncompressed ring all-reduce sends 4 bytes per element with 2 replicas
    (with D > 2 the codecs run twophase, whose factor 2(D-1)/D is the ring's);
  * dp_var: the mean over the compressed steps of the step lines' dp_var
    (train --dp-variance on): ||estimate - exact mean||^2 / ||exact mean||^2 of
    the gradient average the optimizer received, against the exact average
    of the same step's gradients (0 uncompressed);
  * the median step time on this host.

A comparison "holds" only when the difference of the two means exceeds the
seed spread (the sum of the two standard deviations), "fails" when it is
reversed by more than that, and is "not resolved" otherwise. The verdicts,
computed from the table: JointSQ against uniform quantization and TopK at
about the same bits; NUQSGD's variance against QSGD's for each pair of
NUQ_PAIRS whose measured bits per element match within 10% (nuq3 against q3:
the same 7 levels and bytes; nuq4 elias against q2 in groups of 64; a pair
further apart is printed as not judged); whether 1-bit needs a warm-up
(binsgdm with none; sign with error feedback, twophase, and 1-bit Adam,
which runs only with one: the shortest --dp-warmup of --warmup-tries within
2% on the means), each change against uncompressed judged with the seed
spread; the quality targets of issue 25; and whether compression pays on a
slow link.

Writes to --out: results.csv, results.md, findings.md and runs/ (each run's
step lines); a run whose step lines are complete is reused, so a stopped
sweep continues where it stopped. Prints the table and the findings.

Usage: python3 examples/sweep_dp.py [--quick] [--out DIR] [--preset demo] [--replicas 2] ...
"""
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
from sweep import Parser, seed_list as int_list  # noqa: E402  (exit 1 on a bad flag; whole numbers, none twice)

# (name, --dp-compress spec or None, extra train flags). q gets a block of
# 512 (AC-SGD's buckets): its default is a scale per element. topk:0.05 and
# jointsq:2 sit at about 2 bits per element, beside q2 (JointSQ's claim at
# equal bits). NUQSGD against QSGD at equal bits (NUQ_PAIRS): nuq4 (its
# default buckets of 8192) and q4 have the same 15 levels (s = 7: NUQSGD's
# 0, 2^-6 .. 1/2, 1 times the L2 norm against 0, 1/7 .. 1 times max |x|) at
# 4.00 and 4.06 bits; nuq3 and q3 the same 7 levels (0, 1/4, 1/2, 1 against
# 0, 1/3, 2/3, 1) in buckets of 512, so the same bytes; nuq4 elias (the
# issue's codec: nuq4's levels in about 2.5 bits) against q2 in groups of 64
# (2 + 32/64 bits). In the order they run: the quality targets' rows first.
CODECS = [
    ("none", None, []),
    ("sign+EF", "sign", ["--dp-reduce", "twophase"]),
    ("binsgdm", None, ["--optimizer", "binsgdm"]),
    ("1bit-adam", "sign", ["--dp-reduce", "twophase", "--dp-compress-what", "momentum"]),
    ("sign+EF frozen-v", "sign", ["--dp-reduce", "twophase", "--dp-compress-what", "grad-frozen-v"]),
    ("q4", "q4:group=512", []),
    ("jointsq:2", "jointsq:2", []),
    ("q2", "q2:group=512", []),
    ("topk", "topk:0.05", []),
    ("nuq4 elias", "nuq4:code=elias", []),
    ("nuq4", "nuq4", []),
    ("nuq3", "nuq3:bucket=512", []),
    ("q3", "q3:group=512", []),
    ("q2 g64", "q2:group=64", []),
]
QUICK_CODECS = ["none", "sign+EF", "1bit-adam", "q4"]
# the 1-bit rows whose warm-up the sweep searches (the shortest --dp-warmup of
# --warmup-tries within 2%, when none is not enough); 1bit-adam (train
# --dp-compress-what momentum) and sign+EF frozen-v (grad-frozen-v: sign+EF's
# gradient average, AdamW's v frozen) freeze AdamW's v when the warm-up ends,
# so they run only with one, and their speed runs use --dp-warmup 1
WARMUP_SEARCH = ["sign+EF", "1bit-adam", "sign+EF frozen-v"]
# the rows that run only with a warm-up, and what their verdict calls them
WARMUP_ROWS = {"1bit-adam": "1-bit Adam, momentum through sign+EF, twophase",
               "sign+EF frozen-v": "sign+EF over the gradient, twophase, AdamW's v frozen after the warm-up"}
NEEDS_WARMUP = set(WARMUP_ROWS)
# NUQSGD against QSGD: (nuq row, q row) pairs judged on dp_var when both ran
# and their measured bits per element are within BITS_MATCH of each other;
# nuq4 elias against q4 (2.5 against 4 bits) is listed to say it is not
BITS_MATCH = 0.10
NUQ_PAIRS = [("nuq4", "q4"), ("nuq3", "q3"), ("nuq4 elias", "q2 g64"), ("nuq4 elias", "q4")]
LINK_STEPS = 5   # a speed run's steps (the median skips the first)
COLUMNS = ["codec", "spec", "reduce", "seeds", "val_loss", "val_loss_std", "val_loss_vs_none_pct", "dp_wire",
           "bits", "dp_var", "dp_var_std", "step_ms", "warmup"]


def log(msg):
    print(f"sweep --dp: {msg}", file=sys.stderr, flush=True)


def die(msg):
    print(f"sweep --dp: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def build_args():
    names = [c[0] for c in CODECS]
    ap = Parser(prog="sweep_dp.py", description="Train S=1 x D replicas under every data-parallel codec and "
                "uncompressed, over several seeds; write a table and the verdicts on the seeds' claims.",
                epilog="Every number in the outputs comes from the runs of this sweep.")
    ap.add_argument("--quick", action="store_true", help="reduced form for CI: tiny preset, codecs "
                    + ",".join(QUICK_CODECS) + ", 4 steps, seeds 1337,1338, small batches")
    ap.add_argument("--out", help="output directory (default runs/sweep-dp, or runs/sweep-dp-quick with --quick)")
    ap.add_argument("--pipezip", default=os.environ.get("PIPEZIP", os.path.join(REPO, "build", "pipezip")),
                    help="pipezip binary (default $PIPEZIP, else build/pipezip)")
    ap.add_argument("--preset", help="model preset (default demo; quick: tiny)")
    ap.add_argument("--replicas", type=int, help="data-parallel replicas D (default 2)")
    ap.add_argument("--codecs", help="comma-separated subset of: " + ",".join(names) + " (default all; none is "
                    "always run: it is the reference)")
    ap.add_argument("--seeds", type=int_list, help="seeds, comma-separated (default 1337,1338,1339; quick: "
                    "1337,1338)")
    ap.add_argument("--steps", type=int, help="training steps per run (default 200; quick: 4)")
    ap.add_argument("--batch", type=int, help="sequences per micro-batch (default 4; quick: 2)")
    ap.add_argument("--seq", type=int, help="tokens per sequence (default 64; quick: 32)")
    ap.add_argument("--micro-batches", type=int, help="micro-batches per replica and step (default 1)")
    ap.add_argument("--val-batches", type=int, help="validation batches after the last step (default 16; quick: 2)")
    ap.add_argument("--lr", help="peak learning rate (default: train's)")
    ap.add_argument("--warmup-tries", type=int_list, help="--dp-warmup values tried, shortest first, when sign+EF "
                    "is not within 2%% without one, and for 1bit-adam and sign+EF frozen-v (default: 5%%, 10%% "
                    "and 20%% of --steps; 'none' skips: give 0)")
    ap.add_argument("--link-mbps", type=int_list, help="slow links for the link verdict, Mbit/s: a speed run "
                    "per codec and rate (train --dp-link-mbps, first seed; default 100; 0: none)")
    ap.add_argument("--data", help="training shards (default data/fortunes_train.bin)")
    ap.add_argument("--val-data", help="validation shards (default data/fortunes_val.bin)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads per process (default 0: train's choice)")
    return ap


def settings(a):
    """the run settings, --quick's or the full sweep's defaults, overridden by the flags"""
    q = a.quick
    d = dict(preset="tiny" if q else "demo", replicas=2, seeds=[1337, 1338] if q else [1337, 1338, 1339],
             steps=4 if q else 200, batch=2 if q else 4, seq=32 if q else 64, micro_batches=1,
             val_batches=2 if q else 16)
    for k in d:
        if getattr(a, k) is not None:
            d[k] = getattr(a, k)
    if d["replicas"] < 2:
        die("--replicas must be 2 or more")
    for k in ("steps", "batch", "seq", "micro_batches", "val_batches"):
        if d[k] < 1:
            die(f"--{k.replace('_', '-')} must be at least 1")
    return d


def train_help(pz):
    r = subprocess.run([pz, "train", "--help"], capture_output=True, text=True)
    if r.returncode != 0:
        die(f"{pz} train --help failed: {r.stderr.strip()}")
    return r.stdout + r.stderr


def run_lines(path):
    """the JSON lines of a finished run's stdout, or None when it is incomplete"""
    if not os.path.isfile(path):
        return None
    lines = []
    with open(path) as f:
        for ln in f:
            ln = ln.strip()
            if ln.startswith("{"):
                try:
                    lines.append(json.loads(ln))
                except json.JSONDecodeError:
                    return None
    return lines


def run_one(a, s, name, spec, extra, seed, warmup, out_dir, link=0):
    """one training run (reused when its step lines are complete); its figures.
    link > 0: a speed run instead, LINK_STEPS steps over --dp-link-mbps link,
    without validation or --dp-variance (its all-reduce would cross the link)"""
    tag = re.sub(r"[^A-Za-z0-9.]+", "_", name) + (f"-warmup{warmup}" if warmup else "") + (f"-link{link}" if link else "")
    path = os.path.join(out_dir, "runs", tag, f"seed-{seed}.jsonl")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    n = LINK_STEPS if link else s["steps"]
    cmd = [a.pipezip, "train", "--preset", s["preset"], "--data", a.data, "--val-data", a.val_data,
           "--stages", "1", "--replicas", str(s["replicas"]), "--micro-batches", str(s["micro_batches"]),
           "--batch", str(s["batch"]), "--seq", str(s["seq"]), "--steps", str(n), "--seed", str(seed),
           "--threads", str(a.threads)] + extra
    cmd += ["--val-every", "0", "--dp-link-mbps", str(link)] if link else \
        ["--val-every", str(n), "--val-batches", str(s["val_batches"]), "--dp-variance", "on"]
    if a.lr:
        cmd += ["--lr", a.lr]
    if spec:
        cmd += ["--dp-compress", spec]
    if warmup:
        cmd += ["--dp-warmup", str(warmup)]
    lines = run_lines(path)
    done = lines and (link or any(x.get("step") == n and "val_loss" in x for x in lines)) and \
        sum(1 for x in lines if "loss" in x and "val_loss" not in x) == n
    if not done:
        log(f"{tag} seed {seed}: {' '.join(cmd)}")
        t0 = time.time()
        tmp = f"{path}.{os.getpid()}.tmp"   # two sweeps on one --out must not share it
        with open(tmp, "w") as f, open(path[:-6] + ".err", "w") as e:
            rc = subprocess.run(cmd, stdout=f, stderr=e).returncode
        if rc != 0:
            die(f"{tag} seed {seed} failed (exit {rc}); see {path[:-6]}.err")
        os.replace(tmp, path)
        log(f"{tag} seed {seed}: {time.time() - t0:.0f} s")
        lines = run_lines(path)
    steps = [x for x in lines if "loss" in x and "val_loss" not in x]
    val = [x["val_loss"] for x in lines if x.get("step") == n and "val_loss" in x] or [None]
    if len(steps) != n or (val[-1] is None and not link):
        die(f"{path}: {len(steps)} step lines, expected {n} and a final validation")
    # binsgdm exchanges in its optimizer, after the step's figures: its bytes
    # show on the next step line, so the median skips the first step
    # (dp_bytes: the same count in step lines of builds before dp_wire)
    byt = [x.get("dp_wire", x.get("dp_bytes")) for x in steps[1:] or steps]
    var = [x["dp_var"] for x in steps[warmup:] if "dp_var" in x]
    return {"val_loss": val[-1], "dp_wire": statistics.median(byt),
            "dp_var": statistics.fmean(var) if var else None,
            "step_ms": statistics.median(x["ms"] for x in steps[1:] or steps)}


def link_rates(a):
    return [r for r in (a.link_mbps if a.link_mbps is not None else [100]) if r > 0]


def mean_std(v):
    v = [x for x in v if x is not None]
    if not v:
        return None, None
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else None)


def summarize(name, spec, reduce, seeds, runs, warmup):
    row = {"codec": name, "spec": spec or "", "reduce": reduce, "seeds": " ".join(map(str, seeds)), "warmup": warmup}
    for k in ("val_loss", "dp_var"):
        row[k], row[k + "_std"] = mean_std([r[k] for r in runs])
    row["dp_wire"] = statistics.median(r["dp_wire"] for r in runs)
    row["step_ms"] = statistics.median(r["step_ms"] for r in runs)
    return row


def compare(a, b, key, lower_is_better=True):
    """'holds' when a beats b by more than the seed spread, 'fails' when b beats a
    by more, 'not resolved' otherwise (or without two seeds on both sides)"""
    ma, sa, mb, sb = a[key], a[key + "_std"], b[key], b[key + "_std"]
    if ma is None or mb is None:
        return "not measured", ""
    if sa is None or sb is None:
        return "not judged (fewer than 2 seeds)", f"{ma:.4g} vs {mb:.4g}"
    d = (mb - ma) if lower_is_better else (ma - mb)
    spread = sa + sb
    text = f"{ma:.4g} +- {sa:.2g} vs {mb:.4g} +- {sb:.2g} (difference {abs(ma - mb):.3g}, spread {spread:.3g})"
    return ("holds" if d > spread else "fails" if -d > spread else "not resolved by the seed spread"), text


def within(row, ref, pct):
    return row["val_loss"] is not None and (row["val_loss"] - ref["val_loss"]) / ref["val_loss"] * 100 <= pct


def within_spread(row, ref, pct):
    """(verdict, text) on 'row's validation loss within pct% of ref's, judged
    with the seed spread (the two std's in % of ref's mean): 'holds' when even
    change + spread is within, 'fails' when change - spread is not, 'not
    resolved by the seed spread' between; by the means alone with one seed"""
    d = (row["val_loss"] - ref["val_loss"]) / ref["val_loss"] * 100
    if row["val_loss_std"] is None or ref["val_loss_std"] is None:
        return ("holds" if d <= pct else "fails"), f"{d:+.2f}% (one seed: no spread)"
    spread = (row["val_loss_std"] + ref["val_loss_std"]) / ref["val_loss"] * 100
    v = "holds" if d + spread <= pct else "fails" if d - spread > pct else "not resolved by the seed spread"
    return v, f"{d:+.2f}% +- {spread:.2f}% (seed spread)"


def nuq_verdicts(by):
    """NUQSGD's variance against QSGD's, for each pair of NUQ_PAIRS that ran:
    judged on dp_var only where the measured bits match within BITS_MATCH"""
    out = []
    for nq, q in NUQ_PAIRS:
        a, b = by.get(nq), by.get(q)
        if a is None or b is None or a["bits"] is None or b["bits"] is None:
            continue
        head = (f"NUQSGD's variance is lower than QSGD's ({nq} {a['spec']} at {a['bits']:.3g} bits vs {q} "
                f"{b['spec']} stochastic at {b['bits']:.3g} bits per element)")
        apart = abs(a["bits"] - b["bits"]) / b["bits"]
        if apart > BITS_MATCH:
            out.append(f"{head}: not judged: not at equal bits ({100 * apart:.0f}% apart; a pair is judged within "
                       f"{100 * BITS_MATCH:.0f}%); dp_var {fmt(a['dp_var'])} vs {fmt(b['dp_var'])}")
            continue
        v, t = compare(a, b, "dp_var")
        lv, lt = compare(a, b, "val_loss")
        out.append(f"{head}, dp_var: {v}: {t}; validation loss: {lv}: {lt}")
    return out


def fmt(v, p=4):
    return "" if v is None else f"{v:.{p}g}" if isinstance(v, float) else str(v)


def main():
    a = build_args().parse_args()
    s = settings(a)
    a.out = a.out or os.path.join(REPO, "runs", "sweep-dp-quick" if a.quick else "sweep-dp")
    a.data = a.data or os.path.join(REPO, "data", "fortunes_train.bin")
    a.val_data = a.val_data or os.path.join(REPO, "data", "fortunes_val.bin")
    for f in (a.data, a.val_data):
        if not os.path.isfile(f):
            die(f"{f}: no such file (bash tools/make_corpus.sh data build/pipezip makes the built-in corpora)")
    if not os.access(a.pipezip, os.X_OK):
        die(f"{a.pipezip}: not an executable pipezip (build it, or give --pipezip)")
    names = [c[0] for c in CODECS]
    want = QUICK_CODECS if a.quick and not a.codecs else a.codecs.split(",") if a.codecs else names
    bad = [w for w in want if w not in names]
    if bad:
        die(f"--codecs: unknown {','.join(bad)} (known: {','.join(names)})")
    helptext = train_help(a.pipezip)
    os.makedirs(a.out, exist_ok=True)
    notes = []
    rows = []
    D = s["replicas"]
    for name, spec, extra in CODECS:
        if name not in want and name != "none":
            continue
        if "--optimizer" in extra and "binsgdm" not in helptext:
            notes.append(f"{name}: not run: this pipezip has no `--optimizer binsgdm` (train --help does not "
                         "name it; issue 25's BinSGDM optimizer has not landed in this build)")
            log(notes[-1])
            continue
        if name in NEEDS_WARMUP:   # the warm-up search below runs it
            continue
        compressed = spec or "--optimizer" in extra   # binsgdm: its own 1-bit exchange, train's default mode
        red = "" if not compressed else extra[1] if "--dp-reduce" in extra else "allgather" if D == 2 else "twophase"
        runs = [run_one(a, s, name, spec, extra, seed, 0, a.out) for seed in s["seeds"]]
        rows.append(summarize(name, spec, red, s["seeds"], runs, 0))
    ref = rows[0]
    tries = a.warmup_tries if a.warmup_tries is not None else sorted({max(1, s["steps"] * p // 100) for p in (5, 10, 20)})
    tries = [t for t in tries if 0 < t < s["steps"]]
    warm_found = warmup_search(a, s, rows, ref, want, tries, helptext)
    # the slow link: one speed run per codec and rate, first seed
    extras = {c[0]: c[2] for c in CODECS}
    for r in rows:
        w = 1 if r["codec"] in NEEDS_WARMUP else 0   # one speed run per codec: its first row
        if r is not next(x for x in rows if x["codec"] == r["codec"]):
            continue
        for rate in link_rates(a) if "--dp-link-mbps" in helptext else []:
            f = run_one(a, s, r["codec"], r["spec"] or None, extras[r["codec"]], s["seeds"][0], w, a.out, link=rate)
            r[f"link{rate}_ms"] = f["step_ms"]
    for r in rows:
        r["val_loss_vs_none_pct"] = (r["val_loss"] - ref["val_loss"]) / ref["val_loss"] * 100
        r["bits"] = 32.0 * r["dp_wire"] / ref["dp_wire"] if ref["dp_wire"] > 0 else None
    findings = verdicts(rows, ref, warm_found, tries, s, a, helptext)
    write_outputs(a, s, rows, findings, notes)


def warmup_search(a, s, rows, ref, want, tries, helptext):
    """the 1-bit rows of WARMUP_SEARCH: when not within 2% with no warm-up (or
    unable to run without one), the shortest of tries that is; {name: steps}"""
    found = {}
    for name, spec, extra in CODECS:
        if name not in WARMUP_SEARCH or name not in want or ("--dp-compress-what" in extra and
                                                            "--dp-compress-what" not in helptext):
            continue
        zero = next((r for r in rows if r["codec"] == name), None)
        if zero and within(zero, ref, 2.0):
            continue
        for w in tries:
            runs = [run_one(a, s, name, spec, extra, seed, w, a.out) for seed in s["seeds"]]
            rows.append(summarize(name, spec, "twophase", s["seeds"], runs, w))
            if within(rows[-1], ref, 2.0):
                found[name] = w
                log(f"{name}: the shortest --dp-warmup within 2% of uncompressed: {w} steps")
                break
        else:
            log(f"{name}: no --dp-warmup of {tries} got within 2% of uncompressed")
    return found


def one_bit_verdict(name, zero, ref, rows, warm_found, tries, s):
    """whether the 1-bit row `name` needs a warm-up (judged with the seed
    spread), and the shortest of tries within 2% on the means"""
    if name in NEEDS_WARMUP:
        head = f"1-bit ({WARMUP_ROWS[name]}) warm-up"
        verdict, without = "does not apply", "it runs only with one (v freezes when it ends)"
    else:
        head = "1-bit (sign+EF, twophase) needs no warm-up"
        verdict, t = within_spread(zero, ref, 2.0)
        if within(zero, ref, 2.0):   # on the means: warmup_search tried none
            return f"{head}: {verdict}: {t} validation loss against uncompressed with --dp-warmup 0 (target within 2%)"
        without = f"{t} without one"
    w = warm_found.get(name)
    if w:
        r = next(x for x in rows if x["codec"] == name and x["warmup"] == w)
        v, t = within_spread(r, ref, 2.0)
        return (f"{head}: {verdict}: {without}; the shortest --dp-warmup of {tries} within 2% on the means is {w} "
                f"steps ({100 * w / s['steps']:.0f}% of {s['steps']}: {t}; within 2% with the spread: {v})")
    if not tries:
        return f"{head}: {verdict}: {without}; no warm-up was tried (--warmup-tries 0)"
    return f"{head}: {verdict}: {without}, and no --dp-warmup of {tries} got within 2%"


def verdicts(rows, ref, warm_found, tries, s, a, helptext):
    by = {r["codec"]: r for r in rows if not r["warmup"]}
    out = ["Rule: A claim holds when the difference of the two means exceeds the seed spread (the sum of their "
           "sample standard deviations over the seeds), fails when it is reversed by more than that, and is not "
           "resolved otherwise."]
    jsq = by.get("jointsq:2")
    for other in ("q2", "topk"):
        if jsq and other in by:
            v, t = compare(jsq, by[other], "val_loss")
            out.append(f"JointSQ beats {other} at about equal bits ({fmt(jsq['bits'], 3)} vs {fmt(by[other]['bits'], 3)} "
                       f"bits per element), validation loss: {v}: {t}")
    out += nuq_verdicts(by)
    for name in WARMUP_SEARCH:
        if any(r["codec"] == name for r in rows):
            out.append(one_bit_verdict(name, by.get(name), ref, rows, warm_found, tries, s))
    if "binsgdm" in by:   # BinSGDM's own claim: no warm-up (no search for one here)
        v, t = within_spread(by["binsgdm"], ref, 2.0)
        out.append(f"1-bit (binsgdm) needs no warm-up: {v}: {t} validation loss against uncompressed with "
                   "--dp-warmup 0 (target within 2%)")
    targets = [("q4", 1.0), ("jointsq:2", 1.0), ("sign+EF", 2.0), ("binsgdm", 2.0), ("1bit-adam", 2.0),
               ("sign+EF frozen-v", 2.0)]
    for name, pct in targets:
        w = warm_found.get(name)
        r = by.get(name) or next((x for x in rows if x["codec"] == name and x["warmup"] == w), None)
        tried = [x for x in rows if x["codec"] == name]
        if r is None and tried:   # runs only with a warm-up, and none got there: its best
            best = min(tried, key=lambda x: x["val_loss"])
            out.append(f"Quality: {name} within {pct:g}% of uncompressed: fails (best of the warm-ups "
                       f"{[x['warmup'] for x in tried]}: {best['val_loss_vs_none_pct']:+.2f}% with --dp-warmup "
                       f"{best['warmup']})")
            continue
        if r is None:
            out.append(f"Quality: {name} within {pct:g}% of uncompressed: not run")
            continue
        ok = within(r, ref, pct)
        if not ok and w:
            r = next(x for x in rows if x["codec"] == name and x["warmup"] == w)
            ok, extra = True, f" with --dp-warmup {w}"
        else:
            extra = " with no warm-up" if not r["warmup"] else f" with --dp-warmup {r['warmup']}"
        out.append(f"Quality: {name} within {pct:g}% of uncompressed{extra}: {'holds' if ok else 'fails'} "
                   f"({r['val_loss_vs_none_pct']:+.2f}%)")
    rates = link_rates(a)
    if not rates:
        out.append("Slow link: not measured (--link-mbps 0)")
        return out
    if "--dp-link-mbps" not in helptext:
        out.append("Slow link: not measured: this pipezip has no --dp-link-mbps")
        return out
    for rate in rates:
        ms = {r["codec"]: r[f"link{rate}_ms"] for r in rows if f"link{rate}_ms" in r}
        parts = ", ".join(f"{k} {v:.0f} ms" for k, v in ms.items())
        pays = [k for k, v in ms.items() if k != "none" and v < ms["none"]]
        out.append(f"Slow link, measured (train --dp-link-mbps {rate}, {LINK_STEPS} steps, first seed, median step "
                   f"after the first): {parts}; compression pays for: {', '.join(pays) if pays else 'none of them'}")
    return out


def write_outputs(a, s, rows, findings, notes):
    import csv
    with open(os.path.join(a.out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({k: fmt(r[k], 6) if isinstance(r[k], float) else r[k] for k in COLUMNS})
    head = ("| codec | spec | reduce | warm-up | val loss (mean +- std) | vs none | bits/elem | dp bytes/step | "
            "dp_var (mean +- std) | step ms |")
    md = [head, "|" + "---|" * 10]
    for r in rows:
        vl = f"{r['val_loss']:.4f} +- {fmt(r['val_loss_std'], 2) or '-'}"
        dv = "-" if r["dp_var"] is None else f"{r['dp_var']:.4g} +- {fmt(r['dp_var_std'], 2) or '-'}"
        md.append(f"| {r['codec']} | {r['spec'] or '-'} | {r['reduce'] or '-'} | {r['warmup']} | {vl} | "
                  f"{r['val_loss_vs_none_pct']:+.2f}% | {fmt(r['bits'], 3)} | {r['dp_wire']:.0f} | {dv} | "
                  f"{r['step_ms']:.0f} |")
    setting = (f"preset {s['preset']}, S=1 x D={s['replicas']}, {s['steps']} steps, batch {s['batch']} x "
               f"{s['seq']} x {s['micro_batches']} micro-batch(es) per replica, seeds {','.join(map(str, s['seeds']))}, "
               f"validation: {s['val_batches']} batches after the last step")
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    with open(os.path.join(a.out, "findings.md"), "w") as f:
        f.write(f"Setting: {setting}\n\n" + "\n".join(f"- {x}" for x in notes + findings) + "\n")
    print(f"== DP sweep: {setting}")
    print("\n".join(md))
    print("== findings")
    print("\n".join(notes + findings))


if __name__ == "__main__":
    main()
