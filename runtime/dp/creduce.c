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

/* Bucket b's slots from rbuf offset *r and sbuf offset *s on: allgather,
 * receive slot i from member i (D + 1 offsets), send slot 0; twophase,
 * receive slots 0..D-1 phase 1 from member i (my part), D..2D-1 phase 2
 * from owner j (part j), send slots 0..D-1 my phase-1 message for part j,
 * D my phase 2. */
static void bucket_slots(pz_dp_creduce *c, pz_dp_cbucket *b, size_t *r, size_t *s) {
    int D = c->g->n;
    size_t lo, hi;
    if (c->o.mode == PZ_DP_ALLGATHER) {
        size_t cap = slot_cap(c, b->n);
        for (int i = 0; i <= D; i++) b->off[i] = *r + (size_t)i * cap;
        b->soff[0] = *s;
        b->soff[1] = *s + cap;
        *r = b->off[D];
        *s = b->soff[1];
        return;
    }
    size_t mine = slot_cap(c, b->es_len), at = *r;
    for (int i = 0; i < D; i++, at += mine) b->off[i] = at;
    for (int j = 0; j < D; j++) {
        b->off[D + j] = at;
        pz_dp_chunk(b->n, D, j, &lo, &hi);
        at += slot_cap(c, hi - lo);
    }
    b->off[2 * D] = *r = at;
    at = *s;
    for (int j = 0; j < D; j++) {
        b->soff[j] = at;
        pz_dp_chunk(b->n, D, j, &lo, &hi);
        at += slot_cap(c, hi - lo);
    }
    b->soff[D] = at;
    b->soff[D + 1] = *s = at + mine;
}

