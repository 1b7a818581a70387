/* test_codecs.c: the codec framework and the base codecs fp32, fp16, bf16,
 * q<b>, nuq<b>, sign (compress/README.md is the spec these tests hold it to).
 *
 *  - element math: fp16 (exhaustive on halfs, sampled against a reference
 *    and F16C hardware where present), bf16 round to nearest even, CRC-32C,
 *    b-bit packing, LEB128 varints, Elias gamma/delta/omega;
 *  - spec parser: canonical specs, errors pointing at the offending offset;
 *  - round trips and error bounds of every codec and parameter set;
 *  - unbiasedness of every stochastic codec: the mean of T decodes (different
 *    steps) is within 6 standard errors of x for every element, and the mean
 *    squared z-score is below 2 (a bias hidden in the noise shows up there);
 *  - exact encoded sizes = README formulas;
 *  - NUQSGD's variance below uniform levels of the same norm (QSGD) with the
 *    same bits and bucket on Gaussian data;
 *  - corruption: every single-byte flip is detected or decodes to the same
 *    bytes, every truncation fails, header edits with a recomputed CRC never
 *    crash and semantic ones fail;
 *  - peek, out_cap, determinism, all-zero groups. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/bitpack.h"
#include "compress/core/codec.h"
#include "compress/core/codec_impl.h"
#include "base/crc32c.h"
#include "compress/core/elem.h"
#include "compress/codecs/qcommon.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#define CHECK_MAX_PRINTED 60
#include "tests/check.h"
#include "base/mem.h"
#include "base/rng.h"

static size_t hdr(int ndim) { return 48 + 8 * (size_t)ndim; }

static pz_shape shp(int nd, int64_t a, int64_t b, int64_t c, int64_t d) {
    pz_shape s = {nd, {a, b, c, d}};
    for (int i = nd; i < 4; i++) s.dims[i] = 0;
    return s;
}

static float *gauss(size_t n, uint64_t seed, float scale) {
    pz_rng r;
    pz_rng_seed(&r, seed);
    float *x = xmalloc(n * sizeof(float) + 4);
    for (size_t i = 0; i < n; i++) x[i] = scale * pz_rng_normal(&r);
    return x;
}

static pz_codec *mk(const char *spec) {
    pz_codec *c = NULL;
    if (pz_codec_create(spec, &c) != PZ_OK) {
        printf("FAIL: cannot create '%s': %s\n", spec, pz_last_error());
        failures++;
        return NULL;
    }
    return c;
}

/* encode then decode with a second codec object; returns the message (malloc) */
static uint8_t *roundtrip(const char *spec, const float *x, const pz_shape *s, uint64_t step, float *y,
                          size_t *len) {
    pz_codec *e = mk(spec), *d = mk(spec);
    if (!e || !d) {
        pz_codec_free(e);
        pz_codec_free(d);
        return NULL;
    }
    size_t cap = pz_codec_max_encoded_size(e, s);
    uint8_t *m = xmalloc(cap);
    pz_codec_ctx ctx = {7, step, 1, 0, 2, NULL};
    pz_status st = pz_codec_encode(e, x, s, &ctx, m, cap, len);
    CHECK(st == PZ_OK, "%s: encode: %s", spec, pz_last_error());
    if (st == PZ_OK) {
        CHECK(*len <= cap, "%s: %zu > max %zu", spec, *len, cap);
        pz_shape got;
        st = pz_codec_decode(d, m, *len, &ctx, y, pz_shape_numel(s), &got);
        CHECK(st == PZ_OK, "%s: decode: %s", spec, pz_last_error());
        CHECK(got.ndim == s->ndim && !memcmp(got.dims, s->dims, sizeof got.dims), "%s: shape", spec);
    }
    pz_codec_free(e);
    pz_codec_free(d);
    if (st != PZ_OK) {
        free(m);
        return NULL;
    }
    return m;
}

/* ------------------------------------------------------------ element math */

static uint16_t ref_bf16(float f) {   /* nearest by value, ties to even */
    uint32_t u = pz_f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double dl = fabs((double)pz_u2f(lo) - (double)f);
    double dh = (hi & 0x7fffffffu) >= 0x7f800000u && (lo & 0x7fffffffu) == 0x7f7f0000u
                    ? fabs(ldexp(1.0, 128) - fabs((double)f))   /* the next "value" past max is 2^128 */
                    : fabs((double)pz_u2f(hi) - (double)f);
    if (dl < dh) return (uint16_t)(lo >> 16);
    if (dh < dl) return (uint16_t)(hi >> 16);
    return (uint16_t)(((lo >> 16) & 1) ? hi >> 16 : lo >> 16);
}

static uint16_t ref_f16(float f) {    /* via double: exact arithmetic on candidates */
    uint32_t u = pz_f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0;   /* NaN: not compared */
    double a = fabs((double)f);
    if (a >= 65520.0) return sign | 0x7c00;
    /* candidates: magnitudes k * 2^-24 (subnormal) or normal values */
    uint16_t best = 0;
    double bd = 1e300;
    int e;
    frexp(a, &e);
    for (int d = -1; d <= 1; d++) {
        /* the two halfs around a within binade 2^(e-1) */
        int ee = e - 1 + d;
        double unit = ee < -14 ? ldexp(1.0, -24) : ldexp(1.0, ee - 10);
        double k = floor(a / unit);
        for (int t = 0; t <= 1; t++) {
            double v = (k + t) * unit;
            if (v > 65504.0) continue;
            uint16_t h = pz_f32_to_f16((float)v);   /* v is exactly representable */
            if (pz_f16_to_f32(h) != (float)v) continue;
            double dd = fabs(v - a);
            if (dd < bd || (dd == bd && !(h & 1))) {
                bd = dd;
                best = h;
            }
        }
    }
    return sign | best;
}

static void test_elem(void) {
    /* every half round-trips exactly (fp16 exact on representable values) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = pz_f16_to_f32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) {
            if (!isnan(f)) bad++;
            continue;
        }
        if (pz_f32_to_f16(f) != h) bad++;
    }
    CHECK(bad == 0, "fp16: %d halfs do not round-trip", bad);
    /* rounding against a reference (and F16C hardware if built for it) */
    pz_rng r;
    pz_rng_seed(&r, 5);
    int badref = 0, badhw = 0, badbf = 0;
    for (int i = 0; i < 400000; i++) {
        uint32_t u = (uint32_t)pz_rng_next(&r);
        if (i % 4 == 1) u = (u & 0x807fffffu) | ((uint32_t)(100 + pz_rng_below(&r, 60)) << 23); /* near fp16 range */
        if (i % 4 == 2) u = (u & 0xffffe000u) | 0x1000u;                                      /* fp16 ties */
        float f = pz_u2f(u);
        if (!isnan(f) && pz_f32_to_f16(f) != ref_f16(f)) {
            if (badref < 3) printf("  fp16 %08x: %04x ref %04x\n", u, pz_f32_to_f16(f), ref_f16(f));
            badref++;
        }
#if defined(__F16C__)
        if (pz_f32_to_f16(f) != (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT)) badhw++;
#endif
        uint32_t ub = i % 3 == 0 ? (u & 0xffff0000u) | 0x8000u : u;   /* bf16 ties */
        if (pz_f32_to_bf16(pz_u2f(ub)) != ref_bf16(pz_u2f(ub))) badbf++;
    }
    CHECK(badref == 0, "fp16: %d values differ from the reference", badref);
    CHECK(badhw == 0, "fp16: %d values differ from F16C", badhw);
    CHECK(badbf == 0, "bf16: %d values differ from round-to-nearest-even", badbf);
    CHECK(pz_f32_to_bf16(pz_u2f(0x3f808000u)) == 0x3f80, "bf16 tie to even (down)");
    CHECK(pz_f32_to_bf16(pz_u2f(0x3f818000u)) == 0x3f82, "bf16 tie to even (up)");
    CHECK(pz_f32_to_bf16(pz_u2f(0x7f7fffffu)) == 0x7f80, "bf16 max float -> inf");
    CHECK(isnan(pz_bf16_to_f32(pz_f32_to_bf16(NAN))), "bf16 NaN");
    CHECK(isnan(pz_f16_to_f32(pz_f32_to_f16(NAN))), "fp16 NaN");
    CHECK(pz_f32_to_f16(65519.0f) == 0x7bff && pz_f32_to_f16(65520.0f) == 0x7c00, "fp16 overflow threshold");
    CHECK(pz_f32_to_f16(0x1p-25f) == 0 && pz_f32_to_f16(0x1.000002p-25f) == 1, "fp16 smallest subnormal rounding");
    /* directed rounding */
    int baddir = 0;
    for (int i = 0; i < 100000; i++) {
        float v = (float)(pz_rng_normal(&r) * ldexp(1.0, (int)pz_rng_below(&r, 40) - 30));
        float up = pz_f16_to_f32(pz_f32_to_f16_up(v)), dn = pz_f16_to_f32(pz_f32_to_f16_down(v));
        if (!(up >= v && dn <= v)) baddir++;
        if (fabsf(v) < 60000.0f && (pz_f32_to_f16_up(v) != pz_f32_to_f16(v) && pz_f16_to_f32(pz_f32_to_f16(v)) >= v)) baddir++;
    }
    CHECK(baddir == 0, "fp16 directed rounding: %d bad", baddir);
    /* uniforms: range, mean, and independence of neighbours */
    double s = 0, s2 = 0, sxy = 0;
    uint64_t key = pz_ctx_key(NULL);
    float prev = pz_uniform(key, 0);
    int out = 0;
    const int N = 1 << 20;
    for (int i = 0; i < N; i++) {
        float u = pz_uniform(key, (uint64_t)i);
        if (!(u >= 0.0f && u < 1.0f)) out++;
        s += u;
        s2 += (double)u * u;
        if (i) sxy += (double)(u - 0.5f) * (prev - 0.5f);
        prev = u;
    }
    CHECK(out == 0, "uniform outside [0,1): %d", out);
    CHECK(fabs(s / N - 0.5) < 0.002, "uniform mean %g", s / N);
    CHECK(fabs(s2 / N - 1.0 / 3) < 0.002, "uniform second moment %g", s2 / N);
    CHECK(fabs(sxy / N) < 0.002, "uniform lag-1 covariance %g", sxy / N);
    pz_codec_ctx c1 = {1, 2, 3, 0, 5, NULL}, c2 = c1;
    c2.dir = 1;
    CHECK(pz_ctx_key(&c1) != pz_ctx_key(&c2), "ctx key depends on dir");
    CHECK(pz_uniform(1, (uint64_t)1 << 33) != pz_uniform(1, 1) || pz_uniform(1, ((uint64_t)1 << 33) + 1) != pz_uniform(1, 2),
          "uniform depends on the high half of i");
}

