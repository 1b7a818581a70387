/* sync.c: see sync.h. */
#include "runtime/dp/sync.h"

#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"

/* The buckets of pz_dp_buckets into out (when not NULL); returns how many. */
static int cut(size_t n, size_t hold, size_t bf, pz_dp_bucket *out) {
    int k = pz_dp_buckets(n, hold, bf, NULL, NULL);
    if (!out) return k;
    size_t *r = xcalloc((size_t)k * 2 + 1, sizeof *r);
    pz_dp_buckets(n, hold, bf, r, r + k);
    for (int i = 0; i < k; i++) out[i] = (pz_dp_bucket){.lo = r[i], .hi = r[k + i]};
    free(r);
    return k;
}

int pz_dp_sync_count(size_t n, size_t hold, size_t bucket_floats) {
    if (bucket_floats == 0 || hold > n) return 0;
    return cut(n, hold, bucket_floats, NULL);
}

size_t pz_dp_sync_bytes(size_t n, size_t hold, size_t bucket_floats, int D) {
    int nb = pz_dp_sync_count(n, hold, bucket_floats);
    pz_dp_bucket *b = xcalloc(nb ? (size_t)nb : 1, sizeof *b);
    if (nb) cut(n, hold, bucket_floats, b);
    size_t bytes = (size_t)nb * sizeof *b;   /* the table, then every bucket in flight at once */
    for (int i = 0; i < nb; i++) bytes += pz_dp_op_bytes(b[i].hi - b[i].lo, D);
    free(b);
    return bytes;
}

size_t pz_dp_plan_bytes(size_t n, size_t hold, size_t bucket_floats, int D, int me, const pz_dp_copts *o) {
    size_t w = 0, s = 0, bytes = bucket_floats ? pz_dp_sync_bytes(n, hold, bucket_floats, D) : 0;
    pz_dp_copts oc = o ? *o : (pz_dp_copts){0};
    oc.bucket = bucket_floats;   /* the compressed buckets are the same cut: their server error is per bucket */
    oc.hold = hold;
    if (o) pz_dp_creduce_ef_floats(&oc, n, D, me, &w, &s);
    return bytes + (w + s) * sizeof(float);
}

size_t pz_dp_held(const pz_gpt2_config *cfg, int S, int G, int g) {
    return S > 1 && (g == 0 || g == G - 1) ? (size_t)cfg->padded_vocab_size * cfg->channels : 0;
}

double pz_dp_plan_stage(const pz_gpt2_config *cfg, const pz_stage_range *ranges, int S, int V, int r,
                        size_t bucket_floats, int D, int me, const pz_dp_copts *o) {
    double bytes = 0.0;
    for (int c = 0; c < V; c++) {
        int g = c * S + r;
        bytes += (double)pz_dp_plan_bytes(pz_stage_numel(cfg, &ranges[g]), pz_dp_held(cfg, S, S * V, g), bucket_floats,
                                          D, me, o);
    }
    return bytes;
}

pz_status pz_dp_sync_init(pz_dp_sync *s, pz_dp_group *g, float *grad, size_t n, size_t hold, size_t bucket_floats) {
    memset(s, 0, sizeof *s);
    if (!g || (!grad && n)) return pz_fail(PZ_ERR_ARG, "dp sync: NULL argument");
    if (bucket_floats == 0) return pz_fail(PZ_ERR_ARG, "dp sync: buckets of 0 floats");
    if (hold > n) return pz_fail(PZ_ERR_ARG, "dp sync: held prefix of %zu floats in a buffer of %zu", hold, n);
    s->g = g;
    s->grad = grad;
    s->n = n;
    s->hold = hold;
    s->nb = pz_dp_sync_count(n, hold, bucket_floats);
    s->b = xcalloc(s->nb ? (size_t)s->nb : 1, sizeof *s->b);
    if (s->nb) cut(n, hold, bucket_floats, s->b);
    return PZ_OK;
}

pz_status pz_dp_sync_codec(pz_dp_sync *s, pz_dp_creduce *cr, uint64_t step) {
    s->cr = cr;
    s->step = step;
    if (!cr) return PZ_OK;
    int ok = pz_dp_creduce_buckets(cr) == s->nb;
    for (int i = 0; ok && i < s->nb; i++) {
        size_t lo, hi;
        pz_dp_creduce_range(cr, i, &lo, &hi);
        ok = lo == s->b[i].lo && hi == s->b[i].hi;
    }
    return ok ? PZ_OK : pz_fail(PZ_ERR_ARG, "dp sync: the compressed reduction cuts other buckets than the sync's");
}

