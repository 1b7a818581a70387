#!/usr/bin/python3
"""make_fixtures.py: PyTorch reference fixtures for tests/stages/test_reference.c.

Regenerate (from the repository root, with Debian's python3-torch):

    /usr/bin/python3 tools/make_fixtures.py

It writes tests/fixtures/tiny_ref.safetensors and tests/fixtures/tiny_ref.bin.
Both are deterministic (fixed seed) and committed; regenerate only when the
fixture format below changes, and commit both files together.

The model (tools/torch_gpt2.py) is a tiny GPT-2 with random, deliberately
non-default parameters (nonzero biases, LayerNorm weights != 1) so every path
of forward and backward matters:
    V = 65 real tokens (padded to Vp = 128 in pipezip, so padding is exercised),
    maxT = 16, L = 2, NH = 4 (hs = 8), C = 32; batch B = 2, T = 8 (< maxT).
Parameters are drawn in float32 and written to the safetensors; every
reference value is then computed from those exact float32 values with the
model cast to float64, so the fixture is exact to ~1e-12.

tiny_ref.safetensors: HF GPT-2 names and layout (wte.weight (V, C) unpadded,
wpe.weight (maxT, C), h.N.ln_1.weight, ..., Conv1D weights stored (in, out),
e.g. h.N.attn.c_attn.weight (C, 3C)), F32, __metadata__ {"n_head": "4",
"format": "pt"}. No causal-mask buffers, no lm_head.

tiny_ref.bin, all little-endian:
  header: 256 int32 (1024 bytes)
    [0] magic 20240611  [1] version 1
    [2] B  [3] T  [4] V  [5] Vp  [6] maxT  [7] L  [8] NH  [9] C
    [10] ntensors (= 2 + 12 L + 2)  [11] nsteps (3)  [12] nopt (2)
    others 0
  1. tokens   int32 (B, T)
  2. targets  int32 (B, T)
  3. logits   float64 (B, T, V)   forward of the loaded model, unpadded
  4. losses   float64 (B, T)      per-position cross-entropy
  5. loss     float64             mean of losses
  6. ntensors gradient records, in pipezip's tensor order (wte, wpe, per block
     ln_1.w ln_1.b c_attn.w c_attn.b attn.c_proj.w attn.c_proj.b ln_2.w ln_2.b
     c_fc.w c_fc.b mlp.c_proj.w mlp.c_proj.b, then ln_f.w ln_f.b), each:
       char name[64] (HF name, NUL-padded), int32 ndim, int32 shape[2]
       (HF shape; shape[1] = 0 when 1-D), int32 0,
       then numel float64: d loss / d param in HF layout (Conv1D (in, out),
       wte (V, C) unpadded)
  7. training: float64 losses[nsteps + 1] (the loss before each AdamW step,
     then after the last), float64 grad_norms[nsteps] (global L2 norm of
     the gradients before clipping, at each step)
  8. optimizer check: for k in 0..nopt-1: float32 G_k (all tensors
     concatenated in section-6 order and layout), then float32 D_k (the
     parameters after step k minus the initial parameters, same order)

Training (sections 7): AdamW, lr 1e-3 constant, betas (0.9, 0.95), eps 1e-8,
weight decay 0.1 on 2-D weights only (wte, wpe, c_attn/c_proj/c_fc weights),
global-norm clipping at 1.0 with scale min(1, 1.0 / norm) (pipezip's
pz_clip_scale; torch.nn.utils.clip_grad_norm_ would divide by norm + 1e-6, a
relative difference of ~1e-6 / norm, so the norm is taken from it and the
scale applied by hand). Every step here clips (norms are printed).

Optimizer check (section 8): starting from the initial parameters and a fresh
AdamW, step k is given the fixed gradients G_k (G_0 = float32(section 6),
G_1 = float32 of the float64 gradients at the parameters after one training
step), clipped as above. It isolates the optimizer from forward/backward
rounding, so the C test can compare parameters tightly.

Run it with --check32 to also print how far a float32 run of the same model
lands from the float64 reference (to calibrate the C test's tolerances).
"""
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt2 as tg  # noqa: E402

