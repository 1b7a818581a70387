/* test_hadamard.c: the hadamard(C[,block=N]) wrapper (compress/wrappers/hadamard.c).
 *
 *  - The transform: against the O(N^2) product with the Sylvester matrix
 *    (H[i][j] = (-1)^popcount(i & j) / sqrt(N)) and the signs; inverse of
 *    forward is x within 1e-6 relative (L2), the norm is kept within 1e-6,
 *    rotated basis vectors are orthonormal; for C of 1, 3, 12, 96, 768, 1024
 *    and every block size that divides them.
 *  - The device kernels' order (flat pairs, per-element signs), modelled on
 *    the CPU: bitwise the CPU's forward and inverse.
 *  - Through the framework: hadamard(fp32) decodes to x within 1e-6; the
 *    flags byte is log2 N; default N = the largest power of two dividing C,
 *    at most 256; block= spelled in the canonical spec; the peeked spec
 *    re-creates a decoder; the same ctx gives the same bytes, the signs do
 *    not change with step or micro but do with the edge.
 *  - Wire: id 0x84, the chain's high bits in header byte 10; messages of ef,
 *    ef21, aq keep byte 10 zero; tampered flags, chain bits, reserved bits
 *    are refused (PZ_ERR_FORMAT); a decoder with another block refuses.
 *  - Nesting: aq(hadamard(q4)), hadamard(aq(q4)), ef(hadamard(q2)),
 *    hadamard(ef(q2)), ef21(hadamard(q4)), hadamard(ef21(q4)) over rounds
 *    with sample ids: the receiver's output stays close to x (fp32 inners:
 *    within 1e-5; q inners: bounded, and for aq and ef21 the error shrinks
 *    as the input repeats).
 *  - Errors: block= not a power of two, 0, too large (at parse time); block=
 *    not dividing C (at encode, naming the shape); inf or NaN input.
 *  - Heavy tails (issue 14): 8 x 512 x 1024 Student-t (df 3) with 12
 *    channels scaled by 40: hadamard(q4:group=row,round=nearest) has
 *    relative L2 error <= 0.25 and at most half that of the bare codec (for
 *    each q grid= variant this build knows). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "compress/wrappers/hadamard.h"
#include "base/crc32c.h"
#include "base/bytes.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "tests/check.h"
#include "tests/compress/heavy_tail.h"
#include "tests/compress/rel_l2.h"

static double norm2(const float *a, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * (double)a[i];
    return sqrt(s);
}

static void fill_normal(float *x, size_t n, uint64_t seed) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = pz_rng_normal(&r);
}

/* ---- the transform ---------------------------------------------------------- */

