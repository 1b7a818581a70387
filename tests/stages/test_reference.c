/* test_reference.c: the C engine against an independent PyTorch reference.
 *
 * Usage: test_reference FIXTURE_DIR   (meson passes tests/fixtures)
 *
 * The fixtures come from tools/make_fixtures.py (regenerate with
 * `/usr/bin/python3 tools/make_fixtures.py`): a tiny random GPT-2 written by
 * our own plain-PyTorch model (tools/torch_gpt2.py), all reference values in
 * float64 from the float32 parameters.
 *
 *  tiny_ref.safetensors  the model, HF names and layout, __metadata__ n_head
 *  tiny_ref.bin          little-endian:
 *    header 256 int32: [0] magic 20240611, [1] version 1, [2] B, [3] T, [4] V,
 *      [5] Vp, [6] maxT, [7] L, [8] NH, [9] C, [10] ntensors, [11] nsteps,
 *      [12] nopt
 *    int32 tokens (B,T); int32 targets (B,T); f64 logits (B,T,V);
 *    f64 losses (B,T); f64 loss;
 *    ntensors records: char name[64], int32 ndim, int32 shape[2] (HF shape,
 *      shape[1] = 0 if 1-D), int32 0, f64 gradient (numel, HF layout:
 *      Conv1D weights (in,out), wte (V,C));
 *    f64 train_losses[nsteps + 1] (before each AdamW step, then after the last);
 *    f64 grad_norms[nsteps] (before clipping);
 *    for k < nopt: f32 G_k (all tensors, record order, HF layout), f32 D_k
 *      (parameters after optimizer-check step k minus the initial ones).
 *
 * Checks, in order:
 *  1. pz_ckpt_read_config gives the fixture's config; pz_ckpt_load leaves
 *     padded wte rows zero.
 *  2. Forward with dscale = 0: logits (first V of Vp columns), per-position
 *     losses, mean loss.
 *  3. Training forward (dscale = 1/(B*T)) and backward: every parameter
 *     gradient, by HF name (Conv1D weights transposed into our (OC, IN));
 *     wte gradient rows V..Vp-1 exactly 0.
 *  4. Three AdamW steps (lr 1e-3 constant, betas 0.9/0.95, eps 1e-8, wd 0.1,
 *     clip 1.0) with pz_grad_sumsq + pz_clip_scale + pz_optim_step: the
 *     gradient norm and loss before each step, the loss after the last.
 *  5. Optimizer only: from the initial parameters and a fresh pz_optim, steps
 *     with the fixture's fixed gradients G_k; the parameters after each step.
 *
 * Tolerance: |ours - ref| <= atol + rtol * |ref| per element (TOL_* below).
 * Every compared tensor prints its worst element (largest err / tol); any
 * failure makes the exit status 1. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/gpt2_checkpoint.h"
#include "stages/optim.h"
#include "stages/stage.h"
#include "base/io/file.h"
#include "base/mem.h"

#define REF_MAGIC 20240611
#define REF_VERSION 1

/* Tolerances. In brackets: the worst error of the same computation done by
 * PyTorch in float32 against the float64 reference (make_fixtures.py
 * --check32), i.e. what float32 rounding alone costs. */
#define TOL_LOGITS_ATOL 1e-5   /* [1.8e-6 abs; max |logit| 8.2] */
#define TOL_LOGITS_RTOL 1e-5
#define TOL_LOSS_ATOL 1e-6     /* per-position and mean loss [6.6e-7 abs on 6.4] */
#define TOL_LOSS_RTOL 1e-5
/* gradients: atol + rtol * max |g| of the tensor, the same for every element
 * [4.2e-7 of max |g|] */
#define TOL_GRAD_ATOL 1e-7
#define TOL_GRAD_RTOL_MAX 2e-5
#define TOL_NORM_RTOL 1e-5     /* global gradient norm */
#define TOL_TRAIN_RTOL 1e-5    /* losses along 3 AdamW steps [6.6e-7 abs] */
/* optimizer-only check, on the parameter after the step: float32 rounding of
 * the parameter (6e-8 |p| per step) plus the update (lr 1e-3, ~1e-6 rel) */
#define TOL_OPT_ATOL 1e-8
#define TOL_OPT_RTOL 5e-7

static int failures;

/* ---------------------------------------------------------------- fixture */