MAGIC, VERSION = 20240611, 1
V, VP, MAXT, L, NH, C = 65, 128, 16, 2, 4, 32
B, T = 2, 8
NSTEPS, NOPT = 3, 2
LR, BETAS, EPS, WD, CLIP = 1e-3, (0.9, 0.95), 1e-8, 0.1, 1.0
SEED = 20240611


def make_model():
    g = torch.Generator().manual_seed(SEED)
    m = tg.GPT2(V, MAXT, L, NH, C)

    def rnd(shape, std, mean=0.0):
        return torch.randn(shape, generator=g, dtype=torch.float32) * std + mean

    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
                p.copy_(rnd(p.shape, 0.1, 1.0))
            elif name.endswith(".bias"):
                p.copy_(rnd(p.shape, 0.1))
            elif name in ("wte.weight", "wpe.weight"):
                p.copy_(rnd(p.shape, 0.3))
            elif name.endswith(("c_attn.weight", "c_fc.weight")):
                p.copy_(rnd(p.shape, 0.15))
            else:  # the two c_proj weights
                p.copy_(rnd(p.shape, 0.1))
    tokens = torch.randint(0, V, (B, T), generator=g)
    targets = torch.randint(0, V, (B, T), generator=g)
    tokens[1, 3] = V - 1   # the last real token, as input and as target
    targets[0, 5] = V - 1
    return m, tokens, targets


def param_groups(model):
    decay = [p for n, p in model.named_parameters() if tg.is_decayed(n)]
    other = [p for n, p in model.named_parameters() if not tg.is_decayed(n)]
    return [{"params": decay, "weight_decay": WD}, {"params": other, "weight_decay": 0.0}]


def clip_(model):
    """Global-norm clip with pipezip's scale min(1, CLIP / norm); returns the
    norm before clipping."""
    params = list(model.parameters())
    norm = float(torch.nn.utils.clip_grad_norm_(params, float("inf")))
    scale = min(1.0, CLIP / norm)
    for p in params:
        p.grad.mul_(scale)
    return norm


def grads_of(model, tokens, targets):
    model.zero_grad(set_to_none=True)
    logits, loss = model(tokens, targets)
    loss.backward()
    return logits, loss


def flat(model, what):
    """Concatenate, in pipezip's tensor order, each parameter (or its grad)."""
    params = dict(model.named_parameters())
    out = []
    for n in model.hf_names():
        t = params[n].grad if what == "grad" else params[n].data
        out.append(t.detach().reshape(-1))
    return torch.cat(out)


