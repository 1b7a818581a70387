#!/usr/bin/env python3
"""binsgdm_model.py TEST_BINSGDM: --optimizer binsgdm (stages/binsgdm.c, the
exchange of runtime/dp/creduce.c with sign:stochastic,group=tensor and no
error feedback) against an independent NumPy model.

Runs TEST_BINSGDM into a temporary folder, then replays every configuration
in float32 from the dumped gradients:

  g' = c_t g                       (c_t: 1 on even steps, 0.5 on odd: the clip factor)
  m  = beta m + (1 - beta) g'      b = beta b + (1 - beta) |g'|
  u  = m / b  (0 where b = 0)      |u| <= 1
  message of u: +-s per element, s = max |u| of the message; the element is
      +s with probability (1 + u/s)/2 (binary randomisation, E = u)
  allgather     out = (sum over replicas, in order, of their messages) / D
  twophase      owner j: z = (sum_i q_ij) / D, out_j = its message of z
  hierarchical  host means of u (uncompressed), then twophase between the
                hosts' leaders
  p  = p - lr (out + wd p)

The messages are random, so each decoded message (tapped from the real
ones) must be a binary randomisation of the model's u (or z): every element
+-s with s = max |u|, +s wherever u = s and -s wherever u = -s; and over all
messages, sum (q/s - u/s) must lie within 5 standard deviations of 0
(sqrt(sum(1 - (u/s)^2))): unbiased. Given the messages, the moments, outputs
and parameters must equal the model's bit for bit, on every rank.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dp_model import F32, chunk, fail, failures, run_model, same  # noqa: E402  (the shared harness)

stats = {"dev": 0.0, "var": 0.0, "count": 0}


def check_message(cfg, x, q, what):
    """q must be a binary randomisation of x with s = max |x|."""
    s = F32(np.abs(x).max())
    if not np.all(np.abs(q) == s):
        fail(cfg, f"{what}: elements other than +-{s:g} (max |x|)")
        return False
    if np.any((x == s) & (q != s)) or np.any((x == -s) & (q != -s)):
        fail(cfg, f"{what}: an element at +-max |x| took the other sign")
        return False
    if s > 0:
        r = x.astype(np.float64) / float(s)
        stats["dev"] += float((q.astype(np.float64) / float(s) - r).sum())
        stats["var"] += float((1 - r * r).sum())
        stats["count"] += x.size
    return True


def moments(gs, D, steps, n, beta):
    """per replica: u at every step, and the last m, b"""
    b1, omb = F32(beta), F32(1) - F32(beta)
    us, ms, bs = [], [], []
    for i in range(D):
        m = np.zeros(n, F32)
        b = np.zeros(n, F32)
        u = np.zeros((steps, n), F32)
        for t in range(steps):
            g = gs[i][t] * F32(0.5 if t % 2 else 1.0)
            m = b1 * m + omb * g
            b = b1 * b + omb * np.abs(g)
            with np.errstate(divide="ignore", invalid="ignore"):
                u[t] = np.where(b > 0, m / b, F32(0)).astype(F32)
        us.append(u)
        ms.append(m)
        bs.append(b)
    return us, ms, bs


def allgather(cfg, xs, q1, D, n, steps):
    out = np.zeros((steps, n), F32)
    for t in range(steps):
        acc = np.zeros(n, F32)
        for i in range(D):
            if not check_message(cfg, xs[i][t], q1[i][t], f"step {t} replica {i}"):
                return None
            acc = acc + q1[i][t]
        out[t] = acc / F32(D)
    return out


def twophase(cfg, xs, q1, q2, D, n, steps):
    out = np.zeros((steps, n), F32)
    for t in range(steps):
        for i in range(D):
            for j in range(D):
                lo, hi = chunk(n, D, j)
                if not check_message(cfg, xs[i][t][lo:hi], q1[i][t][lo:hi], f"step {t} member {i} chunk {j}"):
                    return None
        for j in range(D):
            lo, hi = chunk(n, D, j)
            acc = np.zeros(hi - lo, F32)
            for i in range(D):
                acc = acc + q1[i][t][lo:hi]
            z = acc / F32(D)
            if not check_message(cfg, z, q2[j][t], f"step {t} owner {j}"):
                return None
            out[t, lo:hi] = q2[j][t]
    return out


def check_config(root, cfg):
    d = os.path.join(root, cfg)
    with open(os.path.join(d, "meta.txt")) as f:
        mode, D, H, n, steps, lr, wd, beta = f.read().split()
    D, H, n, steps = int(D), int(H), int(n), int(steps)
    lr, wd = F32(float(lr)), F32(float(wd))

    def load(r, what):
        return np.load(os.path.join(d, f"r{r}_{what}.npy"))

    gs = [load(r, "g") for r in range(D)]
    us, ms, bs = moments(gs, D, steps, n, float(beta))
    ok = all(same(cfg, f"replica {r}'s m", load(r, "m"), ms[r]) and same(cfg, f"replica {r}'s b", load(r, "b"), bs[r])
             for r in range(D))
    if mode == "hierarchical":
        L = D // H
        leaders = [h * L for h in range(H)]
        hosts = []
        for h in range(H):   # the host's sum in member order (L = 2: one commutative add), then / L
            acc = us[h * L].copy()
            for i in range(h * L + 1, (h + 1) * L):
                acc = acc + us[i]
            hosts.append(acc / F32(L))
        out = twophase(cfg, hosts, [load(r, "q1") for r in leaders], [load(r, "q2") for r in leaders], H, n, steps)
    elif mode == "twophase":
        out = twophase(cfg, us, [load(r, "q1") for r in range(D)], [load(r, "q2") for r in range(D)], D, n, steps)
    else:
        out = allgather(cfg, us, [load(r, "q1") for r in range(D)], D, n, steps)
    if out is None:
        return
    p = load(0, "p")[0].copy()
    want = [p.copy()]
    for t in range(steps):
        p = p - lr * (out[t] + wd * p)
        want.append(p.copy())
    want = np.stack(want)
    ok &= all(same(cfg, f"rank {r}'s parameters", load(r, "p"), want) for r in range(D))
    moved = float(np.abs(want[-1] - want[0]).max())
    if not moved > 0:
        fail(cfg, "the parameters did not move")
    print(f"{'ok' if ok else 'FAIL'} - model {cfg}: {mode} D={D} H={H}, {steps} steps, parameters moved up to {moved:.3g}")


def unbiased():
    dev, sd = stats["dev"], stats["var"] ** 0.5
    print(f"unbiased: sum of (q - u)/s over {stats['count']} elements = {dev:.1f}, sd {sd:.1f}")
    if stats["count"] == 0 or abs(dev) > 5 * sd:
        fail("all", f"the messages are biased: {dev:.1f} against sd {sd:.1f}")


if __name__ == "__main__":
    sys.exit(run_model(sys.argv, __doc__, check_config, "binsgdm_model", unbiased))
