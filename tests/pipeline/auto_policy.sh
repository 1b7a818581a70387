#!/usr/bin/env bash
# --compress auto (runtime/edge/autospec.c, runtime/exec/autopolicy.c) over simulated links:
#  1. No simulated rate (shared memory between local ranks, the rate
#     measured from the sends), gpipe: after step 2 every edge and direction
#     keeps fp16, the default's most precise candidate, or takes q8 (the
#     tiny preset's few ms of compute: one exposed fp16 message on a loaded
#     host can cost more than 1% of the step); the decisions are on
#     stderr and in the metrics JSONL. (Plain 1F1B on a fast simulated link: case 2.)
#  2. A switch mid-run on 3 stages (every end of an edge switches, the middle
#     rank's four too): a fast simulated link starts from the listed
#     candidate with the fewest bytes (hadamard(q4)) and moves to fp16 after
#     step 2. Steps 1-2 equal a run with hadamard(q4) fixed, bit for bit (the
#     same messages); a re-run gives the same losses (the same decisions);
#     every loss is finite. A receiver that decoded with another codec than
#     its sender would fail the step: a hadamard() decoder refuses an fp16
#     message and the other way round (messages of base codecs name their
#     codec, and any base decoder follows the header, so a pair of base
#     codecs could not tell).
#     Checkpoints keep the decisions: a run killed after step 4 and resumed
#     goes on with fp16 and the same losses.
#  3. 10 Mbit/s and 5 ms, plain 1F1B: each decision picks a candidate within
#     max-err that sends no more wire bytes per step than the hand-picked
#     fwd=q4,bwd=q8, or whose extra bytes cost at most 2% of its step; both runs' tokens/s are
#     printed (not asserted: timing on a shared host).
#  3b. The same link under the default schedule (auto, issue 26): it says its
#     choice on stderr and the same in the metrics (schedule_next), and
#     auto weighs the candidates as overlapped (the warm-up
#     hides them, and its predicted step counts fill and drain); the rule's
#     picks: tests/runtime/edge/test_autospec.c, tests/runtime/exec/test_autopolicy.c.
#  4. interleaved:v=2 on 2 ranks (3 boundaries): every boundary and direction
#     switches after step 2 as in case 2; steps 1-2 equal interleaved with
#     hadamard(q4) fixed, bit for bit; its checkpoint keeps the decisions.
#  5. Refusals before any process starts: a stateful candidate, every=0.
#   usage: auto_policy.sh PATH/TO/pipezip
set -u
source "$(dirname "$0")/../lib.sh"
pz_test_init "$1"
py=python3
pz_corpus || exit 1

common=(--preset tiny --data "$dir/train.bin" --batch 2 --seq 64 --micro-batches 4 --threads 1 --seed 5 --lr 1e-3)

# 1. an unthrottled link: fp16 or better. The rate auto measures on loopback
# is a message's time, so a host busy with other tests (CI runs two at once on
# 2 cores) can measure under 1 Gbit/s and rightly pick a smaller codec: such a
# run says nothing about a fast link and is repeated, at most 3 times.
fast_link() {
  "$pz" train "${common[@]}" --stages 2 --steps 4 --schedule gpipe --compress 'both=auto' --metrics "$dir/fast" \
     > "$dir/fast.out" 2> "$dir/fast.err" || { cat "$dir/fast.err"; fail "fast link: auto run failed"; return 0; }
  if ! "$py" -c 'import json,sys; m=[json.loads(l) for l in open(sys.argv[1])]; sys.exit(0 if min(e["auto_mbps"] for e in m[1]["edges"]) >= 1000 else 1)' \
       "$dir/fast.jsonl" 2>/dev/null && [ "$1" -lt 3 ]; then
    echo "fast link: loopback measured under 1000 Mbit/s (a loaded host), attempt $1 repeated"
    return 1
  fi
  # fp16, or q8 where fp16's exposed message costs the few ms of compute
  # more than 1% (the measured rate, a loaded host)
  grep -Eq 'auto after step 2: edge 0-1 fwd (keeps fp16|switches to q8,) ' "$dir/fast.err" \
    && grep -Eq 'auto after step 2: edge 0-1 bwd (keeps fp16|switches to q8,) ' "$dir/fast.err" \
    || { grep 'auto' "$dir/fast.err"; fail "fast link: neither fp16 kept nor q8 after step 2"; }
  grep -q 'rank 1: auto evaluated its candidates on 4 sampled micro-batches' "$dir/fast.err" \
    || { grep 'evaluated' "$dir/fast.err"; fail "fast link: no evaluation cost line"; }
  "$py" - "$dir/fast.jsonl" <<'PY' || fail "fast link: metrics"
import json, sys
met = [json.loads(l) for l in open(sys.argv[1])]
assert len(met) == 4, len(met)
for e in met[1]["edges"]:
    assert e["codec"] == "fp16" and e["auto_next"].split(":")[0] in ("fp16", "q8") and e["auto_rel_err"] < 0.01, e
    assert e["auto_step_ms"] >= e["auto_compute_ms"], e   # the predicted step: compute and what the link adds
assert all("auto_next" not in e for m in (met[0], met[2], met[3]) for e in m["edges"]), met
print("fast link: fp16 or q8 (rel err < 0.01), link %.3f ms per step at %.0f Mbit/s, predicted step %.3f ms, compute %.3f ms"
      % (met[1]["edges"][0]["auto_link_ms"], met[1]["edges"][0]["auto_mbps"], met[1]["edges"][0]["auto_step_ms"],
         met[1]["edges"][0]["auto_compute_ms"]))
PY
}
for attempt in 1 2 3; do fast_link "$attempt" && break; done

