/* test_topk_jointsq.c: properties of the topk and jointsq codecs and of the
 * knapsack solver behind jointsq. Exits non-zero on any failure.
 *
 *   test_topk_jointsq           run the tests
 *   test_topk_jointsq --bench   also time encode+decode of 4M floats against memcpy
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "compress/core/codec_impl.h"
#include "compress/core/elem.h"
#include "compress/jointsq/jointsq_priv.h"
#include "compress/jointsq/mckp.h"
#include "base/clock.h"
#include "base/mem.h"
#include "base/rng.h"
#include "base/status.h"
#include "tests/check.h"

extern const pz_codec_impl pz_codec_topk, pz_codec_jointsq;

/* The jointsq solver tuned so that its bracket of the critical multiplier
 * is (nearly) always wrong and its candidate buffer tiny: the retry,
 * narrowing and fallback paths of the large-tensor solver run. */
static const pz_jsq_tuning forced_tuning = {16384, 1e-5, 64};
static const pz_jsq_tuning default_tuning = PZ_JSQ_TUNING_DEFAULT;

/* ---------------------------------------------------------------- data */

static pz_rng rng;

static float student_t(float dof) {
    /* normal / sqrt(chi2_dof / dof), chi2 from dof normals (integer part)
     * plus a Gamma(frac/2) free approximation: use dof in {2, 3} exactly */
    float z = pz_rng_normal(&rng), c = 0;
    int d = (int)dof;
    for (int i = 0; i < d; i++) {
        float g = pz_rng_normal(&rng);
        c += g * g;
    }
    return z / sqrtf(c / (float)d);
}

enum { D_GAUSS, D_T2, D_T3, D_OUTLIER, D_TIES, D_ZEROS, D_NKINDS };

static void fill(float *x, size_t n, int kind) {
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case D_GAUSS: x[i] = pz_rng_normal(&rng); break;
        case D_T2: x[i] = student_t(2); break;
        case D_T3: x[i] = student_t(3); break;
        case D_OUTLIER: {
            x[i] = pz_rng_normal(&rng);
            if (pz_rng_uniform(&rng) < 0.01f) x[i] *= 50.0f;
            break;
        }
        case D_TIES: {   /* few distinct magnitudes, both signs and -0 */
            int v = (int)pz_rng_below(&rng, 7) - 3;
            x[i] = v == 0 ? (pz_rng_below(&rng, 2) ? -0.0f : 0.0f) : (float)v;
            break;
        }
        default: x[i] = pz_rng_uniform(&rng) < 0.9f ? 0.0f : pz_rng_normal(&rng); break;
        }
    }
}

static double sqerr(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        s += d * d;
    }
    return s;
}

static pz_shape shape2(size_t rows, size_t cols) {
    pz_shape s = {0};
    if (rows == 1) {
        s.ndim = 1;
        s.dims[0] = (int64_t)cols;
    } else {
        s.ndim = 2;
        s.dims[0] = (int64_t)rows;
        s.dims[1] = (int64_t)cols;
    }
    return s;
}

static pz_codec_params parse_or_die(const pz_codec_impl *impl, const char *spec) {
    pz_codec_params p;
    size_t nl = strlen(impl->name);
    if (impl->parse(&p, spec + nl, spec, nl) != PZ_OK || impl->validate(&p) != PZ_OK) {
        fprintf(stderr, "cannot parse %s: %s\n", spec, pz_last_error());
        exit(1);
    }
    return p;
}

/* ---------------------------------------------------------------- topk reference */

static int cmp_mag_(const void *a, const void *b, void *ctx) {
    const float *x = ctx;
    uint32_t ka = pz_f2u(x[*(const uint32_t *)a]) & 0x7fffffffu;
    uint32_t kb = pz_f2u(x[*(const uint32_t *)b]) & 0x7fffffffu;
    if (ka != kb) return ka > kb ? -1 : 1;          /* larger magnitude first */
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;   /* lower index first */
}

/* k per documented formula, computed the slow way: fraction as its shortest
 * decimal, times L, exactly (long double is enough for these sizes). */
static size_t ref_k(float fraction, size_t L) {
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)fraction);
        if (strtof(buf, NULL) == fraction) break;
    }
    /* decimal string times L with integer math on the digits */
    long double v = strtold(buf, NULL) * (long double)L;
    size_t k = (size_t)floorl(v + 1e-9L);
    if (k > L) k = L;
    return k < 1 ? 1 : k;
}

/* Reference kept set: per segment, sort indices by (|x| desc, index asc). */
static size_t ref_topk(const float *x, size_t n, size_t L, size_t k, uint8_t *kept) {
    uint32_t *ord = malloc(L * sizeof *ord);
    memset(kept, 0, n);
    size_t K = 0;
    for (size_t b = 0; b < n; b += L) {
        for (size_t i = 0; i < L; i++) ord[i] = (uint32_t)(b + i);
        qsort_r(ord, L, sizeof *ord, cmp_mag_, (void *)x);
        for (size_t j = 0; j < k; j++) kept[ord[j]] = 1;
        K += k;
    }
    free(ord);
    return K;
}

static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) { v >>= 7; n++; }
    return n;
}

/* Parses the documented index section; fills kept[]; returns 0 on a
 * malformed section. */
static int parse_topk_indices(const uint8_t *pl, size_t len, size_t fixed, size_t n, size_t K,
                              uint8_t *kept) {
    memset(kept, 0, n);
    const uint8_t *ix = pl + fixed;
    size_t il = len - fixed;
    if (pl[0] == 0) {
        if (il != (n + 7) / 8) return 0;
        for (size_t i = 0; i < n; i++) kept[i] = (ix[i / 8] >> (i % 8)) & 1;
        return 1;
    }
    size_t q = 0, pos = 0;
    for (size_t j = 0; j < K; j++) {
        uint64_t v = 0;
        int sh = 0;
        for (;;) {
            if (q >= il) return 0;
            uint8_t b = ix[q++];
            v |= (uint64_t)(b & 0x7f) << sh;
            sh += 7;
            if (!(b & 0x80)) break;
        }
        pos = j ? pos + 1 + v : v;
        if (pos >= n) return 0;
        kept[pos] = 1;
    }
    return q == il;
}

