/* group.c: see group.h. */
#include "runtime/dp/group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/clock.h"
#include "base/crc32c.h"
#include "base/mem.h"
#include "runtime/dp/shm.h"

/* ring segments per chunk at most: the micro field (16 bits) holds
 * step x RING_MAXSEG + segment for 2(D-1) <= 510 steps */
#define RING_MAXSEG 64

pz_status pz_dp_group_init(pz_dp_group *g, pz_transport *t, int my_rank, const int *ranks, int n) {
    /* a group of one sends nothing: it may have no transport (binsgdm's
     * codec round trip in a process alone) */
    if (!g || (!t && n != 1) || !ranks) return pz_fail(PZ_ERR_ARG, "dp group: NULL argument");
    memset(g, 0, sizeof *g);
    if (n < 1 || n > PZ_DP_MAX) return pz_fail(PZ_ERR_ARG, "dp group: %d members (1..%d)", n, PZ_DP_MAX);
    g->me = -1;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] > 255)
            return pz_fail(PZ_ERR_ARG, "dp group: member %d is rank %d (ranks are 0..255)", i, ranks[i]);
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i]) return pz_fail(PZ_ERR_ARG, "dp group: rank %d listed twice", ranks[i]);
        if (ranks[i] == my_rank) g->me = i;
    }
    if (g->me < 0) return pz_fail(PZ_ERR_ARG, "dp group: this rank (%d) is not a member", my_rank);
    g->t = t;
    g->n = n;
    g->ranks = xmalloc((size_t)n * sizeof *g->ranks);
    memcpy(g->ranks, ranks, (size_t)n * sizeof *ranks);
    g->small_bytes = PZ_DP_SMALL_BYTES;
    g->seg_bytes = PZ_DP_SEG_BYTES;
    return PZ_OK;
}

void pz_dp_group_free(pz_dp_group *g) {
    if (!g) return;
    pz_dp_shm_free(g);
    free(g->ranks);
    free(g->scratch);
    memset(g, 0, sizeof *g);
}

void pz_dp_layout_ranks(pz_dp_layout layout, int stage, int S, int D, int *ranks) {
    for (int r = 0; r < D; r++) ranks[r] = layout == PZ_DP_LAYOUT_STRIDED ? r * S + stage : stage * D + r;
}

int pz_dp_layout_stage(pz_dp_layout layout, int rank, int S, int D) {
    return layout == PZ_DP_LAYOUT_STRIDED ? rank % S : rank / D;
}

void pz_dp_group_set_link(pz_dp_group *g, int hosts, double mbps, double latency_ms) {
    int per_host = hosts > 0 && g->n % hosts == 0 ? g->n / hosts : 1;
    if (per_host < g->n) g->net_only = 1;   /* not one host: the network */
    for (int i = 0; i < g->n; i++)
        if (i / per_host != g->me / per_host) pz_transport_set_link(g->t, g->ranks[i], mbps, latency_ms);
}

float *pz_dp_scratch(pz_dp_group *g, size_t n) {
    if (n > g->scratch_n) {
        free(g->scratch);
        g->scratch = xmalloc((n ? n : 1) * sizeof(float));
        g->scratch_n = n;
    }
    return g->scratch;
}

void pz_dp_chunk(size_t n, int parts, int j, size_t *lo, size_t *hi) {
    size_t q = n / (size_t)parts, r = n % (size_t)parts, uj = (size_t)j;
    *lo = uj * q + (uj < r ? uj : r);
    *hi = *lo + q + (uj < r ? 1 : 0);
}

int pz_dp_buckets(size_t n, size_t hold, size_t bf, size_t *lo, size_t *hi) {
    if (bf == 0 || hold > n) {
        if (lo && n) lo[0] = 0, hi[0] = n;
        return n ? 1 : 0;
    }
    int k = 0;
    size_t part[2][2] = {{hold, n}, {0, hold}};   /* the rest from the top down, then the held prefix */
    for (int p = 0; p < 2; p++)
        for (size_t top = part[p][1]; top > part[p][0]; k++) {
            size_t bot = top - part[p][0] > bf ? top - bf : part[p][0];
            if (lo) lo[k] = bot, hi[k] = top;
            top = bot;
        }
    return k;
}