static void test_crc(void) {
    CHECK(pz_crc32c(0, "123456789", 9) == 0xe3069283u, "crc32c check value");
    CHECK(pz_crc32c_sw(0, "123456789", 9) == 0xe3069283u, "crc32c sw check value");
    CHECK(pz_crc32c(0, "", 0) == 0, "crc32c of nothing");
    size_t n = 70000;
    uint8_t *b = xmalloc(n);
    pz_rng r;
    pz_rng_seed(&r, 9);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)pz_rng_next(&r);
    int bad = 0;
    for (size_t len = 0; len < n; len = len * 3 / 2 + 1)
        for (size_t off = 0; off < 8 && off + len <= n; off++)
            if (pz_crc32c(0x1234, b + off, len) != pz_crc32c_sw(0x1234, b + off, len)) bad++;
    CHECK(bad == 0, "crc32c hw/sw differ %d times", bad);
    CHECK(pz_crc32c(pz_crc32c(0, b, 12345), b + 12345, n - 12345) == pz_crc32c(0, b, n), "crc32c chaining");
    free(b);
}

static void test_bitpack(void) {
    pz_rng r;
    pz_rng_seed(&r, 11);
    uint8_t codes[200], back[200], buf[200];
    int bad = 0;
    for (int b = 1; b <= 8; b++)
        for (size_t n = 0; n <= 100; n++) {
            for (size_t i = 0; i < n; i++) codes[i] = (uint8_t)(pz_rng_next(&r) & ((1u << b) - 1));
            memset(buf, 0xee, sizeof buf);
            pz_pack_codes(codes, n, b, buf);
            size_t nb = pz_pack_bytes(n, b);
            if (buf[nb] != 0xee) bad++;   /* wrote exactly nb bytes */
            if (pz_unpack_codes(buf, nb, n, b, back) != PZ_OK || memcmp(codes, back, n)) bad++;
            if (nb && pz_unpack_codes(buf, nb - 1, n, b, back) == PZ_OK) bad++;
            if (pz_unpack_codes(buf, nb + 1, n, b, back) == PZ_OK) bad++;
            if (n % 8) {   /* non-zero padding is refused */
                uint8_t save = buf[nb - 1];
                buf[nb - 1] |= 0x80;
                if (pz_unpack_codes(buf, nb, n, b, back) == PZ_OK) bad++;
                buf[nb - 1] = save;
            }
        }
    CHECK(bad == 0, "pack/unpack: %d failures", bad);
    /* the CGX layout, spelled out: b = 3, codes 1..8 -> word sum c_j << 3j */
    uint8_t c3[8] = {1, 2, 3, 4, 5, 6, 7, 0}, o3[3];
    pz_pack_codes(c3, 8, 3, o3);
    uint32_t w = 0;
    for (int j = 0; j < 8; j++) w |= (uint32_t)c3[j] << (3 * j);
    CHECK(o3[0] == (w & 0xff) && o3[1] == ((w >> 8) & 0xff) && o3[2] == (w >> 16), "CGX layout b=3");
    uint8_t c4[2] = {0x3, 0xa}, o4[4];
    pz_pack_codes(c4, 2, 4, o4);
    CHECK(o4[0] == 0xa3 && o4[1] == 0 && o4[2] == 0 && o4[3] == 0, "CGX layout b=4: low nibble first");
    uint8_t c1[8] = {1, 0, 0, 0, 0, 0, 0, 1}, o1[1];
    pz_pack_codes(c1, 8, 1, o1);
    CHECK(o1[0] == 0x81, "CGX layout b=1: LSB first");
    float pm[11];
    uint8_t bits[2] = {0x81, 0x05};
    pz_bits_to_pm1(bits, 11, pm);
    CHECK(pm[0] == 1 && pm[1] == -1 && pm[7] == 1 && pm[8] == 1 && pm[9] == -1 && pm[10] == 1, "bits to +-1");

    /* varints */
    uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, (1ull << 35) + 5, (1ull << 63), UINT64_MAX};
    bad = 0;
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint8_t vb[PZ_VARINT_MAX];
        size_t l = pz_varint_put(vb, vals[i]), pos = 0;
        uint64_t v;
        if (l != pz_varint_len(vals[i])) bad++;
        if (pz_varint_get(vb, l, &pos, &v) != PZ_OK || v != vals[i] || pos != l) bad++;
        for (size_t t = 0; t < l; t++) {
            pos = 0;
            if (pz_varint_get(vb, t, &pos, &v) == PZ_OK) bad++;   /* truncated */
        }
    }
    CHECK(bad == 0, "varint round trip: %d failures", bad);
    size_t pos = 0;
    uint64_t v;
    uint8_t overlong[] = {0x80, 0x00}, over[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};
    CHECK(pz_varint_get(overlong, 2, &pos, &v) != PZ_OK, "overlong varint accepted");
    pos = 0;
    CHECK(pz_varint_get(over, 10, &pos, &v) != PZ_OK, "65-bit varint accepted");

    /* Elias codes */
    uint8_t sb[4096];
    for (int kind = 0; kind < 3; kind++) {
        pz_bitw wr;
        pz_bitw_init(&wr, sb, sizeof sb);
        uint64_t test_vals[600];
        int nv = 0;
        for (uint64_t t = 1; t <= 500; t++) test_vals[nv++] = t;
        uint64_t big[] = {1ull << 32, (1ull << 40) + 3, 1ull << 63, UINT64_MAX, UINT64_MAX - 1, 123456789012345ull};
        for (size_t t = 0; t < sizeof big / sizeof big[0]; t++) test_vals[nv++] = big[t];
        uint64_t total = 0;
        for (int t = 0; t < nv; t++) {
            uint64_t before = pz_bitw_bits(&wr);
            int expect_bits = kind == 0 ? pz_elias_gamma_bits(test_vals[t])
                                        : kind == 1 ? pz_elias_delta_bits(test_vals[t]) : pz_elias_omega_bits(test_vals[t]);
            if (kind == 0) pz_elias_gamma_put(&wr, test_vals[t]);
            else if (kind == 1) pz_elias_delta_put(&wr, test_vals[t]);
            else pz_elias_omega_put(&wr, test_vals[t]);
            if (pz_bitw_bits(&wr) - before != (uint64_t)expect_bits) bad++;
            total += (uint64_t)expect_bits;
        }
        size_t used = pz_bitw_finish(&wr);
        CHECK(used == (total + 7) / 8, "elias kind %d: %zu bytes for %llu bits", kind, used, (unsigned long long)total);
        pz_bitr rd;
        pz_bitr_init(&rd, sb, used);
        int badr = 0;
        for (int t = 0; t < nv; t++) {
            uint64_t got = kind == 0 ? pz_elias_gamma_get(&rd) : kind == 1 ? pz_elias_delta_get(&rd) : pz_elias_omega_get(&rd);
            if (got != test_vals[t] || rd.err) badr++;
        }
        CHECK(badr == 0 && bad == 0, "elias kind %d round trip: %d/%d bad", kind, badr, bad);
        /* truncation: reading past the end sets err */
        pz_bitr_init(&rd, sb, used / 2);
        int errs = 0;
        for (int t = 0; t < nv && !rd.err; t++)
            (void)(kind == 0 ? pz_elias_gamma_get(&rd) : kind == 1 ? pz_elias_delta_get(&rd) : pz_elias_omega_get(&rd));
        errs = rd.err;
        CHECK(errs, "elias kind %d: truncated stream not detected", kind);
    }
    /* known codes */
    pz_bitw wr;
    pz_bitw_init(&wr, sb, 8);
    pz_elias_gamma_put(&wr, 1);   /* 1 */
    pz_elias_gamma_put(&wr, 2);   /* 010 */
    pz_elias_omega_put(&wr, 1);   /* 0 */
    pz_elias_omega_put(&wr, 4);   /* 101000 */
    pz_elias_delta_put(&wr, 5);   /* gamma(3)=011, then 01 -> 01101 */
    size_t used = pz_bitw_finish(&wr);
    /* 1 010 0 101000 01101 -> 1010 0101 0000 1101 */
    CHECK(used == 2 && sb[0] == 0xa5 && sb[1] == 0x0d, "elias known codes: %02x %02x", sb[0], sb[1]);
    pz_bitw_init(&wr, sb, 1);
    pz_elias_gamma_put(&wr, 1000);
    CHECK(pz_bitw_finish(&wr) == SIZE_MAX, "bit writer overflow not reported");
    uint8_t zeros[16] = {0};
    pz_bitr rd;
    pz_bitr_init(&rd, zeros, sizeof zeros);
    CHECK(pz_elias_gamma_get(&rd) == 0 && rd.err, "gamma of all zeros must fail");
    uint8_t ones[16];
    memset(ones, 0xff, sizeof ones);
    pz_bitr_init(&rd, ones, sizeof ones);
    CHECK(pz_elias_omega_get(&rd) == 0 && rd.err, "omega overflow must fail");
}