static void test_topk_selection(void) {
    static const char *values[] = {"fp32", "fp16", "q8"};
    static const size_t vbytes[] = {4, 2, 1};
    static const struct { size_t rows, cols; } shapes[] = {{1, 1}, {1, 7}, {3, 5}, {16, 64}, {8, 768},
                                                           {1, 10000}, {4, 3000}, {2, 20000}};
    static const float fracs[] = {0.001f, 0.01f, 0.05f, 0.1f, 0.3f, 0.7f, 1.0f};
    int seen_bitmap = 0, seen_varint = 0, cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        size_t R = shapes[si].rows, C = shapes[si].cols, n = R * C;
        pz_shape s = shape2(R, C);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        uint8_t *kept = malloc(n), *got = malloc(n);
        for (int kind = 0; kind < D_NKINDS; kind++) {
            fill(x, n, kind);
            for (size_t fi = 0; fi < sizeof fracs / sizeof fracs[0]; fi++) {
                for (int scope = 0; scope < 2; scope++) {
                    for (int vm = 0; vm < 3; vm++) {
                        char spec[96];
                        snprintf(spec, sizeof spec, "topk:%g,scope=%s,values=%s", (double)fracs[fi],
                                 scope ? "tensor" : "row", values[vm]);
                        pz_codec_params p = parse_or_die(&pz_codec_topk, spec);
                        size_t L = scope ? n : C, nseg = n / L, k = ref_k(fracs[fi], L);
                        size_t K = ref_topk(x, n, L, k, kept);
                        size_t cap = pz_codec_topk.max_payload(&p, &s);
                        uint8_t *pl = malloc(cap);
                        size_t len = 0;
                        pz_status st = pz_codec_topk.encode(&p, x, &s, NULL, pl, cap, &len);
                        CHECK(st == PZ_OK, "%s encode: %s", spec, pz_last_error());
                        if (st != PZ_OK) { free(pl); continue; }
                        cases++;
                        /* documented size */
                        size_t nscale = vm == 2 ? nseg : 0;
                        size_t fixed = 1 + 4 * nscale + K * vbytes[vm];
                        size_t V = 0, prev = 0, j = 0;
                        for (size_t i = 0; i < n; i++) {
                            if (!kept[i]) continue;
                            V += varint_len(j ? i - prev - 1 : i);
                            prev = i;
                            j++;
                        }
                        size_t bm = (n + 7) / 8;
                        int want_varint = V < bm;
                        CHECK(len == fixed + (want_varint ? V : bm), "%s size %zu, formula %zu", spec, len,
                              fixed + (want_varint ? V : bm));
                        CHECK(pl[0] == want_varint, "%s coding %u, expected %d", spec, pl[0], want_varint);
                        seen_varint |= want_varint;
                        seen_bitmap |= !want_varint;
                        /* exact kept set, read from the documented index section */
                        CHECK(parse_topk_indices(pl, len, fixed, n, K, got) && !memcmp(got, kept, n),
                              "%s: kept set differs from the sorted reference", spec);
                        /* decode */
                        st = pz_codec_topk.decode(&p, pl, len, &s, y);
                        CHECK(st == PZ_OK, "%s decode: %s", spec, pz_last_error());
                        int bad = 0;
                        for (size_t sg = 0; sg < nseg && st == PZ_OK; sg++) {
                            float smax = 0;
                            for (size_t i = sg * L; i < (sg + 1) * L; i++) smax = fmaxf(smax, fabsf(x[i]));
                            for (size_t i = sg * L; i < (sg + 1) * L; i++) {
                                if (!kept[i]) { bad += y[i] != 0.0f || signbit(y[i]); continue; }
                                if (vm == 0) bad += pz_f2u(y[i]) != pz_f2u(x[i]);
                                else if (vm == 1) bad += y[i] != pz_f16_to_f32(pz_f32_to_f16(x[i]));
                                else bad += fabsf(y[i] - x[i]) > smax / 254.0f * 1.0001f + 1e-30f;
                            }
                        }
                        CHECK(!bad, "%s: %d decoded values wrong", spec, bad);
                        free(pl);
                    }
                }
            }
        }
        free(x);
        free(y);
        free(kept);
        free(got);
    }
    CHECK(seen_bitmap && seen_varint, "both index codings exercised (bitmap %d, varint %d)", seen_bitmap,
          seen_varint);
    printf("topk selection/size: %d cases\n", cases);
}

/* k formula corner cases */
static void test_topk_k(void) {
    pz_shape s = shape2(1, 10);
    float x[10];
    for (int i = 0; i < 10; i++) x[i] = (float)(i + 1);
    uint8_t pl[256];
    size_t len;
    struct { const char *spec; size_t k; } cs[] = {{"topk:0.7", 7}, {"topk:0.3", 3}, {"topk:0.01", 1},
                                                   {"topk:1", 10}, {"topk:0.99", 9}, {"topk:0.15", 1}};
    for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
        pz_codec_params p = parse_or_die(&pz_codec_topk, cs[c].spec);
        CHECK(pz_codec_topk.encode(&p, x, &s, NULL, pl, sizeof pl, &len) == PZ_OK, "%s", cs[c].spec);
        /* fp32 values; kept = the top k = indices 10-k..9, varints (k bytes) iff k < 2 */
        CHECK(len == 1 + 4 * cs[c].k + (cs[c].k < 2 ? cs[c].k : 2), "%s: k should be %zu (len %zu)", cs[c].spec, cs[c].k, len);
    }
    /* parse errors */
    const char *bad[] = {":0", ":1.5", ":abc", "", ":0.1,scope=col", ":0.1,values=q4", ":0.1,foo=1", ":0.1,",
                         ":0.1;scope=row"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pz_codec_params p;
        char spec[64];
        snprintf(spec, sizeof spec, "topk%s", bad[i]);
        CHECK(pz_codec_topk.parse(&p, bad[i], spec, 4) != PZ_OK, "'%s' should not parse", spec);
    }
    pz_codec_params p = parse_or_die(&pz_codec_topk, "topk:0.7,scope=tensor,values=q8");
    char buf[128];
    pz_codec_topk.format(&p, buf, sizeof buf);
    CHECK(!strcmp(buf, "topk:0.7,scope=tensor,values=q8"), "canonical spec '%s'", buf);
}

/* ---------------------------------------------------------------- decoder robustness */

/* A codec's message, for edits that the decoder must refuse or survive. */
typedef struct {
    const pz_codec_impl *im;
    const char *spec;
    pz_codec_params p;
    pz_shape s;
    uint8_t *pl, *cp;   /* the message, and an edited copy (cap + 8 bytes each) */
    size_t len;         /* 0: encoding failed, the edits are skipped */
    float *y;
} message;