/* ---- messages ---------------------------------------------------------------- */

pz_status pz_dp_post_at(pz_dp_group *g, uint32_t seq, int is_send, int peer, unsigned kind, uint32_t k, void *buf,
                        size_t bytes, pz_request **req) {
    char what[96];
    int src = is_send ? g->ranks[g->me] : g->ranks[peer];
    snprintf(what, sizeof what, "dp %s #%u message %u (kind 0x%x) %s rank %d", is_send ? "send" : "receive",
             seq, k, kind, is_send ? "to" : "from", g->ranks[peer]);
    uint64_t tag = pz_tag(src, seq, k, kind);
    if (is_send) {
        g->bytes_sent += bytes;
        return pz_transport_send(g->t, g->ranks[peer], tag, buf, bytes, what, req);
    }
    return pz_transport_recv(g->t, g->ranks[peer], tag, buf, bytes, what, req);
}


pz_status pz_dp_post(pz_dp_group *g, int is_send, int peer, unsigned kind, uint32_t k, void *buf, size_t bytes,
                     pz_request **req) {
    return pz_dp_post_at(g, g->seq, is_send, peer, kind, k, buf, bytes, req);
}

pz_status pz_dp_wait(pz_dp_group *g, pz_request *r, size_t *len) {
    if (g->spin_s > 0) {
        double until = pz_now() + g->spin_s;
        do {
            int done = 0;
            pz_status st = pz_transport_test(g->t, r, &done, len);
            if (st != PZ_OK || done) return st;   /* r is freed either way */
        } while (pz_now() < until);
    }
    return pz_transport_wait(g->t, r, len);
}

pz_status pz_dp_wait_recv(pz_dp_group *g, pz_request *r, size_t *got) {
    *got = 0;
    pz_status st = pz_dp_wait(g, r, got);
    if (st == PZ_OK) g->bytes_recv += *got;
    return st;
}

/* Waits for a receive of exactly `bytes` (a peer that sends another size has
 * another idea of the vector: mismatched calls). */
static pz_status wait_exact(pz_dp_group *g, pz_request *r, int peer, size_t bytes) {
    size_t got = 0;
    pz_status st = pz_dp_wait_recv(g, r, &got);
    if (st != PZ_OK) return st;
    if (got != bytes)
        return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce #%u: rank %d sent %zu bytes, expected %zu (mismatched calls?)",
                       g->ranks[g->me], g->seq, g->ranks[peer], got, bytes);
    return PZ_OK;
}

