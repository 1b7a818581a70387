#!/usr/bin/env python3
"""onebit_model.py TEST_ONEBIT: 1-bit Adam's steps after the warm-up
(--dp-compress-what momentum: stages/optim.c, runtime/dp/creduce.c) against
an independent NumPy model.

Runs TEST_ONEBIT into a temporary folder (it forks the ranks and writes every
rank's gradients, parameters, momenta, the frozen v and its decoded
messages as .npy), then for every configuration replays in float32 from the
gradients and the starting state, step by step:

  x_i = b1 m + (1 - b1) (g_i c)         each replica's momentum (m: the last mean)
  m   = the compressed mean of the x_i  (sign, error feedback: one step of
                                          dp_model.py's allgather or twophase)
  p   = p - lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t0)) + eps) + wd p)

with v as the warm-up left it (t0 steps). The messages must be sign(x) (resp.
of the owners' z) as dp_model.py's codec model encodes them; every rank's
momenta and parameters must equal the model's bit for bit, v must not move,
and the parameters must move.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dp_model import F32, allgather_step, fail, residuals, run_model, same, twophase_step  # noqa: E402


def check_config(root, cfg):
    d = os.path.join(root, cfg)
    with open(os.path.join(d, "meta.txt")) as f:
        mode, D, n, steps, t0, lr, wd, b1, b2, eps = f.read().split()
    D, n, steps, t0 = int(D), int(n), int(steps), int(t0)
    lr, wd, b1, b2, eps = (F32(float(x)) for x in (lr, wd, b1, b2, eps))

    def load(r, what):
        return np.load(os.path.join(d, f"r{r}_{what}.npy"))

    gs = [load(r, "g") for r in range(D)]
    q1 = [load(r, "q1") for r in range(D)]
    q2 = [load(r, "q2") for r in range(D)] if mode == "twophase" else None
    v = load(0, "v")
    ok = all(same(cfg, f"rank {r}'s frozen v", load(r, "v"), v) for r in range(D))
    p, m = load(0, "p")[0].copy(), load(0, "m")[0].copy()
    ps, ms = [p.copy()], [m.copy()]
    ew, es = residuals(n, D)
    inv_bc2 = F32(1.0 / (1.0 - float(b2) ** t0))   # in double, as the C code
    vhat = v * inv_bc2
    for t in range(steps):
        c = F32(0.5 if t % 2 else 1.0)
        xs = [b1 * m + (F32(1) - b1) * (gs[i][t] * c) for i in range(D)]
        m = np.zeros(n, F32)   # the replicas' mean, through the reduction's model (dp_model.py)
        if not (allgather_step(cfg, "sign", xs, q1, ew, D, n, t, m) if mode == "allgather" else
                twophase_step(cfg, "sign", xs, q1, q2, ew, es, D, n, t, m)):
            return
        inv_bc1 = F32(1.0 / (1.0 - float(b1) ** (t0 + t + 1)))
        p = p - lr * ((m * inv_bc1) / (np.sqrt(vhat) + eps) + wd * p)
        ps.append(p.copy())
        ms.append(m.copy())
    ok &= all(same(cfg, f"rank {r}'s momenta", load(r, "m"), np.stack(ms)) for r in range(D))
    ok &= all(same(cfg, f"rank {r}'s parameters", load(r, "p"), np.stack(ps)) for r in range(D))
    moved = float(np.abs(ps[-1] - ps[0]).max())
    if not moved > 0:
        fail(cfg, "the parameters did not move")
    print(f"{'ok' if ok else 'FAIL'} - model {cfg}: {mode} D={D}, {steps} steps after a warm-up of {t0}, "
          f"parameters moved up to {moved:.3g}")


if __name__ == "__main__":
    sys.exit(run_model(sys.argv, __doc__, check_config, "onebit_model"))
