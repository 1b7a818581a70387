#!/usr/bin/env python3
"""dp_model.py TEST_DP_COMPRESS: the compressed data-parallel reductions
(runtime/dp/creduce.c) against an independent NumPy model.

Runs TEST_DP_COMPRESS into a temporary folder (it forks the ranks, checks
save/load, refusals and bytes in C, and writes every rank's gradients,
outputs, decoded messages and residuals as .npy), then for every
configuration replays the algorithm in NumPy from the gradients:

  allgather     x_i = g_i + e_i; e_i = x_i - q_i; out = (sum_i q_i) / D
  twophase      x_i = g_i + e_i split into D chunks; e_i = x_i - q_i;
                owner j: z = (sum_i q_ij) / D + s_j; s_j = z - qs_j; out_j = qs_j
  hierarchical  host means (uncompressed), then twophase over the hosts'
                leaders; every member gets the leaders' result

Bucketed configurations (meta's bucket > 0) cut the vector as
pz_dp_buckets does (cut() here: [hold, n) from the top down in pieces of at
most `bucket`, then [0, hold)) and run the algorithm on each bucket apart:
every message, its scale and the owners' parts are per bucket, an owner's
residual is its part of every bucket, in bucket order.

where q are the real codec messages as a separate codec object decoded them
(the tap in test_dp_compress.c). For fp16 and sign (deterministic codecs)
the model also encodes x (resp. z) itself and requires the same decoded
values, so it checks what went into each message, not only what came out.
Outputs and residuals must equal the model's bit for bit (the same float32
operations in the same order); the error-feedback identity
sum_t out_t = sum_t mean_i g_i,t - mean_i e_i - s  must hold over the 50
steps in float64 to 1e-4.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

F32 = np.float32
failures = []


def fail(cfg, msg):
    failures.append(f"{cfg}: {msg}")
    print(f"FAIL {cfg}: {msg}")


def chunk(n, parts, j):
    q, r = divmod(n, parts)
    lo = j * q + min(j, r)
    return lo, lo + q + (1 if j < r else 0)


def cut(n, hold, bucket):
    """The buckets [lo, hi) in start order (runtime/dp/group.c, pz_dp_buckets)."""
    if bucket == 0 or hold > n:
        return [(0, n)]
    out = []
    for a, b in ((hold, n), (0, hold)):
        top = b
        while top > a:
            bot = top - bucket if top - a > bucket else a
            out.append((bot, top))
            top = bot
    return out


def codec_model(spec, x):
    """The decoded message of the deterministic codecs, or None."""
    if spec == "fp16":
        return x.astype(np.float16).astype(F32)
    if spec == "sign":  # sign:scaled, one group (a 1-D tensor is one row): mean |x|
        s = F32(np.abs(x.astype(np.float64)).sum() / x.size)
        return np.where(x >= 0, s, -s).astype(F32)
    return None


def check_message(cfg, spec, x, q, what):
    """q must be the codec's output for x: equal to the model's for the
    deterministic codecs, and closer to x than zero for all."""
    want = codec_model(spec, x)
    if want is not None:
        rtol = 0 if spec == "fp16" else 1e-6
        if not np.allclose(q, want, rtol=rtol, atol=0):
            fail(cfg, f"{what}: message is not {spec}(x): max diff {np.abs(q - want).max():g}")
            return False
    if np.linalg.norm(x - q) > np.linalg.norm(x) * (1 + 1e-6):
        fail(cfg, f"{what}: decoded message farther from x than zero")
        return False
    return True


def same(cfg, what, got, want):
    if got.shape != want.shape or not np.array_equal(got, want):
        d = np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape else "shape"
        fail(cfg, f"{what} differs from the model (max diff {d})")
        return False
    return True


def owner_parts(n, D, buckets):
    """member j's part of every bucket, [(lo, hi)] in bucket order, for each j"""
    return [[(blo + chunk(bhi - blo, D, j)[0], blo + chunk(bhi - blo, D, j)[1]) for (blo, bhi) in buckets]
            for j in range(D)]


def twophase_step(cfg, spec, gs, q1, q2, ew, es, D, n, t, out, buckets=None):
    """step t on the members' inputs gs (n each): updates the residuals ew,
    es (per owner, one array per bucket: residuals()) and writes the result
    into out (n); False on a wrong message. q2[j][t] holds owner j's parts
    of every bucket, in bucket order."""
    parts = owner_parts(n, D, buckets or [(0, n)])
    xs = [gs[i] + ew[i] for i in range(D)]
    for i in range(D):
        for j in range(D):
            for k, (lo, hi) in enumerate(parts[j]):
                if hi > lo and not check_message(cfg, spec, xs[i][lo:hi], q1[i][t][lo:hi],
                                                 f"step {t} member {i} bucket {k} part {j}"):
                    return False
        ew[i] = xs[i] - q1[i][t]
    for j in range(D):
        at = 0
        for k, (lo, hi) in enumerate(parts[j]):
            acc = np.zeros(hi - lo, F32)
            for i in range(D):
                acc = acc + q1[i][t][lo:hi]
            z = acc / F32(D) + es[j][k]
            q = q2[j][t][at:at + hi - lo]
            at += hi - lo
            if hi > lo and not check_message(cfg, spec, z, q, f"step {t} owner {j} bucket {k}"):
                return False
            es[j][k] = z - q
            out[lo:hi] = q
    return True


def allgather_step(cfg, spec, gs, q1, ew, D, n, t, out, buckets=None):
    """the same for allgather (no owner residuals); a message per bucket"""
    acc = np.zeros(n, F32)
    for i in range(D):
        x = gs[i] + ew[i]
        for k, (lo, hi) in enumerate(buckets or [(0, n)]):
            if not check_message(cfg, spec, x[lo:hi], q1[i][t][lo:hi], f"step {t} member {i} bucket {k}"):
                return False
        ew[i] = x - q1[i][t]
        acc = acc + q1[i][t]
    out[:] = acc / F32(D)
    return True