typedef struct {
    char name[65];
    int ndim, shape[2];
    size_t numel;
    size_t flat_off;     /* offset into the concatenated G_k / D_k arrays */
    const double *grad;  /* HF layout */
} ref_tensor;

typedef struct {
    uint8_t *buf;
    size_t len;
    int B, T, V, Vp, maxT, L, NH, C, ntensors, nsteps, nopt;
    const int32_t *tokens, *targets;
    const double *logits, *losses;
    double loss;
    ref_tensor *t;
    size_t total;        /* elements of all tensors (HF layout) */
    const double *train_losses, *norms;
    const float **opt_g, **opt_d;
} ref_data;

typedef struct { const uint8_t *p; size_t left; const char *path; } cursor;

static const void *take(cursor *c, size_t bytes) {
    if (bytes > c->left) {
        fprintf(stderr, "%s: truncated (needs %zu more bytes, %zu left)\n", c->path, bytes, c->left);
        exit(1);
    }
    const void *r = c->p;
    c->p += bytes;
    c->left -= bytes;
    return r;
}

static void load_ref(ref_data *r, const char *path) {
    memset(r, 0, sizeof *r);
    if (pz_read_file(path, &r->buf, &r->len) != PZ_OK) {
        fprintf(stderr, "%s\n", pz_last_error());
        exit(1);
    }
    cursor c = {r->buf, r->len, path};
    int32_t hdr[256];
    memcpy(hdr, take(&c, sizeof hdr), sizeof hdr);
    if (hdr[0] != REF_MAGIC || hdr[1] != REF_VERSION) {
        fprintf(stderr, "%s: magic/version %d/%d, expected %d/%d (regenerate with tools/make_fixtures.py)\n",
                path, hdr[0], hdr[1], REF_MAGIC, REF_VERSION);
        exit(1);
    }
    r->B = hdr[2]; r->T = hdr[3]; r->V = hdr[4]; r->Vp = hdr[5]; r->maxT = hdr[6];
    r->L = hdr[7]; r->NH = hdr[8]; r->C = hdr[9]; r->ntensors = hdr[10];
    r->nsteps = hdr[11]; r->nopt = hdr[12];
    for (int i = 2; i <= 12; i++)
        if (hdr[i] < 1 || hdr[i] > 100000) {
            fprintf(stderr, "%s: header slot %d = %d out of range\n", path, i, hdr[i]);
            exit(1);
        }
    size_t BT = (size_t)r->B * (size_t)r->T;
    /* the payload is read in place: offsets stay 4- or 8-byte aligned since
     * the header and every record are multiples of 8 bytes, except after the
     * int32 arrays, which hold 2*B*T ints (an even count) */
    r->tokens = take(&c, BT * 4);
    r->targets = take(&c, BT * 4);
    r->logits = take(&c, BT * (size_t)r->V * 8);
    r->losses = take(&c, BT * 8);
    memcpy(&r->loss, take(&c, 8), 8);
    r->t = xcalloc((size_t)r->ntensors, sizeof *r->t);
    for (int i = 0; i < r->ntensors; i++) {
        ref_tensor *t = &r->t[i];
        memcpy(t->name, take(&c, 64), 64);
        t->name[64] = '\0';
        int32_t dims[4];
        memcpy(dims, take(&c, 16), 16);
        t->ndim = dims[0]; t->shape[0] = dims[1]; t->shape[1] = dims[2];
        if (t->ndim < 1 || t->ndim > 2 || t->shape[0] < 1 || (t->ndim == 2 && t->shape[1] < 1)) {
            fprintf(stderr, "%s: tensor %s: bad shape\n", path, t->name);
            exit(1);
        }
        t->numel = (size_t)t->shape[0] * (size_t)(t->ndim == 2 ? t->shape[1] : 1);
        t->flat_off = r->total;
        r->total += t->numel;
        t->grad = take(&c, t->numel * 8);
    }
    r->train_losses = take(&c, (size_t)(r->nsteps + 1) * 8);
    r->norms = take(&c, (size_t)r->nsteps * 8);
    r->opt_g = xcalloc((size_t)r->nopt, sizeof *r->opt_g);
    r->opt_d = xcalloc((size_t)r->nopt, sizeof *r->opt_d);
    for (int k = 0; k < r->nopt; k++) {
        r->opt_g[k] = take(&c, r->total * 4);
        r->opt_d[k] = take(&c, r->total * 4);
    }
    if (c.left != 0) {
        fprintf(stderr, "%s: %zu trailing bytes\n", path, c.left);
        exit(1);
    }
    for (size_t i = 0; i < BT; i++)
        if (r->tokens[i] < 0 || r->tokens[i] >= r->V || r->targets[i] < 0 || r->targets[i] >= r->V) {
            fprintf(stderr, "%s: token out of range at %zu\n", path, i);
            exit(1);
        }
}