/* ------------------------------------------------------------ spec parser */

static void expect_spec(const char *spec, const char *canonical) {
    pz_codec *c = NULL;
    pz_status st = pz_codec_create(spec, &c);
    CHECK(st == PZ_OK, "'%s' should parse: %s", spec, pz_last_error());
    if (st == PZ_OK) {
        CHECK(!strcmp(pz_codec_spec(c), canonical), "'%s' canonical '%s', expected '%s'", spec, pz_codec_spec(c), canonical);
        /* the canonical spec parses to itself */
        pz_codec *c2 = NULL;
        CHECK(pz_codec_create(pz_codec_spec(c), &c2) == PZ_OK && !strcmp(pz_codec_spec(c2), canonical),
              "canonical '%s' does not reparse", canonical);
        pz_codec_free(c2);
    }
    pz_codec_free(c);
}

/* spec built for use (enum pz_codec_use): its canonical form contains want */
static void expect_use(const char *spec, int use, const char *want) {
    pz_codec *c = NULL;
    pz_status st = pz_codec_create_for(spec, use, &c);
    CHECK(st == PZ_OK, "'%s' (use %d) should parse: %s", spec, use, pz_last_error());
    if (st == PZ_OK) {
        CHECK(strstr(pz_codec_spec(c), want) != NULL, "'%s' (use %d): canonical '%s' lacks '%s'", spec, use,
              pz_codec_spec(c), want);
        /* the canonical spec names round=, so it is the same codec for either use */
        pz_codec *c2 = NULL;
        CHECK(pz_codec_create_for(pz_codec_spec(c), !use, &c2) == PZ_OK && !strcmp(pz_codec_spec(c2), pz_codec_spec(c)),
              "'%s': canonical '%s' changes with the use", spec, pz_codec_spec(c));
        pz_codec_free(c2);
    }
    pz_codec_free(c);
}

/* q's rounding defaults by what it carries: nearest for activations,
 * stochastic for gradients; a named round= wins; inside wrappers too. */
static void test_spec_use(void) {
    expect_use("q4", PZ_USE_ACTIVATION, "q4:scale=absmax,group=channel,round=nearest,");
    expect_use("q4", PZ_USE_GRADIENT, "q4:scale=absmax,group=channel,round=stochastic,");
    expect_use("q2:round=nearest", PZ_USE_GRADIENT, "round=nearest");
    expect_use("q2:round=stochastic", PZ_USE_ACTIVATION, "round=stochastic");
    expect_use("q8:group=row+zstd", PZ_USE_GRADIENT, "group=row,round=stochastic,");
    expect_use("hadamard(q4:group=row)", PZ_USE_GRADIENT, "round=stochastic");
    expect_use("ef(q2)", PZ_USE_GRADIENT, "round=stochastic");
    expect_use("ef(hadamard(q2))", PZ_USE_ACTIVATION, "round=nearest");
    expect_use("nuq4", PZ_USE_GRADIENT, "nuq4:bucket=8192,code=fixed");   /* no round= to default */
    /* the gradient default changes the bytes only through rounding: same size */
    pz_codec *a = NULL, *g = NULL;
    CHECK(pz_codec_create_for("q4", PZ_USE_ACTIVATION, &a) == PZ_OK && pz_codec_create_for("q4", PZ_USE_GRADIENT, &g) == PZ_OK,
          "q4 for both uses");
    if (a && g) {
        pz_shape s = {2, {8, 64}};
        CHECK(pz_codec_max_encoded_size(a, &s) == pz_codec_max_encoded_size(g, &s), "q4's size depends on its use");
    }
    pz_codec_free(a);
    pz_codec_free(g);
    pz_codec *bad = NULL;
    CHECK(pz_codec_create_for("q4", 7, &bad) == PZ_ERR_ARG && bad == NULL, "an unknown use is refused");
}

static void expect_spec_error(const char *spec, size_t off, const char *needle) {
    pz_codec *c = NULL;
    pz_status st = pz_codec_create(spec, &c);
    CHECK(st == PZ_ERR_ARG, "'%s' should fail to parse", spec);
    pz_codec_free(c);
    if (st != PZ_ERR_ARG) return;
    const char *m = pz_last_error();
    CHECK(strstr(m, needle) != NULL, "'%s': message '%s' lacks '%s'", spec, m, needle);
    char at[64];
    snprintf(at, sizeof at, "at offset %zu", off);
    CHECK(strstr(m, at) != NULL, "'%s': message '%s' lacks '%s'", spec, m, at);
    /* the caret sits under the offending character of the echoed spec */
    const char *nl = strchr(m, '\n');
    CHECK(nl != NULL, "'%s': no caret line", spec);
    if (!nl) return;
    size_t first = (size_t)(nl - m), sl = strlen(spec);
    const char *caret = strchr(nl + 1, '^');
    CHECK(first >= sl && !strncmp(nl - sl, spec, sl), "'%s': first line does not end with the spec", spec);
    CHECK(caret && (size_t)(caret - (nl + 1)) == first - sl + off, "'%s': caret misplaced", spec);
}

/* a spec too long to echo whole: the reason survives the message's bounds
 * (it was cut off after the echoed spec), the caret under the offending
 * character of the window shown */
static void long_spec_error(void) {
    char spec[1024] = "";
    for (int i = 0; i < 200; i++) strcat(spec, "ef(");
    strcat(spec, "q4");
    for (int i = 0; i < 200; i++) strcat(spec, ")");
    pz_codec *c = NULL;
    CHECK(pz_codec_create(spec, &c) == PZ_ERR_ARG, "200 nested ef() should fail");
    pz_codec_free(c);
    const char *m = pz_last_error(), *nl = strchr(m, '\n');
    CHECK(strstr(m, "nested more than 4 deep at offset 12") && strstr(m, "(802 characters)"), "message: %s", m);
    const char *caret = nl ? strchr(nl + 1, '^') : NULL;
    size_t col = caret ? (size_t)(caret - (nl + 1)) : 0;
    CHECK(caret && nl - m >= 120 && !strncmp(nl - 120, spec, 120) && col == (size_t)(nl - m) - 120 + 12,
          "the first line does not end with the spec's first 120 characters, or the caret is misplaced: %s", m);
}

static void test_spec(void) {
    expect_spec("fp32", "fp32");
    expect_spec("fp16", "fp16");
    expect_spec("bf16", "bf16");
    expect_spec("q4", "q4:scale=absmax,group=channel,round=nearest,sdtype=fp32,grid=midtread");
    expect_spec("q4:round=stochastic", "q4:scale=absmax,group=channel,round=stochastic,sdtype=fp32,grid=midtread");
    expect_spec("q8:round=nearest", "q8:scale=absmax,group=channel,round=nearest,sdtype=fp32,grid=midtread");
    expect_spec("q4:scale=minmax,group=row,round=nearest",
                "q4:scale=minmax,group=row,round=nearest,sdtype=fp32,grid=midtread");
    expect_spec("q1:group=128,sdtype=fp16", "q1:scale=absmax,group=128,round=nearest,sdtype=fp16,grid=midtread");
    expect_spec("q3:group=tensor", "q3:scale=absmax,group=tensor,round=nearest,sdtype=fp32,grid=midtread");
    expect_spec("q4:grid=midrise", "q4:scale=absmax,group=channel,round=nearest,sdtype=fp32,grid=midrise");
    expect_spec("q2:grid=midrise,scale=minmax,grid=midtread",
                "q2:scale=minmax,group=channel,round=nearest,sdtype=fp32,grid=midtread");
    expect_spec("nuq4", "nuq4:bucket=8192,code=fixed");
    expect_spec("nuq4:bucket=512,code=elias", "nuq4:bucket=512,code=elias");
    expect_spec("nuq1", "nuq1:bucket=8192,code=fixed");
    expect_spec("sign", "sign:scaled,group=row,sdtype=fp32");
    expect_spec("sign:stochastic", "sign:stochastic,group=row,sdtype=fp32");
    expect_spec("sign:group=64,sdtype=fp16", "sign:scaled,group=64,sdtype=fp16");
    expect_spec("q4+zstd", "q4:scale=absmax,group=channel,round=nearest,sdtype=fp32,grid=midtread+zstd");
}