static void test_transform(void) {
    static const size_t Cs[] = {1, 3, 12, 96, 768, 1024};
    const size_t rows = 3;
    for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++) {
        size_t C = Cs[ci], n = rows * C;
        float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *z = xmalloc(n * 4), *s = xmalloc(C * 4);
        fill_normal(x, n, 11 + C);
        pz_hadamard_signs(pz_hadamard_key(&(pz_codec_ctx){.seed = 5, .edge = 2}), s, C);
        int flips = 0;
        for (size_t c = 0; c < C; c++) {
            CHECK(s[c] == 1.0f || s[c] == -1.0f, "sign %zu is %g", c, s[c]);
            flips += s[c] < 0;
        }
        if (C >= 96) CHECK(flips > (int)C / 4 && flips < 3 * (int)C / 4, "C %zu: %d of the signs are -1", C, flips);
        for (int logn = 0; ((size_t)1 << logn) <= C && logn <= 10; logn++) {
            size_t N = (size_t)1 << logn;
            if (C % N) continue;
            pz_hadamard_forward(x, y, rows, C, logn, s);
            /* y against the dense product, per row and block */
            double worst = 0;
            for (size_t r = 0; r < rows && N <= 256; r++)
                for (size_t b = 0; b < C; b += N)
                    for (size_t i = 0; i < N; i++) {
                        double acc = 0;
                        for (size_t j = 0; j < N; j++) {
                            double h = (__builtin_popcountll(i & j) & 1) ? -1.0 : 1.0;
                            acc += h * s[b + j] * x[r * C + b + j];
                        }
                        acc /= sqrt((double)N);
                        double d = fabs(acc - y[r * C + b + i]);
                        worst = d > worst ? d : worst;
                    }
            CHECK(worst <= 1e-5, "C %zu N %zu: forward differs from H D x by %g", C, N, worst);
            double nx = norm2(x, n), ny = norm2(y, n);
            CHECK(fabs(nx - ny) <= 1e-6 * nx, "C %zu N %zu: norm %g -> %g", C, N, nx, ny);
            memcpy(z, y, n * 4);
            pz_hadamard_inverse(z, rows, C, logn, s);
            double e = rel_l2(x, z, n);
            CHECK(e <= 1e-6, "C %zu N %zu: inverse(forward(x)) off by %g relative", C, N, e);
        }
        free(x);
        free(y);
        free(z);
        free(s);
    }
    /* orthonormal: the rotated basis vectors of one block of 64 */
    enum { N = 64 };
    float e[N], v[N][N], s[N];
    pz_hadamard_signs(pz_hadamard_key(NULL), s, N);
    for (int i = 0; i < N; i++) {
        memset(e, 0, sizeof e);
        e[i] = 1;
        pz_hadamard_forward(e, v[i], 1, N, 6, s);
    }
    double worst = 0;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double d = 0;
            for (int k = 0; k < N; k++) d += (double)v[i][k] * v[j][k];
            d -= i == j;
            worst = fabs(d) > worst ? fabs(d) : worst;
        }
    CHECK(worst <= 1e-6, "rotated basis: |<v_i, v_j> - delta_ij| up to %g", worst);
    float bad[4] = {1, 2, NAN, 3};
    CHECK(!pz_hadamard_all_finite(bad, 4) && pz_hadamard_all_finite(bad, 2), "finite check");
}

/* ---- the device kernels' arithmetic, modelled on the CPU ------------------------------
 * compress/cuda/hadamard_cuda.cu works on the flat tensor: element i gets the
 * sign of channel i % C, stage h pairs p = 0..n/2-1 as (i, i + h) with
 * i = (p / h) * 2h + p % h, then one scale pass (the inverse: stages, then
 * scale times sign). The model visits pairs in reverse order (threads run in
 * any order) and must give the CPU's bits. */
static void model_stages(float *v, size_t n, int logn) {
    for (int l = 0; l < logn; l++) {
        size_t h = (size_t)1 << l;
        for (size_t p = n / 2; p-- > 0;) {
            size_t i = (p / h) * 2 * h + p % h, j = i + h;
            float a = v[i], b = v[j];
            v[i] = a + b;
            v[j] = a - b;
        }
    }
}

static void test_device_model(void) {
    static const pz_shape shapes[] = {{3, {2, 5, 1024}}, {2, {7, 96}}, {2, {3, 70}}, {1, {9}}, {2, {4, 2048}}};
    static const int logs[] = {8, 5, 1, 0, 11};
    pz_codec_ctx ctx = {.seed = 12, .edge = 5, .dir = 1};
    uint64_t key = pz_hadamard_key(&ctx);
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        size_t n = pz_shape_numel(&shapes[k]), C = (size_t)shapes[k].dims[shapes[k].ndim - 1];
        int logn = logs[k];
        float *x = xmalloc(n * 4), *y = xmalloc(n * 4), *g = xmalloc(n * 4), *s = xmalloc(C * 4);
        fill_normal(x, n, 40 + k);
        pz_hadamard_signs(key, s, C);
        pz_hadamard_forward(x, y, n / C, C, logn, s);
        float sc = 1.0f;
        for (int i = 0; i < logn / 2; i++) sc *= 0.5f;
        if (logn & 1) sc *= 0x1.6a09e6p-1f;
        for (size_t i = 0; i < n; i++) g[i] = x[i] * s[i % C];
        model_stages(g, n, logn);
        for (size_t i = n; i-- > 0;) g[i] *= sc;
        CHECK(!memcmp(g, y, n * 4), "device model of the forward differs from the CPU (shape %zu)", k);
        pz_hadamard_inverse(y, n / C, C, logn, s);
        model_stages(g, n, logn);
        for (size_t i = 0; i < n; i++) g[i] *= sc * s[i % C];
        CHECK(!memcmp(g, y, n * 4), "device model of the inverse differs from the CPU (shape %zu)", k);
        free(x);
        free(y);
        free(g);
        free(s);
    }
}