def main():
    check32 = "--check32" in sys.argv
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    outdir = os.path.join(root, "tests", "fixtures")
    os.makedirs(outdir, exist_ok=True)
    torch.use_deterministic_algorithms(True)

    m32, tokens, targets = make_model()
    sd = {k: v.clone() for k, v in m32.state_dict().items()}
    st_path = os.path.join(outdir, "tiny_ref.safetensors")
    tg.save_safetensors(st_path, sd, {"n_head": NH, "format": "pt"})
    # read it back, so the reference is exactly what the C side will load
    model = tg.model_from_safetensors(st_path, torch.float64)
    names = model.hf_names()
    assert sorted(names) == sorted(dict(model.named_parameters())), "name list mismatch"

    # 1-6: forward and backward at the initial parameters
    logits, loss = grads_of(model, tokens, targets)
    losses = torch.nn.functional.cross_entropy(
        logits.reshape(-1, V), targets.reshape(-1), reduction="none").reshape(B, T)
    params = dict(model.named_parameters())
    grads0 = {n: params[n].grad.detach().clone() for n in names}
    g0_flat = flat(model, "grad")
    p_init = flat(model, "param").clone()

    # 7: three AdamW steps, float64 trajectory
    opt = torch.optim.AdamW(param_groups(model), lr=LR, betas=BETAS, eps=EPS)
    train_losses, norms, g1_flat = [], [], None
    for step in range(NSTEPS):
        _, l = grads_of(model, tokens, targets)
        if step == 1:
            g1_flat = flat(model, "grad").clone()
        train_losses.append(float(l))
        norms.append(clip_(model))
        opt.step()
    with torch.no_grad():
        train_losses.append(float(model(tokens, targets)[1]))
    assert abs(train_losses[0] - float(loss)) < 1e-12

    # 8: optimizer check from fixed float32 gradients
    omodel = tg.model_from_safetensors(st_path, torch.float64)
    oparams = dict(omodel.named_parameters())
    oopt = torch.optim.AdamW(param_groups(omodel), lr=LR, betas=BETAS, eps=EPS)
    opt_g, opt_d, opt_norms = [], [], []
    for k, gk in enumerate([g0_flat, g1_flat][:NOPT]):
        g32 = gk.to(torch.float32)
        off = 0
        for n in names:
            p = oparams[n]
            p.grad = g32[off:off + p.numel()].to(torch.float64).reshape(p.shape).clone()
            off += p.numel()
        opt_norms.append(clip_(omodel))
        oopt.step()
        opt_g.append(g32)
        opt_d.append((flat(omodel, "param") - p_init).to(torch.float32))

    # write tiny_ref.bin
    hdr = [0] * 256
    hdr[0:13] = [MAGIC, VERSION, B, T, V, VP, MAXT, L, NH, C, len(names), NSTEPS, NOPT]
    bin_path = os.path.join(outdir, "tiny_ref.bin")
    with open(bin_path, "wb") as f:
        f.write(struct.pack("<256i", *hdr))
        f.write(tokens.to(torch.int32).numpy().astype("<i4").tobytes())
        f.write(targets.to(torch.int32).numpy().astype("<i4").tobytes())
        f.write(logits.detach().numpy().astype("<f8").tobytes())
        f.write(losses.detach().numpy().astype("<f8").tobytes())
        f.write(struct.pack("<d", float(loss)))
        for n in names:
            g = grads0[n]
            shape = list(g.shape) + [0] * (2 - g.dim())
            f.write(n.encode("ascii").ljust(64, b"\0"))
            f.write(struct.pack("<4i", g.dim(), shape[0], shape[1], 0))
            f.write(g.numpy().astype("<f8").tobytes())
        f.write(np.asarray(train_losses, dtype="<f8").tobytes())
        f.write(np.asarray(norms, dtype="<f8").tobytes())
        for k in range(NOPT):
            f.write(opt_g[k].numpy().astype("<f4").tobytes())
            f.write(opt_d[k].numpy().astype("<f4").tobytes())

    print("wrote %s (%d bytes), %s (%d bytes)" % (
        st_path, os.path.getsize(st_path), bin_path, os.path.getsize(bin_path)))
    print("params %d, loss %.9f, logits max|.| %.4f" % (
        p_init.numel(), float(loss), float(logits.abs().max())))
    print("training losses %s" % ["%.9f" % x for x in train_losses])
    print("grad norms before clipping %s (clip %.1f)" % (["%.6f" % x for x in norms], CLIP))
    print("optimizer-check norms %s" % ["%.6f" % x for x in opt_norms])
    if min(norms + opt_norms) <= CLIP:
        print("warning: some step does not clip", file=sys.stderr)
    if check32:
        report_float32(st_path, tokens, targets, logits, loss, grads0, train_losses)


def report_float32(st_path, tokens, targets, logits, loss, grads0, train_losses):
    """Same computation in float32, for calibrating tolerances."""
    m = tg.model_from_safetensors(st_path, torch.float32)
    lg, ls = grads_of(m, tokens, targets)
    e = (lg.double() - logits).abs()
    print("float32: logits max abs err %.3g (max|ref| %.3g, worst rel %.3g)" % (
        float(e.max()), float(logits.abs().max()),
        float((e / logits.abs().clamp_min(1e-3)).max())))
    print("float32: loss err %.3g" % abs(float(ls) - float(loss)))
    worst = 0.0
    for n, p in m.named_parameters():
        ref = grads0[n]
        err = float((p.grad.double() - ref).abs().max()) / float(ref.abs().max())
        worst = max(worst, err)
    print("float32: worst grad err / tensor max|g| %.3g" % worst)
    opt = torch.optim.AdamW(param_groups(m), lr=LR, betas=BETAS, eps=EPS)
    ls32 = []
    for _ in range(NSTEPS):
        _, l = grads_of(m, tokens, targets)
        ls32.append(float(l))
        clip_(m)
        opt.step()
    with torch.no_grad():
        ls32.append(float(m(tokens, targets)[1]))
    print("float32: training loss errs %s" % [
        "%.3g" % abs(a - b) for a, b in zip(ls32, train_losses)])


if __name__ == "__main__":
    main()