static void add_into(float *restrict dst, const float *restrict src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

/* dst = (dst + src) / D: an average's last reduce-scatter step, so that the
 * all-gather passes the mean on and no pass over the whole vector follows.
 * The same bits as dividing afterwards: the owner divides the sum every
 * member would have divided (no contraction: -ffp-contract=off). */
static void add_mean_into(float *restrict dst, const float *restrict src, size_t n, int D) {
    const float d = (float)D;
    for (size_t i = 0; i < n; i++) dst[i] = (dst[i] + src[i]) / d;
}

/* ---- ring ------------------------------------------------------------------ */

/* An all-reduce in flight: the ring's state between calls (the blocking
 * pz_dp_allreduce is start + wait on the same object). */
struct pz_dp_op {
    pz_dp_group *g;
    float *buf, *scr, *own_scr;
    size_t n, maxchunk;
    int D, steps, mean;
    uint32_t seq;              /* the tags' step: the group's count when it started */
    int s, i, posted;          /* step and segment awaited; whether step s's receives are posted */
    pz_request **sends;        /* [steps][RING_MAXSEG] */
    pz_request *recvs[RING_MAXSEG];
    pz_dp_shm_op *shm;         /* the shared-memory path's op instead (shm.h) */
};

static int mod(int a, int D) { return ((a % D) + D) % D; }

/* the chunk rank me sends at step s (reduce-scatter s < D-1, then all-gather) */
static int send_chunk(const pz_dp_op *R, int s) {
    int me = R->g->me, D = R->D;
    return s < D - 1 ? mod(me - s, D) : mod(me + 1 - (s - (D - 1)), D);
}
static int recv_chunk(const pz_dp_op *R, int s) { return send_chunk(R, s + 1); }

/* segments of chunk c: count and element length of all but the last */
/* ring chunk c of n floats over D members: its range and segments */
static int chunk_segs(const pz_dp_group *g, size_t n, int D, int c, size_t *lo, size_t *hi, size_t *seglen) {
    pz_dp_chunk(n, D, c, lo, hi);
    size_t len = *hi - *lo, per = g->seg_bytes / sizeof(float);
    if (per == 0) per = 1;
    size_t ns = (len + per - 1) / per;
    if (ns > RING_MAXSEG) ns = RING_MAXSEG;
    *seglen = ns ? (len + ns - 1) / ns : 0;
    return (int)ns;
}

static int seg_count(const pz_dp_op *R, int c, size_t *lo, size_t *hi, size_t *seglen) {
    return chunk_segs(R->g, R->n, R->D, c, lo, hi, seglen);
}

size_t pz_dp_allreduce_max_message(const pz_dp_group *g, size_t n, pz_dp_algo algo) {
    if (g->n < 2 || n == 0) return 0;
    if (algo == PZ_DP_AUTO) algo = n * sizeof(float) <= g->small_bytes ? PZ_DP_RDOUBLING : PZ_DP_RING;
    if (algo == PZ_DP_RDOUBLING) return n * sizeof(float);
    size_t lo, hi, sl;
    chunk_segs(g, n, g->n, 0, &lo, &hi, &sl);   /* chunk 0 is the longest */
    return sl * sizeof(float);
}

static void seg_range(size_t lo, size_t hi, size_t seglen, int s, size_t *a, size_t *b) {
    *a = lo + (size_t)s * seglen;
    *b = *a + seglen < hi ? *a + seglen : hi;
}

static pz_status ring_post_recvs(pz_dp_op *R, int s) {
    size_t lo, hi, sl;
    int c = recv_chunk(R, s), ns = seg_count(R, c, &lo, &hi, &sl), left = mod(R->g->me - 1, R->D);
    float *dst = s < R->D - 1 ? R->scr + (size_t)(s % 2) * R->maxchunk - lo : R->buf;
    for (int i = 0; i < ns; i++) {
        size_t a, b;
        seg_range(lo, hi, sl, i, &a, &b);
        pz_status st = pz_dp_post_at(R->g, R->seq, 0, left, PZ_DP_KIND_RING, (uint32_t)(s * RING_MAXSEG + i),
                                     dst + a, (b - a) * sizeof(float), &R->recvs[i]);
        if (st != PZ_OK) return st;
    }
    return PZ_OK;
}

static pz_status ring_send(pz_dp_op *R, int s, int i) {
    size_t lo, hi, sl, a, b;
    seg_count(R, send_chunk(R, s), &lo, &hi, &sl);
    seg_range(lo, hi, sl, i, &a, &b);
    return pz_dp_post_at(R->g, R->seq, 1, mod(R->g->me + 1, R->D), PZ_DP_KIND_RING, (uint32_t)(s * RING_MAXSEG + i),
                         R->buf + a, (b - a) * sizeof(float), &R->sends[(size_t)s * RING_MAXSEG + i]);
}

/* Whether r finished (block: waits for it); r is freed when it did or failed. */
static pz_status finish(pz_dp_group *g, pz_request *r, int block, int *done, size_t *len) {
    *done = 0;
    if (!block) return pz_transport_test(g->t, r, done, len);
    *done = 1;
    return pz_dp_wait(g, r, len);
}

/* *all = whether every send of step s finished */
static pz_status sends_done(pz_dp_op *R, int s, int block, int *all) {
    *all = 1;
    for (int i = 0; i < RING_MAXSEG; i++) {
        pz_request **r = &R->sends[(size_t)s * RING_MAXSEG + i];
        if (!*r) continue;
        int d = 0;
        pz_status st = finish(R->g, *r, block, &d, NULL);
        if (st != PZ_OK || d) *r = NULL;
        if (st != PZ_OK) return st;
        if (!d) *all = 0;
    }
    return PZ_OK;
}

/* Receives step s's chunk segment by segment; in the reduce-scatter adds it
 * into buf, and passes each finished segment on as the next step's send at
 * once. Returns with *done = 0 where a message has not arrived (block = 0). */
static pz_status ring_advance(pz_dp_op *R, int block, int *done) {
    *done = 0;
    if (R->shm) return pz_dp_shm_advance(R->shm, block, done);
    while (R->s < R->steps) {
        int s = R->s, all;
        if (!R->posted) {
            /* the all-gather receives chunk recv_chunk(s) into buf: the
             * reduce-scatter's sends from it (step s - (D-1)) must be done */
            if (s >= R->D - 1) {
                pz_status st = sends_done(R, s - (R->D - 1), block, &all);
                if (st != PZ_OK || !all) return st;
            }
            pz_status st = ring_post_recvs(R, s);
            if (st != PZ_OK) return st;
            R->posted = 1;
            R->i = 0;
        }
        size_t lo, hi, sl;
        int ns = seg_count(R, recv_chunk(R, s), &lo, &hi, &sl), left = mod(R->g->me - 1, R->D);
        for (; R->i < ns; R->i++) {
            size_t a, b, got = 0;
            int d;
            seg_range(lo, hi, sl, R->i, &a, &b);
            pz_status st = finish(R->g, R->recvs[R->i], block, &d, &got);
            if (st != PZ_OK || d) R->recvs[R->i] = NULL;
            if (st != PZ_OK || !d) return st;
            R->g->bytes_recv += got;
            if (got != (b - a) * sizeof(float))
                return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce #%u: rank %d sent %zu bytes, expected %zu "
                               "(mismatched calls?)", R->g->ranks[R->g->me], R->seq, R->g->ranks[left], got,
                               (b - a) * sizeof(float));
            const float *got_seg = R->scr + (size_t)(s % 2) * R->maxchunk + (a - lo);
            if (s < R->D - 2 || (s == R->D - 2 && !R->mean)) add_into(R->buf + a, got_seg, b - a);
            else if (s == R->D - 2) add_mean_into(R->buf + a, got_seg, b - a, R->D);
            if (s + 1 < R->steps && (st = ring_send(R, s + 1, R->i)) != PZ_OK) return st;
        }
        R->s++;
        R->posted = 0;
    }
    for (int s = 0; s < R->steps; s++) {
        int all;
        pz_status st = sends_done(R, s, block, &all);
        if (st != PZ_OK || !all) return st;
    }
    if (R->mean && R->D > 1 && R->steps == 0)   /* recursive doubling; the ring divided in its last add */
        for (size_t k = 0; k < R->n; k++) R->buf[k] /= (float)R->D;
    *done = 1;
    return PZ_OK;
}