def residuals(n, D, buckets=None):
    """zero worker residuals (D x n) and owner residuals (per owner, one per bucket)"""
    parts = owner_parts(n, D, buckets or [(0, n)])
    return [np.zeros(n, F32) for _ in range(D)], [[np.zeros(hi - lo, F32) for (lo, hi) in parts[j]] for j in range(D)]


def twophase(cfg, spec, gs, q1, q2, D, n, steps, buckets):
    """gs, q1: per member (steps, n); q2: per member (steps, m_j). Returns the
    outputs, worker residuals, owner residuals as the owners dump them (in
    owner order, each in bucket order) and at their elements (the identity)."""
    ew, es = residuals(n, D, buckets)
    out = np.zeros((steps, n), F32)
    for t in range(steps):
        if not twophase_step(cfg, spec, [g[t] for g in gs], q1, q2, ew, es, D, n, t, out[t], buckets):
            return None
    full = np.zeros(n, F32)
    for j, part in enumerate(owner_parts(n, D, buckets)):
        for k, (lo, hi) in enumerate(part):
            full[lo:hi] = es[j][k]
    return out, ew, np.concatenate([e for j in range(D) for e in es[j]]), full


def allgather(cfg, spec, gs, q1, D, n, steps, buckets):
    ew, _ = residuals(n, D)
    out = np.zeros((steps, n), F32)
    for t in range(steps):
        if not allgather_step(cfg, spec, [g[t] for g in gs], q1, ew, D, n, t, out[t], buckets):
            return None
    return out, ew, None, None


def identity(cfg, out, inputs, ew, es):
    """sum of applied updates = sum of true means - residuals (float64)"""
    lhs = out.astype(np.float64).sum(axis=0)
    rhs = np.mean([g.astype(np.float64) for g in inputs], axis=0).sum(axis=0)
    rhs -= np.mean([e.astype(np.float64) for e in ew], axis=0)
    if es is not None:
        rhs -= es.astype(np.float64)
    err = np.abs(lhs - rhs).max()
    if err > 1e-4 * (1 + np.abs(lhs).max()):
        fail(cfg, f"error-feedback identity off by {err:g}")


def check_config(root, cfg):
    d = os.path.join(root, cfg)
    with open(os.path.join(d, "meta.txt")) as f:
        mode, D, H, n, steps, spec, bucket, hold = f.read().split()
    D, H, n, steps = int(D), int(H), int(n), int(steps)
    buckets = cut(n, int(hold), int(bucket))

    def load(r, what):
        return np.load(os.path.join(d, f"r{r}_{what}.npy"))

    gs = [load(r, "g") for r in range(D)]
    outs = [load(r, "out") for r in range(D)]
    if mode == "hierarchical":
        L = D // H
        leaders = [h * L for h in range(H)]
        # host means: the members' sum (L = 2: one commutative add), then / L
        inputs = []
        for h in range(H):
            acc = gs[h * L].copy()
            for i in range(h * L + 1, (h + 1) * L):
                acc = acc + gs[i]
            inputs.append(acc / F32(L))
        res = twophase(cfg, spec, inputs, [load(r, "q1") for r in leaders], [load(r, "q2") for r in leaders], H, n,
                       steps, buckets)
        ew_dump = [load(r, "ew") for r in leaders]
        es_dump = np.concatenate([load(r, "es") for r in leaders])
    elif mode == "twophase":
        inputs = gs
        res = twophase(cfg, spec, gs, [load(r, "q1") for r in range(D)], [load(r, "q2") for r in range(D)], D, n,
                       steps, buckets)
        ew_dump = [load(r, "ew") for r in range(D)]
        es_dump = np.concatenate([load(r, "es") for r in range(D)])
    else:
        inputs = gs
        res = allgather(cfg, spec, gs, [load(r, "q1") for r in range(D)], D, n, steps, buckets)
        ew_dump = [load(r, "ew") for r in range(D)]
        es_dump = None
    if res is None:
        return
    out, ew, es, es_full = res
    ok = all(same(cfg, f"rank {r}'s outputs", outs[r], out) for r in range(D))
    ok &= all(same(cfg, f"worker residual {i}", ew_dump[i], ew[i]) for i in range(len(ew)))
    if es is not None:
        ok &= same(cfg, "owner residuals", es_dump, es)
    identity(cfg, out, inputs, ew, es_full)
    if mode == "hierarchical":
        # and against the members' own gradients: the host means are exact up to rounding
        identity(cfg + " (members' gradients)", out, gs, ew, es_full)
    print(f"{'ok' if ok else 'FAIL'} - model {cfg}: {mode} D={D} H={H} {spec}, {len(buckets)} bucket(s), {steps} steps")


def run_model(argv, doc, check, name, finish=None):
    """Runs the test binary argv[1] into a temporary folder, then check(root,
    cfg) for every configuration folder it wrote, then finish(); the exit
    status (also for binsgdm_model.py)."""
    if len(argv) != 2:
        print(doc, file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix=name + "_") as root:
        r = subprocess.run([argv[1], root], timeout=110)
        if r.returncode != 0:
            print(f"FAIL: {argv[1]} exited {r.returncode}")
            return 1
        cfgs = sorted(c for c in os.listdir(root) if os.path.isdir(os.path.join(root, c)))
        if not cfgs:
            print("FAIL: no configuration written")
            return 1
        for cfg in cfgs:
            check(root, cfg)
    if finish:
        finish()
    print(f"{name}: {len(cfgs)} configurations, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run_model(sys.argv, __doc__, check_config, "dp_model"))
