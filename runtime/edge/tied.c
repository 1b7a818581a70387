/* tied.c: the tied-embedding gradient exchange (see tied.h). */
#include "runtime/edge/tied.h"

#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/status.h"
#include "runtime/edge/autospec.h"

/* spec NULL or "none": raw (*c NULL); else a gradient codec without state */
static pz_status make_codec(const char *spec, pz_codec **c) {
    *c = NULL;
    if (!spec || strcmp(spec, "none") == 0) return PZ_OK;
    /* a gradient: q rounds stochastically unless the spec says otherwise */
    pz_status st = pz_codec_create_for(spec, PZ_USE_GRADIENT, c);
    if (st != PZ_OK) return pz_fail(st, "--compress-tied: %s", pz_last_error());
    pz_codec_set_framed(*c, 1);   /* sent in a checked frame: its CRC is the one */
    if (!pz_codec_keeps_state(*c)) return PZ_OK;
    pz_codec_free(*c);
    *c = NULL;
    return pz_fail(PZ_ERR_ARG,
                   "--compress-tied %s: the tied exchange takes a codec without state (no ef, ef21 or aq): "
                   "its state would live on one end only, and the two copies of wte would drift apart",
                   spec);
}

/* bytes of a message of codec c (NULL: raw floats) */
static size_t msg_cap(const pz_tied *t, pz_codec *c) {
    return c ? pz_codec_max_encoded_size(c, &t->shape) : t->n * sizeof(float);
}

static void start(pz_tied *t, int V, int C) {
    memset(t, 0, sizeof *t);
    t->shape = (pz_shape){2, {V, C}};
    t->n = (size_t)V * (size_t)C;
}

/* once, not per step: V*C can be 154 MB */
static void alloc_buffers(pz_tied *t, size_t cap, int decodes) {
    t->cap = cap;
    if (decodes) t->dec = xaligned_alloc(t->n * sizeof(float));
    t->out = xaligned_alloc(t->cap);
    t->in = xaligned_alloc(t->cap);
}

pz_status pz_tied_init(pz_tied *t, const char *spec, int V, int C) {
    start(t, V, C);
    pz_status st = make_codec(spec, &t->codec);
    if (st == PZ_OK) alloc_buffers(t, msg_cap(t, t->codec), t->codec != NULL);
    return st;
}

pz_status pz_tied_init_auto(pz_tied *t, const pz_auto_spec *a, int cur, int V, int C) {
    start(t, V, C);
    size_t cap = 0;
    for (int k = 0; k < a->n; k++) {
        pz_codec *c = NULL;
        pz_status st = make_codec(a->canon[k], &c);
        if (st != PZ_OK) {
            pz_tied_free(t);
            return st;
        }
        if (msg_cap(t, c) > cap) cap = msg_cap(t, c);
        if (k == cur) t->codec = c;
        else pz_codec_free(c);
    }
    t->follow = a;
    t->cur = cur;
    alloc_buffers(t, cap, 1);
    return PZ_OK;
}

pz_status pz_tied_use(pz_tied *t, int cur) {
    if (!t->follow || cur == t->cur) return PZ_OK;
    pz_codec *c = NULL;
    pz_status st = make_codec(t->follow->canon[cur], &c);
    if (st != PZ_OK) return st;
    pz_codec_free(t->codec);
    t->codec = c;
    t->cur = cur;
    return PZ_OK;
}

int pz_tied_follows_auto(const pz_policy *p) {
    const char *spec = p->stages == 2 ? pz_policy_codec(p, 0, PZ_BWD) : NULL;
    return spec && pz_auto_is(spec);
}

const char *pz_tied_follow(const pz_policy *p) {
    const char *spec = p->stages == 2 ? pz_policy_codec(p, 0, PZ_BWD) : NULL;
    if (!spec || strcmp(spec, "none") == 0 || pz_auto_is(spec)) return NULL;
    pz_codec *c = NULL;
    /* the policy's specs were checked when parsed; one that fails here stays raw */
    if (pz_codec_create_for(spec, PZ_USE_GRADIENT, &c) != PZ_OK) return NULL;
    int state = pz_codec_keeps_state(c);
    pz_codec_free(c);
    return state ? NULL : spec;
}

void pz_tied_free(pz_tied *t) {
    pz_codec_free(t->codec);
    free(t->out);
    free(t->in);
    free(t->dec);
    memset(t, 0, sizeof *t);
}

static pz_codec_ctx ctx_of(uint64_t seed, uint64_t step, int end) {
    return (pz_codec_ctx){seed, step, PZ_TIED_EDGE, 0, (uint32_t)end, NULL};
}

pz_status pz_tied_encode(pz_tied *t, float *g, uint64_t seed, uint64_t step, int end, size_t *len) {
    if (!t->codec) {
        memcpy(t->out, g, t->n * sizeof(float));   /* g changes before the send completes */
        *len = t->n * sizeof(float);
        return PZ_OK;
    }
    pz_codec_ctx c = ctx_of(seed, step, end);
    pz_status st = pz_codec_encode(t->codec, g, &t->shape, &c, t->out, t->cap, len);
    if (st != PZ_OK) return st;
    pz_shape s;
    /* what the peer will decode, so that both ends add the same two terms */
    st = pz_codec_decode(t->codec, t->out, *len, &c, g, t->n, &s);
    if (st == PZ_OK && !pz_shape_equal(&s, &t->shape)) st = pz_fail(PZ_ERR_SHAPE, "tied: the own message decodes to another shape");
    return st;
}

pz_status pz_tied_add(pz_tied *t, size_t len, uint64_t seed, uint64_t step, int peer_end, float *g) {
    const char *from = peer_end ? "the last stage" : "the first stage";
    if (!t->codec) {
        if (len != t->n * sizeof(float))
            return pz_fail(PZ_ERR_PEER, "tied embedding gradient from %s: %zu bytes, expected %zu", from, len,
                           t->n * sizeof(float));
        const float *in = (const float *)(const void *)t->in;
        for (size_t k = 0; k < t->n; k++) g[k] += in[k];
        return PZ_OK;
    }
    float *d = t->dec;
    pz_codec_ctx c = ctx_of(seed, step, peer_end);
    pz_shape s;
    pz_status st = pz_codec_decode(t->codec, t->in, len, &c, d, t->n, &s);
    if (st == PZ_OK && !pz_shape_equal(&s, &t->shape)) {
        char a[64], b[64];
        pz_shape_format(&s, a, sizeof a);
        pz_shape_format(&t->shape, b, sizeof b);
        st = pz_fail(PZ_ERR_PEER, "tied embedding gradient from %s: shape %s, expected %s", from, a, b);
    } else if (st != PZ_OK) {
        st = pz_fail(PZ_ERR_PEER, "tied embedding gradient from %s: %s", from, pz_last_error());
    }
    if (st == PZ_OK)
        for (size_t k = 0; k < t->n; k++) g[k] += d[k];
    return st;
}

const char *pz_tied_codec_name(const pz_tied *t) { return t->codec ? pz_codec_spec(t->codec) : "none"; }