# 2. a switch mid-run, every end of every edge
sw=(--stages 3 --steps 6 --link-mbps 100000 --schedule 1f1b)
pol='both=auto:every=3,candidates=fp16/hadamard(q4)'
ok=1
"$pz" train "${common[@]}" "${sw[@]}" --compress "$pol" --metrics "$dir/sw" > "$dir/sw.out" 2> "$dir/sw.err" || ok=0
"$pz" train "${common[@]}" "${sw[@]}" --compress "$pol" > "$dir/sw2.out" 2> "$dir/sw2.err" || ok=0
"$pz" train "${common[@]}" "${sw[@]}" --compress 'both=hadamard(q4)' > "$dir/q4.out" 2> "$dir/q4.err" || ok=0
if [ $ok = 1 ]; then
  n=$(grep -c 'auto after step 2: edge [01]-[12] [fb][wd][d] switches to fp16, was hadamard(q4) ' "$dir/sw.err")
  [ "$n" = 4 ] || { grep 'auto after' "$dir/sw.err"; fail "switch: $n of 4 edge directions switched after step 2"; }
  "$py" - "$dir/sw.out" "$dir/sw2.out" "$dir/q4.out" "$dir/sw.jsonl" <<'PY' || fail "switch: losses or metrics"
import json, math, sys
loss = lambda p: [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
a, b, q = loss(sys.argv[1]), loss(sys.argv[2]), loss(sys.argv[3])
assert len(a) == 6 and all(math.isfinite(x) for x in a), a
assert a == b, ("a re-run differs", a, b)
assert a[:2] == q[:2], ("steps 1-2 are not hadamard(q4)'s", a, q)
assert a[2:] != q[2:], ("fp16 after the switch gave hadamard(q4)'s losses", a, q)
met = [json.loads(l) for l in open(sys.argv[4])]
for i, m in enumerate(met):
    assert len(m["edges"]) == 4, m
    for e in m["edges"]:
        want = "hadamard(q4:" if i < 2 else "fp16"
        assert e["codec"].startswith(want), (i + 1, e)
        assert e["rel_err"] < (0.2 if i < 2 else 1e-3), (i + 1, e)   # the sender's twin of the live codec
print("switch after step 2, losses", ["%.6f" % x for x in a], "(hadamard(q4) fixed:", ["%.6f" % x for x in q], ")")
PY
else
  tail -n 5 "$dir/sw.err" "$dir/sw2.err" "$dir/q4.err"; fail "switch: a run failed"
fi

# 2b. checkpoints keep the decisions: killed after step 4 (fp16 since step 3),
#     resumed, steps 5-6 equal the run above (without them it would go on
#     with hadamard(q4), the initial candidate, until step 6)
PIPEZIP_FAULT=step:4:1 "$pz" train "${common[@]}" "${sw[@]}" --compress "$pol" --checkpoint-dir "$dir/ck" \
  --checkpoint-every 4 > /dev/null 2> "$dir/ck1.err"
if [ -f "$dir/ck/step-00000004/rank-1.auto" ] && "$pz" train "${common[@]}" "${sw[@]}" --compress "$pol" \
     --checkpoint-dir "$dir/ck" --checkpoint-every 4 --resume auto --metrics "$dir/res" > "$dir/res.out" 2> "$dir/res.err"; then
  grep -q 'auto goes on with edge 1-2 bwd fp16' "$dir/res.err" || fail "resume: decisions not restored"
  "$py" - "$dir/sw.out" "$dir/res.out" "$dir/res.jsonl" <<'PY' || fail "resume: losses or codecs"
import json, sys
loss = lambda p: [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
a, r = loss(sys.argv[1]), loss(sys.argv[2])
assert len(r) == 2 and r == a[4:], (a, r)
assert all(e["codec"] == "fp16" for l in open(sys.argv[3]) for e in json.loads(l)["edges"])
print("resumed after step 4 with fp16 on every edge: losses of steps 5-6 equal the uninterrupted run's")
PY
else
  ls -R "$dir/ck" | head; tail -n 5 "$dir/ck1.err" "$dir/res.err" 2>/dev/null; fail "resume: a run failed"
fi

# 3. 10 Mbit/s and 5 ms one way, plain 1F1B (the default before issue 26)
slow=(--stages 2 --steps 12 --link-mbps 10 --link-latency-ms 5 --schedule 1f1b)
if "$pz" train "${common[@]}" "${slow[@]}" --compress 'both=auto:every=4' --metrics "$dir/auto10" \
     > "$dir/auto10.out" 2> "$dir/auto10.err" \
   && "$pz" train "${common[@]}" "${slow[@]}" --compress 'fwd=q4,bwd=q8' --metrics "$dir/hand10" \
     > "$dir/hand10.out" 2> "$dir/hand10.err"; then
  "$py" - "$dir/auto10.jsonl" "$dir/hand10.jsonl" "$dir/auto10.out" "$dir/hand10.out" <<'PY' || fail "10 Mbit/s"
import json, math, sys
auto = [json.loads(l) for l in open(sys.argv[1])]
hand = [json.loads(l) for l in open(sys.argv[2])]
hand_bytes = {e["dir"]: e["wire_bytes"] for e in hand[-1]["edges"]}
decisions = 0
for i, m in enumerate(auto[:-1]):
    for e in m["edges"]:
        if "auto_next" not in e:
            continue
        decisions += 1
        nxt = [x for x in auto[i + 1]["edges"] if x["dir"] == e["dir"]][0]
        assert nxt["codec"] == e["auto_next"], (e, nxt)
        # plain 1F1B: every message on the critical path; the pick is within the
        # quality bound, and sends no more than the hand-picked codec, or its
        # extra bytes at 10 Mbit/s cost at most 2% of its predicted step
        # (hadamard(q4)'s few more bytes than q4, for a lower error)
        extra_ms = (nxt["wire_bytes"] - hand_bytes[e["dir"]]) / 1.25e6 * 1e3
        assert e["auto_rel_err"] <= 0.5, e
        assert extra_ms <= 0.02 * e["auto_step_ms"], (e, nxt, hand_bytes)
        assert e["auto_mbps"] == 10, e
assert decisions == 2 * 3, decisions   # fwd and bwd after steps 2, 4 and 8 (the one after 12 is never applied)
summ = lambda p: [json.loads(l) for l in open(p) if '"summary"' in l][0]
la = [json.loads(l)["loss"] for l in open(sys.argv[3]) if '"loss"' in l]
assert all(math.isfinite(x) for x in la), la
sa, sh = summ(sys.argv[3]), summ(sys.argv[4])
print("10 Mbit/s, 5 ms: auto ended with %s | %s, %.0f tok/s median, %d+%d wire bytes; fwd=q4,bwd=q8: %.0f tok/s, %d+%d"
      % (auto[-1]["edges"][0]["codec"].split(":")[0], auto[-1]["edges"][1]["codec"].split(":")[0],
         sa["tok_s_median"], sa["fwd_wire"], sa["bwd_wire"], sh["tok_s_median"], sh["fwd_wire"], sh["bwd_wire"]))
PY
else
  tail -n 5 "$dir/auto10.err" "$dir/hand10.err"; fail "10 Mbit/s: a run failed"
fi

# 3b. the same link under the default schedule (auto, issue 26): it adds the
# warm-up a codec needs, so auto weighs its candidates as hidden (0.9 of
# compute), and its picks within the quality bound are checked in
# tests/runtime/edge/test_autospec.c (timing here is the shared host's)
if "$pz" train "${common[@]}" --stages 2 --steps 6 --link-mbps 10 --link-latency-ms 5 --compress 'both=auto:every=4' \
     --metrics "$dir/autod" > "$dir/autod.out" 2> "$dir/autod.err"; then
  grep -q -- '--schedule auto: 1f1b' "$dir/autod.err" || { cat "$dir/autod.err"; fail "default schedule: no choice said"; }
  # ... and the same choice in the metrics (issue 26: "on stderr and in the metrics")
  said=$(grep -m1 -o -- '--schedule auto: 1f1b[^ ]*' "$dir/autod.err" | sed 's/^--schedule auto: //')
  grep -q "\"schedule_next\":\"$said\"" "$dir/autod.jsonl" \
    || fail "default schedule: '$said' said on stderr, not in the metrics' schedule_next"
  "$py" - "$dir/autod.jsonl" <<'PY' || fail "default schedule: auto's decisions"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1])]