static void test_spec_errors(void) {
    expect_spec_error("q9", 1, "bits must be 1..8");
    expect_spec_error("q0", 1, "bits must be 1..8");
    expect_spec_error("q", 1, "bits missing");
    expect_spec_error("nuq9", 3, "bits must be 1..8");
    expect_spec_error("", 0, "empty codec spec");
    expect_spec_error("zz4", 0, "unknown codec 'zz4'");
    expect_spec_error("q4:foo=1", 3, "unknown q option 'foo'");
    expect_spec_error("q4:scale=max", 9, "scale must be absmax or minmax");
    expect_spec_error("q4:round=up", 9, "round must be stochastic or nearest");
    expect_spec_error("q4:grid=mid", 8, "grid must be midtread or midrise");
    expect_spec_error("q4:group=0", 9, "group size must be 1..");
    expect_spec_error("q4:group=x1", 9, "unknown group 'x1'");
    expect_spec_error("q4:group=row,,round=nearest", 13, "empty option");
    expect_spec_error("q4:", 3, "empty option");
    expect_spec_error("q4:group=row,", 13, "empty option after ','");
    expect_spec_error("q4:group=", 9, "value missing after '='");
    expect_spec_error("q4x", 0, "unknown codec 'q4x'");
    expect_spec_error("q4;x", 2, "expected ':'");
    expect_spec_error("fp16:1", 4, "takes no arguments");
    expect_spec_error("nuq1:code=elias", 10, "code=elias needs at least 2 bits");
    expect_spec_error("nuq4:bucket=0", 12, "bucket must be 1..");
    expect_spec_error("nuq4:code=huffman", 10, "code must be fixed or elias");
    expect_spec_error("sign:sto", 5, "unknown sign option 'sto'");
    expect_spec_error("sign:sdtype=bf16", 12, "sdtype must be fp16 or fp32");
    expect_spec_error("q4+zst", 2, "'+' only in a trailing '+zstd'");
    expect_spec_error("q4+zstd+zstd", 2, "'+' only");
    expect_spec_error("ef(q4", 5, "missing ')'");
    expect_spec_error("ef(q4)x", 6, "unexpected text after ')'");
    expect_spec_error("ef(q9)", 4, "bits must be 1..8");
    expect_spec_error("foo(q4)", 0, "unknown wrapper 'foo'");
    expect_spec_error("ef()", 3, "codec expected");
    expect_spec_error("ef(ef(ef(ef(ef(q4)))))", 12, "nested more than 4 deep");
    /* 200 deep: the reason, the offset and a caret under the window the message shows */
    long_spec_error();
    expect_spec_error("aq(q4,warmup=q9)", 14, "bits must be 1..8");
    expect_spec_error("q 4", 1, "unexpected ' '");
}

/* ------------------------------------------------------------ sizes */

static size_t groups_of(const char *g, const pz_shape *s) {
    size_t n = pz_shape_numel(s), C = (size_t)s->dims[s->ndim - 1];
    if (!strcmp(g, "channel")) return C;
    if (!strcmp(g, "row")) return n / C;
    if (!strcmp(g, "tensor")) return 1;
    size_t N = (size_t)atol(g);
    return (n + N - 1) / N;
}

/* README formula of the payload, from the canonical spec (and, for nuq's
 * Elias code, the decoded levels); SIZE_MAX when the codec has no formula here */
static size_t formula(const char *spec, const pz_shape *s, const uint8_t *msg, const float *y) {
    size_t n = pz_shape_numel(s);
    unsigned b, fp;
    char a[32], g[32], r[32];
    if (!strcmp(spec, "fp32")) return 4 * n;
    if (!strcmp(spec, "fp16") || !strcmp(spec, "bf16")) return 2 * n;
    if (sscanf(spec, "q%u:scale=%31[a-z],group=%31[a-z0-9],round=%31[a-z],sdtype=fp%u", &b, a, g, r, &fp) == 5)
        return groups_of(g, s) * (strcmp(a, "minmax") ? 1 : 2) * (fp / 8) + (n + 7) / 8 * b;
    if (sscanf(spec, "sign:%31[a-z],group=%31[a-z0-9],sdtype=fp%u", a, g, &fp) == 3)
        return groups_of(g, s) * (fp / 8) + (n + 7) / 8;
    unsigned bucket;
    if (sscanf(spec, "nuq%u:bucket=%u,code=%31[a-z]", &b, &bucket, a) == 3) {
        size_t G = (n + bucket - 1) / bucket;
        if (!strcmp(a, "fixed")) return 4 * G + (n + 7) / 8 * b;
        int sl = (1 << (b - 1)) - 1;
        size_t bits = 0;
        for (size_t i = 0; i < n; i++) {
            float norm;
            memcpy(&norm, msg + hdr(s->ndim) + 4 * (i / bucket), 4);
            int j = 0;
            if (y[i] != 0.0f) {
                int e;
                frexpf(fabsf(y[i]) / norm, &e);
                j = e - 1 + sl;
            }
            bits += (size_t)pz_elias_gamma_bits((uint64_t)j + 1) + (j > 0);
        }
        return 4 * G + (bits + 7) / 8;
    }
    return SIZE_MAX;
}

static int fixed_size_spec(const char *spec) { return !strstr(spec, "elias") && strncmp(spec, "topk", 4) && strncmp(spec, "jointsq", 7); }

static void test_sizes(void) {
    static const char *const specs[] = {
        "fp32", "fp16", "bf16",
        "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8",
        "q4:scale=minmax", "q4:group=row", "q4:group=tensor", "q4:group=3", "q4:group=64,sdtype=fp16",
        "q3:scale=minmax,group=row,sdtype=fp16", "q7:group=5,round=nearest", "q2:scale=minmax,group=channel,sdtype=fp16",
        "nuq1", "nuq2", "nuq4", "nuq8", "nuq3:bucket=5", "nuq4:bucket=16,code=elias", "nuq8:bucket=7,code=elias",
        "nuq2:code=elias",
        "sign", "sign:stochastic", "sign:group=channel", "sign:group=tensor,sdtype=fp16", "sign:stochastic,group=9,sdtype=fp16",
    };
    pz_shape shapes[] = {shp(1, 1, 0, 0, 0), shp(1, 7, 0, 0, 0), shp(2, 3, 5, 0, 0), shp(3, 2, 3, 11, 0),
                         shp(4, 2, 2, 3, 9), shp(2, 4, 64, 0, 0), shp(2, 8, 1000, 0, 0)};
    int tested = 0;
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
        for (size_t t = 0; t < sizeof shapes / sizeof shapes[0]; t++) {
            pz_shape *sh = &shapes[t];
            size_t n = pz_shape_numel(sh), len;
            float *x = gauss(n, 100 + t, 1.0f), *y = xmalloc(n * 4);
            uint8_t *m = roundtrip(specs[k], x, sh, 3, y, &len);
            if (m) {
                pz_codec *c = mk(specs[k]);
                const char *canon = pz_codec_spec(c);
                size_t f = formula(canon, sh, m, y);
                CHECK(f != SIZE_MAX, "no formula for %s", canon);
                CHECK(len == hdr(sh->ndim) + f, "%s shape #%zu: %zu bytes, formula %zu + header %zu", canon, t, len, f,
                      hdr(sh->ndim));
                size_t mx = pz_codec_max_encoded_size(c, sh);
                if (fixed_size_spec(canon)) CHECK(mx == len, "%s: max_encoded_size %zu != %zu", canon, mx, len);
                else CHECK(mx >= len, "%s: max_encoded_size %zu < %zu", canon, mx, len);
                pz_codec_free(c);
                tested++;
            }
            free(m);
            free(x);
            free(y);
        }
    printf("sizes: %d (codec, shape) pairs match the README formulas\n", tested);
}

/* ------------------------------------------------------------ round trips and bounds */

static float group_absmax(const float *x, const pz_shape *s, const char *g, size_t i, float *mn, float *mx, double *mean) {
    size_t n = pz_shape_numel(s), C = (size_t)s->dims[s->ndim - 1];
    size_t a, e, stride = 1;
    if (!strcmp(g, "channel")) { a = i % C; e = n; stride = C; }
    else if (!strcmp(g, "row")) { a = i / C * C; e = a + C; }
    else if (!strcmp(g, "tensor")) { a = 0; e = n; }
    else { size_t N = (size_t)atol(g); a = i / N * N; e = a + N < n ? a + N : n; }
    float m = 0, lo = INFINITY, hi = -INFINITY;
    double sum = 0;
    size_t cnt = 0;
    for (size_t j = a; j < e; j += stride) {
        m = fmaxf(m, fabsf(x[j]));
        lo = fminf(lo, x[j]);
        hi = fmaxf(hi, x[j]);
        sum += fabs((double)x[j]);
        cnt++;
    }
    if (mn) *mn = lo;
    if (mx) *mx = hi;
    if (mean) *mean = sum / (double)cnt;
    return m;
}