static pz_status flat_create(pz_dp_creduce *c) {
    int D = c->g->n, me = c->g->me;
    size_t n = c->n, D2 = (size_t)2 * D, r = 0, s = 0;
    c->x = xmalloc(n * sizeof(float));
    c->q = xmalloc(n * sizeof(float));
    c->tmp = xmalloc(n * sizeof(float));
    c->acc = xmalloc(n * sizeof(float));
    if (c->o.ef) c->ew = xcalloc(n, sizeof(float));
    size_t per = (D2 + 1) + ((size_t)D + 2) + D2;   /* off, soff, rlen */
    c->offs = xcalloc((size_t)c->nb * per, sizeof *c->offs);
    c->reqs = xcalloc((size_t)c->nb * 2 * D2, sizeof *c->reqs);
    c->flags = xcalloc((size_t)c->nb * D2, 1);
    for (int k = 0; k < c->nb; k++) {
        pz_dp_cbucket *b = &c->b[k];
        b->off = c->offs + (size_t)k * per;
        b->soff = b->off + D2 + 1;
        b->rlen = b->soff + D + 2;
        b->rreq = c->reqs + (size_t)k * 2 * D2;
        b->sreq = b->rreq + D2;
        b->used = c->flags + (size_t)k * D2;
        if (c->o.mode != PZ_DP_ALLGATHER) {
            size_t lo, hi;
            pz_dp_chunk(b->n, D, me, &lo, &hi);
            b->es_lo = b->lo + lo;
            b->es_len = hi - lo;
            b->es_at = c->es_len;
            c->es_len += b->es_len;
        }
        bucket_slots(c, b, &r, &s);
    }
    if (c->o.ef && c->o.mode != PZ_DP_ALLGATHER) c->es = xcalloc(c->es_len ? c->es_len : 1, sizeof(float));
    c->rbuf = xmalloc(r ? r : 1);
    c->sbuf = xmalloc(s ? s : 1);
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
    c->reqs = xcalloc((size_t)c->nb * L, sizeof *c->reqs);   /* each bucket's broadcast */
    for (int k = 0; k < c->nb; k++) c->b[k].rreq = c->reqs + (size_t)k * L;
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
    if (o->bucket && o->hold > n)
        return pz_fail(PZ_ERR_ARG, "dp compressed reduction: held prefix of %zu floats in a vector of %zu", o->hold, n);
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
    c->nb = pz_dp_buckets(n, o->hold, o->bucket, NULL, NULL);
    size_t *lo = xcalloc((size_t)c->nb * 2, sizeof *lo);
    pz_dp_buckets(n, o->hold, o->bucket, lo, lo + c->nb);
    c->b = xcalloc((size_t)c->nb, sizeof *c->b);
    for (int k = 0; k < c->nb; k++) c->b[k].lo = lo[k], c->b[k].n = lo[c->nb + k] - lo[k];
    free(lo);
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
    PZ_FREE_ALL(c->x, c->q, c->tmp, c->acc, c->ew, c->es, c->b, c->offs, c->reqs, c->flags, c->rbuf, c->sbuf,
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
                        uint32_t seq, uint8_t *slot, size_t cap, size_t *len, float *q) {
    pz_shape s = {1, {(int64_t)cnt}}, got;
    pz_codec_ctx ctx = codec_ctx(c, step, phase, chunk);
    size_t ml = 0;
    pz_status st = pz_codec_encode(c->codec, x + lo, &s, &ctx, slot + PZ_DPMSG_HDR, cap - PZ_DPMSG_HDR, &ml);
    if (st != PZ_OK) return st;
    pz_dpmsg h = {(uint8_t)phase, (uint16_t)c->g->n, (uint16_t)c->g->me, (uint16_t)chunk, seq, lo, cnt, ml};
    pz_dpmsg_put(slot, &h);
    *len = PZ_DPMSG_HDR + ml;
    if (c->tap) c->tap(c->tap_user, phase, chunk, lo, cnt, slot + PZ_DPMSG_HDR, ml);
    st = pz_codec_decode(c->codec, slot + PZ_DPMSG_HDR, ml, &ctx, q + lo, cnt, &got);
    if (st == PZ_OK && pz_shape_numel(&got) != cnt)
        st = pz_fail(PZ_ERR_FORMAT, "dp: own message decodes to %zu elements, not %zu", pz_shape_numel(&got), cnt);
    return st;
}

static pz_status send_slot(pz_dp_creduce *c, const pz_dp_cbucket *b, int peer, unsigned kind, size_t slot,
                           size_t len, pz_request **req) {
    c->sent_to[peer] += len;
    return pz_dp_post_at(c->g, b->seq, 1, peer, kind, 0, c->sbuf + b->soff[slot], len, req);
}

static pz_status post_recv(pz_dp_creduce *c, pz_dp_cbucket *b, int peer, unsigned kind, int slot) {
    return pz_dp_post_at(c->g, b->seq, 0, peer, kind, 0, c->rbuf + b->off[slot], b->off[slot + 1] - b->off[slot],
                         &b->rreq[slot]);
}

/* Whether receive slot i of b has arrived (block: waits for it); a slot
 * never posted counts as arrived. */
static pz_status arrived(pz_dp_creduce *c, pz_dp_cbucket *b, int i, int block, int *yes) {
    *yes = b->rreq[i] == NULL;
    if (*yes) return PZ_OK;
    size_t len = 0;
    int d = 1;
    pz_status st = block ? pz_dp_wait(c->g, b->rreq[i], &len) : pz_transport_test(c->g->t, b->rreq[i], &d, &len);
    if (st != PZ_OK || d) b->rreq[i] = NULL;
    if (st == PZ_OK && d) {
        b->rlen[i] = len;
        c->g->bytes_recv += len;
        *yes = 1;
    }
    return st;
}

/* Whether receive slots [from, to) of b have all arrived. */
static pz_status all_arrived(pz_dp_creduce *c, pz_dp_cbucket *b, int from, int to, int block, int *all) {
    *all = 1;
    for (int i = from; i < to; i++) {
        int y = 0;
        pz_status st = arrived(c, b, i, block, &y);
        if (st != PZ_OK) return st;
        if (!y) *all = 0;
    }
    return PZ_OK;
}

/* Whether every send of b has completed (block: waits for them). */
static pz_status sends_done(pz_dp_creduce *c, pz_dp_cbucket *b, int block, int *all) {
    *all = 1;
    for (int i = 0; i < 2 * c->g->n; i++) {
        if (!b->sreq[i]) continue;
        int d = 1;
        pz_status st = block ? pz_dp_wait(c->g, b->sreq[i], NULL) : pz_transport_test(c->g->t, b->sreq[i], &d, NULL);
        if (st != PZ_OK || d) b->sreq[i] = NULL;
        if (st != PZ_OK) return st;
        if (!d) *all = 0;
    }
    return PZ_OK;
}

/* Member src's message in receive slot `slot` of b (arrived): checks its
 * header and codec message against want and decodes it into out
 * (want->count floats). */
static pz_status take(pz_dp_creduce *c, const pz_dp_cbucket *b, int slot, int src, const pz_dpmsg *want, float *out) {
    size_t got = b->rlen[slot];
    const uint8_t *buf = c->rbuf + b->off[slot];
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
    pz_status st = pz_codec_peek_framed(buf + PZ_DPMSG_HDR, got - PZ_DPMSG_HDR, spec, sizeof spec, &s);
    if (st == PZ_OK) {
        char *z = strstr(spec, "+zstd");
        if (z) *z = 0;
        if (strcmp(spec, c->base_spec) != 0)
            return pz_fail(PZ_ERR_PEER, "rank %d: dp reduction #%u: rank %d's message was written by codec '%s', this "
                           "replica runs '%s'", me_rank, want->seq, src_rank, spec, c->base_spec);
    }
    pz_codec_ctx ctx = codec_ctx(c, b->step, want->phase, want->chunk);
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

/* x = g + e_w (or g) over [lo, lo + n) */
static void worker_input(pz_dp_creduce *c, const float *grad, size_t lo, size_t n) {
    if (c->ew)
        for (size_t i = lo; i < lo + n; i++) c->x[i] = grad[i] + c->ew[i];
    else
        memcpy(c->x + lo, grad + lo, n * sizeof(float));
}

/* encode x[lo, lo + n) into send slot `slot` (decoded into q), e_w = x - q */
static pz_status encode_worker(pz_dp_creduce *c, pz_dp_cbucket *b, size_t lo, size_t n, int phase, int chunk, int slot,
                               size_t *len) {
    pz_status st = encode(c, c->x, lo, n, phase, chunk, b->step, b->seq, c->sbuf + b->soff[slot],
                          b->soff[slot + 1] - b->soff[slot], len, c->q);
    if (st == PZ_OK && c->ew)
        for (size_t i = lo; i < lo + n; i++) c->ew[i] = c->x[i] - c->q[i];
    return st;
}

/* ---- the modes: a bucket's start and advance --------------------------------------- */

static pz_status allgather_start(pz_dp_creduce *c, pz_dp_cbucket *b) {
    int D = c->g->n, me = c->g->me;
    size_t len = 0;
    pz_status st = PZ_OK;
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != me) st = post_recv(c, b, i, PZ_DP_KIND_CGATHER, i);
    worker_input(c, b->grad, b->lo, b->n);
    if (st == PZ_OK) st = encode_worker(c, b, b->lo, b->n, PZ_DPMSG_ALLGATHER, 0, 0, &len);
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != me) st = send_slot(c, b, i, PZ_DP_KIND_CGATHER, 0, len, &b->sreq[i]);
    return st;
}

