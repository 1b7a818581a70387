/* test_qgrid.c: q's grids (grid=midtread|midrise) and tiny values.
 *
 *  - heavy-tailed activations (issue 14): a 8 x 512 x 1024 tensor of
 *    Student-t noise (df = 3, fixed seed) with 12 channels scaled by 40:
 *    q2:round=nearest must stay within relative L2 error 1, midtread below
 *    midrise, q4 (its defaults: nearest rounding) within 0.45; the errors of
 *    both grids are
 *    printed, and those of df = 5 (which reproduces the midrise
 *    figures);
 *  - midtread: zeros decode to exactly 0 (b >= 2, both scales, both
 *    roundings), absmax never writes code 2^b - 1, and the grid byte of the
 *    parameter block is 1 (midtread) or 0 (midrise);
 *  - tiny values (issue 13): on tensors near 1e-38, subnormals (1e-40,
 *    1e-42) every q and nuq variant keeps the relative error it has on the
 *    same tensor scaled into the normal range; fp16 scales that underflow
 *    decode to zeros (relative error 1), never to anything larger. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "base/bytes.h"
#include "base/crc32c.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "tests/check.h"
#include "tests/compress/heavy_tail.h"
#include "tests/compress/rel_l2.h"

static const pz_codec_ctx CTX = {7, 3, 1, 0, 2, NULL};

/* Encodes x with spec (ctx CTX) and decodes it into y; returns the message
 * (caller frees) or NULL when the spec does not parse or a step fails. */
static uint8_t *roundtrip(const char *spec, const float *x, const pz_shape *s, float *y, size_t *len) {
    pz_codec *c = NULL;
    if (pz_codec_create(spec, &c) != PZ_OK) {
        CHECK(0, "%s: %s", spec, pz_last_error());
        return NULL;
    }
    size_t cap = pz_codec_max_encoded_size(c, s);
    uint8_t *m = xmalloc(cap);
    pz_status st = pz_codec_encode(c, x, s, &CTX, m, cap, len);
    CHECK(st == PZ_OK, "%s: encode: %s", spec, pz_last_error());
    if (st == PZ_OK) {
        pz_shape got;
        st = pz_codec_decode(c, m, *len, &CTX, y, pz_shape_numel(s), &got);
        CHECK(st == PZ_OK, "%s: decode: %s", spec, pz_last_error());
    }
    pz_codec_free(c);
    if (st != PZ_OK) {
        free(m);
        return NULL;
    }
    return m;
}

static double spec_err(const char *spec, const float *x, const pz_shape *s, float *y) {
    size_t len;
    uint8_t *m = roundtrip(spec, x, s, y, &len);
    if (!m) return INFINITY;
    free(m);
    return rel_l2(x, y, pz_shape_numel(s));
}

/* ------------------------------------------------------------ heavy tails */

/* Student-t noise with df degrees of freedom, z / sqrt(chi2_df / df), in a
 * 8 x 512 x 1024 tensor (seed 14) whose channels `outliers` are scaled by 40;
 * the relative errors of q2:round=nearest, q4 (defaults), q2:round=stochastic
 * and q4:round=stochastic with
 * grid=midtread (mt) and grid=midrise (mr). */
static void heavy(int df, double mt[4], double mr[4]) {
    pz_shape s = {3, {8, 512, 1024, 0}};
    size_t n = pz_shape_numel(&s), C = 1024;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
    heavy_tail_fill(x, n / C, C, df, HEAVY_QGRID_SEED, heavy_qgrid_channels, NULL);
    static const char *const specs[4] = {"q2:round=nearest", "q4", "q2:round=stochastic", "q4:round=stochastic"};
    for (int k = 0; k < 4; k++) {
        char sp[64];
        mt[k] = spec_err(specs[k], x, &s, y);
        snprintf(sp, sizeof sp, "%s%sgrid=midrise", specs[k], strchr(specs[k], ':') ? "," : ":");
        mr[k] = spec_err(sp, x, &s, y);
    }
    printf("heavy-tailed 8x512x1024 t(%d), 12 channels x40: relative L2 error midtread / midrise\n"
           "  q2:round=nearest    %.3f / %.3f\n  q4 (defaults)       %.3f / %.3f\n"
           "  q2:round=stochastic %.3f / %.3f\n  q4:round=stochastic %.3f / %.3f\n",
           df, mt[0], mr[0], mt[1], mr[1], mt[2], mr[2], mt[3], mr[3]);
    free(x);
    free(y);
}

static void test_heavy_tailed(void) {
    double mt[4], mr[4];
    heavy(3, mt, mr);
    CHECK(mt[0] <= 1.0, "t(3): q2:round=nearest relative error %.3f > 1", mt[0]);
    for (int k = 0; k < 4; k++) CHECK(mt[k] < mr[k], "t(3): midtread %.3f not below midrise %.3f (%d)", mt[k], mr[k], k);
    /* q4's defaults (nearest rounding); stochastic rounding is not below
     * 0.45 here (unbiased: its variance is set by the step, and the outlier
     * channels' steps are 40 times the others'): 1.15 on t(3) */
    CHECK(mt[1] <= 0.45, "t(3): q4 relative error %.3f > 0.45", mt[1]);
    /* t(5) gives the midrise figures (2.55 and 0.52) */
    heavy(5, mt, mr);
    CHECK(mt[0] <= 1.0, "t(5): q2:round=nearest relative error %.3f > 1", mt[0]);
    CHECK(mt[0] < mr[0] && mt[2] < mr[2], "t(5): midtread not below midrise at 2 bits");
    CHECK(mt[1] <= 0.45, "t(5): q4 relative error %.3f > 0.45", mt[1]);
}