/* Encodes x (shape s) with spec; the message must decode. */
static void msg_encode(message *m, const pz_codec_impl *im, const char *spec, const float *x, pz_shape s, float *y) {
    *m = (message){.im = im, .spec = spec, .p = parse_or_die(im, spec), .s = s, .y = y};
    size_t cap = im->max_payload(&m->p, &m->s);
    m->pl = malloc(cap + 8);
    m->cp = malloc(cap + 8);
    if (im->encode(&m->p, x, &m->s, NULL, m->pl, cap, &m->len) != PZ_OK) m->len = 0;
    CHECK(m->len > 0, "%s encode: %s", spec, pz_last_error());
    CHECK(!m->len || im->decode(&m->p, m->pl, m->len, &m->s, y) == PZ_OK, "%s clean decode: %s", spec,
          pz_last_error());
}

/* One byte short and one (zero) byte more must be refused. */
static void msg_refuse_lengths(message *m) {
    if (!m->len) return;
    CHECK(m->im->decode(&m->p, m->pl, m->len - 1, &m->s, m->y) != PZ_OK, "%s truncated accepted", m->spec);
    memcpy(m->cp, m->pl, m->len);
    m->cp[m->len] = 0;
    CHECK(m->im->decode(&m->p, m->cp, m->len + 1, &m->s, m->y) != PZ_OK, "%s trailing byte accepted", m->spec);
}

/* The message with bytes [at, at + n) replaced by v must be refused. */
static void msg_refuse_edit(message *m, size_t at, const void *v, size_t n, const char *what) {
    if (!m->len) return;
    memcpy(m->cp, m->pl, m->len);
    memcpy(m->cp + at, v, n);
    CHECK(m->im->decode(&m->p, m->cp, m->len, &m->s, m->y) != PZ_OK, "%s %s accepted", m->spec, what);
}

/* Random corruption (1..4 bit flips, a truncation one time in 8): no crash,
 * any result. Frees the message. */
static void msg_fuzz_free(message *m, int rounds) {
    for (int t = 0; t < rounds && m->len; t++) {
        memcpy(m->cp, m->pl, m->len);
        int nf = 1 + (int)pz_rng_below(&rng, 4);
        for (int f = 0; f < nf; f++) m->cp[pz_rng_below(&rng, m->len)] ^= (uint8_t)(1u << pz_rng_below(&rng, 8));
        size_t l2 = pz_rng_below(&rng, 8) ? m->len : pz_rng_below(&rng, m->len + 1);
        (void)m->im->decode(&m->p, m->cp, l2, &m->s, m->y);
    }
    free(m->pl);
    free(m->cp);
}

/* Decoder robustness: targeted corruptions must fail, random ones must not crash. */
static void test_topk_corrupt(void) {
    size_t R = 8, C = 256, n = R * C;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    fill(x, n, D_GAUSS);
    const char *specs[] = {"topk:0.02,values=q8", "topk:0.3,values=fp16", "topk:0.01,scope=tensor"};
    for (int si = 0; si < 3; si++) {
        message m;
        msg_encode(&m, &pz_codec_topk, specs[si], x, shape2(R, C), y);
        msg_refuse_lengths(&m);
        msg_refuse_edit(&m, 0, &(uint8_t){2}, 1, "bad coding");
        /* last index byte changed: moves/adds/removes an index */
        uint8_t last = m.len ? m.pl[m.len - 1] ^ 0x41 : 0;
        msg_refuse_edit(&m, m.len - 1, &last, 1, "index corruption");
        if (si == 0) {
            msg_refuse_edit(&m, 1 + 4 * R, &(uint8_t){0x80}, 1, "q8 code -128");
            float bads = -1.0f;
            msg_refuse_edit(&m, 1, &bads, 4, "negative scale");
        }
        msg_fuzz_free(&m, 3000);
    }
    free(x);
    free(y);
}

/* ---------------------------------------------------------------- knapsack */

static void test_mckp_brute(void) {
    int cases = 0, exact = 0;
    double worst = 0, worst_crit = 0;
    for (int t = 0; t < 4000; t++) {
        size_t n = 1 + pz_rng_below(&rng, 8);
        pz_mckp_item it[8];
        uint64_t base = 0, maxc = 0;
        int jsq_like = t % 2;
        for (size_t i = 0; i < n; i++) {
            if (jsq_like) {   /* jointsq shapes: group of G elements, costs 1, 2+2G, 3+4G, 3+8G */
                uint32_t G = 1 + (uint32_t)pz_rng_below(&rng, 4);
                float a = fabsf(student_t(2));
                it[i].cost[0] = 1; it[i].cost[1] = 2 + 2 * G; it[i].cost[2] = 3 + 4 * G; it[i].cost[3] = 3 + 8 * G;
                it[i].err[0] = a * a * (float)G;
                it[i].err[1] = pz_rng_below(&rng, 5) ? a * (1.5f - a / 2) * (float)G * 0.5f : INFINITY;
                if (it[i].err[1] < 0) it[i].err[1] = 0;
                it[i].err[2] = a * a * (float)G / 40.0f;
                it[i].err[3] = a * a * (float)G / 8000.0f;
            } else {
                uint32_t c = (uint32_t)pz_rng_below(&rng, 3);
                float e = 1 + 10 * pz_rng_uniform(&rng);
                for (int o = 0; o < 4; o++) {
                    it[i].cost[o] = c;
                    it[i].err[o] = pz_rng_below(&rng, 6) || o == 0 ? e : INFINITY;
                    c += 1 + (uint32_t)pz_rng_below(&rng, 9);
                    e *= pz_rng_uniform(&rng) * 1.2f;    /* sometimes non-convex or dominated */
                }
            }
            base += it[i].cost[0];
            maxc += it[i].cost[3];
        }
        uint64_t cap = base + pz_rng_below(&rng, maxc - base + 2);
        uint8_t ch[8], bch[8];
        pz_mckp_info info;
        pz_mckp_solve(it, n, cap, ch, &info);
        double opt = pz_mckp_brute(it, n, cap, bch);
        uint64_t c = 0;
        double e = 0;
        for (size_t i = 0; i < n; i++) {
            c += it[i].cost[ch[i]];
            e += it[i].err[ch[i]];
        }
        cases++;
        CHECK(info.base_fits && c <= cap && c == info.cost, "infeasible: cost %llu cap %llu",
              (unsigned long long)c, (unsigned long long)cap);
        CHECK(fabs(e - info.err) <= 1e-6 * (1 + e), "reported err %g, actual %g", info.err, e);
        double slack = 1e-5 * (1 + opt);
        CHECK(e <= opt + info.gap + slack, "case %d: greedy %g > optimum %g + gap %g", t, e, opt, info.gap);
        /* the certified gap is below the a priori bound: the critical upgrade's error drop */
        CHECK(info.gap <= info.crit + slack, "case %d: gap %g above the critical drop %g", t, info.gap, info.crit);
        if (info.crit > worst_crit) worst_crit = info.crit;
        if (e <= opt + slack) exact++;
        if (opt > 0 && (e - opt) / opt > worst) worst = (e - opt) / opt;
    }
    /* base does not fit */
    pz_mckp_item it = {{5, 6, 7, 8}, {1, 0.5f, 0.2f, 0.1f}};
    uint8_t ch;
    pz_mckp_info info;
    pz_mckp_solve(&it, 1, 4, &ch, &info);
    CHECK(!info.base_fits && ch == 0, "base over capacity");
    printf("mckp vs brute force: %d cases, %d optimal, worst relative excess %.3g (all within gap)\n",
           cases, exact, worst);
}