static void test_q_bounds(void) {
    static const char *const groups[] = {"channel", "row", "tensor", "16", "5"};
    pz_shape s = shp(3, 2, 6, 40, 0);
    size_t n = pz_shape_numel(&s);
    float *x = gauss(n, 21, 3.0f), *y = xmalloc(n * 4);
    x[7] = 0.0f;
    x[8] = -40.0f;   /* an outlier */
    for (int b = 1; b <= 8; b++)
        for (size_t gi = 0; gi < sizeof groups / sizeof groups[0]; gi++)
            for (int mode = 0; mode < 12; mode++) {
                /* mode % 6: 0 absmax nearest fp32, 1 absmax nearest fp16, 2 minmax nearest fp32,
                 * 3 minmax nearest fp16, 4 absmax stochastic, 5 minmax stochastic fp16;
                 * mode / 6: 0 midrise, 1 midtread */
                int md = mode % 6, mt = mode / 6;
                int minmax = md == 2 || md == 3 || md == 5, fp32 = md == 0 || md == 2 || md == 4;
                int near = md < 4;
                char spec[128];
                snprintf(spec, sizeof spec, "q%d:scale=%s,group=%s,round=%s,sdtype=%s,grid=%s", b,
                         minmax ? "minmax" : "absmax", groups[gi], near ? "nearest" : "stochastic", fp32 ? "fp32" : "fp16",
                         mt ? "midtread" : "midrise");
                size_t len;
                uint8_t *m = roundtrip(spec, x, &s, 1, y, &len);
                free(m);
                if (!m) continue;
                int bad = 0, bad_issue = 0;
                /* intervals the range spans: 2^b - 1 (midrise), 2^b - 2 (midtread, b >= 2;
                 * a minmax group without 0 in its range has 2^b - 1: the bound is looser) */
                double L = (double)((1 << b) - 1 - (mt && b >= 2));
                for (size_t i = 0; i < n; i++) {
                    float lo, hi;
                    float am = group_absmax(x, &s, groups[gi], i, &lo, &hi, NULL);
                    double slo, shi;
                    if (minmax) {
                        slo = pz_scale_store(lo, fp32, -1);
                        shi = pz_scale_store(hi, fp32, +1);
                    } else {
                        shi = pz_scale_store(am, fp32, +1);
                        slo = -shi;
                    }
                    double step = (shi - slo) / L, err = fabs((double)x[i] - (double)y[i]);
                    double bound = near ? step / 2 : step;
                    if (err > bound * (1 + 1e-5) + 1e-12) {
                        if (bad < 2) printf("  %s: x[%zu]=%g y=%g err %g > %g\n", spec, i, x[i], y[i], err, bound);
                        bad++;
                    }
                    if (!isfinite(y[i])) bad++;
                    /* the issue's bound for absmax nearest: |x - x'| <= s/2^(b-1) (exact scales) */
                    if (near && !minmax && fp32 && err > am / ldexp(1.0, b - 1) * (1 + 1e-6)) bad_issue++;
                }
                CHECK(bad == 0, "%s: %d elements beyond the error bound", spec, bad);
                CHECK(bad_issue == 0, "%s: %d elements beyond s/2^(b-1)", spec, bad_issue);
            }
    free(x);
    free(y);
}

static void test_fp_and_others(void) {
    pz_shape s = shp(2, 33, 31, 0, 0);
    size_t n = pz_shape_numel(&s), len;
    float *x = gauss(n, 31, 10.0f), *y = xmalloc(n * 4);
    pz_rng r;
    pz_rng_seed(&r, 3);
    /* fp32: bitwise identity, NaN and inf included */
    x[0] = NAN;
    x[1] = -INFINITY;
    x[2] = -0.0f;
    x[3] = 0x1p-140f;
    uint8_t *m = roundtrip("fp32", x, &s, 0, y, &len);
    CHECK(m && !memcmp(x, y, n * 4), "fp32 is not bitwise identity");
    free(m);
    /* fp16: exact on representable values, else RNE */
    float *xr = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)pz_rng_next(&r);
        if ((h & 0x7c00) == 0x7c00) h &= 0xbfff;   /* no inf/NaN */
        xr[i] = pz_f16_to_f32(h);
    }
    m = roundtrip("fp16", xr, &s, 0, y, &len);
    CHECK(m && !memcmp(xr, y, n * 4), "fp16 not exact on representable values");
    free(m);
    m = roundtrip("fp16", x, &s, 0, y, &len);
    int bad = 0;
    for (size_t i = 3; i < n; i++)
        if (pz_f2u(y[i]) != pz_f2u(pz_f16_to_f32(pz_f32_to_f16(x[i])))) bad++;
    CHECK(m && bad == 0 && isnan(y[0]) && y[1] == -INFINITY, "fp16 rounding: %d bad", bad);
    free(m);
    /* bf16 */
    m = roundtrip("bf16", x, &s, 0, y, &len);
    bad = 0;
    for (size_t i = 1; i < n; i++)
        if (pz_f2u(y[i]) != ((uint32_t)ref_bf16(x[i]) << 16)) bad++;
    CHECK(m && bad == 0 && isnan(y[0]), "bf16 rounding: %d bad", bad);
    free(m);
    x[0] = 1.0f;
    x[1] = -2.0f;
    x[3] = 0.5f;
    /* nuq: decoded values are 0 or +-norm*2^k bracketing |x| */
    static const char *const nuqs[] = {"nuq2:bucket=64", "nuq4:bucket=64", "nuq8:bucket=64", "nuq4:bucket=100,code=elias",
                                       "nuq3", "nuq1:bucket=10"};
    for (size_t k = 0; k < sizeof nuqs / sizeof nuqs[0]; k++) {
        m = roundtrip(nuqs[k], x, &s, 2, y, &len);
        if (!m) continue;
        unsigned b, bucket = 8192;
        sscanf(nuqs[k], "nuq%u:bucket=%u", &b, &bucket);
        int sl = (1 << (b - 1)) - 1;
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            float norm;
            memcpy(&norm, m + hdr(2) + 4 * (i / bucket), 4);
            double ref = 0;
            for (size_t j = i / bucket * bucket; j < n && j < (i / bucket + 1) * bucket; j++) ref += (double)x[j] * x[j];
            if (fabs(norm - sqrt(ref)) > 1e-5 * sqrt(ref)) bad++;
            if (b == 1) {
                if (fabsf(y[i]) != norm) bad++;
                continue;
            }
            double l1 = ldexp(1.0, 1 - sl) * norm;
            double err = fabs((double)x[i] - y[i]);
            if (err > fmax(fabs(x[i]), l1) * (1 + 1e-5)) bad++;
            if (y[i] != 0.0f) {
                int e;
                float fr = frexpf(fabsf(y[i]) / norm, &e);
                if (fr != 0.5f || (y[i] < 0) != (x[i] < 0)) bad++;
            }
        }
        CHECK(bad == 0, "%s: %d bad elements", nuqs[k], bad);
        free(m);
    }
    /* sign */
    static const char *const signs[] = {"sign", "sign:group=channel", "sign:group=7,sdtype=fp16", "sign:stochastic",
                                        "sign:stochastic,group=tensor,sdtype=fp16"};
    for (size_t k = 0; k < sizeof signs / sizeof signs[0]; k++) {
        m = roundtrip(signs[k], x, &s, 2, y, &len);
        if (!m) continue;
        pz_codec *c = mk(signs[k]);
        char mode[16], g[16];
        unsigned fp;
        sscanf(pz_codec_spec(c), "sign:%15[a-z],group=%15[a-z0-9],sdtype=fp%u", mode, g, &fp);
        pz_codec_free(c);
        bad = 0;
        for (size_t i = 0; i < n; i++) {
            double mean;
            float am = group_absmax(x, &s, g, i, NULL, NULL, &mean);
            float want = !strcmp(mode, "scaled") ? pz_scale_store((float)mean, fp == 32, 0) : pz_scale_store(am, fp == 32, +1);
            if (fabsf(y[i]) != want && fabs(fabsf(y[i]) - want) > 1e-6 * want) bad++;
            if (!strcmp(mode, "scaled") && (y[i] >= 0) != (x[i] >= 0)) bad++;
        }
        CHECK(bad == 0, "%s: %d bad elements", signs[k], bad);
        free(m);
    }
    free(xr);
    free(x);
    free(y);
}

/* every codec: all-zero input and all-zero groups decode to zeros, never NaN */
static const char *const all_specs[] = {
    "fp32", "fp16", "bf16", "q1", "q4", "q8:round=nearest", "q4:scale=minmax,group=row", "q2:group=4,sdtype=fp16",
    "nuq1", "nuq4", "nuq4:code=elias", "nuq8:bucket=4", "sign", "sign:stochastic", "sign:group=channel,sdtype=fp16",
    "topk:0.1", "topk:0.5,scope=tensor,values=q8", "jointsq:1.5", "jointsq:4", "q4+zstd", "ef(q4)", "ef21(sign)",
    "aq(q4)", "tah:6,tile=16",
};