/* after an error, requests still posted are the transport's to free on close */
static void op_free(pz_dp_op *R) {
    if (!R) return;
    pz_dp_shm_op_free(R->shm);
    free(R->sends);
    free(R->own_scr);
    free(R);
}

/* ---- recursive doubling ------------------------------------------------------ */

static pz_status exchange(pz_dp_group *g, int peer, uint32_t k, float *out, float *in, size_t n) {
    pz_request *rr = NULL, *sr = NULL;
    size_t bytes = n * sizeof(float);
    pz_status st = pz_dp_post(g, 0, peer, PZ_DP_KIND_RD, k, in, bytes, &rr);
    if (st == PZ_OK) st = pz_dp_post(g, 1, peer, PZ_DP_KIND_RD, k, out, bytes, &sr);
    if (st == PZ_OK) st = wait_exact(g, rr, peer, bytes);
    if (st == PZ_OK) st = pz_dp_wait(g, sr, NULL);
    return st;
}

static pz_status send_only(pz_dp_group *g, int peer, uint32_t k, float *buf, size_t n) {
    pz_request *sr = NULL;
    pz_status st = pz_dp_post(g, 1, peer, PZ_DP_KIND_RD, k, buf, n * sizeof(float), &sr);
    return st == PZ_OK ? pz_dp_wait(g, sr, NULL) : st;
}