static void free_ref(ref_data *r) {
    free(r->t);
    free(r->opt_g);
    free(r->opt_d);
    free(r->buf);
}

/* ---------------------------------------------------------------- compare */

/* Compares n values; tolerance atol + rtol * |ref| (or, if rtol_of_max, the
 * same atol + rtol * max|ref| for every element). cols > 0 prints the worst
 * element as [row, col]. Returns 1 if all pass. */
static int check(const char *what, const double *ours, const double *ref, size_t n, int cols,
                 double atol, double rtol, int rtol_of_max) {
    double maxref = 0;
    for (size_t i = 0; i < n; i++) maxref = fmax(maxref, fabs(ref[i]));
    size_t worst = 0, nbad = 0;
    double worst_ratio = -1;
    for (size_t i = 0; i < n; i++) {
        double tol = atol + rtol * (rtol_of_max ? maxref : fabs(ref[i]));
        double err = fabs(ours[i] - ref[i]);
        double ratio = err / tol;
        if (!(err <= tol)) nbad++;              /* catches NaN */
        if (isnan(err)) ratio = INFINITY;
        if (ratio > worst_ratio) { worst_ratio = ratio; worst = i; }
    }
    double tol = atol + rtol * (rtol_of_max ? maxref : fabs(ref[worst]));
    char where[48];
    if (cols > 0) snprintf(where, sizeof where, "[%zu,%zu]", worst / (size_t)cols, worst % (size_t)cols);
    else snprintf(where, sizeof where, "[%zu]", worst);
    printf("%-4s %-26s n=%-5zu worst %-9s ours % .9e ref % .9e err %.2e tol %.2e (err/tol %.3f)\n",
           nbad ? "FAIL" : "ok", what, n, where, ours[worst], ref[worst],
           fabs(ours[worst] - ref[worst]), tol, worst_ratio);
    if (nbad) {
        printf("     %zu of %zu elements out of tolerance (max|ref| %.3e)\n", nbad, n, maxref);
        failures++;
        return 0;
    }
    return 1;
}

static void check_scalar(const char *what, double ours, double ref, double atol, double rtol) {
    check(what, &ours, &ref, 1, 0, atol, rtol, 0);
}

static void expect(int cond, const char *fmt, const char *a, long x, long y) {
    if (!cond) {
        printf("FAIL ");
        printf(fmt, a, x, y);
        printf("\n");
        failures++;
    }
}

/* ---------------------------------------------------------------- layouts */

/* Our tensor (host copy of the flat array `mem`) to HF layout, as doubles. */
static void ours_to_hf(const pz_tensor_info *ti, const float *mem, const ref_tensor *rt, double *hf) {
    const float *x = mem + ti->offset;
    if (ti->conv1d) {            /* ours (OC, IN), HF (IN, OC) */
        size_t OC = (size_t)ti->shape[0], IN = (size_t)ti->shape[1];
        for (size_t o = 0; o < OC; o++)
            for (size_t i = 0; i < IN; i++) hf[i * OC + o] = x[o * IN + i];
    } else {                     /* same layout; wte: only the first V rows */
        for (size_t i = 0; i < rt->numel; i++) hf[i] = x[i];
    }
}

/* HF-layout floats into our tensor in the host copy `mem`; padded wte rows 0. */
static void hf_to_ours(const pz_tensor_info *ti, const float *hf, const ref_tensor *rt, float *mem) {
    float *x = mem + ti->offset;
    if (ti->conv1d) {
        size_t OC = (size_t)ti->shape[0], IN = (size_t)ti->shape[1];
        for (size_t o = 0; o < OC; o++)
            for (size_t i = 0; i < IN; i++) x[o * IN + i] = hf[i * OC + o];
    } else {
        memcpy(x, hf, rt->numel * sizeof(float));
        for (size_t i = rt->numel; i < ti->numel; i++) x[i] = 0.0f;
    }
}