static void test_zeros(void) {
    pz_shape s = shp(2, 8, 16, 0, 0);
    size_t n = pz_shape_numel(&s), len;
    float *x = xcalloc(n, 4), *y = xmalloc(n * 4);
    float *x2 = gauss(n, 41, 1.0f);
    for (size_t i = 0; i < 16; i++) x2[16 * 3 + i] = 0.0f;   /* row 3 */
    for (size_t r = 0; r < 8; r++) x2[16 * r + 5] = 0.0f;      /* channel 5 */
    for (size_t i = 0; i < 4; i++) x2[i] = 0.0f;               /* block 0 of 4 */
    for (size_t k = 0; k < sizeof all_specs / sizeof all_specs[0]; k++) {
        uint64_t ids[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        for (int pass = 0; pass < 2; pass++) {
            pz_codec *e = mk(all_specs[k]), *d = mk(all_specs[k]);
            if (!e || !d) { pz_codec_free(e); pz_codec_free(d); break; }
            size_t cap = pz_codec_max_encoded_size(e, &s);
            uint8_t *m = xmalloc(cap);
            pz_codec_ctx ctx = {1, 1, 0, 0, 0, ids};
            const float *in = pass ? x2 : x;
            pz_shape got;
            int ok = pz_codec_encode(e, in, &s, &ctx, m, cap, &len) == PZ_OK &&
                     pz_codec_decode(d, m, len, &ctx, y, n, &got) == PZ_OK;
            CHECK(ok, "%s: %s", all_specs[k], pz_last_error());
            int bad = 0;
            for (size_t i = 0; ok && i < n; i++) {
                if (isnan(y[i])) bad++;
                if (!pass && y[i] != 0.0f) bad++;
            }
            if (ok && pass && strncmp(all_specs[k], "topk", 4) && strncmp(all_specs[k], "jointsq", 7)) {
                /* zero groups of the codec's own grouping decode to zero */
                const char *sp = pz_codec_spec(e);
                for (size_t i = 0; i < 16; i++)
                    if (strstr(sp, "group=row") && y[16 * 3 + i] != 0.0f) bad++;
                for (size_t r = 0; r < 8; r++)
                    if (strstr(sp, "group=channel") && y[16 * r + 5] != 0.0f) bad++;
                for (size_t i = 0; i < 4; i++)
                    if ((strstr(sp, "group=4,") || strstr(sp, "bucket=4,")) && y[i] != 0.0f) bad++;
            }
            CHECK(bad == 0, "%s (%s input): %d NaN or non-zero where zero expected", all_specs[k],
                  pass ? "partly zero" : "all-zero", bad);
            free(m);
            pz_codec_free(e);
            pz_codec_free(d);
        }
    }
    free(x);
    free(x2);
    free(y);
}

static void test_bad_input(void) {
    pz_shape s = shp(2, 4, 8, 0, 0);
    size_t n = pz_shape_numel(&s), len;
    float *x = gauss(n, 51, 1.0f);
    static const char *const refuse_nan[] = {"q4", "nuq4", "sign", "sign:stochastic", "q4:scale=minmax"};
    for (size_t k = 0; k < sizeof refuse_nan / sizeof refuse_nan[0]; k++)
        for (int t = 0; t < 2; t++) {
            x[5] = t ? INFINITY : NAN;
            pz_codec *c = mk(refuse_nan[k]);
            size_t cap = pz_codec_max_encoded_size(c, &s);
            uint8_t *m = xmalloc(cap);
            pz_status st = pz_codec_encode(c, x, &s, NULL, m, cap, &len);
            CHECK(st == PZ_ERR_ARG && strstr(pz_last_error(), "inf or NaN"), "%s: non-finite input not refused", refuse_nan[k]);
            free(m);
            pz_codec_free(c);
        }
    x[5] = 70000.0f;   /* beyond fp16 scales */
    pz_codec *c = mk("q4:sdtype=fp16");
    size_t cap = pz_codec_max_encoded_size(c, &s);
    uint8_t *m = xmalloc(cap);
    CHECK(pz_codec_encode(c, x, &s, NULL, m, cap, &len) == PZ_ERR_ARG && strstr(pz_last_error(), "fp16"),
          "fp16 scale overflow not refused");
    x[5] = 1.0f;
    CHECK(pz_codec_encode(c, x, &s, NULL, m, cap - 1, &len) == PZ_ERR_SHAPE, "short output buffer not refused");
    CHECK(pz_codec_encode(c, x, &s, NULL, m, 10, &len) == PZ_ERR_SHAPE, "buffer smaller than a header not refused");
    pz_shape bad = shp(2, 4, 0, 0, 0);
    CHECK(pz_codec_encode(c, x, &bad, NULL, m, cap, &len) == PZ_ERR_SHAPE, "zero dim not refused");
    bad = shp(5, 1, 1, 1, 1);
    bad.ndim = 5;
    CHECK(pz_codec_encode(c, x, &bad, NULL, m, cap, &len) == PZ_ERR_SHAPE, "ndim 5 not refused");
    /* decode into a buffer that is too small */
    CHECK(pz_codec_encode(c, x, &s, NULL, m, cap, &len) == PZ_OK, "encode");
    float *y = xmalloc(n * 4);
    pz_shape got;
    CHECK(pz_codec_decode(c, m, len, NULL, y, n - 1, &got) == PZ_ERR_SHAPE, "out_cap too small not refused");
    free(y);
    free(m);
    pz_codec_free(c);
    free(x);
}

/* ------------------------------------------------------------ unbiasedness */

static void test_unbiased(void) {
    static const char *const specs[] = {
        "q1:round=stochastic", "q2:round=stochastic", "q3:round=stochastic", "q4:round=stochastic",
        "q8:round=stochastic", "q4:scale=minmax,group=row,round=stochastic", "q2:group=16,sdtype=fp16,round=stochastic",
        "q3:group=tensor,round=stochastic", "q1:scale=minmax,group=5,sdtype=fp16,round=stochastic",
        "q2:scale=minmax,group=row,sdtype=fp16,round=stochastic",
        "q3:scale=minmax,group=3,round=stochastic",   /* midtread: groups of one sign take the midrise grid */
        "q1:grid=midrise,round=stochastic", "q2:grid=midrise,round=stochastic", "q4:grid=midrise,round=stochastic",
        "q4:scale=minmax,group=row,grid=midrise,round=stochastic",
        "nuq1:bucket=64", "nuq2:bucket=64", "nuq4:bucket=64", "nuq8:bucket=64", "nuq4", "nuq3:bucket=32,code=elias",
        "sign:stochastic", "sign:stochastic,group=channel,sdtype=fp16", "sign:stochastic,group=tensor",
    };
    pz_shape s = shp(2, 4, 64, 0, 0);
    size_t n = pz_shape_numel(&s);
    float *x = gauss(n, 61, 1.0f);
    x[0] = 0.0f;
    x[10] = 1e-4f;
    x[11] = -2.5f;
    float maxabs = 0;
    for (size_t i = 0; i < n; i++) maxabs = fmaxf(maxabs, fabsf(x[i]));
    const int T = 3000;
    double *sum = xmalloc(n * sizeof(double)), *sq = xmalloc(n * sizeof(double));
    float *y = xmalloc(n * 4);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        pz_codec *e = mk(specs[k]);
        if (!e) continue;
        size_t cap = pz_codec_max_encoded_size(e, &s), len;
        uint8_t *m = xmalloc(cap);
        memset(sum, 0, n * sizeof(double));
        memset(sq, 0, n * sizeof(double));
        int ok = 1;
        for (int t = 0; t < T && ok; t++) {
            pz_codec_ctx ctx = {42, (uint64_t)t, 0, 1, 0, NULL};
            pz_shape got;
            ok = pz_codec_encode(e, x, &s, &ctx, m, cap, &len) == PZ_OK &&
                 pz_codec_decode(e, m, len, &ctx, y, n, &got) == PZ_OK;
            for (size_t i = 0; i < n; i++) {
                sum[i] += y[i];
                sq[i] += (double)y[i] * y[i];
            }
        }
        CHECK(ok, "%s: %s", specs[k], pz_last_error());
        double z2 = 0, zmax = 0;
        int nz = 0, bad = 0;
        for (size_t i = 0; ok && i < n; i++) {
            double mean = sum[i] / T, var = sq[i] / T - mean * mean;
            if (var < 0) var = 0;
            double se = sqrt(var / T);
            double tol = 6 * se + 2.0 * maxabs / T + 1e-5 * maxabs;
            if (fabs(mean - x[i]) > tol) {
                if (bad < 2) printf("  %s: x[%zu]=%g mean %g se %g\n", specs[k], i, x[i], mean, se);
                bad++;
            }
            if (se > 1e-3 * maxabs / sqrt(T)) {
                double z = (mean - x[i]) / se;
                z2 += z * z;
                zmax = fmax(zmax, fabs(z));
                nz++;
            }
        }
        CHECK(bad == 0, "%s: %d elements with a biased mean", specs[k], bad);
        CHECK(nz == 0 || z2 / nz < 2.0, "%s: mean squared z-score %.2f over %d elements (bias)", specs[k], z2 / nz, nz);
        if (ok) printf("unbiased: %-42s T=%d  mean z^2 %.2f  max |z| %.2f\n", pz_codec_spec(e), T, nz ? z2 / nz : 0.0, zmax);
        free(m);
        pz_codec_free(e);
    }
    free(sum);
    free(sq);
    free(y);
    free(x);
}

/* ------------------------------------------------------------ NUQSGD vs uniform levels */

/* exact variance of stochastic rounding of r in [0,1] onto sorted levels */
static double sr_var(double r, const double *lv, int nl) {
    for (int j = 0; j + 1 < nl; j++)
        if (r >= lv[j] && r <= lv[j + 1]) return (r - lv[j]) * (lv[j + 1] - r);
    return 0;
}