/* every member's message in: their sum in group order, / D, into out */
static pz_status allgather_finish(pz_dp_creduce *c, pz_dp_cbucket *b) {
    int D = c->g->n, me = c->g->me;
    size_t lo = b->lo, n = b->n;
    pz_status st = PZ_OK;
    memset(c->acc + lo, 0, n * sizeof(float));
    for (int i = 0; i < D && st == PZ_OK; i++) {
        if (i == me) {
            add_into(c->acc + lo, c->q + lo, n);
            continue;
        }
        pz_dpmsg want = {PZ_DPMSG_ALLGATHER, (uint16_t)D, (uint16_t)i, 0, b->seq, lo, n, 0};
        st = take(c, b, i, i, &want, c->tmp + lo);
        if (st == PZ_OK) add_into(c->acc + lo, c->tmp + lo, n);
    }
    for (size_t i = lo; i < lo + n && st == PZ_OK; i++) b->out[i] = c->acc[i] / (float)D;
    return st;
}

static pz_status twophase_start(pz_dp_creduce *c, pz_dp_cbucket *b) {
    int D = c->g->n, me = c->g->me;
    size_t lo, hi, len = 0;
    pz_status st = PZ_OK;
    for (int i = 0; i < D && st == PZ_OK; i++) {
        if (i == me) continue;
        pz_dp_chunk(b->n, D, i, &lo, &hi);
        if (b->es_len) st = post_recv(c, b, i, PZ_DP_KIND_CPHASE1, i);   /* an empty part (a bucket of < D floats): */
        if (st == PZ_OK && hi > lo) st = post_recv(c, b, i, PZ_DP_KIND_CPHASE2, D + i);   /* no messages */
    }
    worker_input(c, b->grad, b->lo, b->n);
    /* phase 1: part j to its owner, starting after this member so that the
     * owners are not all sent to at once */
    for (int k = 1; k <= D && st == PZ_OK; k++) {
        int j = (me + k) % D;
        pz_dp_chunk(b->n, D, j, &lo, &hi);
        if (hi == lo) continue;
        st = encode_worker(c, b, b->lo + lo, hi - lo, PZ_DPMSG_TO_OWNER, j, j, &len);
        if (st == PZ_OK && j != me) st = send_slot(c, b, j, PZ_DP_KIND_CPHASE1, j, len, &b->sreq[j]);
    }
    return st;
}

