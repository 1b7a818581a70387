#!/usr/bin/env python3
"""test_sweep_dp_verdicts.py SWEEP_DP: the DP sweep's verdicts
(examples/sweep_dp.py) on made-up table rows, no training. Each claim's word
must follow the numbers: NUQSGD against QSGD is judged on dp_var only when
the measured bits per element match within 10% (else "not judged"), and
holds, fails or is not resolved as the means and the seed spread say; the
1-bit warm-up lines judge the change against uncompressed with the seed
spread and name the shortest warm-up found."""
import importlib.util
import sys
import types

spec = importlib.util.spec_from_file_location("sweep_dp", sys.argv[1])
sd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sd)
fails = []


def check(cond, msg):
    if not cond:
        fails.append(msg)


def row(codec, bits=32.0, dp_var=0.0, dp_var_std=0.0, val=2.5, val_std=0.01, warmup=0, spec=""):
    return {"codec": codec, "spec": spec or codec, "bits": bits, "dp_var": dp_var, "dp_var_std": dp_var_std,
            "val_loss": val, "val_loss_std": val_std, "warmup": warmup,
            "val_loss_vs_none_pct": (val - 2.5) / 2.5 * 100}


def nuq_line(nuq, q):
    lines = sd.nuq_verdicts({nuq["codec"]: nuq, q["codec"]: q})
    check(len(lines) == 1, f"one NUQSGD line expected for {nuq['codec']} / {q['codec']}, got {lines}")
    return lines[0] if lines else ""


# equal bits (nuq3 and q3 send the same bytes): the verdict follows dp_var
low, high = row("nuq3", 3.06, 0.5, 0.01), row("q3", 3.06, 2.0, 0.02)
t = nuq_line(low, high)
check(": holds: 0.5 +- 0.01 vs 2 +- 0.02" in t, f"lower dp_var beyond the spread should hold: {t}")
t = nuq_line(row("nuq3", 3.06, 2.0, 0.02), row("q3", 3.06, 0.5, 0.01))
check(": fails: 2 +- 0.02 vs 0.5 +- 0.01" in t, f"higher dp_var beyond the spread should fail: {t}")
t = nuq_line(row("nuq3", 3.06, 1.0, 0.3), row("q3", 3.06, 1.2, 0.3))
check("dp_var: not resolved by the seed spread" in t, f"a difference inside the spread is not resolved: {t}")
# bits matched within 10% (nuq4 elias's 2.47 against q2:group=64's 2.5) are judged
t = nuq_line(row("nuq4 elias", 2.47, 1.3, 0.6), row("q2 g64", 2.5, 40.0, 3.0))
check("at 2.47 bits vs q2 g64" in t and "dp_var: holds" in t, f"2.47 against 2.5 bits is judged: {t}")
# bits 39% apart (nuq4 elias against q4) are not, whatever dp_var says
t = nuq_line(row("nuq4 elias", 2.47, 1.3, 0.6), row("q4", 4.06, 0.09, 0.01))
check("not judged: not at equal bits (39% apart" in t and "holds" not in t and "fails" not in t,
      f"2.47 against 4.06 bits must not be judged: {t}")
check(sd.nuq_verdicts({"nuq3": low}) == [], "a pair with one row missing gives no line")

# within 2% of uncompressed, judged with the spread (in % of uncompressed's mean)
ref = row("none", val=2.5, val_std=0.01)
for val, std, want in ((2.496, 0.01, "holds"), (2.545, 0.02, "not resolved by the seed spread"),
                       (2.6, 0.01, "fails")):
    v, t = sd.within_spread(row("binsgdm", 1.0, val=val, val_std=std), ref, 2.0)
    check(v == want, f"binsgdm at {val} +- {std} against 2.5 +- 0.01: {v}, expected {want} ({t})")
v, t = sd.within_spread(row("x", val=2.52, val_std=None), ref, 2.0)
check(v == "holds" and "one seed" in t, f"one seed: judged on the mean, said so: {v} {t}")

# the 1-bit lines through verdicts(): binsgdm, sign+EF with a warm-up found, 1-bit Adam (only with one)
s = {"steps": 200}
a = types.SimpleNamespace(link_mbps=[0])
rows = [ref, row("binsgdm", 1.0, val=2.496), row("sign+EF", 1.0, val=3.3),
        row("sign+EF", 1.0, val=2.54, warmup=40), row("1bit-adam", 1.0, val=2.44, warmup=10),
        low, high]
out = "\n".join(sd.verdicts(rows, ref, {"sign+EF": 40, "1bit-adam": 10}, [10, 20, 40], s, a, ""))
for want in ("1-bit (binsgdm) needs no warm-up: holds: -0.16% +- 0.80% (seed spread)",
             "1-bit (sign+EF, twophase) needs no warm-up: fails: +32.00% +- 0.80% (seed spread) without one; "
             "the shortest --dp-warmup of [10, 20, 40] within 2% on the means is 40 steps (20% of 200: +1.60% +- 0.80%",
             "within 2% with the spread: not resolved by the seed spread)",
             "1-bit (1-bit Adam, momentum through sign+EF, twophase) warm-up: does not apply: it runs only with one",
             "is 10 steps (5% of 200: -2.40% +- 0.80% (seed spread); within 2% with the spread: holds)",
             "NUQSGD's variance is lower than QSGD's (nuq3 nuq3 at 3.06 bits vs q3 q3 stochastic at 3.06 bits"):
    check(want in out, f"verdicts lack '{want}':\n{out}")

# sign+EF within 2% on the means but not beyond the spread: no warm-up was searched, none is named
rows = [ref, row("sign+EF", 1.0, val=2.52, val_std=0.05)]
out = "\n".join(sd.verdicts(rows, ref, {}, [10], s, a, ""))
want = ("1-bit (sign+EF, twophase) needs no warm-up: not resolved by the seed spread: +0.80% +- 2.40% (seed spread) "
        "validation loss against uncompressed with --dp-warmup 0")
check(want in out and "--dp-warmup of [10]" not in out, f"verdicts lack '{want}' or name a warm-up search:\n{out}")

for f in fails:
    print("FAIL:", f)
print("sweep_dp verdicts:", "all passed" if not fails else f"{len(fails)} failed")
sys.exit(1 if fails else 0)