d = [e for x in m for e in x["edges"] if "auto_next" in e]
assert len(d) == 2 * 2, d   # fwd and bwd after steps 2 and 4
assert all(e["auto_rel_err"] <= 0.5 and e["auto_step_ms"] >= e["auto_compute_ms"] for e in d), d
print("default schedule: auto picked",
      ", ".join("%s %s (rel err %.3g, predicted step %.1f ms)" % (e["dir"], e["auto_next"].split(":")[0],
                                                                  e["auto_rel_err"], e["auto_step_ms"]) for e in d))
PY
else
  tail -n 5 "$dir/autod.err"; fail "default schedule: the auto run failed"
fi

# 4. interleaved: the same switch on every boundary (4 chunks, 3 boundaries, each direction)
il=(--stages 2 --steps 6 --schedule interleaved:v=2 --split 0,1,1,0 --link-mbps 100000)
ok=1
"$pz" train "${common[@]}" "${il[@]}" --compress "$pol" --checkpoint-dir "$dir/ilck" > "$dir/il.out" 2> "$dir/il.err" || ok=0
"$pz" train "${common[@]}" "${il[@]}" --compress 'both=hadamard(q4)' > "$dir/ilq4.out" 2> "$dir/ilq4.err" || ok=0
if [ $ok = 1 ]; then
  n=$(grep -c 'auto after step 2: edge [012]-[123] [fb][wd][d] switches to fp16, was hadamard(q4) ' "$dir/il.err")
  [ "$n" = 6 ] || { grep 'auto after' "$dir/il.err"; fail "interleaved: $n of 6 boundary directions switched after step 2"; }
  [ -f "$dir/ilck/step-00000006/rank-0.auto" ] || fail "interleaved: the checkpoint holds no decisions"
  "$py" - "$dir/il.out" "$dir/ilq4.out" <<'PY' || fail "interleaved: losses"
