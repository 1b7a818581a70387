/* autopolicy.c: see autopolicy.h.
 *
 * Why only stateless candidates: a codec with state (ef's residual at the
 * sender, ef21's g and aq's per-sample buffers at both ends) is valid only
 * while both halves see the same messages. Switching into aq after it sat
 * idle would still be consistent (both halves' buffers stopped at the same
 * message), but its error cannot be measured without updating the live
 * buffers, and a twin fed only sampled micro-batches would measure aq's
 * first-sight warm-up codec, not its deltas. Rather than decide on a
 * figure that is wrong, autospec.c refuses such candidates; the
 * measurements here then never touch a live codec's state. */
#include "runtime/exec/autopolicy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/io/file.h"
#include "base/mem.h"

pz_status pz_auto_init(pz_autopol *a, const pz_policy *pol, int micro, int nend, int B, int T, int C) {
    memset(a, 0, sizeof *a);
    a->end = xcalloc((size_t)nend, sizeof *a->end);
    a->nend = nend;
    a->edges = pol->stages > 1 ? pol->stages - 1 : 0;
    a->micro = micro;
    a->specs = xcalloc((size_t)2 * a->edges + 1, sizeof *a->specs);
    a->cur = xcalloc((size_t)2 * a->edges + 1, sizeof *a->cur);
    a->start_err = xcalloc((size_t)2 * a->edges + 1, sizeof *a->start_err);
    for (int k = 0; k < 2 * a->edges; k++) {
        if (!pz_auto_is(pol->spec[k])) continue;
        pz_status st = pz_auto_parse_for(pol->spec[k], pz_dir_use(k % 2),
                                         &a->specs[k]);
        if (st != PZ_OK) return st;
        a->any = 1;
        /* the start probes every candidate: done once per distinct (value, direction, rate) */
        int same = -1;
        for (int j = k % 2; j < k && same < 0; j += 2)
            if (a->specs[j].n && strcmp(pol->spec[j], pol->spec[k]) == 0 && pol->mbps[j / 2] == pol->mbps[k / 2]) same = j;
        if (same >= 0) a->cur[k] = a->cur[same], a->start_err[k] = a->start_err[same];
        else a->cur[k] = pz_auto_start(&a->specs[k], pz_dir_use(k % 2), B, T, C, pol->mbps[k / 2], &a->start_err[k]);
    }
    return PZ_OK;
}

static void end_free(pz_auto_end *x) {
    int n = x->spec ? x->spec->n : 0;
    for (int k = 0; x->cand && k < n; k++) pz_edge_free(&x->cand[k]);
    for (int k = 0; x->eval && k < n; k++)
        if (x->eval[k]) pz_codec_free(x->eval[k]);
    free(x->cand); free(x->eval); free(x->wire); free(x->out);
    free(x->err2); free(x->norm2); free(x->bytes); free(x->samples);
    free(x->post_t); free(x->post_len); free(x->done_t);
    memset(x, 0, sizeof *x);
}

void pz_auto_free(pz_autopol *a) {
    for (int s = 0; a->end && s < a->nend; s++) end_free(&a->end[s]);
    free(a->end);
    for (int k = 0; a->specs && k < 2 * a->edges; k++) pz_auto_spec_free(&a->specs[k]);
    free(a->specs);
    free(a->cur);
    free(a->start_err);
    memset(a, 0, sizeof *a);
}

