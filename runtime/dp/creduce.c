/* creduce.c: see creduce.h. The state blob (save/load) is creduce_state.c. */
#include "runtime/dp/creduce.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "runtime/dp/creduce_priv.h"
#include "runtime/dp/dpmsg.h"

/* ---- creation ------------------------------------------------------------------ */

static size_t slot_cap(const pz_dp_creduce *c, size_t count) {
    pz_shape s = {1, {(int64_t)count}};
    return PZ_DPMSG_HDR + pz_codec_max_encoded_size(c->codec, &s);
}

static pz_status flat_create(pz_dp_creduce *c) {
    int D = c->g->n, me = c->g->me;
    size_t n = c->n, lo, hi;
    c->x = xmalloc(n * sizeof(float));
    c->q = xmalloc(n * sizeof(float));
    c->tmp = xmalloc(n * sizeof(float));
    c->acc = xmalloc(n * sizeof(float));
    c->off = xcalloc((size_t)2 * D + 1, sizeof *c->off); /* receive slots: offsets into rbuf */
    c->soff = xcalloc((size_t)D + 2, sizeof *c->soff); /* send slots: offsets into sbuf */
    c->rreq = xcalloc((size_t)D * 2, sizeof *c->rreq);
    c->sreq = xcalloc((size_t)D * 2, sizeof *c->sreq);
    if (c->o.ef) c->ew = xcalloc(n, sizeof(float));
    if (c->o.mode == PZ_DP_ALLGATHER) {
        size_t cap = slot_cap(c, n);
        for (int i = 0; i <= D; i++) c->off[i] = (size_t)i * cap;
        c->soff[1] = cap;
    } else {
        pz_dp_chunk(n, D, me, &c->es_lo, &hi);
        c->es_len = hi - c->es_lo;
        if (c->o.ef) c->es = xcalloc(c->es_len ? c->es_len : 1, sizeof(float));
        /* receive slots 0..D-1: phase 1 from member i (my chunk); D..2D-1:
         * phase 2 from owner j (chunk j) */
        size_t mine = slot_cap(c, c->es_len), at = 0;
        for (int i = 0; i < D; i++, at += mine) c->off[i] = at;
        for (int j = 0; j < D; j++) {
            c->off[D + j] = at;
            pz_dp_chunk(n, D, j, &lo, &hi);
            at += slot_cap(c, hi - lo);
        }
        c->off[2 * D] = at;
        /* send slots 0..D-1: my phase-1 message for chunk j; D: my phase 2 */
        at = 0;
        for (int j = 0; j < D; j++) {
            c->soff[j] = at;
            pz_dp_chunk(n, D, j, &lo, &hi);
            at += slot_cap(c, hi - lo);
        }
        c->soff[D] = at;
        c->soff[D + 1] = at + mine;
    }
    size_t rlast = c->o.mode == PZ_DP_ALLGATHER ? (size_t)D : (size_t)2 * D;
    c->rbuf = xmalloc(c->off[rlast] ? c->off[rlast] : 1);
    c->sbuf = xmalloc(c->soff[c->o.mode == PZ_DP_ALLGATHER ? 1 : D + 1]);
    c->sent_to = xcalloc((size_t)D, sizeof *c->sent_to);
    return PZ_OK;
}

/* Hierarchical: the host group (consecutive members) and, on leaders, a
 * twophase reduction over the leaders' group. */
static pz_status hier_create(pz_dp_creduce *c, const char *spec) {
    int D = c->g->n, H = c->o.hosts, L = D / H, me = c->g->me, host = me / L;
    int ranks[PZ_DP_MAX];
    c->sent_to = xcalloc((size_t)D, sizeof *c->sent_to);
    c->acc = xmalloc(c->n * sizeof(float));
    pz_status st = pz_dp_group_init(&c->host, c->g->t, c->g->ranks[me], c->g->ranks + host * L, L);
    if (st != PZ_OK) return st;
    c->host.small_bytes = c->g->small_bytes;
    c->host.seg_bytes = c->g->seg_bytes;
    c->leader = me % L == 0;
    if (!c->leader) return PZ_OK;
    for (int h = 0; h < H; h++) ranks[h] = c->g->ranks[h * L];
    c->leaders = xcalloc(1, sizeof *c->leaders);
    st = pz_dp_group_init(c->leaders, c->g->t, c->g->ranks[me], ranks, H);
    if (st != PZ_OK) return st;
    c->leaders->net_only = 1;   /* one per host: between hosts, never shared memory */
    pz_dp_copts io = c->o;
    io.mode = PZ_DP_TWOPHASE;
    io.hosts = 0;
    return pz_dp_creduce_create(&c->inner, c->leaders, spec, &io, c->n);
}

