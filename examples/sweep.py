#!/usr/bin/env python3
"""Compare activation (fwd) and gradient (bwd) compression on one fine-tuning task.

Runs a grid of forward codecs x backward codecs (plus extra policies: TopK
fractions, error feedback) through examples/gpt_finetune.sh: the same base
model (the example's cached demo model), data and schedule for every policy.
The headline rows (--headline, --also) are repeated over every seed of
--seeds and reported as mean +- sample standard deviation; the other rows run
with the first seed only. Each policy gets

  * a quality run per seed: fine-tuning with no link limit, validated at the
    end with the forward codecs and uncompressed (--eval-compress on);
  * a speed run per bandwidth (first seed only): a few steps with --link-mbps B
    on a training set of two steps' worth of samples, tokens/s = median over
    the steps after the first epoch (AQ-SGD sends a sample's first activation
    uncompressed, so this is its steady state).

A finding comparing two rows "holds" only when the difference of their means
exceeds the seed spread, the sum of their standard deviations (see
compute_findings); with fewer than 2 seeds on either side it is not judged.

Writes to --out: results.csv and results.md (one row per policy, mean and std
over its seeds), results_seeds.csv (one row per policy and seed), findings.md,
plots (headline.png, loss_vs_bits.png, loss_curves.png, heatmap.png, and
speed.png when there are speed runs) and runs/<policy>/ (each run's logs and
report). Prints the table and a findings block computed from these numbers at
the end.

Usage: python3 examples/sweep.py [--quick] [--out DIR] [--seeds 1337,1338,1339] ...
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "examples", "gpt_finetune.sh")

# The default grid. Forward: activations; backward: gradients. q<b> is q's
# default (midtread grid, round to nearest); tah:3.5 needs tiles of 128 on the
# demo model's shapes (64-element tiles cost 3.53 bits of overhead per element).
TAH = "tah:3.5,tile=128"
DEFAULT_FWD = ["none", "q8", "q4", "q2", "hadamard(q4)", "hadamard(q2)", TAH, "aq(q4)", "aq(q2)"]
DEFAULT_BWD = ["none", "q8", "q4", "q2"]
# Extra policies outside the cross grid: TopK on activations at several
# fractions, error feedback on both directions.
DEFAULT_EXTRA = ["fwd=topk:0.5", "fwd=topk:0.2", "fwd=topk:0.1", "fwd=topk:0.05",
                 "fwd=ef(q2)", "fwd=ef(topk:0.1)", "bwd=ef(q2)"]
# Headline rows: repeated over every seed of --seeds (those of them that the
# grid or the extras hold, unless --headline names them).
DEFAULT_HEADLINE = ["none", "fwd=q4", "fwd=q2", "fwd=hadamard(q4)", "fwd=hadamard(q2)", f"fwd={TAH}",
                    "bwd=q2", "fwd=aq(q4),bwd=q8", "fwd=aq(q2),bwd=q4", "fwd=q2,bwd=q4", "bwd=q4",
                    "fwd=q4,bwd=q8"] + DEFAULT_EXTRA
DEFAULT_SEEDS = [1337, 1338, 1339]
QUICK_FWD = ["none", "aq(q4)"]
QUICK_BWD = ["none", "q8"]
QUICK_SEEDS = [1337, 1338]

COLUMNS_HEAD = ["policy", "fwd", "bwd", "kind", "seeds", "val_loss_compressed", "val_loss_compressed_std",
                "val_loss_uncompressed", "val_loss_uncompressed_std", "val_loss_before", "train_loss_final",
                "train_loss_final_std", "tok_s_unlimited"]
COLUMNS_TAIL = ["fwd_raw_bytes", "fwd_wire_bytes", "bwd_raw_bytes", "bwd_wire_bytes",
                "fwd_bits_per_elem", "bwd_bits_per_elem", "fwd_bits_steady", "bwd_bits_steady",
                "policy_canonical"]
SEED_COLUMNS = ["policy", "seed", "val_loss_compressed", "val_loss_uncompressed", "train_loss_final",
                "tok_s_unlimited", "fwd_bits_per_elem", "bwd_bits_per_elem"]


def log(msg):
    print(f"sweep: {msg}", file=sys.stderr, flush=True)


def die(msg):
    print(f"sweep: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def split_list(text):
    """'none;q8;q4:group=row,round=nearest' -> items (';' separates: specs contain commas)."""
    items = [x.strip() for x in text.split(";")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"empty item in '{text}'")
    return items


def seed_list(text):
    out = []
    for x in text.split(","):
        if not re.fullmatch(r"[0-9]+", x.strip()):
            raise argparse.ArgumentTypeError(f"seed '{x}' is not a whole number")
        if int(x) in out:
            raise argparse.ArgumentTypeError(f"seed {int(x)} given twice")
        out.append(int(x))
    return out


def bandwidth_list(text):
    if text == "none":
        return []
    out = []
    for x in text.split(","):
        try:
            v = float(x)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{x}' is not a number")
        if not (v > 0 and math.isfinite(v)):
            raise argparse.ArgumentTypeError(f"bandwidth {x} must be > 0 Mbit/s")
        out.append(v)
    return out


def fmt_bw(b):
    return f"{b:g}"


def policy_text(fwd, bwd):
    parts = []
    if fwd != "none":
        parts.append(f"fwd={fwd}")
    if bwd != "none":
        parts.append(f"bwd={bwd}")
    return ",".join(parts) if parts else "none"


def parse_extra(p):
    """fwd and bwd codec of a policy text like 'fwd=topk:0.1,bwd=q8'; None for other
    forms (e.g. 'auto')."""
    fwd = bwd = "none"
    if p == "none":
        return fwd, bwd
    # split at ',' followed by fwd=/bwd=/both= (codec specs contain commas)
    for a in re.split(r",(?=(?:fwd|bwd|both)=)", p):
        m = re.fullmatch(r"(fwd|bwd|both)=(.+)", a)
        if not m or ":" in a.split("=", 1)[0]:
            return None
        if m.group(1) in ("fwd", "both"):
            fwd = m.group(2)
        if m.group(1) in ("bwd", "both"):
            bwd = m.group(2)
    return fwd, bwd


def slug(p):
    s = re.sub(r"[^A-Za-z0-9.]+", "_", p).strip("_")
    return s or "none"


class Parser(argparse.ArgumentParser):
    def error(self, message):   # exit 1 on a bad flag, like the other pipezip tools
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(1)


def build_args():
    ap = Parser(
        prog="sweep.py",
        description="Fine-tune the same base model under a grid of forward (activation) x backward "
                    "(gradient) codecs and link bandwidths; write a table (CSV + Markdown), plots and "
                    "a findings block.",
        epilog="Lists of codecs are separated by ';' because codec specs may contain ','. "
               "Every number in the outputs comes from the runs of this sweep.")
    ap.add_argument("--dp", action="store_true",
                    help="run the data-parallel codec sweep instead (examples/sweep_dp.py; its flags: "
                         "sweep_dp.py --help)")
    ap.add_argument("--quick", action="store_true",
                    help="reduced form for CI: a 2x2 grid (fwd none,aq(q4) x bwd none,q8), no extra "
                         "policies, seeds 1337,1338 (headline rows none and fwd=aq(q4),bwd=q8), a 20-step "
                         "base model, few short steps, one bandwidth")
    ap.add_argument("--out", help="output directory (default runs/sweep, or runs/sweep-quick with --quick)")
    ap.add_argument("--pipezip", default=os.environ.get("PIPEZIP", os.path.join(REPO, "build", "pipezip")),
                    help="pipezip binary (default $PIPEZIP, else build/pipezip)")
    ap.add_argument("--fwd", type=split_list, help="forward codecs of the grid, ';'-separated "
                    f"(default '{';'.join(DEFAULT_FWD)}')")
    ap.add_argument("--bwd", type=split_list, help="backward codecs of the grid, ';'-separated "
                    f"(default '{';'.join(DEFAULT_BWD)}')")
    ap.add_argument("--extra", action="append", metavar="POLICY",
                    help="extra policy outside the grid (repeatable; 'none' for no extras; default: "
                         + " ".join(DEFAULT_EXTRA) + ")")
    ap.add_argument("--seeds", type=seed_list,
                    help="seeds, comma-separated: the headline rows run once per seed (mean +- std in the "
                         "tables), the other rows with the first seed only (default "
                         f"{','.join(map(str, DEFAULT_SEEDS))}; quick: {','.join(map(str, QUICK_SEEDS))})")
    ap.add_argument("--seed", type=int, help="one seed for every run (the same as --seeds X)")
    ap.add_argument("--headline", action="append", metavar="POLICY",
                    help="headline policy, repeated over every seed; run even when outside the grid "
                         "(repeatable; replaces the default list: " + " ".join(DEFAULT_HEADLINE)
                         + ", of which only those in the grid or the extras are run)")
    ap.add_argument("--also", action="append", metavar="POLICY",
                    help="one more headline policy, added to the headline list (repeatable), e.g. "
                         "--also auto")
    ap.add_argument("--headline-only", action="store_true",
                    help="run the headline policies only (skip the rest of the grid and the extras)")
    ap.add_argument("--bandwidths", type=bandwidth_list,
                    help="link rates in Mbit/s for the speed runs (first seed only), comma-separated, or "
                         "'none' for no speed runs (default 10,100; quick: 100)")
    ap.add_argument("--steps", type=int, help="fine-tuning steps of each quality run (default 40; quick: 6)")
    ap.add_argument("--speed-steps", type=int,
                    help="measured steps of each speed run, after a 2-step first epoch (default 3; quick: 2)")
    ap.add_argument("--train-tokens", type=int,
                    help="fine-tuning set size in tokens (default 16384; quick: two steps' worth)")
    ap.add_argument("--batch", type=int, help="sequences per micro-batch (default 4; quick: 2)")
    ap.add_argument("--micro-batches", type=int, help="micro-batches per step (default 4; quick: 2)")
    ap.add_argument("--seq", type=int, help="tokens per sequence (default 128; quick: 64)")
    ap.add_argument("--lr", default="3e-4", help="peak learning rate (default 3e-4)")
    ap.add_argument("--val-batches", type=int, help="validation batches (default 32; quick: 4)")
    ap.add_argument("--stages", type=int, default=2, help="pipeline stages (default 2)")
    ap.add_argument("--base-steps", type=int, help="pre-training steps of the base model (default 300; quick: 20)")
    ap.add_argument("--init", help="start every run from this checkpoint instead of the example's base model")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "data"),
                    help="directory of the built-in corpora pydoc_*.bin, fortunes_*.bin (default data/)")
    ap.add_argument("--cache", help="cache of base models and training subsets (default runs/cache)")
    ap.add_argument("--no-plots", action="store_true", help="skip the PNG plots (no matplotlib needed)")
    ap.add_argument("--tables-only", action="store_true",
                    help="run no fine-tuning (the base model is still found, or made when not cached): "
                         "write the tables, plots and findings from the finished runs in --out "
                         "(as --resume would reuse them); a policy's missing seeds are left out of its row "
                         "(the seeds column says which it has) and a policy with none is left out")
    ap.add_argument("--resume", action="store_true",
                    help="reuse the finished runs of an earlier sweep into the same --out with the same "
                         "settings: only missing runs execute (a run is redone when its report is missing "
                         "or its arguments differ; the pipezip binary, the repository and --out may have "
                         "moved). Add seeds or policies this way, e.g. --resume --also auto")
    return ap


def main():
    if "--dp" in sys.argv[1:]:   # the data-parallel sweep is its own script, with its own flags
        rest = [x for x in sys.argv[1:] if x != "--dp"]
        os.execv(sys.executable, [sys.executable, os.path.join(REPO, "examples", "sweep_dp.py")] + rest)
    ap = build_args()
    a = ap.parse_args()
    q = a.quick
    a.fwd = (QUICK_FWD if q else DEFAULT_FWD) if a.fwd is None else a.fwd
    a.bwd = (QUICK_BWD if q else DEFAULT_BWD) if a.bwd is None else a.bwd
    if a.extra is None:
        a.extra = [] if q else list(DEFAULT_EXTRA)
    a.extra = [p for p in a.extra if p != "none"]
    a.bandwidths = ([100.0] if q else [10.0, 100.0]) if a.bandwidths is None else a.bandwidths
    if a.seed is not None and a.seeds is not None:
        ap.error("give --seeds or --seed, not both")
    a.seeds = [a.seed] if a.seed is not None else (QUICK_SEEDS if q else DEFAULT_SEEDS) if a.seeds is None else a.seeds
    a.steps = (6 if q else 40) if a.steps is None else a.steps
    a.speed_steps = (2 if q else 3) if a.speed_steps is None else a.speed_steps
    a.batch = (2 if q else 4) if a.batch is None else a.batch
    a.micro_batches = (2 if q else 4) if a.micro_batches is None else a.micro_batches
    a.seq = (64 if q else 128) if a.seq is None else a.seq
    # quick: two steps' worth of samples, so that 6 steps see each sample 3 times
    a.train_tokens = (2 * a.batch * a.micro_batches * a.seq + 1 if q else 16384) if a.train_tokens is None else a.train_tokens
    a.val_batches = (4 if q else 32) if a.val_batches is None else a.val_batches
    a.base_steps = (20 if q else 300) if a.base_steps is None else a.base_steps
    a.out = os.path.abspath(a.out or os.path.join(REPO, "runs", "sweep-quick" if q else "sweep"))
    a.cache = os.path.abspath(a.cache) if a.cache else None
    a.data_dir = os.path.abspath(a.data_dir)
    for name in ("steps", "speed_steps", "train_tokens", "batch", "micro_batches", "seq", "val_batches",
                 "stages", "base_steps"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.stages < 2:
        ap.error("--stages must be at least 2 (compression happens between stages)")
    if not os.access(a.pipezip, os.X_OK):
        die(f"pipezip binary not found at '{a.pipezip}' (build it: bash tools/setup.sh; or pass --pipezip)")

    global RESUME, PORTABLE, TABLES_ONLY
    RESUME = a.resume or a.tables_only
    TABLES_ONLY = a.tables_only
    # run arguments compared by --resume: paths under --out and the repository
    # spelled relative to them, the binary left out
    PORTABLE = [(a.out, "<out>"), (REPO, "<repo>")]
    plt = None
    if not a.no_plots:
        plt = load_matplotlib()

    # policies: the headline rows (every seed), then the rest of the cross grid
    # and the extras (first seed only)
    others = []   # (policy text, fwd, bwd, kind)
    for f in a.fwd:
        for b in a.bwd:
            others.append((policy_text(f, b), f, b, "grid"))
    for p in a.extra:
        if any(x[0] == p for x in others):
            continue
        fb = parse_extra(p) or (p, p)
        others.append((p, fb[0], fb[1], "extra"))
    known = {x[0]: x for x in others}
    if a.headline is None:
        head = [p for p in DEFAULT_HEADLINE if p in known]
    else:
        head = list(a.headline)
    head += a.also or []
    policies = []   # (policy text, fwd, bwd, kind, seeds)
    for p in head:
        if any(x[0] == p for x in policies):
            continue
        fb = parse_extra(p) or (p, p)
        kind = known[p][3] if p in known else "extra"
        policies.append((p, fb[0], fb[1], kind, list(a.seeds)))
    if not a.headline_only:
        policies += [x + (a.seeds[:1],) for x in others if not any(y[0] == x[0] for y in policies)]
    if not policies:
        die("no policies to run")
    if a.tables_only and not os.path.exists(os.path.join(a.out, "settings.json")):
        die(f"--tables-only: no sweep in {a.out}")

    os.makedirs(os.path.join(a.out, "runs"), exist_ok=True)
    t_start = time.time()
    # what every run depends on; --resume reuses runs only when these match
    # (the seeds and bandwidths are part of each run's own arguments)
    settings = {k: portable(getattr(a, k)) for k in ("steps", "speed_steps", "train_tokens", "batch",
                                                     "micro_batches", "seq", "lr", "val_batches", "stages",
                                                     "base_steps", "init", "data_dir")}
    spath = os.path.join(a.out, "settings.json")
    if a.resume and os.path.exists(spath):
        with open(spath) as fh:
            old = json.load(fh)
        if old != settings:
            diff = ", ".join(f"{k}: {old.get(k)} -> {v}" for k, v in settings.items() if old.get(k) != v)
            die(f"--resume: {a.out} holds a sweep with other settings ({diff}); use another --out")
    with open(spath, "w") as fh:
        json.dump(settings, fh, indent=1)
    common = ["--pipezip", a.pipezip, "--stages", str(a.stages), "--batch", str(a.batch),
              "--micro-batches", str(a.micro_batches), "--seq", str(a.seq), "--lr", a.lr,
              "--quiet", "--no-save",
              "--data", os.path.join(a.data_dir, "fortunes_train.bin"),
              "--val-data", os.path.join(a.data_dir, "fortunes_val.bin")]
    base_flags = ["--base-steps", str(a.base_steps),
                  "--base-data", os.path.join(a.data_dir, "pydoc_train.bin"),
                  "--base-val-data", os.path.join(a.data_dir, "pydoc_val.bin")]
    if a.cache:
        base_flags += ["--cache", a.cache]
    common += ["--cache", a.cache] if a.cache else []

    if a.init:
        base = os.path.abspath(a.init)
        if not os.path.isfile(base):
            die(f"--init: no such file '{a.init}'")
    else:
        log(f"base model: bash examples/gpt_finetune.sh --base-only --base-steps {a.base_steps}")
        r = subprocess.run(["bash", EXAMPLE, "--base-only", "--pipezip", a.pipezip] + base_flags,
                           stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            die("making the base model failed (see above)")
        base = r.stdout.strip().splitlines()[-1]
    log(f"base model {base}")
    nq = sum(len(x[4]) for x in policies)
    log(f"{len(policies)} policies ({sum(1 for x in policies if len(x[4]) > 1)} over seeds "
        f"{','.join(map(str, a.seeds))}): {nq} quality runs of {a.steps} steps + "
        f"{len(policies) * len(a.bandwidths)} speed runs"
        + (f" at {', '.join(fmt_bw(b) for b in a.bandwidths)} Mbit/s" if a.bandwidths else "")
        + f"; output in {a.out}")

    # the speed runs' training set: two steps' worth of samples, so that step 3 on is steady state
    speed_tokens = 2 * a.batch * a.micro_batches * a.seq + 1

    columns = COLUMNS_HEAD + [f"tok_s_{fmt_bw(b)}mbps" for b in a.bandwidths] + COLUMNS_TAIL
    results = []
    before = None
    for i, (pol, fwd, bwd, kind, seeds) in enumerate(policies):
        d = os.path.join(a.out, "runs", slug(pol))
        t0 = time.time()
        row = {"policy": pol, "fwd": fwd, "bwd": bwd, "kind": kind, "per_seed": []}
        for seed in seeds:
            log(f"[{i + 1}/{len(policies)}] {pol}: quality run, seed {seed}")
            # the starting model's validation loss is the same for every policy and
            # seed: evaluated once, in the first run
            once = ["--no-before-eval"] if before is not None else []
            rep = run_example(common + once + ["--seed", str(seed), "--init", base, "--compress", pol,
                                               "--steps", str(a.steps), "--train-tokens", str(a.train_tokens),
                                               "--val-batches", str(a.val_batches), "--val-every", str(a.steps),
                                               "--eval-compress", "on",
                                               "--out", os.path.join(d, f"seed-{seed}", "quality")])
            if rep is None:   # --tables-only and this run is not there
                log(f"[{i + 1}/{len(policies)}] {pol}, seed {seed}: no finished run, left out")
                continue
            if before is None:
                before = rep["val_loss_before"]
            vu, vc = rep["val_loss_after_uncompressed"], rep["val_loss_after_compressed"]
            if vc is None:   # no forward codec: evaluation is the same either way
                vc = vu
            sr = {"seed": seed, "val_loss_compressed": vc, "val_loss_uncompressed": vu,
                  "train_loss_final": rep["final_train_loss"], "tok_s_unlimited": rep["tok_s_median"],
                  "policy_canonical": rep["policy"],
                  "curve": read_curve(os.path.join(d, f"seed-{seed}", "quality", "train.jsonl")),
                  "val_curve": rep["val_curve"]}
            for dname in ("fwd", "bwd"):
                dd = rep["direction"][dname]
                sr[f"{dname}_raw_bytes"] = dd["raw_bytes"]
                sr[f"{dname}_wire_bytes"] = dd["wire_bytes"]
                sr[f"{dname}_bits_per_elem"] = dd["bits_per_elem"]
            row["per_seed"].append(sr)
            log(f"[{i + 1}/{len(policies)}] {pol}, seed {seed}: val loss {fnum(vc)} (compressed eval) / "
                f"{fnum(vu)} (uncompressed)")
        if not row["per_seed"]:
            continue
        aggregate(row, before)
        for bw in a.bandwidths:   # the first seed only: tokens/s do not depend on it
            log(f"[{i + 1}/{len(policies)}] {pol}: speed run at {fmt_bw(bw)} Mbit/s")
            sd = os.path.join(d, f"speed-{fmt_bw(bw)}")
            if run_example(common + ["--seed", str(seeds[0]), "--init", base, "--compress", pol,
                                     "--steps", str(2 + a.speed_steps),
                                     "--train-tokens", str(speed_tokens), "--val-batches", "0",
                                     "--link-mbps", fmt_bw(bw), "--error-metrics", "off", "--out", sd]) is None:
                continue
            steady = [r for r in read_steps(os.path.join(sd, "train.jsonl")) if r["step"] > 2]
            if not steady:
                die(f"{pol}: speed run at {fmt_bw(bw)} Mbit/s logged no steps after the first epoch")
            row[f"tok_s_{fmt_bw(bw)}mbps"] = statistics.median(r["tok_s"] for r in steady)
            if bw == a.bandwidths[0]:
                for dname in ("fwd", "bwd"):
                    raw = sum(r.get(f"{dname}_raw", 0) for r in steady)
                    wire = sum(r.get(f"{dname}_wire", 0) for r in steady)
                    row[f"{dname}_bits_steady"] = 32.0 * wire / raw if raw else None
        results.append(row)
        write_tables(a.out, results, columns)   # after every policy: a stopped sweep keeps its rows
        log(f"[{i + 1}/{len(policies)}] {pol}: val loss {fmt_ms(row, 'val_loss_compressed')} (compressed eval) / "
            f"{fmt_ms(row, 'val_loss_uncompressed')} (uncompressed) over {len(seeds)} seed(s), "
            f"{fnum(row['tok_s_unlimited'], 0)} tok/s unlimited, {time.time() - t0:.0f} s")

    plots = []
    if plt is not None:
        plots = make_plots(plt, a.out, results, a)
    findings = compute_findings(results, a)
    with open(os.path.join(a.out, "findings.md"), "w") as fh:
        fh.write(findings_markdown(findings, a, base, time.time() - t_start))
    with open(os.path.join(a.out, "results.md")) as fh:
        print(fh.read())
    print(findings_text(findings))
    for p in plots:
        print(f"plot: {p}")
    print(f"sweep: {len(results)} policies in {(time.time() - t_start) / 60:.1f} min; "
          f"tables {a.out}/results.csv, {a.out}/results.md; findings {a.out}/findings.md")


def portable(v):
    """v with the paths under --out and the repository spelled relative to them."""
    if isinstance(v, list):
        return [portable(x) for x in v]
    if isinstance(v, str):
        for prefix, name in PORTABLE:
            if v == prefix or v.startswith(prefix + os.sep):
                return name + v[len(prefix):]
    return v


def mean_std(xs):
    """Mean and sample standard deviation (n - 1) of the numbers in xs; std None for n < 2."""
    xs = [x for x in xs if x is not None]
    if not xs:
        return None, None
    return statistics.fmean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def aggregate(row, before):
    """Fill a policy's row from its per-seed runs: mean and std of the losses, mean of the rest."""
    ps = row["per_seed"]
    row["seeds"] = " ".join(str(r["seed"]) for r in ps)
    row["n_seeds"] = len(ps)
    row["val_loss_before"] = before
    for c in ("val_loss_compressed", "val_loss_uncompressed", "train_loss_final"):
        row[c], row[c + "_std"] = mean_std([r[c] for r in ps])
    for c in ("tok_s_unlimited", "fwd_raw_bytes", "fwd_wire_bytes", "bwd_raw_bytes", "bwd_wire_bytes",
              "fwd_bits_per_elem", "bwd_bits_per_elem"):
        row[c] = mean_std([r[c] for r in ps])[0]
    row["policy_canonical"] = ps[0]["policy_canonical"]