pz_status pz_auto_edge_init(pz_autopol *a, const pz_policy *pol, int slot, pz_edge_end *e, int edge, int dir,
                            int sender, int B, int T, int C, int measure_error) {
    const char *spec = pz_policy_codec(pol, edge, dir);
    if (!pz_auto_is(spec)) return pz_edge_init(e, edge, dir, sender, spec, B, T, C, measure_error);
    pz_auto_end *x = &a->end[slot];
    const pz_auto_spec *as = &a->specs[2 * edge + dir];
    int n = as->n;
    x->spec = as;
    x->edge = edge;
    x->dir = dir;
    x->sender = sender;
    x->cand = xcalloc((size_t)n, sizeof *x->cand);
    pz_status st = PZ_OK;
    size_t cap = 0;
    for (int k = 0; k < n && st == PZ_OK; k++) {
        st = pz_edge_init(&x->cand[k], edge, dir, sender, as->cand[k], B, T, C, measure_error);
        if (x->cand[k].cap > cap) cap = x->cand[k].cap;
    }
    if (st != PZ_OK) { end_free(x); return st; }
    /* one capacity for all: the executor's wire buffers fit every candidate */
    for (int k = 0; k < n; k++) x->cand[k].cap = cap;
    x->cur = a->cur[2 * edge + dir];
    *e = x->cand[x->cur];
    memset(&x->cand[x->cur], 0, sizeof x->cand[x->cur]);
    x->live = e;
    if (!sender) return PZ_OK;
    x->eval = xcalloc((size_t)n, sizeof *x->eval);
    for (int k = 0; k < n && st == PZ_OK; k++)
        if (strcmp(as->cand[k], "none") != 0)
            if ((st = pz_codec_create_for(as->cand[k], pz_dir_use(dir), &x->eval[k])) == PZ_OK)
                pz_codec_set_framed(x->eval[k], 1);   /* measured as the edge sends it */
    x->wire = xaligned_alloc(cap);
    x->out = xaligned_alloc(e->numel * sizeof(float));
    x->err2 = xcalloc((size_t)n, sizeof *x->err2);
    x->norm2 = xcalloc((size_t)n, sizeof *x->norm2);
    x->bytes = xcalloc((size_t)n, sizeof *x->bytes);
    x->samples = xcalloc((size_t)n, sizeof *x->samples);
    x->post_t = xcalloc((size_t)a->micro, sizeof *x->post_t);
    x->post_len = xcalloc((size_t)a->micro, sizeof *x->post_len);
    x->done_t = xcalloc((size_t)a->micro, sizeof *x->done_t);
    return st;
}

static pz_auto_end *sender_end(pz_autopol *a, const pz_edge_end *e) {
    for (int s = 0; s < a->nend; s++)
        if (a->end[s].live == e && a->end[s].sender) return &a->end[s];
    return NULL;
}

pz_status pz_auto_sample(pz_autopol *a, const pz_edge_end *e, const float *x, const uint64_t *ids, uint64_t seed,
                         uint64_t step, uint32_t micro) {
    pz_auto_end *s = sender_end(a, e);
    /* one micro-batch per step, a different one each step */
    if (!s || micro != step % (uint64_t)a->micro) return PZ_OK;
    double t0 = pz_now();
    pz_shape sh = {3, {e->B, e->T, e->C}};
    /* the live message's context: the live candidate's twin writes its very bytes */
    pz_codec_ctx ctx = {seed, step, (uint32_t)e->edge, (uint32_t)e->dir, micro, ids};
    double norm2 = 0.0;
    for (size_t i = 0; i < e->numel; i++) norm2 += (double)x[i] * x[i];
    for (int k = 0; k < s->spec->n; k++) {
        size_t len = e->numel * sizeof(float);
        double err2 = 0.0;
        if (s->eval[k]) {
            pz_shape got;
            pz_status st = pz_codec_encode(s->eval[k], x, &sh, &ctx, s->wire, e->cap - e->ids_bytes, &len);
            if (st == PZ_OK) st = pz_codec_decode(s->eval[k], s->wire, len, &ctx, s->out, e->numel, &got);
            if (st != PZ_OK) return pz_fail(st, "auto, edge %d-%d: candidate %s: %s", e->edge, e->edge + 1,
                                            s->spec->cand[k], pz_last_error());
            for (size_t i = 0; i < e->numel; i++) {
                double d = (double)x[i] - s->out[i];
                err2 += d * d;
            }
        }
        s->err2[k] += err2;
        s->norm2[k] += norm2;
        s->bytes[k] += (double)(e->ids_bytes + len);
        s->samples[k]++;
    }
    a->eval_s += pz_now() - t0;
    a->eval_n++;
    return PZ_OK;
}