/* ---------------------------------------------------------------- jointsq */

typedef struct {
    uint8_t *cls;        /* per group 0..3 */
    float step[4];
} jsq_parsed;

static int getbit_(const uint8_t *pl, size_t len, size_t *bit) {
    size_t b = (*bit)++;
    return b / 8 < len ? (pl[b / 8] >> (b % 8)) & 1 : 0;
}

/* Reads the documented header, run-length map and scales. */
static int parse_jsq(const uint8_t *pl, size_t len, size_t n, size_t G, jsq_parsed *o) {
    static const int L[4] = {0, 1, 7, 127};
    size_t ng = (n + G - 1) / G;
    o->cls = calloc(ng, 1);
    memset(o->step, 0, sizeof o->step);
    if (len == 0) return 1;
    int k = pl[0];
    size_t bit = 8;
#define GETBIT() getbit_(pl, len, &bit)
    int present[4] = {0};
    size_t pos = 0;
    for (;;) {
        size_t q = 0, r = 0;
        while (GETBIT()) q++;
        for (int j = 0; j < k; j++) r |= (size_t)GETBIT() << j;
        pos += (q << k) + r;
        if (pos >= ng) break;
        int c = 1;
        if (GETBIT()) c = 2 + GETBIT();
        o->cls[pos++] = (uint8_t)c;
        present[c] = 1;
    }
#undef GETBIT
    size_t so = (bit + 7) / 8;
    for (int c = 1; c < 4; c++) {
        if (!present[c]) continue;
        float s;
        memcpy(&s, pl + so, 4);
        so += 4;
        o->step[c] = s / (float)L[c];
    }
    return 1;
}

/* The map writer (pz_jsq_write_map; k = 0 has a path of its own, a table
 * of 4 groups' codes) against the format written out bit by bit here, on
 * random maps of every density, lengths around its 16-group steps, and
 * several Rice parameters. */
static void putbit_(uint8_t *o, size_t *bit, int v) {
    if (v) o[*bit / 8] |= (uint8_t)(1u << (*bit % 8));
    (*bit)++;
}

static size_t ref_map(const uint8_t *cls, size_t ng, int k, uint8_t *o) {
    size_t bit = 0, last = 0;
    for (size_t i = 0; i <= ng; i++) {
        if (i < ng && !cls[i]) continue;
        size_t r = i - last;
        for (size_t q = 0; q < (r >> k); q++) putbit_(o, &bit, 1);
        putbit_(o, &bit, 0);
        for (int j = 0; j < k; j++) putbit_(o, &bit, (int)(r >> j) & 1);
        if (i == ng) break;
        putbit_(o, &bit, cls[i] > 1);
        if (cls[i] > 1) putbit_(o, &bit, cls[i] > 2);
        last = i + 1;
    }
    return bit;
}

static void test_jointsq_map_writer(void) {
    static const size_t lens[] = {1, 15, 16, 17, 31, 33, 1000, 1024, 1025, 5000};
    static const double dens[] = {0.0, 0.05, 0.5, 0.9, 1.0};
    static const int ks[] = {0, 1, 3, 12};
    int cases = 0, bad = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        size_t ng = lens[li], cap = 3 * ng + 64 + 16;
        uint8_t *cls = malloc(ng), *a = malloc(cap), *b = malloc(cap);
        for (size_t di = 0; di < sizeof dens / sizeof dens[0]; di++) {
            for (size_t i = 0; i < ng; i++)
                cls[i] = pz_rng_uniform(&rng) < dens[di] ? (uint8_t)(1 + pz_rng_next(&rng) % 3) : 0;
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                memset(a, 0, cap);
                memset(b, 0, cap);
                size_t want = ref_map(cls, ng, ks[ki], b);
                uint64_t got = pz_jsq_write_map(cls, ng, ks[ki], a);
                size_t nb = (want + 7) / 8;
                if (nb && want % 8) a[nb - 1] &= (uint8_t)((1u << (want % 8)) - 1);   /* (bytes past the map may hold anything) */
                int ok = got == want && !memcmp(a, b, nb);
                CHECK(ok, "map of %zu groups, density %g, k %d: %llu bits vs %zu%s", ng, dens[di], ks[ki],
                      (unsigned long long)got, want, got == want ? ", bits differ" : "");
                bad += !ok;
                cases++;
            }
        }
        free(cls);
        free(a);
        free(b);
    }
    printf("jointsq map writer vs the format bit by bit: %d cases, %d differ\n", cases, bad);
}

/* Encodes x (n = numel(s), groups of G) with im into pl (cap bytes) and
 * checks the message: within the budget and max_payload, it decodes (into
 * y), kept groups decode within one step and dropped ones to 0, and the same
 * ctx gives the same bytes. Returns its length. */
static size_t jsq_check_message(const pz_codec_impl *im, const char *label, const pz_codec_params *p, const float *x,
                                const pz_shape *s, size_t G, const pz_codec_ctx *ctx, uint8_t *pl, size_t cap,
                                float *y) {
    size_t n = pz_shape_numel(s), len = 0;
    pz_status st = im->encode(p, x, s, ctx, pl, cap, &len);
    CHECK(st == PZ_OK, "%s encode: %s", label, pz_last_error());
    double budget_bits = floor((double)p->budget * (double)n);
    CHECK((double)len * 8 <= budget_bits, "%s n=%zu: %zu bytes = %zu bits over budget %.0f", label, n, len, len * 8,
          budget_bits);
    CHECK(len <= cap, "%s over max_payload", label);
    st = im->decode(p, pl, len, s, y);
    CHECK(st == PZ_OK, "%s decode: %s", label, pz_last_error());
    jsq_parsed jp;
    parse_jsq(pl, len, n, G, &jp);
    int bad = 0;
    for (size_t i = 0; i < n && st == PZ_OK; i++) {
        int c = jp.cls[i / G];
        if (!c) bad += y[i] != 0.0f;
        else bad += fabsf(y[i] - x[i]) > jp.step[c] * 1.001f;
    }
    free(jp.cls);
    CHECK(!bad, "%s: %d elements off by more than a step", label, bad);
    uint8_t *pl2 = malloc(cap + 1);
    size_t len2 = 0;
    im->encode(p, x, s, ctx, pl2, cap, &len2);
    CHECK(len2 == len && !memcmp(pl, pl2, len), "%s not deterministic", label);
    free(pl2);
    return len;
}