pz_status pz_dp_creduce_create(pz_dp_creduce **out, pz_dp_group *g, const char *spec, const pz_dp_copts *o,
                               size_t n) {
    if (!out || !g || !g->ranks || !spec || !o) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: NULL argument");
    *out = NULL;
    if (o->mode != PZ_DP_ALLGATHER && o->mode != PZ_DP_TWOPHASE && o->mode != PZ_DP_HIERARCHICAL)
        return pz_fail(PZ_ERR_ARG, "dp compressed reduction: unknown mode %d (allgather, twophase, hierarchical)",
                       (int)o->mode);
    if (n < (size_t)g->n)
        return pz_fail(PZ_ERR_ARG, "dp compressed reduction: %zu elements for %d replicas (at least one per replica)",
                       n, g->n);
    if (n > ((size_t)1 << 40)) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: %zu elements", n);
    int H = o->mode == PZ_DP_HIERARCHICAL ? o->hosts : 1;
    if (H < 1 || g->n % H != 0)
        return pz_fail(PZ_ERR_ARG, "dp compressed reduction: %d hosts do not divide %d replicas", H, g->n);
    pz_codec *codec = NULL;
    pz_status st = pz_codec_create_for(spec, PZ_USE_GRADIENT, &codec);
    if (st != PZ_OK) return st;
    pz_codec_set_framed(codec, 1);   /* sent in the transport's checked frame: its CRC is the one */
    if (pz_codec_keeps_state(codec) || pz_codec_is_stateful_decoder(codec)) {
        st = pz_fail(PZ_ERR_ARG,
                     "dp compressed reduction: codec %s keeps state between messages; the data-parallel reduction "
                     "has its own error feedback (use the plain codec)",
                     pz_codec_spec(codec));
        pz_codec_free(codec);
        return st;
    }
    pz_dp_creduce *c = xcalloc(1, sizeof *c);
    c->g = g;
    c->codec = codec;
    c->o = *o;
    c->o.hosts = H;
    c->n = n;
    snprintf(c->spec, sizeof c->spec, "%s", pz_codec_spec(codec));
    snprintf(c->base_spec, sizeof c->base_spec, "%s", c->spec);
    char *z = strstr(c->base_spec, "+zstd");   /* a message says +zstd only where it paid */
    if (z) *z = 0;
    st = o->mode == PZ_DP_HIERARCHICAL ? hier_create(c, spec) : flat_create(c);
    if (st != PZ_OK) {
        pz_dp_creduce_free(c);
        return st;
    }
    *out = c;
    return PZ_OK;
}

void pz_dp_creduce_free(pz_dp_creduce *c) {
    if (!c) return;
    pz_codec_free(c->codec);
    pz_dp_creduce_free(c->inner);
    if (c->leaders) pz_dp_group_free(c->leaders);
    free(c->leaders);
    pz_dp_group_free(&c->host);
    PZ_FREE_ALL(c->x, c->q, c->tmp, c->acc, c->ew, c->es, c->off, c->soff, c->rreq, c->sreq, c->rbuf, c->sbuf,
                c->sent_to, c);
}

/* ---- messages -------------------------------------------------------------------- */

static pz_codec_ctx codec_ctx(const pz_dp_creduce *c, uint64_t step, int phase, int chunk) {
    /* every member's messages draw their own random stream */
    pz_codec_ctx ctx = {c->o.seed, step, (uint32_t)chunk, (uint32_t)phase, (uint32_t)c->g->me, NULL};
    return ctx;
}

/* Encodes x[lo..lo+cnt) into the slot (header + codec message) and decodes
 * it again into q[lo..): exactly what every receiver will decode. */