/* ------------------------------------------------------------ midtread */

static void test_midtread_zero(void) {
    pz_shape s = {2, {16, 40, 0, 0}};
    size_t n = pz_shape_numel(&s);
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
    pz_rng r;
    pz_rng_seed(&r, 5);
    for (size_t i = 0; i < n; i++) x[i] = i % 3 ? 0.0f : 3.0f * pz_rng_normal(&r);
    x[1] = -0.0f;
    static const char *const opts[] = {"", ":round=nearest", ":scale=minmax", ":scale=minmax,round=nearest",
                                       ":group=row,sdtype=fp16", ":group=7,scale=minmax,sdtype=fp16"};
    for (int b = 1; b <= 8; b++)
        for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
            char spec[96];
            snprintf(spec, sizeof spec, "q%d%s", b, opts[o]);
            size_t len, bad = 0;
            uint8_t *m = roundtrip(spec, x, &s, y, &len);
            if (!m) continue;
            CHECK(m[23] == 1, "%s: grid byte %u, want 1 (midtread)", spec, m[23]);
            free(m);
            for (size_t i = 0; i < n; i++) bad += x[i] == 0.0f && y[i] != 0.0f;
            /* b = 1 is the two-level grid: nothing to check */
            CHECK(b == 1 || bad == 0, "%s: %zu zeros decoded non-zero", spec, bad);
        }
    /* midrise: no zero level with absmax; grid byte 0 */
    size_t len, bad = 0;
    uint8_t *m = roundtrip("q4:grid=midrise,round=nearest", x, &s, y, &len);
    CHECK(m && m[23] == 0, "midrise grid byte not 0");
    free(m);
    for (size_t i = 0; i < n; i++) bad += x[i] == 0.0f && y[i] != 0.0f;
    CHECK(bad > 0, "midrise absmax decoded its zeros as zeros (it has no zero level)");
    /* q8 absmax midtread: codes are the payload bytes after the G fp32 scales
     * (8 bits: the CGX layout is byte order); 255 is never written, 254 is
     * the group's max */
    m = roundtrip("q8:group=tensor", x, &s, y, &len);
    if (m) {
        size_t H = len - 4 - n;
        int has254 = 0, has255 = 0;
        for (size_t i = 0; i < n; i++) {
            has254 |= m[H + 4 + i] == 254;
            has255 |= m[H + 4 + i] == 255;
        }
        CHECK(has254 && !has255, "q8 midtread absmax codes: 254 %s, 255 %s", has254 ? "used" : "unused",
              has255 ? "used" : "unused");
        free(m);
    }
    free(x);
    free(y);
}

/* The grid byte (message byte 23) set to v, CRC recomputed; the decode status. */
static pz_status decode_with_grid(const uint8_t *msg, size_t len, int ndim, uint8_t v, float *y, size_t n) {
    uint8_t *m = xmalloc(len);
    memcpy(m, msg, len);
    m[23] = v;
    size_t H = 48 + 8 * (size_t)ndim;
    uint32_t crc = pz_crc32c(pz_crc32c(0, m, H - 4), m + H, len - H);
    pz_put_u32(m + H - 4, crc);
    pz_codec *c = NULL;
    pz_status st = pz_codec_create("fp32", &c);
    if (st == PZ_OK) {
        pz_shape got;
        st = pz_codec_decode(c, m, len, &CTX, y, n, &got);
    }
    pz_codec_free(c);
    free(m);
    return st;
}

static void test_grid_byte(void) {
    pz_shape s = {2, {4, 24, 0, 0}};
    size_t n = pz_shape_numel(&s), len;
    float x[96], y[96], y2[96];
    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(i * 37 % 23) - 11) / 7.0f;
    uint8_t *m = roundtrip("q3:round=nearest,grid=midrise", x, &s, y, &len);
    if (m) {
        /* the same codes read on the midtread grid: accepted, other values */
        CHECK_STATUS(decode_with_grid(m, len, 2, 1, y2, n), PZ_OK, NULL);
        CHECK(memcmp(y, y2, sizeof y) != 0, "the grid byte did not change the decoded values");
        /* q's validate() message, wrapped by message.c's pz_fail("...: %s",
         * pz_last_error()): pz_fail once formatted into the buffer it read */
        CHECK_STATUS(decode_with_grid(m, len, 2, 2, y2, n), PZ_ERR_FORMAT, "bad q parameters: q: bad mode field");
        CHECK_STATUS(decode_with_grid(m, len, 2, 0, y2, n), PZ_OK, NULL);
        CHECK(memcmp(y, y2, sizeof y) == 0, "re-CRC'd midrise message decodes differently");
        free(m);
    }
    /* any other codec must have 0 there */
    m = roundtrip("nuq4", x, &s, y, &len);
    if (m) {
        CHECK_STATUS(decode_with_grid(m, len, 2, 1, y2, n), PZ_ERR_FORMAT, "reserved parameter byte");
        free(m);
    }
}