static void test_jointsq_budget(void) {
    static const float budgets[] = {0.02f, 0.1f, 0.25f, 0.5f, 0.7f, 1.0f, 1.5f, 2.0f, 3.0f, 4.5f, 8.0f, 12.0f};
    static const uint32_t groups[] = {1, 4, 8, 16, 33, 64};
    static const struct { size_t rows, cols; } shapes[] = {{1, 5}, {1, 100}, {7, 33}, {16, 256}, {4, 4096}};
    int cases = 0, empty = 0;
    double max_fill = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        size_t n = shapes[si].rows * shapes[si].cols;
        pz_shape s = shape2(shapes[si].rows, shapes[si].cols);
        float *x = malloc(n * 4), *y = malloc(n * 4);
        for (int kind = 0; kind < D_NKINDS; kind++) {
            fill(x, n, kind);
            for (size_t bi = 0; bi < sizeof budgets / sizeof budgets[0]; bi++) {
                for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
                    char spec[64];
                    snprintf(spec, sizeof spec, "jointsq:%g,group=%u", (double)budgets[bi], groups[gi]);
                    pz_codec_params p = parse_or_die(&pz_codec_jointsq, spec);
                    size_t cap = pz_codec_jointsq.max_payload(&p, &s), len = 0;
                    uint8_t *pl = malloc(cap + 1);
                    pz_codec_ctx ctx = {.seed = 7, .step = bi};
                    len = jsq_check_message(&pz_codec_jointsq, spec, &p, x, &s, groups[gi], &ctx, pl, cap, y);
                    double budget_bits = floor((double)p.budget * (double)n);
                    if (budget_bits >= 2048 && len) max_fill = fmax(max_fill, len * 8 / budget_bits);
                    empty += len == 0;
                    free(pl);
                    cases++;
                }
            }
        }
        free(x);
        free(y);
    }
    printf("jointsq budget: %d cases, all within budget (%d empty payloads)\n", cases, empty);
    (void)max_fill;
}

/* Long segments (sampled threshold), many rows whose scale jumps (the
 * previous row's threshold is wrong: fallbacks), all-zero rows, ties. */
static void test_topk_large(void) {
    static const struct { size_t rows, cols; int scope; } shapes[] = {
        {1, 100003, 0}, {3, 40000, 0}, {64, 4096, 1}, {300, 1000, 0}, {2, 70000, 1}};
    static const float fracs[] = {0.001f, 0.01f, 0.1f, 0.5f};
    static const char *values[] = {"fp32", "fp16", "q8"};
    static const size_t vbytes[] = {4, 2, 1};
    int cases = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        size_t R = shapes[si].rows, C = shapes[si].cols, n = R * C;
        pz_shape s = shape2(R, C);
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        uint8_t *kept = malloc(n), *got = malloc(n);
        for (int kind = 0; kind < 4; kind++) {
            fill(x, n, kind == 3 ? D_TIES : kind == 2 ? D_ZEROS : kind == 1 ? D_T2 : D_GAUSS);
            if (kind == 0)                             /* rows of very different scales, some zero */
                for (size_t r = 0; r < R; r++) {
                    float sc = r % 5 == 4 ? 0.0f : powf(10.0f, (float)((int)(r * 7 % 9) - 4));
                    for (size_t i = 0; i < C; i++) x[r * C + i] *= sc;
                }
            for (size_t fi = 0; fi < sizeof fracs / sizeof fracs[0]; fi++) {
                int vm = (int)((fi + (size_t)kind) % 3);
                char spec[96];
                snprintf(spec, sizeof spec, "topk:%g,scope=%s,values=%s", (double)fracs[fi],
                         shapes[si].scope ? "tensor" : "row", values[vm]);
                pz_codec_params p = parse_or_die(&pz_codec_topk, spec);
                size_t L = shapes[si].scope ? n : C, nseg = n / L, k = ref_k(fracs[fi], L);
                size_t K = ref_topk(x, n, L, k, kept);
                size_t cap = pz_codec_topk.max_payload(&p, &s), len = 0;
                uint8_t *pl = malloc(cap);
                pz_status st = pz_codec_topk.encode(&p, x, &s, NULL, pl, cap, &len);
                CHECK(st == PZ_OK, "%s encode: %s", spec, pz_last_error());
                if (st != PZ_OK) { free(pl); continue; }
                size_t fixed = 1 + 4 * (vm == 2 ? nseg : 0) + K * vbytes[vm];
                CHECK(parse_topk_indices(pl, len, fixed, n, K, got) && !memcmp(got, kept, n),
                      "%s (%zu x %zu, data %d): kept set differs from the sorted reference", spec, R, C, kind);
                st = pz_codec_topk.decode(&p, pl, len, &s, y);
                CHECK(st == PZ_OK, "%s decode: %s", spec, pz_last_error());
                int bad = 0;
                for (size_t i = 0; i < n && st == PZ_OK && vm == 0; i++)
                    bad += kept[i] ? pz_f2u(y[i]) != pz_f2u(x[i]) : y[i] != 0.0f;
                CHECK(!bad, "%s: %d decoded values wrong", spec, bad);
                free(pl);
                cases++;
            }
        }
        free(x);
        free(y);
        free(kept);
        free(got);
    }
    printf("topk large segments: %d cases\n", cases);
}

/* The solver for large tensors (a sample brackets the critical multiplier,
 * one pass over all groups): budget, decoding, determinism; and the same
 * with the bracket forced wrong (retries, narrowing, fallback), which must
 * give a solution of the same quality. */