/* ---- through the framework -------------------------------------------------------- */

typedef struct {
    uint8_t *msg;
    size_t len;
} message;

static message encode(pz_codec *c, const float *x, const pz_shape *s, const pz_codec_ctx *ctx) {
    message m = {0};
    size_t cap = pz_codec_max_encoded_size(c, s);
    m.msg = xmalloc(cap);
    pz_status st = pz_codec_encode(c, x, s, ctx, m.msg, cap, &m.len);
    CHECK(st == PZ_OK, "encode %s: %s", pz_codec_spec(c), pz_last_error());
    return m;
}

static pz_shape shape3(int64_t a, int64_t b, int64_t c) { return (pz_shape){3, {a, b, c}}; }

/* re-seals a tampered message */
static void reseal(uint8_t *m, size_t len, int ndim) {
    size_t H = 48 + 8 * (size_t)ndim;
    pz_put_u32(m + H - 4, pz_crc32c(pz_crc32c(0, m, H - 4), m + H, len - H));
}

static void test_codec(void) {
    pz_codec_ctx ctx = {.seed = 9, .step = 1, .edge = 3, .dir = 0, .micro = 2};
    struct {
        const char *spec;
        pz_shape s;
        int logn;
        const char *canon;
    } cases[] = {
        {"hadamard(fp32)", {3, {2, 5, 1024}}, 8, "hadamard(fp32)"},
        {"hadamard(fp32)", {2, {7, 96}}, 5, "hadamard(fp32)"},
        {"hadamard(fp32)", {2, {4, 70}}, 1, "hadamard(fp32)"},
        {"hadamard(fp32)", {1, {9}}, 0, "hadamard(fp32)"},
        {"hadamard(fp32,block=1024)", {2, {3, 2048}}, 10, "hadamard(fp32,block=1024)"},
        {"hadamard(fp32,block=4)", {2, {3, 96}}, 2, "hadamard(fp32,block=4)"},
        {"hadamard(fp32,block=8,block=16)", {2, {3, 96}}, 4, "hadamard(fp32,block=16)"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pz_codec *tx = NULL, *rx = NULL;
        CHECK_STATUS(pz_codec_create(cases[k].spec, &tx), PZ_OK, NULL);
        CHECK_STATUS(pz_codec_create(cases[k].spec, &rx), PZ_OK, NULL);
        if (!tx || !rx) continue;
        CHECK(!strcmp(pz_codec_spec(tx), cases[k].canon), "%s: canonical %s", cases[k].spec, pz_codec_spec(tx));
        size_t n = pz_shape_numel(&cases[k].s);
        float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
        fill_normal(x, n, 100 + k);
        message m = encode(tx, x, &cases[k].s, &ctx);
        CHECK(m.msg[5] == 0x84 && m.msg[7] == cases[k].logn && m.msg[8] == 0 && m.msg[10] == 1,
              "%s: header id 0x%02x flags %u chain %u/%u", cases[k].spec, m.msg[5], m.msg[7], m.msg[8], m.msg[10]);
        pz_shape got;
        CHECK_STATUS(pz_codec_decode(rx, m.msg, m.len, &ctx, y, n, &got), PZ_OK, NULL);
        double e = rel_l2(x, y, n);
        CHECK(e <= 1e-6, "%s: decode(encode(x)) off by %g relative", cases[k].spec, e);
        /* the inner fp32 payload is bitwise the baseline copy's forward
         * (the codec runs this CPU's ISA level) */
        size_t H = 48 + 8 * (size_t)cases[k].s.ndim;
        float *s = xmalloc((size_t)cases[k].s.dims[cases[k].s.ndim - 1] * 4), *yb = xmalloc(n * 4);
        size_t C = (size_t)cases[k].s.dims[cases[k].s.ndim - 1];
        pz_hadamard_signs(pz_hadamard_key(&ctx), s, C);
        pz_hadamard_forward(x, yb, n / C, C, cases[k].logn, s);
        CHECK(m.len == 2 * H + 4 * n && !memcmp(m.msg + 2 * H, yb, 4 * n), "%s: payload is not the baseline's forward",
              cases[k].spec);
        free(s);
        free(yb);
        /* the peeked spec names the codec and decodes the message the same way */
        char spec[256];
        CHECK_STATUS(pz_codec_peek(m.msg, m.len, spec, sizeof spec, NULL), PZ_OK, NULL);
        pz_codec *pk = NULL;
        CHECK_STATUS(pz_codec_create(spec, &pk), PZ_OK, NULL);
        float *y2 = xmalloc(n * 4);
        if (pk) {
            CHECK_STATUS(pz_codec_decode(pk, m.msg, m.len, &ctx, y2, n, &got), PZ_OK, NULL);
            CHECK(!memcmp(y, y2, n * 4), "%s: the peeked spec %s decodes differently", cases[k].spec, spec);
        }
        pz_codec_free(pk);
        /* same ctx, same bytes; another step or micro-batch, the same signs;
         * another edge, other signs */
        message m2 = encode(tx, x, &cases[k].s, &ctx);
        CHECK(m2.len == m.len && !memcmp(m.msg, m2.msg, m.len), "%s: not deterministic", cases[k].spec);
        pz_codec_ctx later = ctx;
        later.step = 77;
        later.micro = 5;
        message m3 = encode(tx, x, &cases[k].s, &later);
        CHECK(m3.len == m.len && !memcmp(m.msg, m3.msg, m.len), "%s: signs change with the step", cases[k].spec);
        pz_codec_ctx other = ctx;
        other.edge = 4;
        message m4 = encode(tx, x, &cases[k].s, &other);
        if (n >= 16)
            CHECK(m4.len == m.len && memcmp(m.msg, m4.msg, m.len), "%s: signs do not change with the edge",
                  cases[k].spec);
        /* decoded with the other edge's signs: wrong (a sanity check of the test) */
        CHECK_STATUS(pz_codec_decode(rx, m4.msg, m4.len, &ctx, y2, n, &got), PZ_OK, NULL);
        if (n >= 16) CHECK(rel_l2(x, y2, n) > 0.1, "%s: decoding ignores the signs", cases[k].spec);
        /* tampered flags byte: refused by the header check or the wrapper */
        for (int f = 0; f < 3; f++) {
            uint8_t bad = f == 0 ? (uint8_t)(m.msg[7] + 1) : f == 1 ? 17 : 255;
            if (f == 0 && cases[k].logn == 0) continue;
            m2.msg[7] = bad;
            reseal(m2.msg, m2.len, cases[k].s.ndim);
            CHECK_STATUS(pz_codec_decode(rx, m2.msg, m2.len, &ctx, y2, n, &got), PZ_ERR_FORMAT, "flags");
            memcpy(m2.msg, m.msg, m.len);
        }
        /* chain bits: reserved bits of byte 10, unknown kind 5..7, a high
         * bit past the end of the chain */
        static const uint8_t b10[] = {0x11, 0x21, 0x81, 0x05, 0x03, 0x01};
        static const uint8_t b8[] = {0, 0, 0, 0, 4, 1};
        for (size_t t = 0; t < sizeof b10; t++) {
            m2.msg[10] = b10[t];
            m2.msg[8] = b8[t];
            reseal(m2.msg, m2.len, cases[k].s.ndim);
            CHECK_STATUS(pz_codec_decode(rx, m2.msg, m2.len, &ctx, y2, n, &got), PZ_ERR_FORMAT, NULL);
            CHECK_STATUS(pz_codec_peek(m2.msg, m2.len, NULL, 0, NULL), PZ_ERR_FORMAT, NULL);
        }
        memcpy(m2.msg, m.msg, m.len);
        m2.msg[11] = 1;
        reseal(m2.msg, m2.len, cases[k].s.ndim);
        CHECK_STATUS(pz_codec_decode(rx, m2.msg, m2.len, &ctx, y2, n, &got), PZ_ERR_FORMAT, "reserved");
        free(m.msg);
        free(m2.msg);
        free(m3.msg);
        free(m4.msg);
        free(x);
        free(y);
        free(y2);
        pz_codec_free(tx);
        pz_codec_free(rx);
    }
    /* a decoder with another block refuses */
    pz_codec *a = NULL, *b = NULL, *c = NULL;
    CHECK_STATUS(pz_codec_create("hadamard(q4,block=16)", &a), PZ_OK, NULL);
    CHECK_STATUS(pz_codec_create("hadamard(q4)", &b), PZ_OK, NULL);
    CHECK_STATUS(pz_codec_create("ef(q4)", &c), PZ_OK, NULL);
    pz_shape s = {2, {4, 64}};
    float x[256], y[256];
    fill_normal(x, 256, 3);
    message m = encode(a, x, &s, &ctx);
    pz_shape got;
    CHECK_STATUS(pz_codec_decode(b, m.msg, m.len, &ctx, y, 256, &got), PZ_ERR_FORMAT, "block");
    CHECK_STATUS(pz_codec_decode(c, m.msg, m.len, &ctx, y, 256, &got), PZ_ERR_FORMAT, "hadamard");
    char spec[256];
    CHECK_STATUS(pz_codec_peek(m.msg, m.len, spec, sizeof spec, NULL), PZ_OK, NULL);
    CHECK(strstr(spec, "hadamard(q4:") == spec && strstr(spec, ",block=16)"), "peeked spec %s", spec);
    free(m.msg);
    /* the older wrappers' messages keep byte 10 zero */
    m = encode(c, x, &s, &ctx);
    CHECK(m.msg[5] == 0x81 && m.msg[8] == 1 && m.msg[10] == 0, "ef(q4) header changed");
    free(m.msg);
    pz_codec_free(a);
    pz_codec_free(b);
    pz_codec_free(c);
    /* errors */
    pz_codec *e = NULL;
    CHECK_STATUS(pz_codec_create("hadamard(q4,block=3)", &e), PZ_ERR_ARG, "power of two");
    CHECK_STATUS(pz_codec_create("hadamard(q4,block=96)", &e), PZ_ERR_ARG, "power of two");
    CHECK_STATUS(pz_codec_create("hadamard(q4,block=0)", &e), PZ_ERR_ARG, "block");
    CHECK_STATUS(pz_codec_create("hadamard(q4,block=131072)", &e), PZ_ERR_ARG, "block");
    CHECK_STATUS(pz_codec_create("hadamard(q4,block=)", &e), PZ_ERR_ARG, "block");
    CHECK_STATUS(pz_codec_create("hadamard(q4,blocks=4)", &e), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_codec_create("hadamard()", &e), PZ_ERR_ARG, NULL);
    CHECK_STATUS(pz_codec_create("hadamard(q4,block=64)", &e), PZ_OK, NULL);
    if (e) {
        pz_shape s96 = {2, {4, 96}};
        uint8_t buf[4096];
        size_t len;
        CHECK_STATUS(pz_codec_encode(e, x, &s96, &ctx, buf, sizeof buf, &len), PZ_ERR_SHAPE, "(4,96)");
        float inf[64];
        fill_normal(inf, 64, 1);
        inf[5] = INFINITY;
        pz_shape s64 = {1, {64}};
        CHECK_STATUS(pz_codec_encode(e, inf, &s64, &ctx, buf, sizeof buf, &len), PZ_ERR_ARG, "inf or NaN");
        inf[5] = NAN;
        CHECK_STATUS(pz_codec_encode(e, inf, &s64, &ctx, buf, sizeof buf, &len), PZ_ERR_ARG, "inf or NaN");
        inf[5] = 3e38f;
        inf[6] = 3e38f;
        CHECK_STATUS(pz_codec_encode(e, inf, &s64, &ctx, buf, sizeof buf, &len), PZ_ERR_ARG, "overflow");
    }
    pz_codec_free(e);
}

/* ---- nesting ------------------------------------------------------------------- */

static void test_nesting(void) {
    static const struct {
        const char *spec;
        double first, last;   /* bounds of the relative error of round 1 and the last round */
        int shrinks;          /* the error must shrink as the input repeats */
    } cases[] = {
        {"aq(hadamard(fp32))", 1e-6, 1e-5, 0},   {"hadamard(aq(fp32))", 1e-6, 1e-5, 0},
        {"ef(hadamard(fp32))", 1e-6, 1e-6, 0},   {"hadamard(ef(fp32))", 1e-6, 1e-6, 0},
        {"aq(hadamard(q4))", 1e-6, 0.05, 1},     {"hadamard(aq(q4))", 1e-6, 0.05, 1},
        /* 2-bit midtread (q's default) has 3 levels, -s, 0 and s: coarser than midrise's 4 */
        {"ef(hadamard(q2))", 1.0, 3.0, 0},       {"hadamard(ef(q2))", 1.0, 3.0, 0},
        {"ef(hadamard(q2:grid=midrise))", 0.6, 1.5, 0}, {"hadamard(ef(q2:grid=midrise))", 0.6, 1.5, 0},
        {"ef21(hadamard(q4))", 0.3, 0.05, 1},    {"hadamard(ef21(q4))", 0.3, 0.05, 1},
        {"aq(hadamard(q4,block=8),warmup=fp16)", 1e-3, 0.05, 1},
        {"ef(aq(hadamard(q4)))+zstd", 1e-6, 0.05, 1},
    };
    enum { B = 4, T = 6, C = 96, ROUNDS = 6 };
    pz_shape s = shape3(B, T, C);
    size_t n = (size_t)B * T * C;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
    uint64_t ids[B] = {10, 11, 12, 13};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        pz_codec *tx = NULL, *rx = NULL;
        CHECK_STATUS(pz_codec_create(cases[k].spec, &tx), PZ_OK, NULL);
        CHECK_STATUS(pz_codec_create(cases[k].spec, &rx), PZ_OK, NULL);
        if (!tx || !rx) {
            pz_codec_free(tx);
            pz_codec_free(rx);
            continue;
        }
        char spec[512];
        double e0 = 0, e = 0;
        for (int r = 0; r < ROUNDS; r++) {
            fill_normal(x, n, 1234);   /* the same samples every round */
            pz_codec_ctx ctx = {.seed = 1, .step = (uint64_t)r, .edge = 2, .dir = 1, .micro = 0, .sample_ids = ids};
            message m = encode(tx, x, &s, &ctx);
            pz_shape got;
            CHECK_STATUS(pz_codec_decode(rx, m.msg, m.len, &ctx, y, n, &got), PZ_OK, NULL);
            e = rel_l2(x, y, n);
            if (r == 0) e0 = e;
            if (r == 0) {
                CHECK_STATUS(pz_codec_peek(m.msg, m.len, spec, sizeof spec, NULL), PZ_OK, NULL);
                pz_codec *pk = NULL;
                CHECK_STATUS(pz_codec_create(spec, &pk), PZ_OK, NULL);
                pz_codec_free(pk);
            }
            free(m.msg);
        }
        CHECK(e0 <= cases[k].first, "%s: round 1 relative error %g > %g", cases[k].spec, e0, cases[k].first);
        CHECK(e <= cases[k].last, "%s: round %d relative error %g > %g", cases[k].spec, ROUNDS, e, cases[k].last);
        if (cases[k].shrinks) CHECK(e < e0 || e0 < 1e-6, "%s: error %g -> %g does not shrink", cases[k].spec, e0, e);
        /* what it holds stays within what a memory estimate counts */
        CHECK(pz_codec_state_bytes(tx, NULL) <= pz_codec_state_bound(tx, &s) &&
                  pz_codec_state_bytes(rx, NULL) <= pz_codec_state_bound(rx, &s),
              "%s: holds %zu / %zu bytes, bound %zu", cases[k].spec, pz_codec_state_bytes(tx, NULL),
              pz_codec_state_bytes(rx, NULL), pz_codec_state_bound(tx, &s));
        pz_codec_free(tx);
        pz_codec_free(rx);
    }
    /* the header of aq(hadamard(q4)): id 0x83, chain 3 then 4 (byte 8 = 3,
     * byte 10 = bit 1); hadamard(aq(q4)): id 0x84, byte 8 = 3 << 2, byte 10 = 1 */
    const char *specs[2] = {"aq(hadamard(q4))", "hadamard(aq(q4))"};
    const uint8_t want[2][3] = {{0x83, 3, 2}, {0x84, 12, 1}};
    for (int i = 0; i < 2; i++) {
        pz_codec *c = NULL;
        CHECK_STATUS(pz_codec_create(specs[i], &c), PZ_OK, NULL);
        if (!c) continue;
        pz_codec_ctx ctx = {.seed = 1, .sample_ids = ids};
        fill_normal(x, n, 5);
        message m = encode(c, x, &s, &ctx);
        CHECK(m.msg[5] == want[i][0] && m.msg[8] == want[i][1] && m.msg[10] == want[i][2],
              "%s: header 0x%02x %u %u", specs[i], m.msg[5], m.msg[8], m.msg[10]);
        free(m.msg);
        pz_codec_free(c);
    }
    /* checkpoints walk the chain through the stateless level: a restored
     * codec writes the same next message as the original */
    static const char *const st_specs[] = {"ef(hadamard(q2))", "hadamard(ef(q2))", "aq(hadamard(q4))"};
    for (int i = 0; i < 3; i++) {
        pz_codec *a = NULL, *b = NULL;
        CHECK_STATUS(pz_codec_create(st_specs[i], &a), PZ_OK, NULL);
        CHECK_STATUS(pz_codec_create(st_specs[i], &b), PZ_OK, NULL);
        if (!a || !b) continue;
        pz_codec_ctx ctx = {.seed = 3, .edge = 1, .sample_ids = ids};
        fill_normal(x, n, 8);
        free(encode(a, x, &s, &ctx).msg);
        uint8_t *blob = NULL;
        size_t blen = 0;
        CHECK_STATUS(pz_codec_state_save(a, &blob, &blen), PZ_OK, NULL);
        CHECK_STATUS(pz_codec_state_load(b, blob, blen), PZ_OK, NULL);
        ctx.step = 1;
        message ma = encode(a, x, &s, &ctx), mb = encode(b, x, &s, &ctx);
        CHECK(ma.len == mb.len && !memcmp(ma.msg, mb.msg, ma.len), "%s: restored state writes another message",
              st_specs[i]);
        free(blob);
        free(ma.msg);
        free(mb.msg);
        pz_codec_free(a);
        pz_codec_free(b);
    }
    /* four levels deep still fit; five do not */
    pz_codec *c = NULL;
    CHECK_STATUS(pz_codec_create("hadamard(ef(hadamard(ef21(q4))))", &c), PZ_OK, NULL);
    if (c) {
        pz_codec *r = NULL;
        pz_codec_create(pz_codec_spec(c), &r);
        pz_codec_ctx ctx = {.seed = 1};
        message m = encode(c, x, &s, &ctx);
        CHECK(m.msg[5] == 0x84 && m.msg[8] == ((1 << 2) | (2 << 6)) && m.msg[10] == 0x5, "4 levels: %u %u", m.msg[8],
              m.msg[10]);
        pz_shape got;
        if (r) CHECK_STATUS(pz_codec_decode(r, m.msg, m.len, &ctx, y, n, &got), PZ_OK, NULL);
        free(m.msg);
        pz_codec_free(r);
    }
    pz_codec_free(c);
    CHECK_STATUS(pz_codec_create("hadamard(hadamard(hadamard(hadamard(hadamard(q4)))))", &c), PZ_ERR_ARG, "deep");
    free(x);
    free(y);
}