/* For each fixture tensor, our tensor of the same name; checks shapes. */
static const pz_tensor_info **match_tensors(const ref_data *r, const pz_tensor_info *ti, int n) {
    const pz_tensor_info **m = xcalloc((size_t)r->ntensors, sizeof *m);
    expect(n == r->ntensors, "%s: we have %ld tensors, the fixture %ld", "tensor count", n, r->ntensors);
    for (int i = 0; i < r->ntensors; i++) {
        const ref_tensor *rt = &r->t[i];
        for (int j = 0; j < n; j++)
            if (strcmp(ti[j].name, rt->name) == 0) m[i] = &ti[j];
        if (!m[i]) {
            printf("FAIL fixture tensor %s has no pz tensor of that name\n", rt->name);
            failures++;
            continue;
        }
        const pz_tensor_info *t = m[i];
        int hf0 = t->conv1d ? t->shape[1] : t->shape[0];
        int hf1 = t->conv1d ? t->shape[0] : t->shape[1];
        if (strcmp(rt->name, "wte.weight") == 0) hf0 = r->V;
        if (t->ndim != rt->ndim || hf0 != rt->shape[0] || (rt->ndim == 2 && hf1 != rt->shape[1])) {
            printf("FAIL %s: our shape (%d,%d) conv1d=%d does not map to HF (%d,%d)\n", rt->name,
                   t->shape[0], t->shape[1], t->conv1d, rt->shape[0], rt->shape[1]);
            failures++;
            m[i] = NULL;
        }
    }
    return m;
}