static void test_jointsq_large(void) {
    static const struct { size_t rows, cols; } shapes[] = {{256, 1024}, {1, 262149}, {64, 1000}};
    static const float budgets[] = {0.3f, 1.5f, 3.0f, 6.0f};
    static const uint32_t groups[] = {1, 8, 64};
    static const int kinds[] = {D_T3, D_OUTLIER, D_GAUSS, D_ZEROS};
    int cases = 0;
    double worst = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        size_t n = shapes[si].rows * shapes[si].cols;
        pz_shape s = shape2(shapes[si].rows, shapes[si].cols);
        float *x = malloc(n * 4), *y = malloc(n * 4);
        for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
            fill(x, n, kinds[ki]);
            double xx = 0;
            for (size_t i = 0; i < n; i++) xx += (double)x[i] * x[i];
            for (size_t bi = 0; bi < sizeof budgets / sizeof budgets[0]; bi++) {
                for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++) {
                    if ((bi + gi + ki + si) % 2) continue;        /* half of the grid */
                    char spec[64];
                    snprintf(spec, sizeof spec, "jointsq:%g,group=%u", (double)budgets[bi], groups[gi]);
                    pz_codec_params p = parse_or_die(&pz_codec_jointsq, spec);
                    size_t cap = pz_codec_jointsq.max_payload(&p, &s);
                    uint8_t *pl = malloc(cap + 1);
                    double e[2] = {0, 0};
                    for (int forced = 0; forced < 2; forced++) {
                        const pz_codec_impl *im = &pz_codec_jointsq;
                        pz_jsq_tune = forced ? forced_tuning : default_tuning;
                        char label[80];
                        snprintf(label, sizeof label, "%s%s", spec, forced ? " (forced)" : "");
                        pz_codec_ctx ctx = {.seed = 9, .step = bi};
                        jsq_check_message(im, label, &p, x, &s, groups[gi], &ctx, pl, cap, y);
                        e[forced] = sqerr(x, y, n) / (xx > 0 ? xx : 1);
                        cases++;
                    }
                    pz_jsq_tune = default_tuning;
                    /* same greedy solution up to the ties and the fill: errors within 2% */
                    double d = fabs(e[1] - e[0]) / fmax(e[0], 1e-12);
                    if (e[0] > 1e-9) worst = fmax(worst, d);
                    CHECK(e[0] <= 1e-9 || d < 0.02, "%s: forced-bracket error %.5g vs %.5g", spec, e[1], e[0]);
                    free(pl);
                }
            }
        }
        free(x);
        free(y);
    }
    printf("jointsq large tensors: %d cases within budget, forced brackets within %.2g%%\n", cases, 100 * worst);
}

/* Unbiasedness: the mean of N decodes of x (heavy-tailed, rows x cols) with
 * ctx.step 0..N-1 converges to x on kept elements; dropped groups are 0 in
 * every decode (the assignment does not depend on ctx). */
typedef struct {
    int bad, kept, classes[4];   /* elements beyond tolerance, kept, per 0/2/4/8-bit class */
    double worst;                /* largest |mean - x| in units of the tolerance */
} unbiasedness;

static unbiasedness jsq_unbiasedness(const char *spec, size_t rows, size_t cols, size_t G, size_t N,
                                     pz_codec_ctx ctx) {
    size_t n = rows * cols;
    pz_shape s = shape2(rows, cols);
    float *x = malloc(n * 4), *y = malloc(n * 4);
    double *mean = calloc(n, sizeof *mean);
    fill(x, n, D_T3);
    pz_codec_params p = parse_or_die(&pz_codec_jointsq, spec);
    size_t cap = pz_codec_jointsq.max_payload(&p, &s), len;
    uint8_t *pl = malloc(cap);
    jsq_parsed first = {0};
    int same_sets = 1;
    for (size_t r = 0; r < N; r++) {
        ctx.step = r;
        CHECK(pz_codec_jointsq.encode(&p, x, &s, &ctx, pl, cap, &len) == PZ_OK, "%s encode", spec);
        CHECK(pz_codec_jointsq.decode(&p, pl, len, &s, y) == PZ_OK, "%s decode", spec);
        jsq_parsed jp;
        parse_jsq(pl, len, n, G, &jp);
        if (r == 0) first = jp;
        else {
            same_sets &= !memcmp(first.cls, jp.cls, (n + G - 1) / G);
            free(jp.cls);
        }
        for (size_t i = 0; i < n; i++) mean[i] += y[i];
    }
    CHECK(same_sets, "%s: kept set depends on ctx", spec);
    unbiasedness u = {0};
    for (size_t i = 0; i < n; i++) {
        mean[i] /= (double)N;
        int c = first.cls[i / G];
        u.classes[c]++;
        if (!c) { u.bad += mean[i] != 0.0; continue; }
        u.kept++;
        /* sd of one decode <= step/2; 5 sigma of the mean, plus fp32 rounding */
        double tol = 5.0 * first.step[c] / 2.0 / sqrt((double)N) + 1e-6 * fabs(x[i]);
        double z = fabs(mean[i] - x[i]) / tol;
        if (z > u.worst) u.worst = z;
        u.bad += z > 1.0;
    }
    free(first.cls);
    free(pl);
    free(x);
    free(y);
    free(mean);
    return u;
}

/* Unbiasedness on a tensor large enough for the sampled solver. */
static void test_jointsq_unbiased_large(void) {
    size_t n = 32768, N = 300;
    unbiasedness u = jsq_unbiasedness("jointsq:2.5", 32, 1024, 1, N, (pz_codec_ctx){.seed = 4});
    /* 5 sigma on each of 32768 elements: a handful may exceed by chance */
    CHECK(u.bad <= 2, "%d of %zu elements biased (worst %.2f of tolerance)", u.bad, n, u.worst);
    printf("jointsq unbiased (sampled solver): %zu decodes, worst |mean-x| = %.2f of 5 sigma\n", N, u.worst);
}

static void test_jointsq_corrupt(void) {
    size_t n = 4096;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    fill(x, n, D_T3);
    message m;
    msg_encode(&m, &pz_codec_jointsq, "jointsq:3,group=8", x, shape2(4, 1024), y);
    msg_refuse_lengths(&m);
    uint8_t code = m.len ? m.pl[0] ^ 1 : 0;   /* first group's code changes: sizes no longer match */
    msg_refuse_edit(&m, 0, &code, 1, "map corruption");
    msg_fuzz_free(&m, 3000);
    free(x);
    free(y);
    /* a large message (the sampled solver; the decoder's table path, k = 0):
     * random corruption must not crash */
    n = 65536;
    x = malloc(n * 4);
    y = malloc(n * 4);
    fill(x, n, D_GAUSS);
    msg_encode(&m, &pz_codec_jointsq, "jointsq:4", x, shape2(64, 1024), y);
    CHECK(!m.len || m.pl[0] == 0, "Rice parameter %d, expected 0 at 4 bits", m.pl[0]);
    msg_fuzz_free(&m, 300);
    free(x);
    free(y);
}