static void test_nuq_variance(void) {
    const size_t bucket = 8192, n = 4 * bucket;
    pz_shape s = shp(2, 4, (int64_t)bucket, 0, 0);
    float *x = gauss(n, 71, 1.0f), *y = xmalloc(n * 4);
    for (int b = 2; b <= 8; b++) {
        int sl = (1 << (b - 1)) - 1;
        double nuq_lv[130], qsgd_lv[130];
        nuq_lv[0] = 0;
        for (int j = 1; j <= sl; j++) nuq_lv[j] = ldexp(1.0, j - sl);
        for (int j = 0; j <= sl; j++) qsgd_lv[j] = (double)j / sl;   /* QSGD: s uniform levels of the norm, same b bits */
        double v_nuq = 0, v_qsgd = 0, v_q = 0;
        for (size_t g = 0; g < n / bucket; g++) {
            double nn = 0, am = 0;
            for (size_t i = g * bucket; i < (g + 1) * bucket; i++) {
                nn += (double)x[i] * x[i];
                am = fmax(am, fabs(x[i]));
            }
            double norm = sqrt(nn), L = (double)((1 << b) - 1), step = 2 * am / L;
            for (size_t i = g * bucket; i < (g + 1) * bucket; i++) {
                double r = fabs(x[i]) / norm;
                v_nuq += norm * norm * sr_var(r, nuq_lv, sl + 1);
                v_qsgd += norm * norm * sr_var(r, qsgd_lv, sl + 1);
                double f = (x[i] + am) / step - floor((x[i] + am) / step);
                v_q += step * step * f * (1 - f);   /* our q<b> (max-scaled grid), for reference */
            }
        }
        /* the codec's actual squared error over a few encodes matches the analytic variance */
        char spec[64];
        snprintf(spec, sizeof spec, "nuq%d:bucket=%zu", b, bucket);
        double emp = 0;
        const int T = 8;
        for (int t = 0; t < T; t++) {
            size_t len;
            uint8_t *m = roundtrip(spec, x, &s, (uint64_t)t, y, &len);
            free(m);
            for (size_t i = 0; i < n; i++) emp += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        }
        emp /= T;
        CHECK(fabs(emp - v_nuq) < 0.05 * v_nuq, "nuq%d: measured squared error %g vs analytic variance %g", b, emp, v_nuq);
        /* 2 bits: both grids are {0, 1} (equal); from 3 bits NUQ must be strictly lower */
        CHECK(b == 2 ? v_nuq <= v_qsgd * (1 + 1e-12) : v_nuq < v_qsgd, "nuq%d: variance %g not below uniform levels (QSGD) %g",
              b, v_nuq, v_qsgd);
        printf("variance/elem, bucket %zu, %d bits: nuq %.4g (measured %.4g)  uniform L2 levels (QSGD) %.4g  "
               "q%d max-scaled grid %.4g\n", bucket, b, v_nuq / n, emp / n, v_qsgd / n, b, v_q / n);
    }
    free(x);
    free(y);
}

/* ------------------------------------------------------------ corruption */

static void test_corruption(void) {
    static const char *const specs[] = {
        "fp32", "fp16", "bf16", "q4", "q3:scale=minmax,group=5,sdtype=fp16", "q8:round=nearest,group=row", "nuq2",
        "nuq4:bucket=16,code=elias", "nuq1", "sign", "sign:stochastic,group=channel,sdtype=fp16", "q4+zstd", "fp32+zstd",
        "topk:0.3", "jointsq:3", "ef(q4)", "ef21(q2)", "tah:8,tile=8", "tah:13,tile=4,alloc=token",
    };
    pz_shape shapes[] = {shp(2, 3, 7, 0, 0), shp(3, 2, 1, 40, 0)};
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++)
        for (size_t t = 0; t < 2; t++) {
            pz_shape *s = &shapes[t];
            size_t n = pz_shape_numel(s), len;
            float *x = gauss(n, 81 + t, 1.0f), *y = xmalloc(n * 4), *y2 = xmalloc(n * 4);
            if (strstr(specs[k], "zstd"))
                for (size_t i = 0; i < n; i++) x[i] = (float)(i % 3);   /* compressible */
            uint8_t *m = roundtrip(specs[k], x, s, 5, y, &len);
            if (!m) { free(x); free(y); free(y2); continue; }
            int undetected = 0, truncated_ok = 0, crashed_checks = 0;
            uint8_t *c = xmalloc(len + 1);
            for (size_t i = 0; i < len; i++) {
                static const uint8_t flips[] = {0x01, 0x10, 0x80, 0xff};
                for (size_t f = 0; f < sizeof flips; f++) {
                    memcpy(c, m, len);
                    c[i] ^= flips[f];
                    pz_codec *d = mk(specs[k]);
                    pz_shape got;
                    if (pz_codec_decode(d, c, len, NULL, y2, n, &got) == PZ_OK && memcmp(y, y2, n * 4)) undetected++;
                    pz_codec_free(d);
                }
            }
            for (size_t l = 0; l < len; l++) {
                pz_codec *d = mk(specs[k]);
                pz_shape got;
                uint8_t *exact = xmalloc(l ? l : 1);
                memcpy(exact, m, l);
                if (pz_codec_decode(d, exact, l, NULL, y2, n, &got) == PZ_OK) truncated_ok++;
                free(exact);
                pz_codec_free(d);
            }
            memcpy(c, m, len);
            c[len] = 0;
            pz_codec *d = mk(specs[k]);
            pz_shape got;
            CHECK(pz_codec_decode(d, c, len + 1, NULL, y2, n, &got) != PZ_OK, "%s: a trailing byte was accepted", specs[k]);
            pz_codec_free(d);
            /* header edits with the CRC recomputed: never a crash; the fields that
             * define the message's structure must be refused */
            size_t H = hdr(s->ndim);
            for (size_t i = 0; i < H - 4; i++)
                for (int v = 0; v < 256; v += (i < 12 ? 1 : 17)) {
                    if (v == m[i]) continue;
                    memcpy(c, m, len);
                    c[i] = (uint8_t)v;
                    uint32_t crc = pz_crc32c(pz_crc32c(0, c, H - 4), c + H, len - H);
                    memcpy(c + H - 4, &crc, 4);
                    d = mk(specs[k]);
                    pz_status st = pz_codec_decode(d, c, len, NULL, y2, n, &got);
                    pz_codec_free(d);
                    int structural = i < 5 || i == 8 || i == 9 || i == 10 || i == 11 || (i >= 36 && i < H - 4);
                    if (structural && st == PZ_OK) {
                        if (crashed_checks < 3) printf("  %s: header byte %zu = %d accepted\n", specs[k], i, v);
                        crashed_checks++;
                    }
                    if (st == PZ_OK && !strstr(specs[k], "fp") && !strncmp(specs[k], "q", 1))
                        for (size_t j = 0; j < n; j++)
                            if (!isfinite(y2[j])) { crashed_checks++; break; }
                }
            if (t == 0)
                printf("corruption: %-40.40s %zu-byte message: %zu flips, %zu truncations, %zu header edits\n",
                       specs[k], len, 4 * len, len, (H - 4));
            CHECK(undetected == 0, "%s: %d single-byte flips decoded to different values", specs[k], undetected);
            CHECK(truncated_ok == 0, "%s: %d truncations accepted", specs[k], truncated_ok);
            CHECK(crashed_checks == 0, "%s: %d structural header edits accepted", specs[k], crashed_checks);
            free(c);
            free(m);
            free(x);
            free(y);
            free(y2);
        }
}

/* nuq's Elias decoder reads large tensors (2^16 elements and more) through a
 * table of several codes a lookup, and runs of j = 0 codes a word at a time
 * (compress/codecs/nuq.c): held to a plain reader (pz_elias_gamma_get) on
 * streams of every b, mostly j = 0, small j or any j, intact, with one bit
 * flipped, cut short by a byte or with a non-zero padding bit. */
static int nuq_elias_ref(const uint8_t *st, size_t len, size_t n, int b, uint8_t *codes) {
    int sl = (1 << (b - 1)) - 1;
    pz_bitr rd;
    pz_bitr_init(&rd, st, len);
    for (size_t i = 0; i < n; i++) {
        uint64_t g = pz_elias_gamma_get(&rd);
        if (rd.err || g - 1 > (uint64_t)sl) return 0;
        uint64_t sg = g > 1 ? pz_bitr_get(&rd, 1) : 0;
        if (rd.err) return 0;
        codes[i] = (uint8_t)((g - 1) | sg << (b - 1));
    }
    uint64_t left = pz_bitr_left(&rd);
    return left < 8 && pz_bitr_get(&rd, (int)left) == 0;
}