/* The owner, once its D parts are in: average them in group order, add
 * e_s, re-encode, keep e_s, its result into out, and send it to all. */
static pz_status owner(pz_dp_creduce *c, pz_dp_cbucket *b) {
    int D = c->g->n, me = c->g->me;
    size_t lo = b->es_lo, m = b->es_len, len = 0;
    float *acc = c->acc + lo, *z = c->tmp + lo, *es = c->es ? c->es + b->es_at : NULL;
    pz_status st = PZ_OK;
    if (m == 0) return PZ_OK;
    memset(acc, 0, m * sizeof(float));
    for (int i = 0; i < D && st == PZ_OK; i++) {
        if (i == me) {
            add_into(acc, c->q + lo, m);
            continue;
        }
        pz_dpmsg want = {PZ_DPMSG_TO_OWNER, (uint16_t)D, (uint16_t)i, (uint16_t)me, b->seq, lo, m, 0};
        st = take(c, b, i, i, &want, z);
        if (st == PZ_OK) add_into(acc, z, m);
    }
    if (st != PZ_OK) return st;
    for (size_t k = 0; k < m; k++) z[k] = acc[k] / (float)D + (es ? es[k] : 0.0f);
    /* z sits at tmp[lo..): encode reads it there, the decoded result lands in out[lo..) */
    st = encode(c, c->tmp, lo, m, PZ_DPMSG_FROM_OWNER, me, b->step, b->seq, c->sbuf + b->soff[D],
                b->soff[D + 1] - b->soff[D], &len, b->out);
    if (st == PZ_OK && es)
        for (size_t k = 0; k < m; k++) es[k] = z[k] - b->out[lo + k];
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != me) st = send_slot(c, b, i, PZ_DP_KIND_CPHASE2, D, len, &b->sreq[D + i]);
    return st;
}