static pz_status encode(pz_dp_creduce *c, const float *x, size_t lo, size_t cnt, int phase, int chunk, uint64_t step,
                        uint8_t *slot, size_t cap, size_t *len, float *q) {
    pz_shape s = {1, {(int64_t)cnt}}, got;
    pz_codec_ctx ctx = codec_ctx(c, step, phase, chunk);
    size_t ml = 0;
    pz_status st = pz_codec_encode(c->codec, x + lo, &s, &ctx, slot + PZ_DPMSG_HDR, cap - PZ_DPMSG_HDR, &ml);
    if (st != PZ_OK) return st;
    pz_dpmsg h = {(uint8_t)phase, (uint16_t)c->g->n, (uint16_t)c->g->me, (uint16_t)chunk, c->g->seq, lo, cnt, ml};
    pz_dpmsg_put(slot, &h);
    *len = PZ_DPMSG_HDR + ml;
    if (c->tap) c->tap(c->tap_user, phase, chunk, slot + PZ_DPMSG_HDR, ml);
    st = pz_codec_decode(c->codec, slot + PZ_DPMSG_HDR, ml, &ctx, q + lo, cnt, &got);
    if (st == PZ_OK && pz_shape_numel(&got) != cnt)
        st = pz_fail(PZ_ERR_FORMAT, "dp: own message decodes to %zu elements, not %zu", pz_shape_numel(&got), cnt);
    return st;
}

static pz_status send_slot(pz_dp_creduce *c, int peer, unsigned kind, uint8_t *slot, size_t len, pz_request **req) {
    c->sent_to[peer] += len;
    return pz_dp_post(c->g, 1, peer, kind, 0, slot, len, req);
}

/* Waits for member src's message in slot [buf, cap), checks its header and
 * codec message against want and decodes it into out (want->count floats). */
static pz_status take(pz_dp_creduce *c, pz_request *r, int src, uint8_t *buf, const pz_dpmsg *want, uint64_t step,
                      float *out) {
    size_t got = 0;
    pz_status st = pz_dp_wait_recv(c->g, r, &got);
    if (st != PZ_OK) return st;
    char why[160];
    int me_rank = c->g->ranks[c->g->me], src_rank = c->g->ranks[src];
    pz_dpmsg_result res = pz_dpmsg_check(buf, got, want, why, sizeof why);
    if (res != PZ_DPMSG_OK)
        return pz_fail(PZ_ERR_PEER, "rank %d: dp reduction #%u: message from rank %d refused: %s", me_rank, want->seq,
                       src_rank, why);
    /* a base codec decodes any base codec's message (they describe
     * themselves): a replica that runs another codec is refused here */
    pz_shape s;
    char spec[600];
    st = pz_codec_peek_framed(buf + PZ_DPMSG_HDR, got - PZ_DPMSG_HDR, spec, sizeof spec, &s);
    if (st == PZ_OK) {
        char *z = strstr(spec, "+zstd");
        if (z) *z = 0;
        if (strcmp(spec, c->base_spec) != 0)
            return pz_fail(PZ_ERR_PEER, "rank %d: dp reduction #%u: rank %d's message was written by codec '%s', this "
                           "replica runs '%s'", me_rank, want->seq, src_rank, spec, c->base_spec);
    }
    pz_codec_ctx ctx = codec_ctx(c, step, want->phase, want->chunk);
    if (st == PZ_OK) st = pz_codec_decode(c->codec, buf + PZ_DPMSG_HDR, got - PZ_DPMSG_HDR, &ctx, out, want->count, &s);
    if (st != PZ_OK)
        return pz_fail(PZ_ERR_PEER, "rank %d: dp reduction #%u: codec message from rank %d refused: %s", me_rank,
                       want->seq, src_rank, pz_last_error());
    if (s.ndim != 1 || pz_shape_numel(&s) != want->count)
        return pz_fail(PZ_ERR_PEER, "rank %d: dp reduction #%u: rank %d's message holds %zu elements, expected %llu",
                       me_rank, want->seq, src_rank, pz_shape_numel(&s), (unsigned long long)want->count);
    return PZ_OK;
}