def fmt_ms(row, c="val_loss_uncompressed", nd=4):
    """'2.5301 +- 0.0012' (mean +- std over seeds), or the single value."""
    if row.get(c) is None:
        return "n/a"
    if row.get(c + "_std") is None:
        return fnum(row[c], nd)
    return f"{row[c]:.{nd}f} ± {row[c + '_std']:.{nd}f}"


def load_matplotlib():
    try:
        import matplotlib
    except ImportError:
        # Debian's python3-matplotlib lives in the system interpreter; another
        # python3 first in PATH (pyenv, venv) may not see it: run under it.
        sysp = "/usr/bin/python3"
        if os.path.realpath(sys.executable) != os.path.realpath(sysp) and os.access(sysp, os.X_OK) and \
                subprocess.run([sysp, "-c", "import matplotlib"], capture_output=True).returncode == 0:
            os.execv(sysp, [sysp] + sys.argv)
        die("matplotlib is not installed (Debian: apt-get install python3-matplotlib; "
            "or run with --no-plots)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


RESUME = False
TABLES_ONLY = False
PORTABLE = []


def run_example(args):
    out = args[args.index("--out") + 1]
    rpath = os.path.join(out, "report.json")
    key = portable([x for i, x in enumerate(args) if "--pipezip" not in args[max(i - 1, 0):i + 1]])
    if RESUME and os.path.exists(rpath) and os.path.exists(os.path.join(out, "args.json")):
        with open(os.path.join(out, "args.json")) as fh:
            if json.load(fh) == key:
                log(f"  reusing {out}")
                with open(rpath) as fh2:
                    return json.load(fh2)
    if TABLES_ONLY:
        return None
    os.makedirs(out, exist_ok=True)
    if os.path.exists(rpath):
        os.remove(rpath)
    with open(os.path.join(out, "args.json"), "w") as fh:
        json.dump(key, fh)
    r = subprocess.run(["bash", EXAMPLE] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.stderr.write(r.stderr[-4000:])
        die(f"run failed: bash examples/gpt_finetune.sh {' '.join(args)}")
    with open(os.path.join(out, "report.json")) as fh:
        return json.load(fh)


def read_steps(path):
    rows = []
    with open(path) as fh:
        for line in fh:
            if line.startswith("{"):
                r = json.loads(line)
                if "loss" in r and "step" in r:
                    rows.append(r)
    return rows


def read_curve(path):
    return [(r["step"], r["loss"]) for r in read_steps(path)]


def fnum(x, nd=4):
    if x is None:
        return "n/a"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{nd}f}"


def cell(col, v):
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if col == "seed" or col.endswith("_bytes"):
        return str(int(v))
    if col.startswith("tok_s"):
        return f"{v:.1f}"
    if "bits" in col:
        return f"{v:.3f}"
    return f"{v:.5f}"


def write_tables(out, results, columns):
    with open(os.path.join(out, "results.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(columns)
        for r in results:
            w.writerow([cell(c, r.get(c)) for c in columns])
    with open(os.path.join(out, "results_seeds.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(SEED_COLUMNS)
        for r in results:
            for sr in r["per_seed"]:
                w.writerow([cell(c, r["policy"] if c == "policy" else sr.get(c)) for c in SEED_COLUMNS])
    ref = find(results, "none", "none")
    md_cols = ["policy", "n_seeds", "val_loss_compressed", "val_loss_uncompressed", "vs_none"] + \
        [c for c in columns if c.startswith("tok_s")] + \
        ["fwd_wire_bytes", "bwd_wire_bytes", "fwd_bits_per_elem", "bwd_bits_per_elem",
         "fwd_bits_steady", "bwd_bits_steady"]
    heads = {"n_seeds": "seeds", "val_loss_compressed": "val loss (eval compressed)",
             "val_loss_uncompressed": "val loss (uncompressed)", "vs_none": "vs none",
             "tok_s_unlimited": "tok/s (no limit)", "fwd_wire_bytes": "fwd MB sent", "bwd_wire_bytes": "bwd MB sent",
             "fwd_bits_per_elem": "fwd bits/elem", "bwd_bits_per_elem": "bwd bits/elem",
             "fwd_bits_steady": "fwd bits/elem steady", "bwd_bits_steady": "bwd bits/elem steady"}
    with open(os.path.join(out, "results.md"), "w") as fh:
        names = [heads.get(c, re.sub(r"tok_s_(.*)mbps", r"tok/s \1 Mbit/s", c)) for c in md_cols]
        fh.write("| " + " | ".join(names) + " |\n")
        fh.write("|" + "---|" * len(md_cols) + "\n")
        for r in results:
            vals = []
            for c in md_cols:
                v = r.get(c)
                if c == "policy":
                    vals.append(f"`{v}`")
                elif c == "n_seeds":
                    vals.append(str(v))
                elif c == "vs_none":
                    vals.append("" if ref is None else pct(rel(r["val_loss_uncompressed"],
                                                                ref["val_loss_uncompressed"])))
                elif c.endswith("_bytes"):
                    vals.append("" if v is None else f"{v / 1e6:.1f}")
                elif c.startswith("tok_s"):
                    vals.append("" if v is None else f"{v:.0f}")
                elif "bits" in c:
                    vals.append("" if v is None else f"{v:.2f}")
                else:
                    vals.append(fmt_ms(r, c))
            fh.write("| " + " | ".join(vals) + " |\n")


# ---- findings ------------------------------------------------------------------

def find(results, fwd=None, bwd=None, policy=None):
    for r in results:
        if policy is not None and r["policy"] == policy:
            return r
        if policy is None and r["fwd"] == fwd and r["bwd"] == bwd:
            return r
    return None


def rel(x, ref):
    return (x - ref) / ref


def pct(x):
    return f"{100 * x:+.2f}%"


SPREAD_RULE = ("A claim that row A's validation loss is lower than row B's (times 1 + m for a claim "
               "'within m of B') holds when d = (1 + m) * mean_B - mean_A exceeds the seed spread "
               "s = std_A + (1 + m) * std_B (std: sample standard deviation over the row's seeds), does "
               "not hold when d < -s, and is within the seed spread otherwise; rows with fewer than 2 "
               "seeds are not judged.")


def judge_lower(ra, rb, c="val_loss_uncompressed", margin=0.0):
    """Verdict of the claim 'row ra's mean of c is lower than (1 + margin) x row rb's' by the
    seed-spread rule (SPREAD_RULE). Returns (verdict, d, s)."""
    k = 1.0 + margin
    d = k * rb[c] - ra[c]
    if ra["n_seeds"] < 2 or rb["n_seeds"] < 2:
        return "not judged (1 seed)", d, None
    s = ra[c + "_std"] + k * rb[c + "_std"]
    if d > s:
        return "holds", d, s
    if d < -s:
        return "does not hold", d, s
    return "within the seed spread", d, s


def both(v1, v2):
    """Verdict of a claim made of two parts."""
    for v in ("not measured", "not judged (1 seed)"):
        if v in (v1, v2):
            return v
    if "does not hold" in (v1, v2):
        return "does not hold"
    return "holds" if v1 == v2 == "holds" else "within the seed spread"


def majority(vs):
    n = len(vs)
    for v in ("holds", "does not hold"):
        if sum(1 for x in vs if x == v) > n / 2:
            return v
    if all(v == "not judged (1 seed)" for v in vs):
        return "not judged (1 seed)"
    return "within the seed spread"


def ds(d, s):
    return f"d = {d:+.4f}" + ("" if s is None else f", s = {s:.4f}")


def compute_findings(results, a):
    """List of (title, verdict, detail); verdict 'holds', 'does not hold', 'within the seed
    spread', 'not judged (1 seed)' or 'not measured' (SPREAD_RULE)."""
    F = []
    ref = find(results, "none", "none")
    if ref is None:
        return [("all findings", "not measured", "the grid has no fwd=none,bwd=none row to compare with")]
    base_u = ref["val_loss_uncompressed"]
    U = "val_loss_uncompressed"

    def ms(r, c=U):
        return f"{r['policy']} {fmt_ms(r, c)}"

    def finding(title, got, need):
        """Appends (title, verdict, detail): got's (verdict, detail), or, where got is None (the rows it
        needs are missing), 'not measured' and need."""
        F.append((title,) + (got or ("not measured", need)))

    # gradients need milder compression than activations: the same codec on one direction only
    pairs = []
    for c in sorted(set(r["fwd"] for r in results) & set(r["bwd"] for r in results) - {"none"}):
        rf, rb = find(results, c, "none"), find(results, "none", c)
        if rf and rb:
            pairs.append((c, rf, rb))
    got = None
    if pairs:
        # judged on the most aggressive common codec (fewest bits) that has seeds on both sides
        judged = [p for p in pairs if p[1]["n_seeds"] > 1 and p[2]["n_seeds"] > 1] or pairs
        c, rf, rb = min(judged, key=lambda p: p[1]["fwd_bits_per_elem"])
        v, d, s = judge_lower(rf, rb)
        det = "; ".join(f"{c_}: activations only {fmt_ms(f_, U)} ({pct(rel(f_[U], base_u))}), gradients only "
                        f"{fmt_ms(b_, U)} ({pct(rel(b_[U], base_u))})" for c_, f_, b_ in pairs)
        got = (v,
               f"val loss (uncompressed evaluation; none {fmt_ms(ref)}) with one direction compressed: {det}. "
               f"Judged at {c}: claim fwd-only lower than bwd-only, {ds(d, s)}.")
    finding("Gradients need milder compression than activations", got,
            "needs the same codec as fwd-only and bwd-only rows")

    # hadamard() before q<b> on activations
    for r in results:
        m = re.fullmatch(r"hadamard\((.+)\)", r["fwd"]) if r["bwd"] == "none" else None
        plain = find(results, m.group(1), "none") if m else None
        if not m:
            continue
        title = f"hadamard() lowers the loss of {m.group(1)} on activations"
        if not plain:
            F.append((title, "not measured", f"needs a fwd={m.group(1)} row"))
            continue
        v, d, s = judge_lower(r, plain)
        F.append((title, v, f"{ms(r)} vs {ms(plain)} (uncompressed evaluation; none {fmt_ms(ref)}); "
                            f"through the codec at evaluation {fmt_ms(r, 'val_loss_compressed')} vs "
                            f"{fmt_ms(plain, 'val_loss_compressed')}; {ds(d, s)}."))

    # TAH-Quant against q4 on activations
    q4 = find(results, "q4", "none")
    for r in results:
        m = re.fullmatch(r"tah:([0-9.]+).*", r["fwd"]) if r["bwd"] == "none" else None
        if not m:
            continue
        title = f"{r['fwd']} on activations beats q4 with fewer bits"
        if not q4:
            F.append((title, "not measured", "needs a fwd=q4 row"))
            continue
        v, d, s = judge_lower(r, q4)
        F.append((title, v, f"{ms(r)} at {r['fwd_bits_per_elem']:.2f} bits/elem vs {ms(q4)} at "
                            f"{q4['fwd_bits_per_elem']:.2f} (uncompressed evaluation; none {fmt_ms(ref)}); "
                            f"{ds(d, s)}."))

    # AQ-SGD against the plain quantizer (gradients at q8)
    for inner in ("q4",):
        ra, rp = find(results, f"aq({inner})", "q8"), find(results, inner, "q8")
        title = f"aq({inner}) beats plain {inner} on activations (gradients q8)"
        if ra and rp:
            v, d, s = judge_lower(ra, rp)
            F.append((title, v, f"{ms(ra)} vs {ms(rp)}; {ds(d, s)}."))
        else:
            F.append((title, "not measured", f"needs fwd=aq({inner}),bwd=q8 and fwd={inner},bwd=q8"))

    # TopK rows (activations only)
    topk = []
    for r in results:
        m = re.fullmatch(r"topk:([0-9.]+)", r["fwd"]) if r["bwd"] == "none" else None
        if m:
            topk.append((float(m.group(1)), r))
    topk.sort(key=lambda t: t[0])
    C = "val_loss_compressed"
    low = [(f, r) for f, r in topk if f <= 0.1]
    high = [(f, r) for f, r in topk if f >= 0.2]
    got = None
    if low and high:
        fl, rl = max(low, key=lambda t: t[1][C])
        fh_, rh = min(high, key=lambda t: t[1][C])
        v, d, s = judge_lower(rh, rl, C)
        det = "; ".join(f"topk:{f:g} {fmt_ms(r, C)} ({pct(rel(r[C], base_u))})" for f, r in topk)
        got = (v,
               f"val loss (evaluated with the same TopK) vs uncompressed {fmt_ms(ref)}: {det}. Claim: the "
               f"best fraction >= 0.2 (topk:{fh_:g}) is lower than the worst <= 0.1 (topk:{fl:g}), {ds(d, s)}.")
    finding("TopK below 10-20% hurts", got, "needs fwd=topk rows at fractions <= 0.1 and >= 0.2")
    got = None
    if topk:
        vs = []
        for f, r in topk:
            rc = dict(r, **{U: r[C], U + "_std": r.get(C + "_std")})
            vs.append(judge_lower(rc, r)[0])
        det = "; ".join(f"topk:{f:g} {fmt_ms(r, C)} with TopK at evaluation vs {fmt_ms(r, U)} without"
                        for f, r in topk)
        got = (majority(vs),
               f"{det}. Claim per fraction: evaluation through TopK is lower; verdicts {', '.join(vs)}; "
               f"the finding takes the majority.")
    finding("TopK needs compression at evaluation", got, "needs fwd=topk rows")

    # error feedback does not help training: the plain codec's loss is lower than EF's
    ef = []
    for r in results:
        for dname in ("fwd", "bwd"):
            m = re.fullmatch(r"ef\((.+)\)", r[dname])
            other = "bwd" if dname == "fwd" else "fwd"
            if m:
                plain = find(results, **{dname: m.group(1), other: r[other]})
                if plain:
                    ef.append((r, plain, judge_lower(plain, r)))
    got = None
    if ef:
        det = "; ".join(f"{ms(r)} vs {ms(p)} ({pct(rel(r[U], p[U]))}, {ds(j[1], j[2])}: {j[0]})"
                        for r, p, j in ef)
        got = (majority([j[0] for _, _, j in ef]),
               f"{det}. Claim per pair: the plain codec is lower than ef(codec); the finding takes the "
               f"majority.")
    finding("Error feedback does not help training", got, "needs ef(C) rows next to rows with C alone")

    # targets
    t1 = find(results, "aq(q4)", "q8")
    got = None
    if t1:
        v, d, s = judge_lower(t1, ref, margin=0.01)
        got = (v,
               f"{fmt_ms(t1)} vs {fmt_ms(ref)} ({pct(rel(t1[U], base_u))}); evaluated with q4 activations "
               f"{fmt_ms(t1, C)} ({pct(rel(t1[C], base_u))}); {ds(d, s)}.")
    finding("Target: fwd=aq(q4),bwd=q8 within 1% of uncompressed val loss", got, "no such row")
    t2, t3 = find(results, "aq(q2)", "q4"), find(results, "q2", "q4")
    got = None
    if t2 and t3:
        v1, d1, s1 = judge_lower(t2, ref, margin=0.02)
        v2, d2, s2 = judge_lower(t2, t3)
        got = (both(v1, v2),
               f"aq(q2)/q4 {fmt_ms(t2)} ({pct(rel(t2[U], base_u))} vs uncompressed {fmt_ms(ref)}); "
               f"q2/q4 {fmt_ms(t3)} ({pct(rel(t3[U], base_u))}). Within 2%: {ds(d1, s1)}, {v1}; better "
               f"than q2/q4: {ds(d2, s2)}, {v2}.")
    finding("Target: fwd=aq(q2),bwd=q4 within 2% and better than fwd=q2,bwd=q4", got, "needs both rows")
    ra = find(results, policy="auto")
    got = None
    if ra:
        v, d, s = judge_lower(ra, ref, margin=0.01)
        det = f"auto ({ra['policy_canonical']}) {fmt_ms(ra)} vs none {fmt_ms(ref)} ({pct(rel(ra[U], base_u))})"
        if t1:
            det += f", fwd=aq(q4),bwd=q8 {fmt_ms(t1)}"
        got = (v,
               f"{det}; wire bits/elem fwd {ra['fwd_bits_per_elem']:.2f}, bwd {ra['bwd_bits_per_elem']:.2f}; "
               f"{ds(d, s)}.")
    finding("Target: --compress auto within 1% of uncompressed val loss", got,
            "no auto row (add it with --resume --also auto)")

    # communication-bound speedup vs wire bytes (steady state; both policies have the same raw bytes);
    # one speed run per bandwidth (first seed): not judged against a seed spread
    if t1 and not a.bandwidths:
        F.append(("Target: speedup of fwd=aq(q4),bwd=q8 over none on a slow link", "not measured",
                  "no speed runs (--bandwidths none)"))
    if t1:
        for bw in a.bandwidths:
            k = f"tok_s_{fmt_bw(bw)}mbps"
            s1, s0 = t1.get(k), ref.get(k)
            f1, b1 = t1.get("fwd_bits_steady"), t1.get("bwd_bits_steady")
            f0, b0 = ref.get("fwd_bits_steady"), ref.get("bwd_bits_steady")
            if not (s1 and s0 and f1 and b1 and f0 and b0):
                continue
            speed = s1 / s0
            ratio = (f0 + b0) / (f1 + b1)
            bound = max(f0, b0) / max(f1, b1)   # full-duplex links: the direction that shrinks least
            F.append((f"Target: speedup of fwd=aq(q4),bwd=q8 over none at {fmt_bw(bw)} Mbit/s >= 80% of the wire-byte ratio",
                      "holds" if speed >= 0.8 * ratio else "does not hold",
                      f"{fnum(s1, 0)} vs {fnum(s0, 0)} tok/s = {speed:.2f}x; steady-state bits per element "
                      f"fwd {f0:.2f} -> {f1:.2f}, bwd {b0:.2f} -> {b1:.2f}: {ratio:.2f}x fewer bytes in all, "
                      f"{bound:.2f}x in the direction that shrinks least (the bound on full-duplex links; "
                      f"the uncompressed tied-embedding gradient exchange also crosses the link). "
                      f"Without a link limit: {fnum(t1['tok_s_unlimited'], 0)} vs {fnum(ref['tok_s_unlimited'], 0)} "
                      f"tok/s. Speedup = {100 * speed / ratio:.0f}% of the byte ratio, {100 * speed / bound:.0f}% "
                      f"of the full-duplex bound. Rule: holds if the speedup is at least 80% of the byte ratio "
                      f"(one speed run per policy and bandwidth, seed {a.seeds[0]})."))
    return F


def findings_text(F):
    lines = ["", "== findings (from this sweep's runs) ==", f"rule: {SPREAD_RULE}"]
    for title, verdict, det in F:
        lines.append(f"- {title}: {verdict.upper()}")
        lines.append(f"    {det}")
    return "\n".join(lines) + "\n"


def findings_markdown(F, a, base, secs):
    s = [f"# Sweep findings\n",
         f"Base model `{base}`; {a.stages} stages, {a.micro_batches} micro-batches of {a.batch} x {a.seq} "
         f"tokens per step, {a.steps} fine-tuning steps on {a.train_tokens} tokens of fortunes; headline rows "
         f"over seeds {', '.join(map(str, a.seeds))}, the other rows seed {a.seeds[0]}; "
         + (f"speed runs at {', '.join(fmt_bw(b) for b in a.bandwidths)} Mbit/s" if a.bandwidths
            else "no speed runs") + f"; {secs / 60:.1f} min in all (this invocation).\n",
         "Val losses are mean ± sample std over the seeds, relative to `none` (uncompressed both ways, "
         "uncompressed evaluation).\n", f"Rule: {SPREAD_RULE}\n"]
    for title, verdict, det in F:
        s.append(f"- **{title}: {verdict}.** {det}")
    return "\n".join(s) + "\n"


# ---- plots -----------------------------------------------------------------------

def make_plots(plt, out, results, a):
    paths = []
    ref = find(results, "none", "none")

    # headline rows: val loss relative to none, mean +- std over the seeds, each seed a dot
    head = [r for r in results if r["n_seeds"] > 1] or results
    if ref:
        R = ref["val_loss_uncompressed"]
        fig, ax = plt.subplots(figsize=(8, 0.38 * len(head) + 1.6))
        labelled = set()
        for k, r in enumerate(head):
            y = len(head) - 1 - k
            for c, color, dy, lab in (("val_loss_uncompressed", "tab:blue", 0.12, "uncompressed evaluation"),
                                      ("val_loss_compressed", "tab:orange", -0.12, "evaluation through the fwd codec")):
                if c == "val_loss_compressed" and r["fwd"] == "none":
                    continue   # the same evaluation
                m, sd = r[c], r.get(c + "_std")
                ax.errorbar([100 * rel(m, R)], [y + dy], xerr=None if sd is None else [100 * sd / R], fmt="o",
                            color=color, capsize=3, markersize=5, label=None if lab in labelled else lab)
                labelled.add(lab)
                ax.plot([100 * rel(x[c], R) for x in r["per_seed"]], [y + dy] * r["n_seeds"], "x",
                        color=color, alpha=0.6, markersize=4)
        ax.axvline(0, color="gray", linestyle="--", linewidth=1)
        ax.set_xscale("symlog", linthresh=0.5, linscale=1.5)   # linear within +-0.5%, log beyond
        xv = [100 * rel(x[c], R) for r in head for x in r["per_seed"]
              for c in ("val_loss_uncompressed", "val_loss_compressed")]
        ax.set_xlim(min(xv + [-0.2]) * 1.3, max(xv + [0.2]) * 1.5)
        ax.set_yticks(range(len(head)), labels=[r["policy"] for r in reversed(head)], fontsize=8)
        ax.set_xlabel(f"val loss vs none (%, none = {R:.4f}; linear within ±0.5%, log beyond)\n"
                      f"bars: mean ± std, x: each seed", fontsize=9)
        ax.set_title(f"Headline rows over seeds {', '.join(map(str, a.seeds))}")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(axis="x", alpha=0.3)
        fig.tight_layout()
        paths.append(os.path.join(out, "headline.png"))
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    # loss vs bits per element, one direction compressed at a time; one line per codec
    # family (q<b>, aq(q<b>), topk:<f>, ...), solid = uncompressed evaluation,
    # dotted = evaluated through the fwd codec
    fig, ax = plt.subplots(figsize=(8, 5))
    markers = "osD^v<>phX*"
    for dname, other, label, color_base in (("fwd", "bwd", "activations", 0), ("bwd", "fwd", "gradients", 5)):
        fams = {}
        for r in results:
            if r[other] == "none" and r[dname] != "none":
                fams.setdefault(re.sub(r"[0-9]+(\.[0-9]+)?", "#", r[dname]), []).append(r)
        for k, (fam, rs) in enumerate(sorted(fams.items())):
            rs.sort(key=lambda r: r[f"{dname}_bits_per_elem"])
            xs = [r[f"{dname}_bits_per_elem"] for r in rs]
            color = plt.cm.tab10((color_base + k) % 10)
            mk = markers[k % len(markers)]
            ax.errorbar(xs, [r["val_loss_uncompressed"] for r in rs],
                        yerr=[r.get("val_loss_uncompressed_std") or 0 for r in rs], marker=mk, color=color,
                        capsize=3, label=f"{label} {fam}")
            if dname == "fwd":
                ax.errorbar(xs, [r["val_loss_compressed"] for r in rs],
                            yerr=[r.get("val_loss_compressed_std") or 0 for r in rs], marker=mk, color=color,
                            linestyle=":", capsize=2, alpha=0.6, label=f"{label} {fam}, eval through it")
            for r, x in zip(rs, xs):
                ax.annotate(r[dname], (x, r["val_loss_uncompressed"]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")
    if ref:
        ax.axhline(ref["val_loss_uncompressed"], color="gray", linestyle="--", label="uncompressed")
    ax.set_xscale("log", base=2)
    ticks = [0.25, 0.5, 1, 2, 4, 8, 16, 32]
    ax.set_xticks(ticks, labels=[f"{t:g}" for t in ticks])
    ax.set_xlim(0.2, 40)
    ax.set_xlabel("bits per element sent (average over the run, log scale)")
    ax.set_ylabel("validation loss after fine-tuning")
    ax.set_title("Validation loss vs compression, one direction at a time (the other uncompressed)\n"
                 "error bars: std over seeds where a row has several", fontsize=10)
    ax.legend(fontsize=6)
    fig.tight_layout()
    paths.append(os.path.join(out, "loss_vs_bits.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # loss curves (training loss, smoothed, mean over the seeds) per policy
    fig, ax = plt.subplots(figsize=(9, 5))
    for r in results:
        by_step = {}
        for sr in r["per_seed"]:
            for st, l in sr["curve"]:
                by_step.setdefault(st, []).append(l)
        steps = sorted(by_step)
        ema, sm = None, []
        for st in steps:
            l = statistics.fmean(by_step[st])
            ema = l if ema is None else 0.8 * ema + 0.2 * l
            sm.append(ema)
        ax.plot(steps, sm, linewidth=1, label=r["policy"])
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (mean over seeds, EMA 0.8)")
    ax.set_title("Fine-tuning loss per policy")
    ax.legend(fontsize=6, ncol=2, loc="upper right")
    fig.tight_layout()
    paths.append(os.path.join(out, "loss_curves.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)

    # heatmap of the fwd x bwd grid: val loss relative to none (uncompressed eval)
    grid = [r for r in results if r["kind"] == "grid"]
    fl = [f for f in a.fwd if any(r["fwd"] == f for r in grid)]
    bl = [b for b in a.bwd if any(r["bwd"] == b for r in grid)]
    if fl and bl:
        m = [[None] * len(bl) for _ in fl]
        sd = [[None] * len(bl) for _ in fl]
        for i, f in enumerate(fl):
            for j, b in enumerate(bl):
                r = find(grid, f, b)
                if r and ref:
                    m[i][j] = 100 * rel(r["val_loss_uncompressed"], ref["val_loss_uncompressed"])
                    if r.get("val_loss_uncompressed_std") is not None:
                        sd[i][j] = 100 * r["val_loss_uncompressed_std"] / ref["val_loss_uncompressed"]
        vals = [v for row in m for v in row if v is not None]
        lim = max([abs(v) for v in vals] + [0.1])
        fig, ax = plt.subplots(figsize=(1.4 * len(bl) + 2.5, 0.7 * len(fl) + 2))
        im = ax.imshow([[v if v is not None else float("nan") for v in row] for row in m],
                       cmap="RdYlGn_r", vmin=-lim, vmax=lim, aspect="auto")
        for i in range(len(fl)):
            for j in range(len(bl)):
                if m[i][j] is not None:
                    t = f"{m[i][j]:+.2f}%" + ("" if sd[i][j] is None else f"\n±{sd[i][j]:.2f}")
                    ax.text(j, i, t, ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(bl)), labels=bl)
        ax.set_yticks(range(len(fl)), labels=fl)
        ax.set_xlabel("backward codec (gradients)")
        ax.set_ylabel("forward codec (activations)")
        ax.set_title("Val loss vs uncompressed (uncompressed evaluation;\n± std over seeds where a row has several)",
                     fontsize=9)
        fig.colorbar(im, ax=ax, label="%")
        fig.tight_layout()
        paths.append(os.path.join(out, "heatmap.png"))
        fig.savefig(paths[-1], dpi=110)
        plt.close(fig)

    # tokens/s per bandwidth
    if not a.bandwidths:
        return paths
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = list(a.bandwidths)
    for r in results:
        ys = [r.get(f"tok_s_{fmt_bw(b)}mbps") for b in xs]
        ax.plot(xs, ys, marker="o", linewidth=1, label=r["policy"])
    ax.set_xscale("log")
    ax.set_xlabel("link rate (Mbit/s)")
    ax.set_ylabel("tokens/s (steady state)")
    ax.set_title("Throughput under a simulated link")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    paths.append(os.path.join(out, "speed.png"))
    fig.savefig(paths[-1], dpi=110)
    plt.close(fig)
    return paths


if __name__ == "__main__":
    main()
