/* test_jointsq_scratch.c: a jointsq codec object keeps its encode scratch
 * from one call to the next (compress/core/codec_impl.h, pz_scratch); what the
 * last call left in it must never reach a message. One object per spec
 * encodes a sequence of tensors of growing and shrinking shapes (large ones
 * take the sampled path, small ones the exact one; one with the solver's
 * retry and fallback forced), and every message must equal, byte for byte,
 * that of a fresh object. Also: the scratch shows in pz_codec_state_bytes
 * and stays within pz_codec_state_bound for the shape, and
 * pz_codec_free releases it (LeakSanitizer builds check that). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "compress/jointsq/jointsq_priv.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "tests/check.h"

static uint8_t *encode(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx, size_t *len) {
    size_t cap = pz_codec_max_encoded_size(c, s);
    uint8_t *m = xmalloc(cap);
    pz_status st = pz_codec_encode(c, x, s, ctx, m, cap, len);
    CHECK(st == PZ_OK, "%s: encode: %s", pz_codec_spec(c), pz_last_error());
    if (st != PZ_OK) *len = 0;
    return m;
}

static uint8_t *encode_fresh(const char *spec, const float *x, const pz_shape *s, const pz_codec_ctx *ctx,
                             size_t *len) {
    pz_codec *c = NULL;
    if (pz_codec_create(spec, &c) != PZ_OK) {
        CHECK(0, "%s: %s", spec, pz_last_error());
        *len = 0;
        return NULL;
    }
    uint8_t *m = encode(c, x, s, ctx, len);
    pz_codec_free(c);
    return m;
}

int main(void) {
    static const char *const specs[] = {"jointsq:4", "jointsq:2", "jointsq:0.5", "jointsq:3,group=4",
                                        "jointsq:1.5,group=32"};
    /* rows x 1024: sampled (more than 16384 groups), exact, larger, the
     * first again, small again */
    static const size_t rows[] = {256, 8, 512, 256, 12};
    const size_t C = 1024, maxn = 512 * C;
    float *x = xmalloc(maxn * sizeof *x);
    pz_rng r;
    pz_rng_seed(&r, 1411);
    const pz_jsq_tuning dflt = PZ_JSQ_TUNING_DEFAULT, forced = {16384, 1e-5, 64};
    for (size_t si = 0; si < sizeof specs / sizeof specs[0]; si++) {
        pz_codec *c = NULL;
        CHECK_STATUS(pz_codec_create(specs[si], &c), PZ_OK, NULL);
        if (!c) continue;
        size_t same = 0, tried = 0;
        for (size_t t = 0; t < sizeof rows / sizeof rows[0] + 1; t++) {
            int force = t == sizeof rows / sizeof rows[0];   /* last: retry and fallback paths */
            pz_shape s = {2, {force ? 256 : rows[t], C, 0, 0}};
            size_t n = pz_shape_numel(&s);
            /* a different tensor each time: Gaussian, every 7th call heavier */
            for (size_t i = 0; i < n; i++) {
                float v = pz_rng_normal(&r);
                x[i] = (i + t) % 97 == 0 ? 30.0f * v : v;
            }
            pz_jsq_tune = force ? forced : dflt;
            pz_codec_ctx ctx = {.seed = 3, .step = t, .edge = 1};
            size_t la = 0, lb = 0;
            uint8_t *a = encode(c, x, &s, &ctx, &la);
            uint8_t *b = encode_fresh(specs[si], x, &s, &ctx, &lb);
            tried++;
            same += la == lb && la > 0 && b && !memcmp(a, b, la);
            CHECK(la == lb && b && !memcmp(a, b, la), "%s, %zu x %zu%s: kept scratch gives other bytes (%zu vs %zu)",
                  specs[si], (size_t)s.dims[0], C, force ? " (forced retries)" : "", la, lb);
            if (t == 0) {
                size_t held = pz_codec_state_bytes(c, NULL), bound = pz_codec_state_bound(c, &s);
                CHECK(held > 0 && held <= bound, "%s: scratch held %zu bytes, bound %zu", specs[si], held, bound);
            }
            free(a);
            free(b);
        }
        printf("%-22s %zu of %zu messages equal to a fresh object's, scratch %zu bytes\n", specs[si], same, tried,
               pz_codec_state_bytes(c, NULL));
        pz_codec_free(c);
    }
    pz_jsq_tune = dflt;
    free(x);
    return check_summary("test_jointsq_scratch");
}