static void test_nuq_elias_reader(void) {
    const pz_codec_impl *impl = pz_codec_impl_by_name("nuq", 3);
    size_t n = 70001;   /* past the table's threshold; no multiple of a chunk */
    pz_shape s = shp(2, 1, (int64_t)n, 0, 0);
    uint8_t *codes = xmalloc(n), *ref = xmalloc(n), *buf = xmalloc(4 + 2 * n + 16);
    float *y = xmalloc(n * sizeof(float));
    pz_rng r;
    pz_rng_seed(&r, 77);
    int bad = 0, cases = 0;
    for (int b = 2; b <= 8; b++)
        for (int mix = 0; mix < 3; mix++) {
            char args[64];
            snprintf(args, sizeof args, "%d:code=elias,bucket=%zu", b, n);
            pz_codec_params p;
            memset(&p, 0, sizeof p);
            if (impl->parse(&p, args, args, 0) != PZ_OK) { bad++; continue; }
            uint32_t sl = (1u << (b - 1)) - 1;
            const float one = 1.0f;
            memcpy(buf, &one, 4);
            pz_bitw w;
            pz_bitw_init(&w, buf + 4, 2 * n + 12);
            for (size_t i = 0; i < n; i++) {
                uint32_t j = mix == 0 ? (pz_rng_below(&r, 16) ? 0 : 1 + (uint32_t)pz_rng_below(&r, sl))
                           : mix == 1 ? (uint32_t)pz_rng_below(&r, sl < 3 ? sl + 1 : 4)
                                      : (uint32_t)pz_rng_below(&r, sl + 1);
                uint32_t sg = j ? (uint32_t)pz_rng_below(&r, 2) : 0;
                codes[i] = (uint8_t)(j | sg << (b - 1));
                pz_elias_gamma_put(&w, j + 1);
                if (j) pz_bitw_put(&w, sg, 1);
            }
            size_t slen = pz_bitw_finish(&w);
            for (int edit = 0; edit < 8; edit++) {
                size_t len = 4 + slen;
                uint8_t saved[2] = {buf[4 + slen - 1], 0};
                size_t at = 4 + (size_t)pz_rng_below(&r, slen), bit = (size_t)pz_rng_below(&r, 8);
                uint8_t keep = buf[at];
                if (edit >= 2 && edit < 7) buf[at] ^= (uint8_t)(1u << bit);   /* a flipped bit */
                if (edit == 1) len--;                                    /* cut short */
                if (edit == 7) buf[4 + slen - 1] |= 1;                   /* padding (or the last code's bit) */
                int ok = nuq_elias_ref(buf + 4, len - 4, n, b, ref);
                pz_status st = impl->decode(&p, buf, len, &s, y);
                cases++;
                if ((st == PZ_OK) != ok) {
                    if (bad < 5) printf("  nuq%d elias mix %d edit %d: decode %d, plain reader %d\n", b, mix, edit, st, ok);
                    bad++;
                } else if (ok) {
                    size_t wrong = 0;
                    for (size_t i = 0; i < n; i++)
                        wrong += y[i] != pz_nuq_value(ref[i], 1.0f, b, (int)sl);
                    if (edit == 0)
                        for (size_t i = 0; i < n; i++) wrong += ref[i] != codes[i];
                    if (wrong) {
                        if (bad < 5) printf("  nuq%d elias mix %d edit %d: %zu values differ\n", b, mix, edit, wrong);
                        bad++;
                    }
                }
                buf[at] = keep;
                buf[4 + slen - 1] = saved[0];
            }
        }
    CHECK(bad == 0, "nuq elias table reader: %d of %d streams differ from the plain reader", bad, cases);
    free(codes);
    free(ref);
    free(buf);
    free(y);
}

/* payload edits with a recomputed CRC: no crash (ASan), and q/nuq/sign never
 * produce a non-finite value */
static void test_payload_edits(void) {
    static const char *const specs[] = {"q4", "q2:scale=minmax,group=3,sdtype=fp16", "nuq3:bucket=8", "nuq4:bucket=8,code=elias",
                                        "sign", "sign:stochastic,sdtype=fp16"};
    pz_shape s = shp(2, 3, 9, 0, 0);
    size_t n = pz_shape_numel(&s), len, H = hdr(2);
    float *x = gauss(n, 91, 1.0f), *y = xmalloc(n * 4);
    pz_rng r;
    pz_rng_seed(&r, 92);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        uint8_t *m = roundtrip(specs[k], x, &s, 1, y, &len);
        if (!m) continue;
        uint8_t *c = xmalloc(len);
        int nonfinite = 0, accepted = 0;
        for (int it = 0; it < 3000; it++) {
            memcpy(c, m, len);
            int edits = 1 + (int)pz_rng_below(&r, 3);
            for (int e = 0; e < edits; e++) c[H + pz_rng_below(&r, len - H)] = (uint8_t)pz_rng_next(&r);
            uint32_t crc = pz_crc32c(pz_crc32c(0, c, H - 4), c + H, len - H);
            memcpy(c + H - 4, &crc, 4);
            pz_codec *d = mk(specs[k]);
            pz_shape got;
            if (pz_codec_decode(d, c, len, NULL, y, n, &got) == PZ_OK) {
                accepted++;
                for (size_t j = 0; j < n; j++) nonfinite += !isfinite(y[j]);
            }
            pz_codec_free(d);
        }
        CHECK(nonfinite == 0, "%s: %d non-finite values decoded from edited payloads", specs[k], nonfinite);
        (void)accepted;
        free(c);
        free(m);
    }
    free(x);
    free(y);
}

/* ------------------------------------------------------------ peek, determinism */

/* Decodes message m (len bytes) with a fresh codec of spec into y (n floats);
 * returns the status. */
static pz_status decode_with(const char *spec, const uint8_t *m, size_t len, float *y, size_t n) {
    pz_codec *d = mk(spec);
    pz_shape gs;
    pz_status st = d ? pz_codec_decode(d, m, len, NULL, y, n, &gs) : PZ_ERR_ARG;
    pz_codec_free(d);
    return st;
}

static void test_peek(void) {
    static const char *const specs[] = {"q4", "fp16", "nuq4:code=elias", "sign:stochastic", "q8+zstd", "ef(q4)",
                                        "ef21(sign)", "ef(ef21(q2))"};
    pz_shape s = shp(3, 2, 3, 4, 0);
    size_t n = pz_shape_numel(&s), len;
    float *x = gauss(n, 95, 1.0f), *y = xmalloc(n * 4);
    for (size_t k = 0; k < sizeof specs / sizeof specs[0]; k++) {
        uint8_t *m = roundtrip(specs[k], x, &s, 1, y, &len);
        if (!m) continue;
        pz_codec *c = mk(specs[k]);
        char got[512];
        pz_shape gs;
        CHECK(pz_codec_peek(m, len, got, sizeof got, &gs) == PZ_OK, "%s: peek: %s", specs[k], pz_last_error());
        /* the peeked spec names the same codec chain (aq options aside) */
        CHECK(!strcmp(got, pz_codec_spec(c)), "%s: peek says '%s', canonical '%s'", specs[k], got, pz_codec_spec(c));
        CHECK(gs.ndim == 3 && gs.dims[0] == 2 && gs.dims[1] == 3 && gs.dims[2] == 4, "%s: peek shape", specs[k]);
        char tiny[4];
        CHECK(pz_codec_peek(m, len, tiny, sizeof tiny, NULL) == PZ_OK && strlen(tiny) == 3, "%s: peek truncates the spec",
              specs[k]);
        CHECK(pz_codec_is_stateful_decoder(c) == (strstr(specs[k], "ef21") != NULL), "%s: stateful flag", specs[k]);
        pz_codec_free(c);
        free(m);
    }
    /* determinism: same ctx, same bytes; another step, other bytes (stochastic) */
    pz_codec *e = mk("q4:round=stochastic");
    size_t cap = pz_codec_max_encoded_size(e, &s), l1, l2, l3;
    uint8_t *a = xmalloc(cap), *b = xmalloc(cap), *c3 = xmalloc(cap);
    pz_codec_ctx c1 = {1, 2, 3, 0, 4, NULL}, c2 = c1;
    c2.step = 3;
    pz_codec_encode(e, x, &s, &c1, a, cap, &l1);
    pz_codec_encode(e, x, &s, &c1, b, cap, &l2);
    pz_codec_encode(e, x, &s, &c2, c3, cap, &l3);
    CHECK(l1 == l2 && !memcmp(a, b, l1), "same ctx gave different bytes");
    CHECK(l1 == l3 && memcmp(a, c3, l1), "another step gave the same bytes");
    free(a);
    free(b);
    free(c3);
    pz_codec_free(e);
    /* a base decoder reads any base message; a wrapper message needs its wrapper */
    static const struct { const char *enc, *dec; pz_status want; } cross[] = {
        {"q4", "fp16", PZ_OK}, {"ef(q4)", "q4", PZ_ERR_FORMAT}, {"ef(q4)", "ef21(q4)", PZ_ERR_FORMAT}};
    for (size_t k = 0; k < sizeof cross / sizeof cross[0]; k++) {
        uint8_t *m = roundtrip(cross[k].enc, x, &s, 1, y, &len);
        pz_status st = m ? decode_with(cross[k].dec, m, len, y, n) : PZ_ERR_ARG;
        CHECK(st == cross[k].want, "%s decoder on a %s message: %s, want %s", cross[k].dec, cross[k].enc,
              pz_status_name(st), pz_status_name(cross[k].want));
        free(m);
    }
    free(x); free(y);
}

static void test_zstd(void) {
    pz_shape s = shp(2, 16, 256, 0, 0);
    size_t n = pz_shape_numel(&s), len;
    float *x = xmalloc(n * 4), *y = xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 7);
    uint8_t *m = roundtrip("fp32+zstd", x, &s, 0, y, &len);
    CHECK(m && m[6] == 3 && len < hdr(2) + 4 * n / 10 && !memcmp(x, y, n * 4), "fp32+zstd: compressible data not compressed");
    free(m);
    float *g = gauss(n, 97, 1.0f);
    m = roundtrip("fp16+zstd", g, &s, 0, y, &len);
    CHECK(m && len <= hdr(2) + 2 * n, "fp16+zstd: larger than fp16");
    free(m);
    for (size_t i = 0; i < n; i++) {   /* incompressible: random bits as floats */
        uint32_t u = (uint32_t)pz_mix64(i) & 0xbf7fffffu;
        x[i] = pz_u2f(u);
    }
    m = roundtrip("fp32+zstd", x, &s, 0, y, &len);
    CHECK(m && m[6] == 1 && len == hdr(2) + 4 * n && !memcmp(x, y, n * 4), "fp32+zstd: incompressible data should stay raw");
    free(m);
    free(g);
    free(x);
    free(y);
}

int main(void) {
    test_elem();
    test_zstd();
    test_crc();
    test_bitpack();
    test_spec();
    test_spec_use();
    test_spec_errors();
    test_sizes();
    test_q_bounds();
    test_fp_and_others();
    test_zeros();
    test_bad_input();
    test_unbiased();
    test_nuq_variance();
    test_corruption();
    test_payload_edits();
    test_nuq_elias_reader();
    test_peek();
    return check_summary("test_codecs");
}
