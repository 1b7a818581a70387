/* interleaved.c: interleaved 1F1B (Megatron's virtual pipeline): the order
 * of a rank's chunk computes, and where its sends and receives go (see
 * schedule.h for the rules and what is proven about them). */
#include "schedules/interleaved.h"
#include "base/mem.h"

#include <stdlib.h>

/* one chunk compute */
typedef struct {
    int fwd;    /* forward / activation (1) or backward / gradient (0) */
    int micro;
    int chunk;  /* local chunk of the rank it belongs to */
} vop;

int pz_interleaved_warmup(int stage, int nstages, int nmicro, int nchunks) {
    const long total = (long)nmicro * nchunks;
    const long w = nchunks == 1 ? (long)nstages - stage - 1
                                : 2L * (nstages - stage - 1) + (long)(nchunks - 1) * nstages;
    return (int)(w < total ? w : total);
}

/* Virtual micro-batch k of a rank: groups of S micro-batches go through
 * chunk 0, 1, ..., V-1 (forwards) or V-1, ..., 0 (backwards). */
static vop virtual_op(long k, int fwd, int S, int V) {
    const long group = (long)S * V;
    const int c = (int)(k % group / S);
    vop v = {fwd, (int)(k / group * S + k % S), fwd ? c : V - 1 - c};
    return v;
}

/* Rank r's 2mV chunk computes in execution order. */
static vop *compute_order(int r, int S, int m, int V) {
    const long total = (long)m * V;
    const long w = pz_interleaved_warmup(r, S, m, V);
    vop *o = xmalloc((size_t)(2 * total) * sizeof *o);
    long n = 0;
    for (long k = 0; k < w; k++) o[n++] = virtual_op(k, 1, S, V);
    for (long j = 0; j < total - w; j++) {
        o[n++] = virtual_op(j + w, 1, S, V);
        o[n++] = virtual_op(j, 0, S, V);
    }
    for (long j = total - w; j < total; j++) o[n++] = virtual_op(j, 0, S, V);
    return o;
}

/* One instruction of this rank at an instant of the reference run: the
 * messages of an instant (phase 0, in one order common to all ranks: by
 * boundary, direction, micro-batch) come before the compute that starts then
 * (phase 1). */
typedef struct {
    long t, key;
    int phase;
    pz_instr ins;
} event;

static int by_time(const void *a, const void *b) {
    const event *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    if (x->phase != y->phase) return x->phase < y->phase ? -1 : 1;
    return (x->key > y->key) - (x->key < y->key);
}

pz_status pz_interleaved_fill(pz_schedule *s, int stage, int nstages, int nmicro, int nchunks) {
    const int r = stage, S = nstages, m = nmicro, V = nchunks;
    const long total = (long)m * V, G = (long)S * V;
    const int w = pz_interleaved_warmup(r, S, m, V);
    s->warmup = w;
    s->steady = (int)(total - w);
    s->cooldown = w;

    /* the reference run: every rank's computes in order, one time unit
     * each, a compute starting once its input exists (the executor's model,
     * free communication); end times per global chunk and micro-batch */
    const size_t nkey = (size_t)G * (size_t)m;
    long *fend = xmalloc(nkey * sizeof *fend), *bend = xmalloc(nkey * sizeof *bend);
    for (size_t k = 0; k < nkey; k++) fend[k] = bend[k] = -1;
    vop **ord = xcalloc((size_t)S, sizeof *ord);
    long *pc = xcalloc((size_t)S, sizeof *pc), *clock = xcalloc((size_t)S, sizeof *clock);
    for (int q = 0; q < S; q++) ord[q] = compute_order(q, S, m, V);
    for (int progress = 1; progress;) {
        progress = 0;
        for (int q = 0; q < S; q++)
            for (; pc[q] < 2 * total; pc[q]++, progress = 1) {
                const vop *x = &ord[q][pc[q]];
                const long g = (long)x->chunk * S + q;
                const long t = x->fwd ? (g > 0 ? fend[(size_t)(g - 1) * m + x->micro] : 0)
                                      : (g < G - 1 ? bend[(size_t)(g + 1) * m + x->micro] : 0);
                if (t < 0 || (!x->fwd && fend[(size_t)g * m + x->micro] < 0)) break;
                clock[q] = (t > clock[q] ? t : clock[q]) + 1;
                (x->fwd ? fend : bend)[(size_t)g * m + x->micro] = clock[q];
            }
    }
    pz_status st = PZ_OK;
    for (int q = 0; q < S; q++)
        if (pc[q] < 2 * total) st = PZ_ERR_SHAPE;

    /* this rank's list: each message at the instant its sender made it,
     * on both sides, so that the reference run is itself an execution of
     * the lists in which every send meets its receive at once */
    event *ev = xmalloc((size_t)(6 * total) * sizeof *ev);
    size_t n = 0;
    for (long k = 0; k < 2 * total && st == PZ_OK; k++) {
        const vop *x = &ord[r][k];
        const long g = (long)x->chunk * S + r;
        const size_t at = (size_t)g * m + x->micro;
        const long end = (x->fwd ? fend : bend)[at];
        ev[n++] = (event){end - 1, 0, 1, {x->fwd ? PZ_OP_FORWARD : PZ_OP_BACKWARD, x->micro, x->chunk}};
        if (S < 2) continue;
        /* key: (boundary * 2 + direction) * m + micro */
        if (x->fwd && g > 0)
            ev[n++] = (event){fend[at - m], ((g - 1) * 2) * m + x->micro, 0, {PZ_OP_RECV_ACT, x->micro, x->chunk}};
        if (x->fwd && g < G - 1)
            ev[n++] = (event){end, (g * 2) * m + x->micro, 0, {PZ_OP_SEND_ACT, x->micro, x->chunk}};
        if (!x->fwd && g < G - 1)
            ev[n++] = (event){bend[at + m], (g * 2 + 1) * m + x->micro, 0, {PZ_OP_RECV_GRAD, x->micro, x->chunk}};
        if (!x->fwd && g > 0)
            ev[n++] = (event){end, ((g - 1) * 2 + 1) * m + x->micro, 0, {PZ_OP_SEND_GRAD, x->micro, x->chunk}};
    }
    qsort(ev, n, sizeof *ev, by_time);
    for (size_t k = 0; k < n && st == PZ_OK; k++) s->ins[s->n++] = ev[k].ins;

    for (int q = 0; q < S; q++) free(ord[q]);
    free(ord);
    free(pc);
    free(clock);
    free(fend);
    free(bend);
    free(ev);
    if (st != PZ_OK)
        return pz_fail(st, "interleaved schedule: %d ranks, %d micro-batches, v=%d: the computes deadlock (a bug)",
                       S, m, V);
    return PZ_OK;
}