/* ------------------------------------------------------------ tiny values */

static const char *const tiny_specs[] = {
    "q1", "q2", "q3", "q4", "q8", "q2:round=nearest", "q4:round=nearest", "q4:scale=minmax",
    "q3:scale=minmax,round=nearest", "q4:group=row", "q4:group=tensor", "q5:group=100",
    "q1:grid=midrise", "q2:grid=midrise", "q4:grid=midrise", "q8:grid=midrise", "q4:round=nearest,grid=midrise",
    "q4:scale=minmax,grid=midrise", "q3:scale=minmax,round=nearest,grid=midrise", "q4:group=row,grid=midrise",
    "nuq1", "nuq2", "nuq4", "nuq8", "nuq4:code=elias", "nuq3:bucket=100", "nuq8:bucket=64,code=elias",
};

static void test_tiny(void) {
    pz_shape s = {2, {64, 256, 0, 0}};
    size_t n = pz_shape_numel(&s);
    float *x = xmalloc(n * 4), *xr = xmalloc(n * 4), *y = xmalloc(n * 4);
    /* magnitudes: ~1e-38 (normal, near the bottom), 1e-40 and 1e-42 (subnormal) */
    static const float mags[] = {1e-38f, 1e-40f, 1e-42f};
    static const int ups[] = {100, 110, 120};   /* 2^up brings each into the normal range, exactly */
    pz_rng r;
    pz_rng_seed(&r, 13);
    for (size_t k = 0; k < sizeof mags / sizeof mags[0]; k++) {
        for (size_t i = 0; i < n; i++) x[i] = mags[k] * (2.0f * pz_rng_uniform(&r) - 1.0f);
        for (size_t i = 0; i < n; i++) xr[i] = ldexpf(x[i], ups[k]);   /* exact */
        for (size_t si = 0; si < sizeof tiny_specs / sizeof tiny_specs[0]; si++) {
            const char *spec = tiny_specs[si];
            double e = spec_err(spec, x, &s, y);
            double ref = spec_err(spec, xr, &s, y);
            /* the relative error of the same tensor in the normal range (1.4 for
             * q1, 90 for nuq1: a one-level grid); anything else is at most 1 */
            double bound = 1.1 * ref + 1e-3;
            CHECK(e <= bound, "%s on values ~%g: relative error %.4g, %.4g on the same tensor x 2^%d", spec,
                  (double)mags[k], e, ref, ups[k]);
            CHECK(ref > 1.0 || e <= 1.0, "%s on values ~%g: relative error %.4g > 1", spec, (double)mags[k], e);
        }
    }
    /* fp16 scales: values whose scale rounds to 0 in fp16 (<= 2^-25) decode to
     * zeros, whatever the grid */
    static const char *const fp16_specs[] = {
        "q4:sdtype=fp16", "q2:sdtype=fp16,round=nearest", "q1:sdtype=fp16", "q4:scale=minmax,sdtype=fp16",
        "q4:sdtype=fp16,grid=midrise", "q2:round=nearest,sdtype=fp16,grid=midrise", "q1:sdtype=fp16,grid=midrise",
        "q4:scale=minmax,sdtype=fp16,grid=midrise", "q8:scale=minmax,round=nearest,sdtype=fp16,grid=midrise",
    };
    static const float mags16[] = {1e-38f, 1e-40f, 1e-8f, 2.9e-8f};
    for (size_t k = 0; k < sizeof mags16 / sizeof mags16[0]; k++) {
        for (size_t i = 0; i < n; i++) x[i] = mags16[k] * (2.0f * pz_rng_uniform(&r) - 1.0f);
        for (size_t si = 0; si < sizeof fp16_specs / sizeof fp16_specs[0]; si++) {
            double e = spec_err(fp16_specs[si], x, &s, y);
            size_t nz = 0;
            for (size_t i = 0; i < n; i++) nz += y[i] != 0.0f;
            CHECK(nz == 0 && e == 1.0, "%s on values ~%g: %zu non-zero decoded values, relative error %.4g",
                  fp16_specs[si], (double)mags16[k], nz, e);
        }
    }
    /* just above the underflow (fp16 subnormal scales): a usable grid */
    for (size_t i = 0; i < n; i++) x[i] = 1e-6f * (2.0f * pz_rng_uniform(&r) - 1.0f);
    double e = spec_err("q4:sdtype=fp16,round=nearest", x, &s, y);
    CHECK(e < 0.2, "q4 nearest, fp16 scales, values ~1e-6: relative error %.4g", e);
    free(x);
    free(xr);
    free(y);
}

int main(void) {
    test_midtread_zero();
    test_grid_byte();
    test_tiny();
    test_heavy_tailed();
    return check_summary("test_qgrid");
}