static void add_into(float *restrict dst, const float *restrict src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

/* x = g + e_w (or g) */
static void worker_input(pz_dp_creduce *c, const float *grad) {
    if (c->ew)
        for (size_t i = 0; i < c->n; i++) c->x[i] = grad[i] + c->ew[i];
    else
        memcpy(c->x, grad, c->n * sizeof(float));
}

static pz_status wait_sends(pz_dp_creduce *c, int count) {
    pz_status st = PZ_OK;
    for (int i = 0; i < count; i++)
        if (c->sreq[i] && st == PZ_OK) {
            st = pz_dp_wait(c->g, c->sreq[i], NULL);
            c->sreq[i] = NULL;
        }
    return st;
}

/* ---- the modes --------------------------------------------------------------------- */

static pz_status run_allgather(pz_dp_creduce *c, const float *grad, float *out, uint64_t step) {
    pz_dp_group *g = c->g;
    int D = g->n, me = g->me;
    size_t n = c->n, len = 0;
    pz_status st = PZ_OK;
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != me)
            st = pz_dp_post(g, 0, i, PZ_DP_KIND_CGATHER, 0, c->rbuf + c->off[i], c->off[i + 1] - c->off[i], &c->rreq[i]);
    worker_input(c, grad);
    if (st == PZ_OK)
        st = encode(c, c->x, 0, n, PZ_DPMSG_ALLGATHER, 0, step, c->sbuf, c->soff[1], &len, c->q);
    if (st == PZ_OK && c->ew)
        for (size_t i = 0; i < n; i++) c->ew[i] = c->x[i] - c->q[i];
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != me) st = send_slot(c, i, PZ_DP_KIND_CGATHER, c->sbuf, len, &c->sreq[i]);
    memset(c->acc, 0, n * sizeof(float));
    for (int i = 0; i < D && st == PZ_OK; i++) {
        if (i == me) {
            add_into(c->acc, c->q, n);
            continue;
        }
        pz_dpmsg want = {PZ_DPMSG_ALLGATHER, (uint16_t)D, (uint16_t)i, 0, g->seq, 0, n, 0};
        st = take(c, c->rreq[i], i, c->rbuf + c->off[i], &want, step, c->tmp);
        c->rreq[i] = NULL;
        if (st == PZ_OK) add_into(c->acc, c->tmp, n);
    }
    if (st == PZ_OK) st = wait_sends(c, D);
    if (st == PZ_OK)
        for (size_t i = 0; i < n; i++) out[i] = c->acc[i] / (float)D;
    return st;
}

/* Phase 2 of twophase on the owner: average the decoded chunks in group
 * order, add e_s, re-encode, keep e_s, the decoded result into out. */
static pz_status owner(pz_dp_creduce *c, float *out, uint64_t step, size_t *len) {
    pz_dp_group *g = c->g;
    int D = g->n, me = g->me;
    size_t lo = c->es_lo, m = c->es_len;
    float *acc = c->acc, *z = c->tmp + lo;
    pz_status st = PZ_OK;
    memset(acc, 0, m * sizeof(float));
    for (int i = 0; i < D && st == PZ_OK; i++) {
        if (i == me) {
            add_into(acc, c->q + lo, m);
            continue;
        }
        pz_dpmsg want = {PZ_DPMSG_TO_OWNER, (uint16_t)D, (uint16_t)i, (uint16_t)me, g->seq, lo, m, 0};
        st = take(c, c->rreq[i], i, c->rbuf + c->off[i], &want, step, c->tmp + lo);
        c->rreq[i] = NULL;
        if (st == PZ_OK) add_into(acc, c->tmp + lo, m);
    }
    if (st != PZ_OK) return st;
    for (size_t k = 0; k < m; k++) z[k] = acc[k] / (float)D + (c->es ? c->es[k] : 0.0f);
    uint8_t *slot = c->sbuf + c->soff[D];
    /* z sits at tmp[lo..): encode reads it there, the decoded result lands in out[lo..) */
    st = encode(c, c->tmp, lo, m, PZ_DPMSG_FROM_OWNER, me, step, slot, c->soff[D + 1] - c->soff[D], len, out);
    if (st == PZ_OK && c->es)
        for (size_t k = 0; k < m; k++) c->es[k] = z[k] - out[lo + k];
    return st;
}