static void test_jointsq_unbiased(void) {
    size_t n = 2048, N = 4000;
    unbiasedness u = jsq_unbiasedness("jointsq:2,group=8", 2, 1024, 8, N, (pz_codec_ctx){.seed = 11, .edge = 1});
    CHECK(u.kept > 0 && u.classes[1] + u.classes[2] + u.classes[3] > 0, "nothing kept");
    CHECK(u.bad == 0, "%d of %zu elements biased (worst %.2f of tolerance)", u.bad, n, u.worst);
    printf("jointsq unbiased: %d kept elements (2/4/8-bit %d/%d/%d), %zu decodes, worst |mean-x| = %.2f of 5 sigma\n",
           u.kept, u.classes[1], u.classes[2], u.classes[3], N, u.worst);
}

/* ---------------------------------------------------------------- jointsq vs q<b> and topk */

/* Reference q<b> when the registry has none: symmetric absmax per row
 * (fp32 scale), 2^b - 1 levels... b = 1 uses {-s, +s}. Stochastic rounding. */
static size_t ref_q_bytes(size_t rows, size_t cols, int b) { return rows * 4 + (rows * cols * (size_t)b + 7) / 8; }
static void ref_q(const float *x, size_t rows, size_t cols, int b, uint64_t seed, float *y) {
    uint64_t key = pz_mix64(seed);
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * cols;
        float s = 0;
        for (size_t i = 0; i < cols; i++) s = fmaxf(s, fabsf(xr[i]));
        for (size_t i = 0; i < cols; i++) {
            float u = pz_uniform(key, r * cols + i);
            if (s == 0) { y[r * cols + i] = 0; continue; }
            if (b == 1) {   /* {-s, s}, P(+s) = (1 + x/s)/2 */
                y[r * cols + i] = u < (1 + xr[i] / s) / 2 ? s : -s;
            } else {
                float Lq = (float)((1 << (b - 1)) - 1);
                y[r * cols + i] = pz_round_stoch(xr[i] / s * Lq, u) * s / Lq;
            }
        }
    }
}

/* topk at fraction f (at least 1e-6), scope row or tensor, values: its spec
 * (ts) and parameters (tp), the message in pl; returns the message length. */
static size_t topk_encode_at(double f, int scope, const char *values, const float *x, const pz_shape *s, uint8_t *pl,
                             size_t cap, char ts[96], pz_codec_params *tp) {
    snprintf(ts, 96, "topk:%.6g,scope=%s,values=%s", fmax(f, 1e-6), scope ? "tensor" : "row", values);
    *tp = parse_or_die(&pz_codec_topk, ts);
    size_t tl = 0;
    pz_codec_topk.encode(tp, x, s, NULL, pl, cap, &tl);
    return tl;
}

static void test_jointsq_vs_others(void) {
    size_t R = 64, C = 1024, n = R * C;
    pz_shape s = shape2(R, C);
    float *x = malloc(n * 4), *y = malloc(n * 4);
    static const float budgets[] = {0.5f, 1.0f, 2.0f, 3.0f, 4.0f};
    static const int kinds[] = {D_T2, D_T3, D_OUTLIER};
    static const char *kname[] = {"t2", "t3", "1%x50"};
    for (int ki = 0; ki < 3; ki++) {
        fill(x, n, kinds[ki]);
        double xx = 0;
        for (size_t i = 0; i < n; i++) xx += (double)x[i] * x[i];
        for (size_t bi = 0; bi < sizeof budgets / sizeof budgets[0]; bi++) {
            char spec[64];
            snprintf(spec, sizeof spec, "jointsq:%g", (double)budgets[bi]);
            pz_codec_params p = parse_or_die(&pz_codec_jointsq, spec);
            size_t cap = pz_codec_jointsq.max_payload(&p, &s), jlen = 0;
            uint8_t *pl = malloc(cap > n * 5 ? cap : n * 5);
            double ej = 0;
            for (int rep = 0; rep < 3; rep++) {
                pz_codec_ctx ctx = {.seed = 3, .step = (uint64_t)rep};
                pz_codec_jointsq.encode(&p, x, &s, &ctx, pl, cap, &jlen);
                pz_codec_jointsq.decode(&p, pl, jlen, &s, y);
                ej += sqerr(x, y, n) / 3;
            }
            /* best topk config with no more bytes: fraction searched by bisection */
            double et = INFINITY;
            char best_t[96] = "none";
            static const char *tv[] = {"fp32", "fp16", "q8"};
            for (int scope = 0; scope < 2; scope++)
                for (int vm = 0; vm < 3; vm++) {
                    double lo = 0, hi = 1;
                    double best_f = 0;
                    char ts[96];
                    pz_codec_params tp;
                    for (int it = 0; it < 30; it++) {
                        double mid = (lo + hi) / 2;
                        if (topk_encode_at(mid, scope, tv[vm], x, &s, pl, n * 5, ts, &tp) <= jlen) {
                            best_f = mid;
                            lo = mid;
                        } else
                            hi = mid;
                    }
                    if (best_f <= 0) continue;
                    size_t tl = topk_encode_at(best_f, scope, tv[vm], x, &s, pl, n * 5, ts, &tp);
                    if (tl > jlen) continue;
                    pz_codec_topk.decode(&tp, pl, tl, &s, y);
                    double e = sqerr(x, y, n);
                    if (e < et) { et = e; snprintf(best_t, sizeof best_t, "%s", ts); }
                }
            /* best q<b> with no more bytes (reference quantiser; registry q when present) */
            double eq = INFINITY;
            int best_b = 0;
            for (int b = 1; b <= 8; b++) {
                if (ref_q_bytes(R, C, b) > jlen) continue;
                double e = 0;
                for (int rep = 0; rep < 3; rep++) {
                    ref_q(x, R, C, b, (uint64_t)rep + 100, y);
                    e += sqerr(x, y, n) / 3;
                }
                if (e < eq) { eq = e; best_b = b; }
            }
            printf("  %-5s %-12s %7zu B: jointsq rel.err %.4f | topk %.4f (%s) | q%d %.4f\n", kname[ki], spec,
                   jlen, ej / xx, et / xx, best_t, best_b, eq / xx);
            /* Known limit: on Student-t with 2 dof (infinite variance) above 2 bits per
             * element, topk with per-row q8 scales wins, because JointSQ has one scale
             * per width class per tensor and the 8-bit class's step is set by the
             * tensor's single largest outlier. Printed above, not asserted. */
            if (!(kinds[ki] == D_T2 && budgets[bi] > 2.0f))
                CHECK(ej < et, "%s on %s: jointsq %.4g not below topk %.4g", spec, kname[ki], ej / xx, et / xx);
            CHECK(ej < eq, "%s on %s: jointsq %.4g not below q%d %.4g", spec, kname[ki], ej / xx, best_b, eq / xx);
            free(pl);
        }
    }
    free(x);
    free(y);
}

