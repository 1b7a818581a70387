#!/usr/bin/env bash
# Smoke test of the data-parallel sweep (pipezip sweep --dp, examples/sweep_dp.py
# --quick): tiny preset, S=1 x D=2 (allgather; sign+EF twophase) and D=4
# (twophase), 4 steps, seeds 1337,1338, codecs none, sign+EF, q4 and 1bit-adam
# (--dp-compress-what momentum, only with a warm-up: 1 step), on a corpus
# tokenized from pipezip's own sources. Checks the table's structure and that
# its values come from the runs: results.csv has those rows and columns, the
# numbers are finite, uncompressed has dp_var 0 exactly and 32 bits per
# element, sign+EF and q4 a dp_var > 0 and fewer bits (sign about 1, q4 about
# 4), every row has a validation loss with a spread over 2 seeds, and
# findings.md states the rule and the verdicts (D=2 with measured speed runs
# at --dp-link-mbps 100, whose uncompressed step is the slowest).
#   usage: sweep_dp_smoke.sh PATH/TO/pipezip
set -u
pz="$1"
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

cat "$repo"/runtime/*/*.c > "$dir/text.txt"
"$pz" tokenize --out "$dir/train.bin" "$dir/text.txt" > /dev/null || exit 1
fails=0
for D in 2 4; do
  out="$dir/sweep-d$D"
  link=100; [ "$D" = 2 ] || link=0   # the speed runs once (CI time)
  if ! "$pz" sweep --dp --quick --replicas "$D" --threads 1 --link-mbps "$link" --out "$out" --data "$dir/train.bin" \
       --val-data "$dir/train.bin" > "$dir/d$D.out" 2> "$dir/d$D.err"; then
    tail -n 20 "$dir/d$D.err"; echo "FAIL: sweep --dp --quick --replicas $D exited non-zero"; fails=$((fails + 1)); continue
  fi
  python3 - "$out" "$D" <<'PY' || fails=$((fails + 1))
import csv, math, os, sys
out, D = sys.argv[1], int(sys.argv[2])
ok = True
def fail(msg):
    global ok
    print(f"FAIL (D={D}):", msg); ok = False
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
cols = ["codec", "spec", "reduce", "seeds", "val_loss", "val_loss_std", "val_loss_vs_none_pct", "dp_wire",
        "bits", "dp_var", "dp_var_std", "step_ms", "warmup"]
if not rows or list(rows[0].keys()) != cols:
    fail(f"columns {list(rows[0].keys()) if rows else None}, expected {cols}")
by = {r["codec"]: r for r in rows if r.get("warmup") == "0"}
if sorted(by) != ["none", "q4", "sign+EF"]:
    fail(f"rows {sorted(by)}, expected none, q4, sign+EF")
num = lambda r, c: float(r[c])
for name, r in by.items():
    if r["seeds"] != "1337 1338":
        fail(f"{name}: seeds '{r['seeds']}'")
    for c in ("val_loss", "val_loss_std", "dp_wire", "bits", "dp_var", "step_ms"):
        try:
            v = num(r, c)
        except ValueError:
            fail(f"{name}: {c} = '{r[c]}' is not a number"); continue
        if not math.isfinite(v) or v < 0:
            fail(f"{name}: {c} = {v}")
    if name != "none" and r["spec"] == "":
        fail(f"{name}: no codec spec")
if ok:
    n, s, q = by["none"], by["sign+EF"], by["q4"]
    if num(n, "dp_var") != 0.0:
        fail(f"uncompressed dp_var {n['dp_var']}, expected 0 exactly")
    if num(n, "bits") != 32.0 or num(n, "val_loss_vs_none_pct") != 0.0:
        fail(f"uncompressed bits {n['bits']} / change {n['val_loss_vs_none_pct']}, expected 32 / 0")
    for r, lo, hi in ((s, 0.9, 1.3), (q, 3.9, 4.5)):
        if not num(r, "dp_var") > 0:
            fail(f"{r['codec']}: dp_var {r['dp_var']}, expected > 0 (a compressed average strays)")
        if not lo <= num(r, "bits") <= hi:
            fail(f"{r['codec']}: {r['bits']} bits per element, expected {lo}..{hi}")
        if not num(r, "dp_wire") < num(n, "dp_wire"):
            fail(f"{r['codec']}: dp_wire {r['dp_wire']} not below uncompressed {n['dp_wire']}")
    if s["reduce"] != "twophase" or q["reduce"] != ("allgather" if D == 2 else "twophase"):
        fail(f"reductions sign+EF {s['reduce']}, q4 {q['reduce']}")
    if not num(n, "val_loss_std") > 0:
        fail("uncompressed: no spread over 2 seeds (the seeds did not change the runs?)")
    # 1-bit Adam runs only with a warm-up: 4 steps try --dp-warmup 1
    ob = [r for r in rows if r["codec"] == "1bit-adam"]
    if not ob or ob[0]["warmup"] != "1" or ob[0]["reduce"] != "twophase" or not 0.9 <= num(ob[0], "bits") <= 1.3:
        fail(f"1bit-adam: rows {ob}, expected one at --dp-warmup 1, twophase, about 1 bit per element")
fm = open(os.path.join(out, "findings.md")).read()
if D == 2 and "compression pays for: sign+EF, q4" not in fm:
    fail("findings.md: at 100 Mbit/s sign+EF and q4 should beat uncompressed (1 MB per step: 80 ms on the link)")
for want in ("Rule: A claim", "Quality: q4 within 1%", "Quality: sign+EF within 2%", "Slow link",
             "1-bit (sign+EF, twophase) needs no warm-up", "1-bit (1-bit Adam, momentum through sign+EF",
             "Quality: 1bit-adam within 2%"):
    if want not in fm:
        fail(f"findings.md lacks '{want}'")
md = open(os.path.join(out, "results.md")).read().strip().splitlines()
if len(md) != 2 + len(rows):
    fail(f"results.md has {len(md)} lines for {len(rows)} rows")
if ok:
    print(f"ok (D={D}): {len(rows)} rows; none dp_var 0, sign+EF {s['dp_var']} at {s['bits']} bits, "
          f"q4 {q['dp_var']} at {q['bits']} bits")
sys.exit(0 if ok else 1)
PY
  grep -q '^== findings' "$dir/d$D.out" || { echo "FAIL: D=$D: no findings block on stdout"; fails=$((fails + 1)); }
done
[ "$fails" = 0 ] && echo "sweep --dp smoke: all passed"
[ "$fails" = 0 ]