/* Fails if rows V..Vp-1 of the wte-shaped (Vp, C) array x are not all exactly 0. */
static void check_pad_rows_zero(const char *what, const float *x, const ref_data *r) {
    size_t nz = 0;
    for (size_t i = (size_t)r->V * (size_t)r->C; i < (size_t)r->Vp * (size_t)r->C; i++) nz += x[i] != 0.0f;
    printf("%-4s %s rows %d..%d all exactly 0 (%zu nonzero)\n", nz ? "FAIL" : "ok", what, r->V, r->Vp - 1, nz);
    if (nz) failures++;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s FIXTURE_DIR\n", argv[0]);
        return 2;
    }
    char st_path[4096], bin_path[4096];
    snprintf(st_path, sizeof st_path, "%s/tiny_ref.safetensors", argv[1]);
    snprintf(bin_path, sizeof bin_path, "%s/tiny_ref.bin", argv[1]);
    ref_data r;
    load_ref(&r, bin_path);
    const int B = r.B, T = r.T, V = r.V, Vp = r.Vp;
    const size_t BT = (size_t)B * (size_t)T;

    /* 1. config and load */
    pz_gpt2_config cfg;
    pz_ckpt_format fmt;
    if (pz_ckpt_read_config(st_path, &cfg, &fmt) != PZ_OK) {
        printf("FAIL pz_ckpt_read_config: %s\n", pz_last_error());
        return 1;
    }
    printf("config: V=%d Vp=%d maxT=%d L=%d NH=%d C=%d; batch B=%d T=%d\n", cfg.vocab_size,
           cfg.padded_vocab_size, cfg.max_seq_len, cfg.num_layers, cfg.num_heads, cfg.channels, B, T);
    expect(cfg.vocab_size == V, "%s: %ld, fixture %ld", "vocab_size", cfg.vocab_size, V);
    expect(cfg.padded_vocab_size == Vp, "%s: %ld, fixture %ld", "padded_vocab_size", cfg.padded_vocab_size, Vp);
    expect(cfg.max_seq_len == r.maxT, "%s: %ld, fixture %ld", "max_seq_len", cfg.max_seq_len, r.maxT);
    expect(cfg.num_layers == r.L, "%s: %ld, fixture %ld", "num_layers", cfg.num_layers, r.L);
    expect(cfg.num_heads == r.NH, "%s: %ld, fixture %ld", "num_heads", cfg.num_heads, r.NH);
    expect(cfg.channels == r.C, "%s: %ld, fixture %ld", "channels", cfg.channels, r.C);
    if (failures) return 1;

    const pz_backend *be = pz_backend_cpu();
    pz_stage_range range = pz_whole_model(&cfg);
    pz_stage s;
    if (pz_stage_init(&s, be, &cfg, &range, B, T) != PZ_OK) {
        printf("FAIL pz_stage_init: %s\n", pz_last_error());
        return 1;
    }
    if (pz_ckpt_load(st_path, &s.params) != PZ_OK) {
        printf("FAIL pz_ckpt_load: %s\n", pz_last_error());
        return 1;
    }
    const size_t numel = s.params.numel;
    int nt = pz_gpt2_params_tensors(&s.params, NULL);
    pz_tensor_info *ti = xcalloc((size_t)nt, sizeof *ti);
    pz_gpt2_params_tensors(&s.params, ti); /* offsets are the same for grads */
    const pz_tensor_info **map = match_tensors(&r, ti, nt);
    if (failures) return 1;

    float *host = xmalloc(numel * sizeof(float));   /* host copy of params or grads */
    float *p0 = xmalloc(numel * sizeof(float));     /* initial parameters */
    double *ours_hf = xmalloc(r.total * sizeof(double));
    double *ref_hf = xmalloc(r.total * sizeof(double));
    be->to_host(p0, s.param_mem, numel * sizeof(float));
    const pz_tensor_info *wte_info = NULL;
    for (int i = 0; i < nt; i++)
        if (strcmp(ti[i].name, "wte.weight") == 0) wte_info = &ti[i];
    check_pad_rows_zero("loaded wte", p0 + wte_info->offset, &r);

    pz_acts a;
    if (pz_acts_init(&a, &s) != PZ_OK) {
        printf("FAIL pz_acts_init: %s\n", pz_last_error());
        return 1;
    }

    /* 2. forward, logits kept (dscale = 0) */
    int *tokens = xmalloc(BT * sizeof(int)), *targets = xmalloc(BT * sizeof(int));
    for (size_t i = 0; i < BT; i++) { tokens[i] = r.tokens[i]; targets[i] = r.targets[i]; }
    pz_stage_forward(&s, &a, tokens, NULL, targets, 0.0f);
    {
        float *lg = xmalloc(BT * (size_t)Vp * sizeof(float));
        float *ls = xmalloc(BT * sizeof(float));
        be->to_host(lg, a.logits, BT * (size_t)Vp * sizeof(float));
        be->to_host(ls, a.losses, BT * sizeof(float));
        double *o = xmalloc(BT * (size_t)V * sizeof(double));
        for (size_t bt = 0; bt < BT; bt++)
            for (int v = 0; v < V; v++) o[bt * (size_t)V + (size_t)v] = lg[bt * (size_t)Vp + (size_t)v];
        check("logits (B*T, V)", o, r.logits, BT * (size_t)V, V, TOL_LOGITS_ATOL, TOL_LOGITS_RTOL, 0);
        for (size_t bt = 0; bt < BT; bt++) o[bt] = ls[bt];
        check("losses (B, T)", o, r.losses, BT, T, TOL_LOSS_ATOL, TOL_LOSS_RTOL, 0);
        check_scalar("loss", a.loss, r.loss, TOL_LOSS_ATOL, TOL_LOSS_RTOL);
        free(o);
        free(ls);
        free(lg);
    }

    /* 3. training forward + backward: gradients */
    const float dscale = 1.0f / (float)BT;
    pz_stage_zero_grad(&s);
    pz_stage_forward(&s, &a, tokens, NULL, targets, dscale);
    check_scalar("loss (training forward)", a.loss, r.loss, TOL_LOSS_ATOL, TOL_LOSS_RTOL);
    pz_stage_backward(&s, &a, NULL, NULL);
    be->to_host(host, s.grad_mem, numel * sizeof(float));
    for (int i = 0; i < r.ntensors; i++) {
        char what[96];
        snprintf(what, sizeof what, "grad %s", r.t[i].name);
        ours_to_hf(map[i], host, &r.t[i], ours_hf);
        check(what, ours_hf, r.t[i].grad, r.t[i].numel, r.t[i].ndim == 2 ? r.t[i].shape[1] : 0,
              TOL_GRAD_ATOL, TOL_GRAD_RTOL_MAX, 1);
    }
    check_pad_rows_zero("grad wte", host + wte_info->offset, &r);

    /* 4. AdamW training steps */
    pz_optim_config oc;
    pz_optim_config_default(&oc);
    oc.lr = 1e-3f;
    oc.min_lr_frac = 1.0f;
    oc.warmup_steps = 0;
    oc.total_steps = 1000000;
    oc.beta1 = 0.9f;
    oc.beta2 = 0.95f;
    oc.eps = 1e-8f;
    oc.weight_decay = 0.1f;
    oc.grad_clip = 1.0f;
    for (int k = 0; k < r.nsteps; k++) {
        float lr = pz_lr_at(&oc, k);
        if (lr != 1e-3f) {
            printf("FAIL pz_lr_at(step %d) = %.9g, expected exactly 1e-3f (constant schedule)\n", k, lr);
            failures++;
        }
    }
    pz_optim o;
    if (pz_optim_init(&o, &s, &oc) != PZ_OK) {
        printf("FAIL pz_optim_init: %s\n", pz_last_error());
        return 1;
    }
    for (int k = 0; k < r.nsteps; k++) {
        char what[64];
        pz_stage_zero_grad(&s);
        pz_stage_forward(&s, &a, tokens, NULL, targets, dscale);
        snprintf(what, sizeof what, "train loss before step %d", k + 1);
        check_scalar(what, a.loss, r.train_losses[k], 0.0, TOL_TRAIN_RTOL);
        pz_stage_backward(&s, &a, NULL, NULL);
        double norm = sqrt(pz_grad_sumsq(&s));
        snprintf(what, sizeof what, "grad norm at step %d", k + 1);
        check_scalar(what, norm, r.norms[k], 0.0, TOL_NORM_RTOL);
        float scale = pz_clip_scale(&oc, norm);
        double want = fmin(1.0, 1.0 / norm);
        if (fabs(scale - want) > 1e-6 * want) {
            printf("FAIL pz_clip_scale(norm %.6f) = %.9g, expected min(1, 1/norm) = %.9g\n", norm, scale, want);
            failures++;
        }
        float lr = pz_optim_step(&o, &s, scale);
        if (lr != 1e-3f) {
            printf("FAIL pz_optim_step used lr %.9g at step %d, expected 1e-3\n", lr, k + 1);
            failures++;
        }
    }
    pz_stage_forward(&s, &a, tokens, NULL, targets, 0.0f);
    check_scalar("train loss after last step", a.loss, r.train_losses[r.nsteps], 0.0, TOL_TRAIN_RTOL);
    pz_optim_free(&o, &s);

    /* 5. optimizer only, fixed gradients, from the initial parameters */
    be->from_host(s.param_mem, p0, numel * sizeof(float));
    if (pz_optim_init(&o, &s, &oc) != PZ_OK) {
        printf("FAIL pz_optim_init: %s\n", pz_last_error());
        return 1;
    }
    for (int k = 0; k < r.nopt; k++) {
        memset(host, 0, numel * sizeof(float));
        for (int i = 0; i < r.ntensors; i++)
            hf_to_ours(map[i], r.opt_g[k] + r.t[i].flat_off, &r.t[i], host);
        be->from_host(s.grad_mem, host, numel * sizeof(float));
        double norm = sqrt(pz_grad_sumsq(&s));
        pz_optim_step(&o, &s, pz_clip_scale(&oc, norm));
        be->to_host(host, s.param_mem, numel * sizeof(float));
        for (int i = 0; i < r.ntensors; i++) {
            const ref_tensor *rt = &r.t[i];
            char what[96];
            /* reference parameter = initial + D_k; ours as loaded after the step */
            ours_to_hf(map[i], p0, rt, ref_hf);
            for (size_t j = 0; j < rt->numel; j++) ref_hf[j] += (double)r.opt_d[k][rt->flat_off + j];
            ours_to_hf(map[i], host, rt, ours_hf);
            snprintf(what, sizeof what, "adamw%d %s", k + 1, rt->name);
            check(what, ours_hf, ref_hf, rt->numel, rt->ndim == 2 ? rt->shape[1] : 0,
                  TOL_OPT_ATOL, TOL_OPT_RTOL, 0);
        }
        check_pad_rows_zero("adamw wte", host + wte_info->offset, &r);
    }
    pz_optim_free(&o, &s);

    free(tokens);
    free(targets);
    free(ref_hf);
    free(ours_hf);
    free(p0);
    free(host);
    free(map);
    free(ti);
    pz_acts_free(&a, &s);
    pz_stage_free(&s);
    free_ref(&r);
    if (failures) {
        printf("test_reference: %d check(s) FAILED\n", failures);
        return 1;
    }
    printf("test_reference: all checks passed\n");
    return 0;
}
