/* edge.c: see edge.h. */
#include "runtime/edge/edge.h"

#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "runtime/edge/policy.h"
#include "base/clock.h"
#include "base/mem.h"

pz_status pz_edge_init(pz_edge_end *e, int edge, int dir, int sender, const char *spec, int B, int T, int C,
                       int measure_error) {
    memset(e, 0, sizeof *e);
    e->edge = edge;
    e->dir = dir;
    e->sender = sender;
    e->B = B;
    e->T = T;
    e->C = C;
    e->numel = (size_t)B * T * C;
    e->ids_bytes = dir == PZ_FWD ? (size_t)B * 8 : 0;
    pz_status st = PZ_OK;
    if (spec && strcmp(spec, "none") != 0) {
        /* q's rounding defaults to stochastic for gradients (compress/core/codec.h) */
        int use = pz_dir_use(dir);
        if ((st = pz_codec_create_for(spec, use, &e->codec)) != PZ_OK) return st;
        /* the message travels in a checked frame (runtime/net/frame.h): its CRC is the only one on the wire */
        pz_codec_set_framed(e->codec, 1);
        if (sender && measure_error) {
            if ((st = pz_codec_create_for(spec, use, &e->shadow)) != PZ_OK) { pz_edge_free(e); return st; }
            pz_codec_set_framed(e->shadow, 1);
            e->scratch = xaligned_alloc(e->numel * sizeof(float));
        }
    }
    pz_shape sh = {3, {B, T, C}};
    e->cap = e->ids_bytes + (e->codec ? pz_codec_max_encoded_size(e->codec, &sh) : e->numel * sizeof(float));
    return st;
}

void pz_edge_free(pz_edge_end *e) {
    pz_codec_free(e->codec);
    pz_codec_free(e->shadow);
    free(e->scratch);
    memset(e, 0, sizeof *e);
}

size_t pz_edge_capacity(const pz_edge_end *e) { return e->cap; }

double pz_edge_stats_take(pz_edge_end *e, double *es) {
    if (!e->numel) return 0.0;
    double codec_s = e->st.enc_s + e->st.dec_s;
    const double *v = &e->st.raw;
    double *d = es + (2 * e->edge + e->dir) * PZ_EDGE_STATS_N;
    for (int i = 0; i < PZ_EDGE_STATS_N; i++) d[i] += v[i];
    memset(&e->st, 0, sizeof e->st);
    return codec_s;
}

double pz_edge_state_bytes(const pz_edge_end *e, double *file) {
    double mem = 0.0;
    pz_codec *cs[2] = {e->codec, e->shadow};
    for (int j = 0; j < 2; j++) {
        size_t fb = 0;
        if (cs[j]) mem += (double)pz_codec_state_bytes(cs[j], &fb), *file += (double)fb;
    }
    return mem;
}

pz_status pz_edge_init_val(pz_edge_end val[2], int edge, int sender, const char *fwd_spec, int B, int T, int C) {
    char ev[512];
    const char *evs = NULL;
    pz_status st = PZ_OK;
    if (fwd_spec) {
        if ((st = pz_policy_eval_spec(fwd_spec, ev, sizeof ev)) != PZ_OK) return st;
        evs = ev;
    }
    if ((st = pz_edge_init(&val[0], edge, PZ_FWD, sender, NULL, B, T, C, 0)) != PZ_OK) return st;
    return pz_edge_init(&val[1], edge, PZ_FWD, sender, evs, B, T, C, 0);
}

size_t pz_edge_wire_cap(const pz_edge_end *live, const pz_edge_end val[2]) {
    size_t cap = live->cap;
    for (int k = 0; k < 2; k++)
        if (val[k].cap > cap) cap = val[k].cap;
    return cap;
}

const char *pz_edge_codec_name(const pz_edge_end *e) { return e->codec ? pz_codec_spec(e->codec) : "none"; }


static pz_codec_ctx make_ctx(const pz_edge_end *e, uint64_t seed, uint64_t step, uint32_t micro,
                             const uint64_t *ids) {
    pz_codec_ctx ctx = {seed, step, (uint32_t)e->edge, (uint32_t)e->dir, micro, ids};
    return ctx;
}

