#!/usr/bin/env bash
# Smoke test of the compression sweep (examples/sweep.py --quick): builds the
# built-in corpora into a temporary directory, runs the quick sweep there (a
# 2x2 grid of fwd x bwd codecs on a 20-step base model, one bandwidth; the
# headline rows none and fwd=aq(q4),bwd=q8 over seeds 1337,1338) and checks its
# outputs: the CSV has one row per grid cell and the expected columns, every
# number in it is finite and positive, the headline rows have 2 seeds and a
# standard deviation (the others 1 seed and none), results_seeds.csv has one
# row per run, the Markdown table and the findings exist, and every plot is a
# non-empty PNG.
#   usage: sweep_smoke.sh [--pipezip] PATH/TO/pipezip
# Exit 77 (skipped) when the corpus packages or matplotlib are missing.
set -u
pz=""
while [ $# -gt 0 ]; do
  case $1 in
    --pipezip) pz=${2:-}; shift 2 ;;
    --pipezip=*) pz=${1#*=}; shift ;;
    *) pz=$1; shift ;;
  esac
done
[ -n "$pz" ] && [ -x "$pz" ] || { echo "usage: sweep_smoke.sh [--pipezip] PATH/TO/pipezip"; exit 1; }
pz=$(cd "$(dirname "$pz")" && pwd)/$(basename "$pz")
repo=$(cd "$(dirname "$0")/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# the sweep re-runs itself under /usr/bin/python3 when that one has matplotlib
if ! python3 -c 'import matplotlib' 2>/dev/null && ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: matplotlib missing (apt-get install python3-matplotlib)"; exit 77
fi
if [ ! -d /usr/share/doc/python3.11/html/_sources ] || [ ! -d /usr/share/games/fortunes ]; then
  echo "SKIP: corpus packages missing (apt-get install python3.11-doc fortunes)"; exit 77
fi
bash "$repo/tools/make_corpus.sh" "$dir/data" "$pz" > "$dir/corpus.log" 2>&1 ||
  { cat "$dir/corpus.log"; echo "FAIL: make_corpus.sh"; exit 1; }

start=$SECONDS
if ! python3 "$repo/examples/sweep.py" --quick --pipezip "$pz" --out "$dir/sweep" \
     --data-dir "$dir/data" --cache "$dir/cache" > "$dir/sweep.out" 2> "$dir/sweep.err"; then
  tail -n 40 "$dir/sweep.err"; cat "$dir/sweep.out"; echo "FAIL: sweep.py --quick exited non-zero"; exit 1
fi
echo "ok: sweep --quick ran in $((SECONDS - start)) s"

fails=0
python3 - "$dir/sweep" <<'PY' || fails=$((fails + 1))
import csv, math, os, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(out, "results.csv"))))
ok = True
def fail(msg):
    global ok
    print("FAIL:", msg); ok = False
expected = ["policy", "fwd", "bwd", "kind", "seeds", "val_loss_compressed", "val_loss_compressed_std",
            "val_loss_uncompressed", "val_loss_uncompressed_std", "val_loss_before", "train_loss_final",
            "train_loss_final_std", "tok_s_unlimited", "tok_s_100mbps", "fwd_raw_bytes", "fwd_wire_bytes",
            "bwd_raw_bytes", "bwd_wire_bytes", "fwd_bits_per_elem", "bwd_bits_per_elem",
            "fwd_bits_steady", "bwd_bits_steady", "policy_canonical"]
cols = list(rows[0].keys()) if rows else []
if cols != expected:
    fail(f"columns {cols}, expected {expected}")
if len(rows) != 4:
    fail(f"{len(rows)} rows, expected 4 (2 fwd x 2 bwd codecs)")
cells = {(r["fwd"], r["bwd"]) for r in rows}
if cells != {(f, b) for f in ("none", "aq(q4)") for b in ("none", "q8")}:
    fail(f"grid cells {sorted(cells)}")
stds = [c for c in expected if c.endswith("_std")]
numeric = [c for c in expected if c not in ["policy", "fwd", "bwd", "kind", "seeds", "policy_canonical"] + stds]
headline = {"none", "fwd=aq(q4),bwd=q8"}
for r in rows:
    want = "1337 1338" if r["policy"] in headline else "1337"
    if r["seeds"] != want:
        fail(f"{r['policy']}: seeds '{r['seeds']}', expected '{want}'")
    for c in stds:
        if r["policy"] in headline:
            try:
                v = float(r[c])
            except ValueError:
                fail(f"{r['policy']}: {c} = '{r[c]}' is not a number"); continue
            if not (math.isfinite(v) and v >= 0):
                fail(f"{r['policy']}: {c} = {v} is not finite and >= 0")
        elif r[c] != "":
            fail(f"{r['policy']}: {c} = '{r[c]}' for a single seed (expected empty)")
    for c in numeric:
        try:
            v = float(r[c])
        except ValueError:
            fail(f"{r['policy']}: {c} = '{r[c]}' is not a number"); continue
        if not (math.isfinite(v) and v > 0):
            fail(f"{r['policy']}: {c} = {v} is not finite and positive")
    # uncompressed directions send the raw bytes (forward: plus 8 bytes of sample id
    # per sequence); compressed ones fewer
    for d in ("fwd", "bwd"):
        raw, wire = float(r[d + "_raw_bytes"] or 0), float(r[d + "_wire_bytes"] or 0)
        if r[d] == "none" and not raw <= wire <= 1.01 * raw:
            fail(f"{r['policy']}: {d} uncompressed but wire {wire} vs raw {raw}")
        if r[d] != "none" and not wire < raw:
            fail(f"{r['policy']}: {d} compressed with {r[d]} but wire {wire} >= raw {raw}")
per_seed = list(csv.DictReader(open(os.path.join(out, "results_seeds.csv"))))
if sorted((r["policy"], r["seed"]) for r in per_seed) != sorted(
        (r["policy"], s) for r in rows for s in r["seeds"].split()):
    fail(f"results_seeds.csv rows {[(r['policy'], r['seed']) for r in per_seed]} do not match the seeds column")
md = open(os.path.join(out, "results.md")).read().strip().splitlines()
if len(md) != 2 + len(rows):
    fail(f"results.md has {len(md)} lines, expected {2 + len(rows)}")
fm = open(os.path.join(out, "findings.md")).read()
if "holds" not in fm and "seed spread" not in fm:
    fail("findings.md has no verdicts")
if "Rule: A claim" not in fm:
    fail("findings.md does not state the seed-spread rule")
for p in ("headline.png", "loss_vs_bits.png", "loss_curves.png", "heatmap.png", "speed.png"):
    path = os.path.join(out, p)
    if not os.path.isfile(path) or os.path.getsize(path) < 1000:
        fail(f"{p} missing or tiny"); continue
    if open(path, "rb").read(8) != b"\x89PNG\r\n\x1a\n":
        fail(f"{p} is not a PNG")
if ok:
    print(f"ok: results.csv has {len(rows)} rows x {len(cols)} columns, numbers finite and positive; plots are PNGs")
sys.exit(0 if ok else 1)
PY
grep -q '== findings' "$dir/sweep.out" || { echo "FAIL: no findings block on stdout"; fails=$((fails + 1)); }
[ "$fails" = 0 ] && echo "sweep smoke: all passed"
[ "$fails" = 0 ]