/* phase 2: each owner's result into out as it arrives; *all when every one is in */
static pz_status from_owners(pz_dp_creduce *c, pz_dp_cbucket *b, int block, int *all) {
    int D = c->g->n, me = c->g->me;
    *all = 1;
    for (int j = 0; j < D; j++) {
        size_t lo, hi;
        int y = 0;
        pz_dp_chunk(b->n, D, j, &lo, &hi);
        if (j == me || hi == lo || b->used[D + j]) continue;
        pz_status st = arrived(c, b, D + j, block, &y);
        if (st == PZ_OK && y) {
            pz_dpmsg want = {PZ_DPMSG_FROM_OWNER, (uint16_t)D, (uint16_t)j, (uint16_t)j, b->seq, b->lo + lo, hi - lo, 0};
            st = take(c, b, D + j, j, &want, b->out + b->lo + lo);
            b->used[D + j] = 1;
        }
        if (st != PZ_OK) return st;
        if (!y) *all = 0;
    }
    return PZ_OK;
}

/* Moves bucket b as far as what has arrived allows (block: to its end). */
static pz_status advance(pz_dp_creduce *c, pz_dp_cbucket *b, int block, int *done) {
    int D = c->g->n, all = 0;
    pz_status st = PZ_OK;
    *done = 0;
    if (b->phase == 1) {
        st = all_arrived(c, b, 0, D, block, &all);
        if (st == PZ_OK && all) {
            st = c->o.mode == PZ_DP_ALLGATHER ? allgather_finish(c, b) : owner(c, b);
            b->phase = c->o.mode == PZ_DP_ALLGATHER ? 3 : 2;
        }
    }
    if (st == PZ_OK && b->phase == 2) {
        st = from_owners(c, b, block, &all);
        if (st == PZ_OK && all) b->phase = 3;
    }
    if (st == PZ_OK && b->phase == 3) {
        st = sends_done(c, b, block, &all);
        if (st == PZ_OK && all) b->phase = 0, *done = 1;
    }
    if (st != PZ_OK) b->phase = 0;   /* after an error the transport is closed (group.h) */
    return st;
}

/* ---- hierarchical: a bucket in three stages ---------------------------------------- */

/* the leaders' traffic, by the full group's index */
static void hier_count(pz_dp_creduce *c) {
    const uint64_t *in = pz_dp_creduce_sent_to(c->inner);
    int L = c->g->n / c->o.hosts;
    for (int h = 0; h < c->o.hosts; h++) c->sent_to[h * L] = in[h];
}

/* Stage 1 starts: the host's uncompressed mean of the bucket in acc,
 * without blocking (shared memory or the ring, as pz_dp_allreduce picks:
 * the same bits). The broadcast's number is taken now, so that a host's
 * members number it alike whatever order their buckets end in; a member
 * posts its receive of the leader's result at once. */
static pz_status hier_start(pz_dp_creduce *c, pz_dp_cbucket *b) {
    memcpy(c->acc + b->lo, b->grad + b->lo, b->n * sizeof(float));
    pz_status st = pz_dp_allreduce_start(&c->host, c->acc + b->lo, b->n, 1, PZ_DP_AUTO, &b->hop);
    b->hseq = c->host.seq++;
    if (st == PZ_OK && !c->leader) st = pz_dp_broadcast_post(&c->host, b->hseq, 0, b->out + b->lo, b->n, b->rreq);
    return st;
}

/* Stage 1 ends, stage 2 starts: once the host's mean of bucket k is in, a
 * leader starts its twophase bucket over the leaders (a member just waits
 * for the broadcast, stage 3). The leaders start those in bucket order (each
 * takes the leaders' collective number), whatever order their hosts' means
 * end in: bucket k waits for the ones before it (block: moves them on). */
static pz_status hier_host(pz_dp_creduce *c, int k, int block) {
    pz_dp_cbucket *b = &c->b[k];
    pz_status st = PZ_OK;
    if (b->hop) {
        int d = 1;
        st = block ? pz_dp_op_wait(b->hop) : pz_dp_op_test(b->hop, &d);
        if (st != PZ_OK || d) b->hop = NULL;   /* the op frees itself then */
        if (st != PZ_OK || !d) return st;
    }
    if (!c->leader) {
        b->phase = 3;
        return PZ_OK;
    }
    while (block && c->hnext != k && st == PZ_OK) {   /* the buckets before k first */
        if (c->b[c->hnext].phase != 1)
            return pz_fail(PZ_ERR_ARG, "dp compressed reduction: hierarchical bucket %d started before bucket %d", k,
                           c->hnext);
        st = hier_host(c, c->hnext, 1);
    }
    if (st != PZ_OK || c->hnext != k) return st;
    c->hnext = (k + 1) % c->nb;
    b->phase = 2;
    st = pz_dp_creduce_start(c->inner, k, c->acc, b->out, b->step);
    hier_count(c);
    return st;
}