void pz_auto_sent(pz_autopol *a, const pz_edge_end *e, int micro, size_t len, double t) {
    pz_auto_end *s = sender_end(a, e);
    if (!s || micro < 0 || micro >= a->micro) return;
    s->post_t[micro] = t;
    s->post_len[micro] = (double)len;
    s->done_t[micro] = 0.0;
}

void pz_auto_send_done(pz_autopol *a, const pz_edge_end *e, int micro, double t) {
    pz_auto_end *s = sender_end(a, e);
    if (s && micro >= 0 && micro < a->micro && s->post_t[micro] > 0) s->done_t[micro] = t;
}

/* The link's throughput from this step's sends: a message is on the link
 * from its post, or from when the one before it was done (sends leave in
 * micro-batch order, so one queued behind another is not on the link yet),
 * to its completion. The window keeps the best message's rate: a late
 * completion (the progress thread not scheduled, a loaded host) only makes
 * a message look slower than its link, never faster. */
static void fold_link(pz_autopol *a, pz_auto_end *s) {
    double last = 0.0;
    for (int m = 0; m < a->micro; m++) {
        if (s->post_t[m] > 0 && s->done_t[m] >= s->post_t[m]) {
            double from = s->post_t[m] > last ? s->post_t[m] : last;
            if (s->done_t[m] > from && s->post_len[m] / (s->done_t[m] - from) > s->link_rate)
                s->link_rate = s->post_len[m] / (s->done_t[m] - from);
            if (s->done_t[m] > last) last = s->done_t[m];
        }
        s->post_t[m] = s->done_t[m] = 0.0;
    }
}

/* Candidate k's tied message over the live one's, where the tied exchange
 * follows this end's picks (edge 0-1 bwd): the same codec on another tensor
 * of the same row width, so about the ratio of their messages; else 1. */
static double tied_scale(const pz_autopol *a, const pz_auto_end *s, int k) {
    if (!a->tied_follows || s->edge != 0 || s->dir != PZ_BWD || !s->samples[k] || !s->samples[s->cur] ||
        s->bytes[s->cur] <= 0)
        return 1.0;
    return (s->bytes[k] / s->samples[k]) / (s->bytes[s->cur] / s->samples[s->cur]);
}

void pz_auto_figs(const pz_autopol *a, const pz_auto_end *s, double tied_bytes, pz_auto_fig *f) {
    for (int k = 0; k < s->spec->n; k++) {
        f[k].measured = s->samples[k] > 0;
        f[k].rel_err = s->norm2[k] > 0 ? sqrt(s->err2[k] / s->norm2[k]) : 0.0;
        f[k].msg = s->samples[k] > 0 ? s->bytes[k] / s->samples[k] : 0.0;
        /* with 2 ranks the tied exchange shares the edge's link, each way */
        f[k].tied = f[k].measured ? tied_bytes * tied_scale(a, s, k) : 0.0;
    }
}

void pz_auto_contribute(pz_autopol *a, const pz_policy *pol, int step, int overlapped, double tied_bytes, double *dec) {
    for (int slot = 0; slot < a->nend; slot++) {
        pz_auto_end *s = &a->end[slot];
        if (!s->live || !s->sender) continue;
        fold_link(a, s);
        if (!pz_auto_decides(s->spec, step)) continue;
        int n = s->spec->n;
        pz_auto_fig f[PZ_AUTO_MAX];
        pz_auto_figs(a, s, tied_bytes, f);
        /* a simulated rate is known; otherwise what the sends took (none
         * measured: taken as unlimited). Delay only from --link-latency-ms. */
        double mbps = pol->mbps[s->edge];
        pz_auto_link l = {s->compute_n > 0 ? s->compute_sum / s->compute_n : 0.0,
                          mbps > 0 ? mbps * 1e6 / 8 : s->link_rate, pol->latency_ms[s->edge] * 1e-3, a->micro,
                          overlapped};
        double pred = 0.0, link = 0.0;
        int pick = pz_auto_choose(f, n, &l, s->spec->max_err, &pred, &link);
        if (pick < 0) continue;   /* nothing sampled yet: keep the live codec */
        double *d = dec + (2 * s->edge + s->dir) * PZ_AUTO_RED;
        d[0] = pick + 1;
        d[1] = f[pick].rel_err;
        d[2] = link;
        d[3] = l.compute_s;
        d[4] = l.rate;
        d[5] = pred;
        d[6] = f[s->cur].measured ? f[s->cur].rel_err : -1.0;   /* what the steps so far sent with */
        d[7] = f[s->cur].measured ? pz_auto_step_s(&f[s->cur], &l, NULL) : -1.0;
        memset(s->err2, 0, (size_t)n * sizeof *s->err2);
        memset(s->norm2, 0, (size_t)n * sizeof *s->norm2);
        memset(s->bytes, 0, (size_t)n * sizeof *s->bytes);
        memset(s->samples, 0, (size_t)n * sizeof *s->samples);
        s->link_rate = s->compute_sum = 0.0;
        s->compute_n = 0;
    }
}