static pz_status run_twophase(pz_dp_creduce *c, const float *grad, float *out, uint64_t step) {
    pz_dp_group *g = c->g;
    int D = g->n, me = g->me;
    size_t n = c->n, lo, hi, len = 0;
    pz_status st = PZ_OK;
    for (int i = 0; i < D && st == PZ_OK; i++) {
        if (i == me) continue;
        st = pz_dp_post(g, 0, i, PZ_DP_KIND_CPHASE1, 0, c->rbuf + c->off[i], c->off[i + 1] - c->off[i], &c->rreq[i]);
        if (st == PZ_OK)
            st = pz_dp_post(g, 0, i, PZ_DP_KIND_CPHASE2, 0, c->rbuf + c->off[D + i], c->off[D + i + 1] - c->off[D + i],
                            &c->rreq[D + i]);
    }
    worker_input(c, grad);
    /* phase 1: chunk j to its owner, starting after this member so that the
     * owners are not all sent to at once */
    for (int k = 1; k <= D && st == PZ_OK; k++) {
        int j = (me + k) % D;
        pz_dp_chunk(n, D, j, &lo, &hi);
        st = encode(c, c->x, lo, hi - lo, PZ_DPMSG_TO_OWNER, j, step, c->sbuf + c->soff[j], c->soff[j + 1] - c->soff[j],
                    &len, c->q);
        if (st == PZ_OK && c->ew)
            for (size_t i = lo; i < hi; i++) c->ew[i] = c->x[i] - c->q[i];
        if (st == PZ_OK && j != me) st = send_slot(c, j, PZ_DP_KIND_CPHASE1, c->sbuf + c->soff[j], len, &c->sreq[j]);
    }
    if (st == PZ_OK) st = owner(c, out, step, &len);
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != me) st = send_slot(c, i, PZ_DP_KIND_CPHASE2, c->sbuf + c->soff[D], len, &c->sreq[D + i]);
    for (int j = 0; j < D && st == PZ_OK; j++) {
        if (j == me) continue;
        pz_dp_chunk(n, D, j, &lo, &hi);
        pz_dpmsg want = {PZ_DPMSG_FROM_OWNER, (uint16_t)D, (uint16_t)j, (uint16_t)j, g->seq, lo, hi - lo, 0};
        st = take(c, c->rreq[D + j], j, c->rbuf + c->off[D + j], &want, step, out + lo);
        c->rreq[D + j] = NULL;
    }
    if (st == PZ_OK) st = wait_sends(c, 2 * D);
    return st;
}

static pz_status run_hier(pz_dp_creduce *c, const float *grad, float *out, uint64_t step) {
    size_t n = c->n;
    memcpy(c->acc, grad, n * sizeof(float));
    pz_status st = pz_dp_allreduce(&c->host, c->acc, n, 1, PZ_DP_AUTO);   /* the host's mean */
    if (st != PZ_OK) return st;
    if (c->leader) {
        st = pz_dp_creduce_run(c->inner, c->acc, out, step);
        /* the leaders' traffic, by the full group's index */
        const uint64_t *in = pz_dp_creduce_sent_to(c->inner);
        int L = c->g->n / c->o.hosts;
        for (int h = 0; h < c->o.hosts; h++) c->sent_to[h * L] = in[h];
    }
    /* the leader (the host's first member) shares the result */
    if (st == PZ_OK) st = pz_dp_broadcast(&c->host, 0, out, n);
    return st;
}

pz_status pz_dp_creduce_run(pz_dp_creduce *c, const float *grad, float *out, uint64_t step) {
    if (!c || !grad || !out) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: NULL argument");
    pz_status st;
    if (c->o.mode == PZ_DP_HIERARCHICAL) {
        st = run_hier(c, grad, out, step);
        c->g->seq++;
        return st;
    }
    if (c->g->n == 1) {
        /* one replica: the codec round trip with error feedback all the same */
        size_t len = 0;
        worker_input(c, grad);
        st = encode(c, c->x, 0, c->n, PZ_DPMSG_ALLGATHER, 0, step, c->sbuf, c->soff[1], &len, out);
        if (st == PZ_OK && c->ew)
            for (size_t i = 0; i < c->n; i++) c->ew[i] = c->x[i] - out[i];
        c->g->seq++;
        return st;
    }
    st = c->o.mode == PZ_DP_ALLGATHER ? run_allgather(c, grad, out, step) : run_twophase(c, grad, out, step);
    c->g->seq++;
    return st;
}