pz_status pz_edge_encode(pz_edge_end *e, const float *x, const uint64_t *ids, uint64_t seed, uint64_t step,
                         uint32_t micro, uint8_t *wire, size_t *len) {
    for (int b = 0; e->ids_bytes && b < e->B; b++) pz_put_u64(wire + 8 * b, ids[b]);
    uint8_t *payload = wire + e->ids_bytes;
    size_t n = 0;
    double t0 = pz_now();
    if (!e->codec) {
        n = e->numel * sizeof(float);
        memcpy(payload, x, n);
    } else {
        pz_shape sh = {3, {e->B, e->T, e->C}};
        pz_codec_ctx ctx = make_ctx(e, seed, step, micro, ids);
        pz_status st = pz_codec_encode(e->codec, x, &sh, &ctx, payload, e->cap - e->ids_bytes, &n);
        if (st != PZ_OK) return st;
    }
    e->st.enc_s += pz_now() - t0;
    *len = e->ids_bytes + n;
    e->st.raw += (double)(e->numel * sizeof(float));
    e->st.wire += (double)*len;
    if (e->shadow) {
        /* what the receiver will get, decoded by our twin of its codec */
        pz_shape got;
        pz_codec_ctx ctx = make_ctx(e, seed, step, micro, ids);
        pz_status st = pz_codec_decode(e->shadow, payload, n, &ctx, e->scratch, e->numel, &got);
        if (st != PZ_OK) return st;
        double err2 = 0.0, norm2 = 0.0;
        for (size_t i = 0; i < e->numel; i++) {
            double d = (double)x[i] - e->scratch[i];
            err2 += d * d;
            norm2 += (double)x[i] * x[i];
        }
        e->st.err2 += err2;
        e->st.norm2 += norm2;
    }
    return PZ_OK;
}

pz_status pz_edge_decode(pz_edge_end *e, const uint8_t *wire, size_t len, uint64_t seed, uint64_t step,
                         uint32_t micro, float *out, uint64_t *ids) {
    const char *what = e->dir == PZ_FWD ? "activation" : "gradient";
    if (len < e->ids_bytes)
        return pz_fail(PZ_ERR_PEER, "edge %d-%d: %s message of %zu bytes is shorter than its %zu bytes of sample ids",
                       e->edge, e->edge + 1, what, len, e->ids_bytes);
    for (int b = 0; e->ids_bytes && b < e->B; b++) ids[b] = pz_get_u64(wire + 8 * b);
    const uint8_t *payload = wire + e->ids_bytes;
    size_t n = len - e->ids_bytes;
    double t0 = pz_now();
    if (!e->codec) {
        if (n != e->numel * sizeof(float))
            return pz_fail(PZ_ERR_PEER, "edge %d-%d: %s message carries %zu bytes of floats, expected %zu (B %d, T %d, C %d); "
                           "do both stages use the same --compress, --batch and --seq?",
                           e->edge, e->edge + 1, what, n, e->numel * sizeof(float), e->B, e->T, e->C);
        memcpy(out, payload, n);
    } else {
        pz_shape got;
        pz_codec_ctx ctx = make_ctx(e, seed, step, micro, ids);
        pz_status st = pz_codec_decode(e->codec, payload, n, &ctx, out, e->numel, &got);
        if (st != PZ_OK)
            return pz_fail(st, "edge %d-%d: %s message step %llu micro %u: %s", e->edge, e->edge + 1, what,
                           (unsigned long long)step, micro, pz_last_error());
        if (got.ndim != 3 || got.dims[0] != e->B || got.dims[1] != e->T || got.dims[2] != e->C)
            return pz_fail(PZ_ERR_PEER, "edge %d-%d: %s message has shape (%lld,...) of %d dims, expected (%d,%d,%d)",
                           e->edge, e->edge + 1, what, (long long)got.dims[0], got.ndim, e->B, e->T, e->C);
    }
    e->st.dec_s += pz_now() - t0;
    return PZ_OK;
}