void pz_auto_note_compute(pz_autopol *a, double compute_s) {
    for (int slot = 0; slot < a->nend; slot++) {
        a->end[slot].compute_sum += compute_s;
        a->end[slot].compute_n++;
    }
}

/* Moves candidate k's end into the executor's end, and the live one back
 * among the candidates (no message is in flight at a step boundary). */
static void switch_to(pz_auto_end *s, int k) {
    if (k == s->cur) return;
    s->cand[s->cur] = *s->live;
    *s->live = s->cand[k];
    memset(&s->cand[k], 0, sizeof s->cand[k]);
    s->cur = k;
}

void pz_auto_apply(pz_autopol *a, const double *dec, int step, pz_metrics *m) {
    for (int k = 0; k < 2 * a->edges; k++) {
        const double *d = dec + k * PZ_AUTO_RED;
        const pz_auto_spec *as = &a->specs[k];
        int pick = (int)d[0] - 1;
        if (pick < 0 || pick >= as->n) continue;
        if (m) {
            char rate[48], was[96] = "";
            if (d[4] > 0) snprintf(rate, sizeof rate, "%.4g Mbit/s", d[4] * 8 / 1e6);
            else snprintf(rate, sizeof rate, "an unlimited link");
            if (pick != a->cur[k])
                snprintf(was, sizeof was, ", was %s at rel err %.4g, predicted step %.3g s", as->cand[a->cur[k]], d[6],
                         d[7]);
            const char *cost = pz_auto_sweep_cost(as->cand[pick], k % 2);   /* the sweep's figure, where it has one */
            fprintf(stderr, "pipezip train: auto after step %d: edge %d-%d %s %s %s%s (rel err %.4g; predicted step "
                    "%.3g s: compute %.3g s, link %.3g s per step at %s%s%s%s)\n", step, k / 2, k / 2 + 1,
                    k % 2 ? "bwd" : "fwd", pick == a->cur[k] ? "keeps" : "switches to", as->cand[pick], was, d[1],
                    d[5], d[3], d[2], rate, cost ? "; the sweep's validation loss vs none: " : "", cost ? cost : "",
                    cost ? ", docs/results.md" : "");
            pz_metrics_auto(m, k, as->canon[pick], d[1], d[2], d[3], d[4], d[5]);
        }
        a->cur[k] = pick;
        for (int slot = 0; slot < a->nend; slot++)
            if (a->end[slot].live && 2 * a->end[slot].edge + a->end[slot].dir == k) switch_to(&a->end[slot], pick);
    }
}

pz_status pz_auto_save(const pz_autopol *a, const char *path) {
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, path);
    if (st != PZ_OK) return st;
    fprintf(af.f, "pipezip-auto 1 %d\n", a->edges);
    for (int k = 0; k < 2 * a->edges; k++)
        if (a->specs[k].n) fprintf(af.f, "%d %d %d\n", k, a->specs[k].n, a->cur[k]);
    return pz_atomic_commit(&af);
}

