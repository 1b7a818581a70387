/* codec_stream.c: see codec_stream.h. */
#include "tests/compress/codec_stream.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/status.h"
#include "base/mem.h"
#include "base/rng.h"

void codec_stream_fill(float *x, size_t n, size_t C, uint64_t seed, int neg_zero) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        float v = pz_rng_normal(&r);
        if (i % C == 3) v *= 40.0f;
        if (i % 97 == 0) v = 0.0f;
        if (neg_zero && i % 101 == 0) v = -0.0f;
        if (i % 89 == 0) v *= 1e-6f;
        x[i] = v;
    }
}

int codec_stream_run(const codec_stream *cs) {
    int rc = 0;
    for (size_t k = 0; k < cs->nshapes && !rc; k++) {
        const pz_shape *s = &cs->shapes[k];
        size_t n = pz_shape_numel(s), C = (size_t)s->dims[s->ndim - 1];
        float *x = xmalloc(n * sizeof(float)), *y = xmalloc(n * sizeof(float));
        uint64_t ids[8];
        for (int i = 0; i < s->dims[0] && i < 8; i++) ids[i] = 100 + (uint64_t)i;
        for (size_t i = 0; i < cs->nspecs && !rc; i++) {
            pz_codec *c = NULL, *d = NULL;
            if (pz_codec_create(cs->specs[i], &c) != PZ_OK || pz_codec_create(cs->specs[i], &d) != PZ_OK) {
                fprintf(stderr, "FAIL %s: %s\n", cs->specs[i], pz_last_error());
                pz_codec_free(c);
                rc = 1;
                break;
            }
            size_t cap = pz_codec_max_encoded_size(c, s);
            uint8_t *msg = xmalloc(cap);
            for (int round = 0; round < cs->rounds && !rc; round++) {
                cs->input(x, n, C, k, i, round);
                pz_codec_ctx ctx = {.seed = 7, .step = (uint64_t)round, .edge = 1, .dir = 0, .micro = 3,
                                    .sample_ids = cs->sample_ids ? ids : NULL};
                size_t len = 0;
                pz_shape got;
                if (pz_codec_encode(c, x, s, &ctx, msg, cap, &len) != PZ_OK ||
                    pz_codec_decode(d, msg, len, &ctx, y, n, &got) != PZ_OK) {
                    fprintf(stderr, "FAIL %s: %s\n", cs->specs[i], pz_last_error());
                    rc = 1;
                } else if (cs->emit(cs->arg, msg, len, y, n)) {
                    rc = 1;
                }
            }
            free(msg);
            pz_codec_free(c);
            pz_codec_free(d);
        }
        free(x);
        free(y);
    }
    return rc;
}