/* ---- heavy tails (issue 14's done-when) --------------------------------------------------------- */

static double codec_error(const char *spec, const float *x, const pz_shape *s) {
    pz_codec *c = NULL;
    if (pz_codec_create(spec, &c) != PZ_OK) {
        CHECK(0, "%s: %s", spec, pz_last_error());
        return 1e9;
    }
    size_t n = pz_shape_numel(s);
    float *y = xmalloc(n * 4);
    pz_codec_ctx ctx = {.seed = 42, .edge = 1};
    message m = encode(c, x, s, &ctx);
    pz_shape got;
    double e = 1e9;
    if (pz_codec_decode(c, m.msg, m.len, &ctx, y, n, &got) == PZ_OK) e = rel_l2(x, y, n);
    else CHECK(0, "%s: decode: %s", spec, pz_last_error());
    free(m.msg);
    free(y);
    pz_codec_free(c);
    return e;
}

static void test_heavy_tails(void) {
    pz_shape s = shape3(8, 512, 1024);
    size_t n = pz_shape_numel(&s), C = 1024;
    float *x = xmalloc(n * 4);
    /* 12 distinct outlier channels drawn after the noise, scaled by 40 */
    heavy_tail_fill(x, n / C, C, 3, HEAVY_HADAMARD_SEED, NULL, NULL);
    /* the inner q options this relies on, spelled out; every grid this build
     * knows (q's grid= option, where it exists) */
    static const char *const grids[] = {"", ",grid=midtread", ",grid=midrise", ",grid=uniform", ",grid=symmetric"};
    int tried = 0;
    for (size_t g = 0; g < sizeof grids / sizeof grids[0]; g++) {
        char q[128], h[160];
        snprintf(q, sizeof q, "q4:group=row,round=nearest%s", grids[g]);
        pz_codec *probe = NULL;
        if (pz_codec_create(q, &probe) != PZ_OK) continue;   /* no such grid here */
        pz_codec_free(probe);
        snprintf(h, sizeof h, "hadamard(%s)", q);
        double eq = codec_error(q, x, &s), eh = codec_error(h, x, &s);
        printf("heavy tails (8x512x1024, t3, 12 channels x40): %s relative L2 %.4f, %s %.4f (ratio %.3f)\n", q, eq, h,
               eh, eh / eq);
        CHECK(eh <= 0.25, "%s: relative L2 error %g > 0.25", h, eh);
        CHECK(eh <= 0.5 * eq, "%s: error %g is more than half of %s's %g", h, eh, q, eq);
        tried++;
    }
    CHECK(tried >= 1, "no q4 variant parsed");
    free(x);
}

int main(void) {
    test_transform();
    test_device_model();
    test_codec();
    test_nesting();
    test_heavy_tails();
    return check_summary("test_hadamard");
}