pz_status pz_auto_load(pz_autopol *a, const char *path) {
    uint8_t *buf = NULL;
    size_t len = 0;
    pz_status st = pz_read_file_max(path, (size_t)1 << 20, &buf, &len);
    if (st != PZ_OK) return st;
    char *text = xmalloc(len + 1);
    memcpy(text, buf, len);
    text[len] = 0;
    free(buf);
    int *cur = xcalloc((size_t)2 * a->edges + 1, sizeof *cur), edges = -1, pos = 0, seen = 0;
    memcpy(cur, a->cur, (size_t)2 * a->edges * sizeof *cur);
    if (sscanf(text, "pipezip-auto 1 %d\n%n", &edges, &pos) != 1 || edges != a->edges)
        st = pz_fail(PZ_ERR_FORMAT, "%s: not auto's decisions for %d edges", path, a->edges);
    for (int k, n, c, used; st == PZ_OK && sscanf(text + pos, "%d %d %d\n%n", &k, &n, &c, &used) == 3; pos += used) {
        if (k < 0 || k >= 2 * a->edges || n != a->specs[k].n || c < 0 || c >= n)
            st = pz_fail(PZ_ERR_FORMAT, "%s: a decision of another policy (entry %d: %d of %d candidates)", path, k, c, n);
        else cur[k] = c, seen++;
    }
    int want = 0;
    for (int k = 0; k < 2 * a->edges; k++) want += a->specs[k].n > 0;
    if (st == PZ_OK && (text[pos] || seen != want))
        st = pz_fail(PZ_ERR_FORMAT, "%s: %d decisions for this policy's %d auto edge directions", path, seen, want);
    for (int k = 0; st == PZ_OK && k < 2 * a->edges; k++) {
        a->cur[k] = cur[k];
        for (int slot = 0; slot < a->nend; slot++)
            if (a->end[slot].live && 2 * a->end[slot].edge + a->end[slot].dir == k) switch_to(&a->end[slot], cur[k]);
    }
    free(cur);
    free(text);
    return st;
}

void pz_auto_print_start(const pz_autopol *a, pz_metrics *m) {
    for (int k = 0; k < 2 * a->edges; k++) {
        if (!a->specs[k].n) continue;
        free(m->codec[k]);
        m->codec[k] = xstrdup(a->specs[k].canon[a->cur[k]]);
        if (a->start_err[k] < 0)
            fprintf(stderr, "pipezip train: auto starts edge %d-%d %s with %s (no simulated rate: the first candidate)\n",
                    k / 2, k / 2 + 1, k % 2 ? "bwd" : "fwd", a->specs[k].cand[a->cur[k]]);
        else
            fprintf(stderr, "pipezip train: auto starts edge %d-%d %s with %s (rel err %.4g on a Gaussian probe, "
                    "max-err %g: the fewest bytes within it, before anything is measured)\n", k / 2, k / 2 + 1,
                    k % 2 ? "bwd" : "fwd", a->specs[k].cand[a->cur[k]], a->start_err[k], a->specs[k].max_err);
    }
}

void pz_auto_metrics_sync(const pz_autopol *a, pz_metrics *m) {
    for (int k = 0; k < 2 * a->edges; k++) {
        if (!a->specs[k].n) continue;
        free(m->codec[k]);
        m->codec[k] = xstrdup(a->specs[k].canon[a->cur[k]]);
        fprintf(stderr, "pipezip train: auto goes on with edge %d-%d %s %s\n", k / 2, k / 2 + 1, k % 2 ? "bwd" : "fwd",
                a->specs[k].cand[a->cur[k]]);
    }
}

void pz_auto_report(const pz_autopol *a, int rank, double run_s, int steps) {
    if (!a->eval_n || steps < 1) return;
    fprintf(stderr, "pipezip train: rank %d: auto evaluated its candidates on %d sampled micro-batches: %.3f s, "
            "%.2f ms per step, %.1f%% of %.2f s of training\n", rank, a->eval_n, a->eval_s, 1e3 * a->eval_s / steps,
            run_s > 0 ? 100.0 * a->eval_s / run_s : 0.0, run_s);
}

int pz_auto_decided(const pz_autopol *a, int step) {
    for (int k = 0; a->any && k < 2 * a->edges; k++)
        if (pz_auto_decides(&a->specs[k], step)) return 1;
    return 0;
}