/* Moves hierarchical bucket k as far as what has arrived allows (block: to
 * its end): the host's mean; the leader's twophase bucket, its result into
 * out; the leader's result to its host. */
static pz_status hier_advance(pz_dp_creduce *c, int k, int block, int *done) {
    pz_dp_cbucket *b = &c->b[k];
    pz_status st = PZ_OK;
    int d = 0;
    *done = 0;
    if (b->phase == 1) st = hier_host(c, k, block);
    if (st == PZ_OK && b->phase == 2) {
        st = block ? pz_dp_creduce_wait(c->inner, k) : pz_dp_creduce_test(c->inner, k, &d);
        hier_count(c);
        if (st == PZ_OK && (block || d)) {
            st = pz_dp_broadcast_post(&c->host, b->hseq, 0, b->out + b->lo, b->n, b->rreq);
            b->phase = 3;
        }
    }
    if (st == PZ_OK && b->phase == 3) {
        st = pz_dp_broadcast_test(&c->host, b->hseq, 0, b->n, b->rreq, block, &d);
        if (st == PZ_OK && d) b->phase = 0, *done = 1;
    }
    if (st != PZ_OK) b->phase = 0;   /* after an error the transport is closed (group.h) */
    return st;
}

/* one replica: the codec round trip with error feedback all the same */
static pz_status alone_bucket(pz_dp_creduce *c, pz_dp_cbucket *b) {
    size_t len = 0;
    worker_input(c, b->grad, b->lo, b->n);
    pz_status st = encode(c, c->x, b->lo, b->n, PZ_DPMSG_ALLGATHER, 0, b->step, b->seq, c->sbuf + b->soff[0],
                          b->soff[1] - b->soff[0], &len, b->out);
    if (st == PZ_OK && c->ew)
        for (size_t i = b->lo; i < b->lo + b->n; i++) c->ew[i] = c->x[i] - b->out[i];
    return st;
}

int pz_dp_creduce_buckets(const pz_dp_creduce *c) { return c->nb; }

void pz_dp_creduce_range(const pz_dp_creduce *c, int k, size_t *lo, size_t *hi) {
    *lo = c->b[k].lo;
    *hi = c->b[k].lo + c->b[k].n;
}

pz_status pz_dp_creduce_start(pz_dp_creduce *c, int k, const float *grad, float *out, uint64_t step) {
    if (!c || !grad || !out) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: NULL argument");
    if (k < 0 || k >= c->nb) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: bucket %d of %d", k, c->nb);
    pz_dp_cbucket *b = &c->b[k];
    if (b->phase != 0) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: bucket %d started twice", k);
    pz_status st;
    b->grad = grad;
    b->out = out;
    b->step = step;
    b->seq = c->g->seq++;
    if (c->o.mode == PZ_DP_HIERARCHICAL) {
        st = hier_start(c, b);
        b->phase = st == PZ_OK ? 1 : 0;
        return st;
    }
    memset(b->used, 0, (size_t)2 * c->g->n);
    if (c->g->n == 1) return alone_bucket(c, b);
    st = c->o.mode == PZ_DP_ALLGATHER ? allgather_start(c, b) : twophase_start(c, b);
    b->phase = st == PZ_OK ? 1 : 0;
    return st;
}

pz_status pz_dp_creduce_test(pz_dp_creduce *c, int k, int *done) {
    *done = 1;
    if (!c || k < 0 || k >= c->nb) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: no bucket %d", k);
    if (!c->b[k].phase) return PZ_OK;
    return c->o.mode == PZ_DP_HIERARCHICAL ? hier_advance(c, k, 0, done) : advance(c, &c->b[k], 0, done);
}