static pz_status recv_only(pz_dp_group *g, int peer, uint32_t k, float *buf, size_t n) {
    pz_request *rr = NULL;
    pz_status st = pz_dp_post(g, 0, peer, PZ_DP_KIND_RD, k, buf, n * sizeof(float), &rr);
    return st == PZ_OK ? wait_exact(g, rr, peer, n * sizeof(float)) : st;
}

static pz_status rd_allreduce(pz_dp_group *g, float *buf, size_t n) {
    int D = g->n, me = g->me, P = 1;
    while (P * 2 <= D) P *= 2;
    int rem = D - P;
    float *scr = pz_dp_scratch(g, n);
    pz_status st = PZ_OK;
    /* fold: of ranks 0..2rem-1 the even ones hand their vector to the odd
     * neighbour and wait for the result */
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            st = send_only(g, me + 1, 0, buf, n);
            return st == PZ_OK ? recv_only(g, me + 1, 1000, buf, n) : st;
        }
        st = recv_only(g, me - 1, 0, scr, n);
        if (st != PZ_OK) return st;
        add_into(buf, scr, n);
    }
    int vr = me < 2 * rem ? me / 2 : me - rem;
    uint32_t round = 1;
    for (int mask = 1; mask < P && st == PZ_OK; mask <<= 1, round++) {
        int pv = vr ^ mask, peer = pv < rem ? 2 * pv + 1 : pv + rem;
        st = exchange(g, peer, round, buf, scr, n);
        /* a + b on one side, b + a on the other: the same bits */
        if (st == PZ_OK) add_into(buf, scr, n);
    }
    if (st == PZ_OK && me < 2 * rem) st = send_only(g, me - 1, 1000, buf, n);
    return st;
}

/* ---- replicas' agreement --------------------------------------------------------- */

static pz_status check_table(pz_dp_group *g, const uint8_t *tab, const char *what) {
    char msg[512];
    int pos = 0, bad = 0;
    for (int i = 1; i < g->n; i++) {
        if (!memcmp(tab + 16 * i, tab, 16)) continue;
        bad++;
        if (pos < (int)sizeof msg - 96)
            pos += snprintf(msg + pos, sizeof msg - (size_t)pos, ", rank %d holds CRC-32C 0x%08x of %llu bytes",
                            g->ranks[i], pz_get_u32(tab + 16 * i),
                            (unsigned long long)pz_get_u64(tab + 16 * i + 8));
    }
    if (!bad) return PZ_OK;
    return pz_fail(PZ_ERR_PEER, "rank %d: replicas differ in %s: rank %d holds CRC-32C 0x%08x of %llu bytes%s",
                   g->ranks[g->me], what ? what : "their data", g->ranks[0], pz_get_u32(tab),
                   (unsigned long long)pz_get_u64(tab + 8), msg);
}

/* Every member's `len` bytes into tab[len x D] (its own from mine), a
 * member-to-member exchange of small messages. */
static pz_status exchange_all(pz_dp_group *g, uint32_t k, const uint8_t *mine, size_t len, uint8_t *tab) {
    int D = g->n;
    pz_request **rq = xcalloc((size_t)D * 2, sizeof *rq);
    memcpy(tab + len * (size_t)g->me, mine, len);
    pz_status st = PZ_OK;
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != g->me) st = pz_dp_post(g, 0, i, PZ_DP_KIND_CHECK, k, tab + len * (size_t)i, len, &rq[i]);
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != g->me) st = pz_dp_post(g, 1, i, PZ_DP_KIND_CHECK, k, (void *)mine, len, &rq[D + i]);
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (i != g->me) {
            st = wait_exact(g, rq[i], i, len);
            rq[i] = NULL;
        }
    for (int i = 0; i < D && st == PZ_OK; i++)
        if (rq[D + i]) {
            st = pz_dp_wait(g, rq[D + i], NULL);
            rq[D + i] = NULL;
        }
    g->seq++;
    /* after a transport error a receive may still be posted into tab: the
     * transport must be closed (group.h), and close cancels it before any
     * progress could land it */
    free(rq);
    return st;
}