void pz_dp_sync_free(pz_dp_sync *s) {
    if (!s) return;
    free(s->b);   /* ops still in flight after an error are the transport's to drop on close (group.h) */
    memset(s, 0, sizeof *s);
}

/* The bytes this member sent so far: the compressed reduction's messages
 * (hierarchical: those between hosts; its host's uncompressed mean and
 * broadcast go through groups of their own), else the ring's. */
static uint64_t sent_so_far(const pz_dp_sync *s) {
    if (!s->cr) return s->g->bytes_sent;
    uint64_t b = 0;
    for (int i = 0; i < s->g->n; i++) b += pz_dp_creduce_sent_to(s->cr)[i];
    return b;
}

void pz_dp_sync_arm(pz_dp_sync *s) {
    if (s->armed) return;
    s->armed = 1;
    s->next = 0;
    s->ready_lo = s->n;
    s->err = PZ_OK;
    s->drained = 0;
    s->t_first = s->t_last = s->t_backward_end = s->sync_s = s->hidden_s = 0.0;
    s->sent0 = sent_so_far(s);
    for (int i = 0; i < s->nb; i++) s->b[i].state = 0, s->b[i].op = NULL;
}

static void start(pz_dp_sync *s, pz_dp_bucket *b) {
    b->t_start = pz_now();
    if (s->t_first == 0.0) s->t_first = b->t_start;
    /* the ring: its start never blocks (recursive doubling would run to the
     * end inside start, with the backward waiting); compressed: bucket k of
     * the reduction (the same cut) */
    int k = (int)(b - s->b);
    s->err = s->cr ? pz_dp_creduce_start(s->cr, k, s->grad, s->grad, s->step)
                   : pz_dp_allreduce_start(s->g, s->grad + b->lo, b->hi - b->lo, 1, PZ_DP_RING, &b->op);
    b->state = s->err == PZ_OK ? 1 : 2;
    if (s->err != PZ_OK) b->op = NULL;
}

static void done(pz_dp_sync *s, pz_dp_bucket *b) {
    b->op = NULL;   /* freed by test or wait */
    b->state = 2;
    b->t_done = pz_now();
    s->t_last = b->t_done;
}

/* Starts, in order, the buckets whose lo the mark has reached, none below floor. */
static void start_ready(pz_dp_sync *s, size_t floor) {
    size_t mark = s->ready_lo > floor ? s->ready_lo : floor;
    while (s->err == PZ_OK && s->next < s->nb && s->b[s->next].lo >= mark) start(s, &s->b[s->next++]);
}

void pz_dp_sync_ready(void *ctx, size_t lo) {
    pz_dp_sync *s = ctx;
    if (!s->armed || s->err != PZ_OK) return;
    if (lo < s->ready_lo) s->ready_lo = lo;
    if (lo == 0 && s->t_backward_end == 0.0) s->t_backward_end = pz_now();
    start_ready(s, s->hold);
    for (int i = 0; i < s->next && s->err == PZ_OK; i++) {
        int d = 0;
        if (s->b[i].state != 1) continue;
        s->err = s->cr ? pz_dp_creduce_test(s->cr, i, &d) : pz_dp_op_test(s->b[i].op, &d);
        if (s->err != PZ_OK || d) done(s, &s->b[i]);
    }
}

/* Waits for the buckets in flight; returns the seconds it waited. */
static double wait_started(pz_dp_sync *s) {
    double t0 = pz_now();
    for (int i = 0; i < s->next && s->err == PZ_OK; i++)
        if (s->b[i].state == 1) {
            s->err = s->cr ? pz_dp_creduce_wait(s->cr, i) : pz_dp_op_wait(s->b[i].op);
            done(s, &s->b[i]);
        }
    return pz_now() - t0;
}

pz_status pz_dp_sync_drain(pz_dp_sync *s) {
    if (!s->armed || s->drained) return s->err;
    double w = wait_started(s);
    s->drained = 1;
    if (s->next > 0) {   /* the early buckets: in flight from the first start to the last end */
        s->sync_s = s->t_last - s->t_first;
        s->hidden_s = s->sync_s > w ? s->sync_s - w : 0.0;
    }
    return s->err;
}

pz_status pz_dp_sync_finish(pz_dp_sync *s) {
    pz_dp_sync_arm(s);   /* never armed (no backward reported): everything starts here */
    pz_dp_sync_drain(s);
    double t0 = pz_now();
    s->ready_lo = 0;
    start_ready(s, 0);
    wait_started(s);
    s->sync_s += pz_now() - t0;
    s->sent = sent_so_far(s) - s->sent0;
    s->armed = 0;
    return s->err;
}