pz_status pz_dp_creduce_wait(pz_dp_creduce *c, int k) {
    int done = 1;
    if (!c || k < 0 || k >= c->nb) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: no bucket %d", k);
    if (!c->b[k].phase) return PZ_OK;
    return c->o.mode == PZ_DP_HIERARCHICAL ? hier_advance(c, k, 1, &done) : advance(c, &c->b[k], 1, &done);
}

pz_status pz_dp_creduce_run(pz_dp_creduce *c, const float *grad, float *out, uint64_t step) {
    if (!c || !grad || !out) return pz_fail(PZ_ERR_ARG, "dp compressed reduction: NULL argument");
    pz_status st = PZ_OK;
    for (int k = 0; k < c->nb && st == PZ_OK; k++) st = pz_dp_creduce_start(c, k, grad, out, step);
    for (int k = 0; k < c->nb && st == PZ_OK; k++) st = pz_dp_creduce_wait(c, k);
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
    int nb = pz_dp_buckets(n, o->hold, o->bucket, NULL, NULL);
    size_t *b = xcalloc((size_t)nb * 2 + 1, sizeof *b);
    pz_dp_buckets(n, o->hold, o->bucket, b, b + nb);
    for (int k = 0; k < nb; k++) {   /* this member's part of every bucket */
        pz_dp_chunk(b[nb + k] - b[k], D, me, &lo, &hi);
        *server += hi - lo;
    }
    free(b);
}

const float *pz_dp_creduce_server_error(const pz_dp_creduce *c, size_t *lo, size_t *len) {
    if (c->inner) return pz_dp_creduce_server_error(c->inner, lo, len);
    *lo = c->es ? c->b[0].es_lo : 0;
    *len = c->es ? c->es_len : 0;
    return c->es;
}

size_t pz_dp_creduce_bytes(const pz_dp_creduce *c) {
    if (!c) return 0;
    size_t f = sizeof(float), D = (size_t)c->g->n, b = sizeof *c;
    b += ((c->x != NULL) + (c->q != NULL) + (c->tmp != NULL) + (c->acc != NULL) + (c->ew != NULL)) * c->n * f;
    b += c->es ? c->es_len * f : 0;
    b += (size_t)c->nb * sizeof *c->b;
    if (c->offs) {   /* the buckets' slots (the last bucket's end is the buffers' size) and tables */
        const pz_dp_cbucket *l = &c->b[c->nb - 1];
        b += l->off[c->o.mode == PZ_DP_ALLGATHER ? D : 2 * D] + l->soff[c->o.mode == PZ_DP_ALLGATHER ? 1 : D + 1];
        b += (size_t)c->nb * (((5 * D + 3) * sizeof *c->offs) + 4 * D * sizeof *c->reqs + 2 * D);
    }
    b += D * sizeof *c->sent_to;
    b += c->host.scratch_n * f;
    if (c->o.mode == PZ_DP_HIERARCHICAL)   /* each bucket's broadcast requests and its host all-reduce in flight */
        for (int k = 0; k < c->nb; k++) b += c->host.n * sizeof *c->reqs + pz_dp_op_bytes(c->b[k].n, c->host.n);
    if (c->inner) b += pz_dp_creduce_bytes(c->inner) + c->leaders->scratch_n * f;
    return b;
}

const uint64_t *pz_dp_creduce_sent_to(const pz_dp_creduce *c) { return c->sent_to; }

size_t pz_dp_creduce_max_message(const pz_dp_creduce *c) {
    if (c->o.mode == PZ_DP_HIERARCHICAL) return c->inner ? pz_dp_creduce_max_message(c->inner) : 0;
    int slots = c->o.mode == PZ_DP_ALLGATHER ? c->g->n : 2 * c->g->n;
    size_t most = 0;
    for (int k = 0; k < c->nb; k++)
        for (int i = 0; i < slots; i++)
            if (c->b[k].off[i + 1] - c->b[k].off[i] > most) most = c->b[k].off[i + 1] - c->b[k].off[i];
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