pz_status pz_dp_check_identical(pz_dp_group *g, const void *data, size_t bytes, const char *what) {
    if (!g || !g->ranks || (!data && bytes)) return pz_fail(PZ_ERR_ARG, "dp check: NULL argument");
    uint8_t mine[16] = {0}, *tab = xcalloc((size_t)g->n, 16);
    pz_put_u32(mine, pz_crc32c(0, data, bytes));
    pz_put_u64(mine + 8, bytes);
    pz_status st = exchange_all(g, 0, mine, 16, tab);
    if (st == PZ_OK) st = check_table(g, tab, what);
    free(tab);
    return st;
}

#define HOST_MAX 64

pz_status pz_dp_group_hosts(pz_dp_group *g, const char *my_host, int *hosts) {
    if (!g || !g->ranks || !hosts) return pz_fail(PZ_ERR_ARG, "dp hosts: NULL argument");
    *hosts = 0;
    uint8_t mine[HOST_MAX] = {0};
    if (my_host) snprintf((char *)mine, sizeof mine, "%s", my_host);
    else if (gethostname((char *)mine, sizeof mine - 1) != 0)
        return pz_fail(PZ_ERR_IO, "rank %d: gethostname failed", g->ranks[g->me]);
    int D = g->n;
    uint8_t *tab = xcalloc((size_t)D, HOST_MAX);
    pz_status st = exchange_all(g, 1, mine, HOST_MAX, tab);
    for (int i = 0; i < D && st == PZ_OK; i++) {
        const uint8_t *h = tab + HOST_MAX * (size_t)i;
        int ok = h[HOST_MAX - 1] == 0 && h[0] != 0;
        for (int j = 0; ok && h[j]; j++) ok = h[j] > 32 && h[j] < 127;
        if (!ok) st = pz_fail(PZ_ERR_PEER, "rank %d: dp hosts: rank %d sent no printable host name", g->ranks[g->me],
                              g->ranks[i]);
    }
    /* hosts: runs of equal names, each of the first run's length, no name twice */
    int L = 1;
    while (st == PZ_OK && L < D && !strcmp((char *)tab + HOST_MAX * (size_t)L, (char *)tab)) L++;
    if (st == PZ_OK && D % L != 0)
        st = pz_fail(PZ_ERR_ARG, "rank %d: dp hosts: %d members on host %s, which does not divide the group's %d "
                     "(the same number on every host)", g->ranks[g->me], L, (const char *)tab, D);
    for (int i = 0; i < D && st == PZ_OK; i++) {
        const char *h = (const char *)tab + HOST_MAX * (size_t)i, *first = (const char *)tab + HOST_MAX * (size_t)(i / L * L);
        int starts_new = i % L == 0, same_as_before = i > 0 && !strcmp(h, (const char *)tab + HOST_MAX * (size_t)(i - 1));
        if (strcmp(h, first) != 0 || (starts_new && same_as_before))
            st = pz_fail(PZ_ERR_ARG, "rank %d: dp hosts: the replicas of a host must be consecutive members, the same "
                         "number on every host; %d members on host %s first, then rank %d on host %s",
                         g->ranks[g->me], L, (const char *)tab, g->ranks[i], h);
        for (int j = 0; j < i && st == PZ_OK && starts_new; j += L)
            if (!strcmp(h, (const char *)tab + HOST_MAX * (size_t)j))
                st = pz_fail(PZ_ERR_ARG, "rank %d: dp hosts: host %s holds members that are not consecutive "
                             "(rank %d)", g->ranks[g->me], h, g->ranks[i]);
    }
    if (st == PZ_OK) *hosts = D / L;
    free(tab);
    return st;
}

/* own_scratch: the op gets receive space of its own (several may be in
 * flight); else the group's (the blocking call). */