/* ---------------------------------------------------------------- bench */

static double best_time(void (*fn)(void *), void *arg, int reps) {
    double best = 1e9;
    for (int r = 0; r < reps; r++) {
        double t = pz_now();
        fn(arg);
        t = pz_now() - t;
        if (t < best) best = t;
    }
    return best;
}

typedef struct {
    const pz_codec_impl *impl;
    pz_codec_params p;
    const float *x;
    float *y;
    pz_shape s;
    uint8_t *pl;
    size_t cap, len;
} bench_arg;

static void b_memcpy(void *a_) { bench_arg *a = a_; memcpy(a->y, a->x, pz_shape_numel(&a->s) * 4); }
static void b_enc(void *a_) {
    bench_arg *a = a_;
    pz_codec_ctx ctx = {.seed = 1};
    a->impl->encode(&a->p, a->x, &a->s, &ctx, a->pl, a->cap, &a->len);
}
static void b_dec(void *a_) { bench_arg *a = a_; a->impl->decode(&a->p, a->pl, a->len, &a->s, a->y); }

static void bench(void) {
    size_t R = 4096, C = 1024, n = R * C;
    float *x = xaligned_alloc(n * 4), *y = xaligned_alloc(n * 4);
    fill(x, n, D_GAUSS);
    bench_arg a = {.x = x, .y = y, .s = shape2(R, C)};
    double tm = best_time(b_memcpy, &a, 10);
    printf("bench: 4M floats (4096 x 1024), memcpy %.2f ms = %.2f GB/s\n", tm * 1e3, n * 4 / tm / 1e9);
    const char *specs[] = {"topk:0.1", "topk:0.1,scope=tensor", "topk:0.1,values=q8", "topk:0.01",
                           "jointsq:1", "jointsq:2", "jointsq:4", "jointsq:1,group=64"};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        a.impl = !strncmp(specs[i], "topk", 4) ? &pz_codec_topk : &pz_codec_jointsq;
        a.p = parse_or_die(a.impl, specs[i]);
        a.cap = a.impl->max_payload(&a.p, &a.s);
        a.pl = malloc(a.cap);
        double te = best_time(b_enc, &a, 5), td = best_time(b_dec, &a, 5);
        double gbs = n * 4 / (te + td) / 1e9;
        printf("  %-24s enc %6.2f ms  dec %6.2f ms  enc+dec %.2f GB/s = %.2fx memcpy  ratio %.1f\n", specs[i],
               te * 1e3, td * 1e3, gbs, tm / (te + td), (double)n * 4 / a.len);
        free(a.pl);
    }
    free(x);
    free(y);
}

/* ---------------------------------------------------------------- through the framework */

static void test_framework(void) {
    const char *specs[] = {"topk:0.1", "topk:0.05,scope=tensor,values=q8", "jointsq:1.5", "jointsq:3,group=32"};
    pz_shape s = shape2(8, 512);
    size_t n = 8 * 512;
    float *x = malloc(n * 4), *y = malloc(n * 4);
    fill(x, n, D_T3);
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        pz_codec *c = NULL;
        pz_status st = pz_codec_create(specs[i], &c);
        CHECK(st == PZ_OK, "create %s: %s", specs[i], pz_last_error());
        if (st != PZ_OK) continue;
        size_t cap = pz_codec_max_encoded_size(c, &s), len = 0;
        uint8_t *msg = malloc(cap);
        pz_codec_ctx ctx = {.seed = 5};
        st = pz_codec_encode(c, x, &s, &ctx, msg, cap, &len);
        CHECK(st == PZ_OK, "encode %s: %s", specs[i], pz_last_error());
        pz_shape got;
        st = pz_codec_decode(c, msg, len, &ctx, y, n, &got);
        CHECK(st == PZ_OK, "decode %s: %s", specs[i], pz_last_error());
        CHECK(got.ndim == 2 && got.dims[0] == 8 && got.dims[1] == 512, "shape");
        double e = sqerr(x, y, n);
        CHECK(isfinite(e), "error");
        printf("  framework %-34s -> %-40s %zu bytes\n", specs[i], pz_codec_spec(c), len);
        free(msg);
        pz_codec_free(c);
    }
    const char *bad[] = {"topk", "topk:2", "topk:0.1,scope=x", "jointsq", "jointsq:0", "jointsq:40",
                         "jointsq:1,group=0", "jointsq:1,bits=3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pz_codec *c = NULL;
        CHECK(pz_codec_create(bad[i], &c) != PZ_OK, "'%s' accepted", bad[i]);
        pz_codec_free(c);
    }
    free(x);
    free(y);
}

/* The canonical spec of every budget parses back to the same budget (a
 * budget of 10 was once written "1e+01", which the grammar refuses; found by
 * the libFuzzer target through pz_codec_peek). */
static void test_jointsq_spec_roundtrip(void) {
    const char *in[] = {"jointsq:10", "jointsq:20", "jointsq:32", "jointsq:0.00001", "jointsq:0.1", "jointsq:1.5",
                        "jointsq:3.14159"};
    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        pz_codec *a = NULL, *b = NULL;
        CHECK(pz_codec_create(in[i], &a) == PZ_OK, "%s: %s", in[i], pz_last_error());
        if (!a) continue;
        CHECK(pz_codec_create(pz_codec_spec(a), &b) == PZ_OK, "canonical '%s' of %s does not parse: %s",
              pz_codec_spec(a), in[i], pz_last_error());
        if (b) CHECK(strcmp(pz_codec_spec(a), pz_codec_spec(b)) == 0, "%s -> %s", pz_codec_spec(a), pz_codec_spec(b));
        pz_codec_free(a);
        pz_codec_free(b);
    }
}

int main(int argc, char **argv) {
    pz_rng_seed(&rng, 20240607);
    test_jointsq_spec_roundtrip();
    test_topk_k();
    test_topk_selection();
    test_topk_corrupt();
    test_mckp_brute();
    test_jointsq_budget();
    test_jointsq_corrupt();
    test_jointsq_map_writer();
    test_jointsq_unbiased();
    test_jointsq_vs_others();
    test_topk_large();
    test_jointsq_large();
    test_jointsq_unbiased_large();
#ifndef TK_NO_FRAMEWORK
    test_framework();
#endif
    if (argc > 1 && !strcmp(argv[1], "--bench")) bench();
    return check_summary("test_topk_jointsq");
}