const float *pz_dp_creduce_worker_error(const pz_dp_creduce *c, size_t *len) {
    if (c->inner) return pz_dp_creduce_worker_error(c->inner, len);
    *len = c->ew ? c->n : 0;
    return c->ew;
}

void pz_dp_creduce_ef_floats(const pz_dp_copts *o, size_t n, int D, int me, size_t *worker, size_t *server) {
    size_t lo, hi;
    *worker = *server = 0;
    int H = o->mode == PZ_DP_HIERARCHICAL ? o->hosts : 0, L = H > 0 ? D / H : 1;
    if (!o->ef || D < 1 || (H > 0 && (L < 1 || me % L != 0))) return;   /* hierarchical: a leader's, inner twophase */
    if (H > 0) D = H, me /= L;
    *worker = n;
    if (o->mode == PZ_DP_ALLGATHER) return;
    pz_dp_chunk(n, D, me, &lo, &hi);
    *server = hi - lo;
}

const float *pz_dp_creduce_server_error(const pz_dp_creduce *c, size_t *lo, size_t *len) {
    if (c->inner) return pz_dp_creduce_server_error(c->inner, lo, len);
    *lo = c->es ? c->es_lo : 0;
    *len = c->es ? c->es_len : 0;
    return c->es;
}

size_t pz_dp_creduce_bytes(const pz_dp_creduce *c) {
    if (!c) return 0;
    size_t f = sizeof(float), D = (size_t)c->g->n, b = sizeof *c;
    b += ((c->x != NULL) + (c->q != NULL) + (c->tmp != NULL) + (c->acc != NULL) + (c->ew != NULL)) * c->n * f;
    b += c->es ? c->es_len * f : 0;
    if (c->off) b += c->off[c->o.mode == PZ_DP_ALLGATHER ? D : 2 * D];   /* receive slots */
    if (c->soff) b += c->soff[c->o.mode == PZ_DP_ALLGATHER ? 1 : D + 1]; /* send slots */
    b += D * sizeof *c->sent_to;
    b += c->host.scratch_n * f;
    if (c->inner) b += pz_dp_creduce_bytes(c->inner) + c->leaders->scratch_n * f;
    return b;
}

const uint64_t *pz_dp_creduce_sent_to(const pz_dp_creduce *c) { return c->sent_to; }

size_t pz_dp_creduce_max_message(const pz_dp_creduce *c) {
    if (c->o.mode == PZ_DP_HIERARCHICAL) return c->inner ? pz_dp_creduce_max_message(c->inner) : 0;
    int slots = c->o.mode == PZ_DP_ALLGATHER ? c->g->n : 2 * c->g->n;
    size_t most = 0;
    for (int i = 0; i < slots; i++)
        if (c->off[i + 1] - c->off[i] > most) most = c->off[i + 1] - c->off[i];
    return most;
}

void pz_dp_creduce_set_tap(pz_dp_creduce *c, pz_dp_tap fn, void *user) {
    c->tap = fn;
    c->tap_user = user;
    if (c->inner) pz_dp_creduce_set_tap(c->inner, fn, user);
}

static double sent_by(const pz_dp_creduce *c, int members) {
    double b = 0.0;
    for (int j = 0; c && j < members; j++) b += (double)pz_dp_creduce_sent_to(c)[j];
    return b;
}

pz_status pz_dp_creduce_exchange(pz_dp_creduce *c, pz_dp_group *g, float *u, size_t n, uint64_t step, int compressed,
                                 double *fig) {
    double t0 = pz_now(), b0 = sent_by(c, g->n), g0 = (double)g->bytes_sent;
    pz_status st = compressed ? pz_dp_creduce_run(c, u, u, step)
                 : g->n > 1 ? pz_dp_allreduce(g, u, n, 1, PZ_DP_AUTO) : PZ_OK;
    fig[0] += (double)n * sizeof(float);
    fig[1] += compressed ? sent_by(c, g->n) - b0 : (double)g->bytes_sent - g0;
    fig[2] += pz_now() - t0;
    return st;
}