static pz_status op_start(pz_dp_group *g, float *buf, size_t n, int mean, pz_dp_algo algo, int own_scratch,
                          pz_dp_op **out) {
    *out = NULL;
    if (!g || !g->ranks) return pz_fail(PZ_ERR_ARG, "dp all-reduce: no group");
    if (!buf && n) return pz_fail(PZ_ERR_ARG, "dp all-reduce: NULL buffer of %zu floats", n);
    if (algo != PZ_DP_AUTO && algo != PZ_DP_RING && algo != PZ_DP_RDOUBLING)
        return pz_fail(PZ_ERR_ARG, "dp all-reduce: unknown algorithm %d", (int)algo);
    int shm = 0;
    pz_status st = pz_dp_shm_pick(g, n, algo, &shm);   /* the first may set it up (collective) */
    if (st != PZ_OK) return st;
    pz_dp_op *R = xcalloc(1, sizeof *R);
    R->g = g;
    R->buf = buf;
    R->n = n;
    R->D = g->n;
    R->mean = mean;
    R->seq = g->seq;
    if (algo == PZ_DP_AUTO) algo = n * sizeof(float) <= g->small_bytes ? PZ_DP_RDOUBLING : PZ_DP_RING;
    if (shm) {
        st = pz_dp_shm_start(g, buf, n, mean, &R->shm);   /* counts itself in g->seq */
        if (st != PZ_OK) op_free(R);
        else *out = R;
        return st;
    }
    if (g->n > 1 && n > 0 && algo == PZ_DP_RDOUBLING) {
        st = rd_allreduce(g, buf, n);   /* latency-bound: done here, also for _start */
    } else if (g->n > 1 && n > 0) {
        R->steps = 2 * (g->n - 1);
        R->maxchunk = (n + (size_t)g->n - 1) / (size_t)g->n;
        R->scr = own_scratch ? (R->own_scr = xmalloc(2 * R->maxchunk * sizeof(float))) : pz_dp_scratch(g, 2 * R->maxchunk);
        R->sends = xcalloc((size_t)R->steps * RING_MAXSEG, sizeof *R->sends);
        size_t lo, hi, sl;
        int ns0 = seg_count(R, send_chunk(R, 0), &lo, &hi, &sl);
        st = ring_post_recvs(R, 0);
        R->posted = 1;
        for (int i = 0; i < ns0 && st == PZ_OK; i++) st = ring_send(R, 0, i);
    }
    g->seq++;
    if (st != PZ_OK) {
        op_free(R);
        return st;
    }
    *out = R;
    return PZ_OK;
}

pz_status pz_dp_allreduce_start(pz_dp_group *g, float *buf, size_t n, int mean, pz_dp_algo algo, pz_dp_op **op) {
    if (!op) return pz_fail(PZ_ERR_ARG, "dp all-reduce: NULL op pointer");
    return op_start(g, buf, n, mean, algo, 1, op);
}

size_t pz_dp_op_bytes(size_t n, int D) {
    if (D < 2 || n == 0) return sizeof(pz_dp_op);
    size_t maxchunk = (n + (size_t)D - 1) / (size_t)D;
    return sizeof(pz_dp_op) + 2 * maxchunk * sizeof(float) + (size_t)2 * (D - 1) * RING_MAXSEG * sizeof(pz_request *);
}

pz_status pz_dp_op_test(pz_dp_op *op, int *done) {
    *done = 0;
    if (!op) return pz_fail(PZ_ERR_ARG, "dp all-reduce: NULL op");
    pz_status st = ring_advance(op, 0, done);
    if (st != PZ_OK || *done) op_free(op);
    return st;
}

pz_status pz_dp_op_wait(pz_dp_op *op) {
    if (!op) return pz_fail(PZ_ERR_ARG, "dp all-reduce: NULL op");
    int done = 0;
    pz_status st = ring_advance(op, 1, &done);
    op_free(op);
    return st;
}

static pz_status bcast_args(const pz_dp_group *g, int root, const float *buf, size_t n) {
    if (!g || !g->ranks || (!buf && n)) return pz_fail(PZ_ERR_ARG, "dp broadcast: NULL argument");
    if (root < 0 || root >= g->n) return pz_fail(PZ_ERR_ARG, "dp broadcast: root %d of %d members", root, g->n);
    return PZ_OK;
}