import json, math, sys
loss = lambda p: [json.loads(l)["loss"] for l in open(p) if '"loss"' in l]
a, q = loss(sys.argv[1]), loss(sys.argv[2])
assert len(a) == 6 and all(math.isfinite(x) for x in a), a
assert a[:2] == q[:2] and a[2:] != q[2:], (a, q)
print("interleaved:v=2: every boundary switched to fp16 after step 2; steps 1-2 are hadamard(q4)'s bit for bit")
PY
else
  tail -n 5 "$dir/il.err" "$dir/ilq4.err"; fail "interleaved: a run failed"
fi

# 5. refused before any process starts
refuse() {  # expected message part, then train flags
  local want="$1"; shift
  if "$pz" train "${common[@]}" --steps 1 "$@" > /dev/null 2> "$dir/ref.err"; then
    fail "accepted: $*"
  elif ! grep -qF "$want" "$dir/ref.err" || grep -q '^\[rank' "$dir/ref.err"; then
    cat "$dir/ref.err"; fail "refusal of $* lacks '$want' or started ranks"
  fi
}
refuse "candidate 2 'aq(q4)' keeps state" --stages 2 --compress 'fwd=auto:candidates=fp16/aq(q4)'
refuse "every= expects a whole number of steps" --stages 2 --compress 'fwd=auto:every=0'

[ "$fails" = 0 ] && echo "auto_policy: all passed"
exit $((fails > 0))