pz_status pz_dp_broadcast_post(pz_dp_group *g, uint32_t seq, int root, float *buf, size_t n, pz_request **rq) {
    pz_status st = rq ? bcast_args(g, root, buf, n) : pz_fail(PZ_ERR_ARG, "dp broadcast: NULL request table");
    size_t bytes = n * sizeof(float);
    if (st != PZ_OK || g->n == 1) return st;
    if (g->me != root) return pz_dp_post_at(g, seq, 0, root, PZ_DP_KIND_BCAST, 0, buf, bytes, &rq[root]);
    for (int i = 0; i < g->n && st == PZ_OK; i++)
        if (i != root) st = pz_dp_post_at(g, seq, 1, i, PZ_DP_KIND_BCAST, 0, buf, bytes, &rq[i]);
    return st;
}

pz_status pz_dp_broadcast_test(pz_dp_group *g, uint32_t seq, int root, size_t n, pz_request **rq, int block,
                               int *done) {
    *done = 1;
    for (int i = 0; i < g->n; i++) {
        if (!rq[i]) continue;
        size_t got = 0;
        int d = 1, recv = g->me != root;   /* the member's one receive, or the root's sends */
        pz_status st = block ? pz_dp_wait(g, rq[i], recv ? &got : NULL)
                             : pz_transport_test(g->t, rq[i], &d, recv ? &got : NULL);
        if (st != PZ_OK || d) rq[i] = NULL;
        if (st != PZ_OK) return st;
        if (!d) {
            *done = 0;
            continue;
        }
        if (!recv) continue;
        g->bytes_recv += got;
        if (got != n * sizeof(float))   /* a root with another idea of the vector: mismatched calls */
            return pz_fail(PZ_ERR_PEER, "rank %d: dp broadcast #%u: rank %d sent %zu bytes, expected %zu (mismatched "
                           "calls?)", g->ranks[g->me], seq, g->ranks[root], got, n * sizeof(float));
    }
    return PZ_OK;
}

pz_status pz_dp_broadcast(pz_dp_group *g, int root, float *buf, size_t n) {
    pz_status st = bcast_args(g, root, buf, n);
    if (st != PZ_OK) return st;
    pz_request **rq = xcalloc((size_t)g->n, sizeof *rq);
    int done = 0;
    st = pz_dp_broadcast_post(g, g->seq, root, buf, n, rq);
    if (st == PZ_OK) st = pz_dp_broadcast_test(g, g->seq, root, n, rq, 1, &done);
    g->seq++;
    free(rq);   /* after an error the transport is closed (requests still posted are its own) */
    return st;
}

pz_status pz_dp_allreduce(pz_dp_group *g, float *buf, size_t n, int mean, pz_dp_algo algo) {
    pz_dp_op *op = NULL;
    pz_status st = op_start(g, buf, n, mean, algo, 0, &op);
    return st == PZ_OK ? pz_dp_op_wait(op) : st;
}

pz_status pz_dp_check_link(double mbps, double latency_ms, size_t most, double timeout) {
    double secs = (mbps > 0 ? (double)most * 8.0 / (mbps * 1e6) : 0.0) + latency_ms * 1e-3;
    if (secs < timeout) return PZ_OK;
    return pz_fail(PZ_ERR_ARG, "--dp-link-mbps %g, --dp-link-latency-ms %g: one data-parallel message of up to %zu "
                       "bytes takes %.3g s on the link between replicas, longer than --peer-timeout %g s, after which "
                       "the receiving replica would give its peer up: raise the rate or --peer-timeout", mbps,
                       latency_ms, most, secs, timeout);
}

pz_status pz_dp_mean_dev(pz_dp_group *g, const pz_backend *be, float *dev, size_t n) {
    if (be->host_memory) return pz_dp_allreduce(g, dev, n, 1, PZ_DP_AUTO);
    float *host = xmalloc(n * sizeof(float) + 1);
    be->to_host(host, dev, n * sizeof(float));
    pz_status st = pz_dp_allreduce(g, host, n, 1, PZ_DP_AUTO);
    if (st == PZ_OK) be->from_host(dev, host, n * sizeof(float));
    free(host);
    return st;
}

pz_status pz_dp_check_identical_dev(pz_dp_group *g, const pz_backend *be, const float *dev, size_t n, const char *what) {
    float *host = xmalloc(n * sizeof(float) + 1);
    be->to_host(host, dev, n * sizeof(float));
    pz_status st = pz_dp_check_identical(g, host, n * sizeof(float), what);
    free(host);
    return st;
}
