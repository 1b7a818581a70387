/* nuq.c: nuq<b>, NUQSGD (nonuniform levels, unbiased stochastic rounding).
 *
 * The tensor is cut into buckets of `bucket` consecutive elements (default
 * 8192; the last one may be shorter); each bucket sends its L2 norm |v| as
 * fp32. With r = |x|/|v| in [0, 1] and s = 2^(b-1) - 1, the levels are
 *   l_0 = 0,  l_j = 2^(j - s) for j = 1..s      i.e. {0, 2^-(s-1), ..., 1/2, 1}
 * and r between l_j and l_(j+1) goes up with probability
 * (r - l_j)/(l_(j+1) - l_j), so E[decoded] = x. The decoded value is
 * sign(x) * |v| * l_j.
 *   code=fixed (default): each element is a b-bit code (sign << (b-1)) | j,
 *     sign = 1 for x < 0 (0 when j = 0), packed in the CGX layout.
 *   code=elias: each element is Elias-gamma(j + 1) followed, when j > 0, by
 *     a sign bit (1 = negative), in one MSB-first bit stream zero-padded to a
 *     byte (needs b >= 2).
 * b = 1 has no room for a zero level: its single level is 1, i.e. the element
 * goes to +|v| with probability (1 + x/|v|)/2 and to -|v| otherwise (code 1
 * means +). A bucket whose norm is 0 decodes to zeros. A bucket whose norm
 * is below 2^-126 is coded at 2^64 times its size (pz_nuq_fs, elem_codecs.h),
 * so tiny and subnormal values keep the relative error of any other bucket.
 * Payload: G = ceil(n/bucket) fp32 norms, then the codes. */

/* hot loops are throughput-bound: let gcc use 512-bit vectors where the
 * build targets AVX-512 (it defaults to 256 bits) */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/bitpack.h"
#include "compress/codecs/qcommon.h"
#include "base/mem.h"

#define DEFAULT_BUCKET 8192

static pz_status nuq_parse(pz_codec_params *p, const char *args, const char *spec, size_t where) {
    p->group_mode = PZ_GROUP_BLOCK;
    p->group_size = DEFAULT_BUCKET;
    p->elias = 0;
    size_t i;
    pz_status st = pz_spec_bits(spec, where, args, "nuq", &i, p);
    if (st != PZ_OK) return st;
    size_t elias_off = 0;
    if (args[i]) {
        if (args[i] != ':') return pz_spec_fail(spec, where + i, "expected ':' before the options");
        i++;
        size_t base = where + i, pos = 0;
        pz_spec_opt o;
        int r;
        while ((r = pz_spec_next_opt(spec, base, args + i, &pos, &o)) > 0) {
            if (pz_spec_key_is(&o, "bucket") && o.val) {
                uint64_t v;
                if ((st = pz_spec_uint(spec, o.voff, o.val, o.vlen, 1, 1u << 31, &v, "bucket")) != PZ_OK) return st;
                p->group_size = (uint32_t)v;
            } else if (pz_spec_key_is(&o, "code") && o.val) {
                if (pz_spec_val_is(&o, "elias")) p->elias = 1;
                else if (pz_spec_val_is(&o, "fixed")) p->elias = 0;
                else return pz_spec_fail(spec, o.voff, "code must be fixed or elias");
                elias_off = o.voff;
            } else {
                return pz_spec_unknown(spec, &o, "nuq", "bucket=, code=");
            }
        }
        if (r < 0) return PZ_ERR_ARG;
    }
    if (p->elias && p->bits < 2) return pz_spec_fail(spec, elias_off, "code=elias needs at least 2 bits");
    return PZ_OK;
}

static void nuq_format(const pz_codec_params *p, char *buf, size_t cap) {
    snprintf(buf, cap, "nuq%u:bucket=%u,code=%s", (unsigned)p->bits, (unsigned)p->group_size,
             p->elias ? "elias" : "fixed");
}

static pz_status nuq_validate(const pz_codec_params *p) {
    if (p->bits < 1 || p->bits > 8) return pz_fail(PZ_ERR_FORMAT, "nuq: bits %u", p->bits);
    if (p->group_mode != PZ_GROUP_BLOCK || p->group_size < 1 || p->group_size > (1u << 31))
        return pz_fail(PZ_ERR_FORMAT, "nuq: bad bucket");
    if (p->elias > 1 || (p->elias && p->bits < 2)) return pz_fail(PZ_ERR_FORMAT, "nuq: bad code field");
    if (p->scale_mode || p->round_mode || p->scale_fp32 || p->value_mode || p->per_row || p->stochastic ||
        p->fraction != 0.0f || p->budget != 0.0f)
        return pz_fail(PZ_ERR_FORMAT, "nuq: fields of other codecs set");
    return PZ_OK;
}

#define nuq_s pz_nuq_s

static size_t elias_max_bits(int bits) {
    int s = nuq_s(bits);
    return (size_t)pz_elias_gamma_bits((uint64_t)s + 1) + 1;
}

static size_t nuq_max_payload(const pz_codec_params *p, const pz_shape *s) {
    size_t n = pz_shape_numel(s), G = pz_group_count(p, s);
    if (p->elias) return 4 * G + (n * elias_max_bits(p->bits) + 7) / 8;
    return 4 * G + pz_pack_bytes(n, p->bits);
}

/* Per-element formulas (level index, code, level value, Elias code):
 * compress/core/elem_codecs.h, shared with the GPU kernels. */

/* Elias stream writer for the hot loops: MSB-first like pz_bitw. The
 * pending bits (n < 8 between groups) sit at the top of a 64-bit
 * accumulator whose lower bits are zero; codes come from a table (code ->
 * bits, length) and go in groups of `per` (at most 57 bits in all), each
 * group then stored as 8 big-endian bytes of which the whole ones are kept.
 * Where fewer than the chunk's bound + 8 bytes are left before `end` the
 * bytes are stored one by one instead: the same bytes, never past `end`. */
typedef struct {
    uint8_t *p;
    uint64_t acc;
    int n;
} ewriter;

typedef struct {
    uint32_t e[256];   /* bits << 5 | length */
    int maxlen, per;
} etable;

static void etable_init(etable *t, int b) {
    t->maxlen = 0;
    for (uint32_t c = 0; c < (1u << b); c++) {
        uint32_t v;
        int nb = pz_nuq_elias((uint8_t)c, b, &v);
        t->e[c] = v << 5 | (uint32_t)nb;
        t->maxlen = nb > t->maxlen ? nb : t->maxlen;
    }
    t->per = 56 / t->maxlen;   /* 7 pending bits + per codes < 64 */
    if (t->per > 8) t->per = 8;
}

/* appends the codes c[0..m) of b bits (bits above b ignored) */
static void ew_codes(ewriter *w, const etable *t, int b, const uint8_t *c, size_t m, const uint8_t *end) {
    uint8_t *p = w->p;
    uint64_t acc = w->acc;
    int n = w->n, per = t->per;
    uint32_t mask = (1u << b) - 1;
    int fast = (size_t)(end - p) >= (m * (size_t)t->maxlen) / 8 + 16;
    for (size_t i = 0; i < m; i += (size_t)per) {
        size_t ge = i + (size_t)per < m ? i + (size_t)per : m;
        for (size_t j = i; j < ge; j++) {
            uint32_t e = t->e[c[j] & mask];
            int len = (int)(e & 31);
            n += len;
            acc |= (uint64_t)(e >> 5) << (64 - n);
        }
        int nb = n >> 3;
        if (fast) {
            uint64_t be = __builtin_bswap64(acc);
            memcpy(p, &be, 8);
        } else {
            for (int k = 0; k < nb; k++) p[k] = (uint8_t)(acc >> (56 - 8 * k));
        }
        p += nb;
        acc = nb ? acc << (8 * nb) : acc;
        n &= 7;
    }
    w->p = p;
    w->acc = acc;
    w->n = n;
}

/* pads to a byte with zeros; returns bytes written since the start */
static size_t ew_finish_from(ewriter *w, const uint8_t *start) {
    if (w->n > 0) {
        *w->p++ = (uint8_t)(w->acc >> 56);
        w->acc = 0;
        w->n = 0;
    }
    return (size_t)(w->p - start);
}

/* the next 64 bits of the stream from bit pos, zero past the end */
static inline uint64_t er_peek(const uint8_t *p, size_t len, uint64_t pos) {
    size_t byte = (size_t)(pos >> 3);
    uint64_t w = 0;
    if (byte + 8 <= len) {
        memcpy(&w, p + byte, 8);
        w = __builtin_bswap64(w);
    } else {
        for (size_t k = 0; k < 8; k++) w = (w << 8) | (byte + k < len ? p[byte + k] : 0u);
    }
    return w << (pos & 7);
}

/* Table-driven decode of several codes per lookup: the per-code loop below
 * costs a branch and a bit count per code, and most codes are 1 to 4 bits.
 * The entry for the next ETAB_BITS bits of the stream (MSB first) holds the
 * whole codes that begin there, up to ETAB_MAX of them (their b-bit values
 * in bytes 0..6), and in byte 7 their count | the bits they take << 3. A
 * count of 0 (the first code is longer than ETAB_BITS bits, or malformed)
 * leaves that code to the per-code loop, which also says what is wrong.
 * Built per decode (2048 entries) where the tensor is large enough for the
 * lookups to repay it. */
#define ETAB_BITS 11
#define ETAB_MAX 7
#define ETAB_MIN_N (1u << 16)

static void etab_build(uint64_t *tab, int b, int sl, int zmax) {
    for (uint32_t x = 0; x < (1u << ETAB_BITS); x++) {
        uint64_t e = 0;
        int used = 0, cnt = 0;
        while (cnt < ETAB_MAX) {
            uint32_t rest = (x << used) & ((1u << ETAB_BITS) - 1);   /* bits not yet taken, at the top */
            int left = ETAB_BITS - used, z = 0;
            while (z < left && !((rest >> (ETAB_BITS - 1 - z)) & 1)) z++;
            int width = 2 * z + 1;
            if (z > zmax || width > left) break;
            uint32_t jx = (rest >> (ETAB_BITS - width)) - 1, sg = 0;
            if (jx > (uint32_t)sl) break;
            if (jx) {
                if (width + 1 > left) break;
                sg = (rest >> (ETAB_BITS - width - 1)) & 1;
                width++;
            }
            e |= (uint64_t)(jx | sg << (b - 1)) << (8 * cnt);
            cnt++;
            used += width;
        }
        tab[x] = e | (uint64_t)(cnt | used << 3) << 56;
    }
}

/* Decodes the m codes of a chunk from bit *pos (codes[] has 64 bytes of
 * slack). With a table (tab, else NULL) it takes 4 lookups (at most 44 bits
 * and 4 * ETAB_MAX codes) from each load of 57 bits of the stream while that
 * many codes are left. Otherwise, and where the table has no entry, it
 * takes in turn the run of 1 bits ahead if any (j = 0 codes, all at once)
 * and the code with j > 0 that ends it, while 16 bits (the longest code) are
 * left. Returns 0, with *pos and codes[] unspecified, at anything but
 * well-formed codes (a long zero prefix, j > s, a code past the stream's
 * end): the caller then redoes the chunk with the checked loop, which says
 * what is wrong. */
static int elias_fast(const uint8_t *cin, size_t clen, uint64_t *ppos, uint64_t total, size_t m, int b, int sl,
                      int zmax, const uint64_t *tab, uint8_t *codes) {
    uint64_t pos = *ppos;
    size_t i = 0;
    const uint32_t sgs = (uint32_t)(b - 1);
    while (i < m) {
        size_t byte = (size_t)(pos >> 3);
        uint64_t w;
        if (byte + 8 <= clen) {
            memcpy(&w, cin + byte, 8);
            w = __builtin_bswap64(w) << (pos & 7);   /* >= 57 bits of the stream */
        } else {
            w = er_peek(cin, clen, pos);              /* (zeros past the end) */
        }
        unsigned used = 0;
        if (tab && m - i >= 4 * ETAB_MAX && byte + 8 <= clen) {
            /* an entry of count 0 takes no bits, so the lookups after it
             * find it again: only the last one needs looking at */
            uint64_t e = 0;
            for (int k = 0; k < 4; k++) {
                e = tab[(w << used) >> (64 - ETAB_BITS)];
                memcpy(codes + i, &e, 8);
                i += (size_t)((e >> 56) & 7);
                used += (unsigned)(e >> 59);
            }
            if ((e >> 56) & 7 || used) {
                pos += used;
                continue;
            }
        }
        for (;;) {
            uint64_t v = w << used;                   /* used <= 57 */
            if (v >> 63) {                            /* a run of j = 0 codes */
                uint64_t nv = ~v;
                size_t t = nv ? (size_t)__builtin_clzll(nv) : 64, lim = 57 - used;
                lim = lim < m - i ? lim : m - i;
                t = t < lim ? t : lim;
                memset(codes + i, 0, 64);
                i += t;
                used += (unsigned)t;
                if (i == m || used > 57 - 16) break;  /* (a run cut at lim ends here too) */
                v = w << used;
            }
            /* v starts with 0: a code with j > 0 */
            int z = __builtin_clzll(v | 1), zc = z < zmax ? z : zmax;
            int width = 2 * zc + 1;                   /* <= 2 zmax + 1 <= 15 bits */
            uint32_t jx = (uint32_t)(v >> (64 - width)) - 1;
            uint32_t sg = (uint32_t)(v >> (63 - width)) & 1;
            used += (unsigned)width + 1;
            if ((z > zmax) | (jx > (uint32_t)sl)) return 0;
            codes[i++] = (uint8_t)(jx | sg << sgs);
            if (i == m || used > 57 - 16) break;
        }
        pos += used;
        if (pos > total) return 0;                    /* a code ran past the end */
    }
    *ppos = pos;
    return 1;
}

/* Norms of every bucket (sums of squares in the canonical order of
 * compress/core/elem_codecs.h, as the GPU sums); 0 if some value is not finite. */
static int bucket_norms(const float *x, size_t n, size_t bucket, size_t G, float *norm) {
    for (size_t g = 0; g < G; g++) {
        size_t a = g * bucket, e = a + bucket < n ? a + bucket : n;
        double acc = pz_sum_sq_canon(x + a, e - a);
        if (!isfinite(acc)) return 0;
        norm[g] = pz_nuq_norm(acc);   /* >= every |x_i| of the bucket: rounding is monotone */
        if (!isfinite(norm[g])) return 0;
    }
    return 1;
}

/* The Elias stream of n b-bit codes (what nuq_encode writes after the
 * norms): for backends that compute the codes elsewhere (compress/cuda/).
 * out holds the bound of nuq_max_payload; returns the bytes written. */
size_t pz_nuq_elias_stream(const uint8_t *codes, size_t n, int b, uint8_t *out) {
    etable t;
    etable_init(&t, b);
    ewriter w = {out, 0, 0};
    const uint8_t *end = out + (n * (size_t)t.maxlen + 7) / 8;
    for (size_t a = 0; a < n; a += PZ_CHUNK) ew_codes(&w, &t, b, codes + a, n - a < PZ_CHUNK ? n - a : PZ_CHUNK, end);
    return ew_finish_from(&w, out);
}

static pz_status nuq_encode(const pz_codec_params *p, const float *x, const pz_shape *s,
                            const pz_codec_ctx *ctx, uint8_t *out, size_t cap, size_t *len) {
    size_t n = pz_shape_numel(s), G = pz_group_count(p, s), bucket = p->group_size;
    size_t maxp = nuq_max_payload(p, s);
    if (cap < maxp) return pz_fail(PZ_ERR_SHAPE, "nuq encode: %zu bytes of room, payload needs up to %zu", cap, maxp);
    float *norm = xmalloc(G * sizeof(float));
    if (!bucket_norms(x, n, bucket, G, norm)) {
        free(norm);
        return pz_fail(PZ_ERR_ARG, "nuq encode: input holds inf or NaN");
    }
    memcpy(out, norm, 4 * G);
    const uint8_t *stream = out + 4 * G;
    uint64_t key = pz_ctx_key(ctx);
    int b = p->bits, sl = b >= 2 ? nuq_s(b) : 0;
    float smallest_inv = pz_nuq_smallest_inv(b);   /* 2^(s-1) */
    uint8_t codes[PZ_CHUNK];
    ewriter w = {out + 4 * G, 0, 0};
    etable et;
    if (p->elias) etable_init(&et, b);
    for (size_t a = 0; a < n; a += PZ_CHUNK) {
        size_t e = a + PZ_CHUNK < n ? a + PZ_CHUNK : n;
        pz_ukey k = pz_ukey_at(key, a);
        uint32_t klo = k.lo, khi = k.hi;
        for (size_t i = a; i < e;) {
            size_t g = i / bucket, re = (g + 1) * bucket < e ? (g + 1) * bucket : e, m = re - i;
            float fs = pz_nuq_fs(norm[g]), inv = pz_nuq_inv(norm[g] * fs);
            const float *xi = x + i;
            uint8_t *cd = codes + (i - a);
            uint32_t i32 = (uint32_t)i;
            if (b == 1) {
#pragma omp simd
                for (uint32_t j = 0; j < (uint32_t)m; j++)
                    cd[j] = pz_nuq_code1(xi[j], fs, inv, pz_uniform2(klo, khi, i32 + j));
            } else {
#pragma omp simd
                for (uint32_t j = 0; j < (uint32_t)m; j++)
                    cd[j] = pz_nuq_code(xi[j], fs, inv, b, sl, smallest_inv, pz_uhash2(klo, khi, i32 + j));
            }
            i = re;
        }
        if (p->elias) {
            ew_codes(&w, &et, b, codes, e - a, out + maxp);
        } else {
            pz_pack_codes(codes, e - a, b, out + 4 * G + (a / 8) * (size_t)b);
        }
    }
    free(norm);
    if (p->elias) {
        size_t used = ew_finish_from(&w, stream);
        if (4 * G + used > maxp) return pz_fail(PZ_ERR_SHAPE, "nuq encode: Elias stream overran its bound");
        *len = 4 * G + used;
    } else {
        *len = maxp;
    }
    return PZ_OK;
}

static pz_status nuq_decode(const pz_codec_params *p, const uint8_t *in, size_t len,
                            const pz_shape *s, float *out) {
    size_t n = pz_shape_numel(s), G = pz_group_count(p, s), bucket = p->group_size;
    int b = p->bits, sl = b >= 2 ? nuq_s(b) : 0;
    if (len < 4 * G) return pz_fail(PZ_ERR_FORMAT, "nuq: payload of %zu bytes, shorter than its norms", len);
    if (!p->elias && len != nuq_max_payload(p, s))
        return pz_fail(PZ_ERR_FORMAT, "nuq: payload of %zu bytes, expected %zu", len, nuq_max_payload(p, s));
    float *norm = xmalloc(G * sizeof(float));
    memcpy(norm, in, 4 * G);
    uint64_t *etab = NULL;   /* (elias_fast's table) */
    pz_status st = PZ_OK;
    for (size_t g = 0; g < G; g++)
        if (!(norm[g] >= 0.0f) || !isfinite(norm[g])) {
            st = pz_fail(PZ_ERR_FORMAT, "nuq: bucket %zu has a bad norm", g);
            goto done;
        }
    const uint8_t *cin = in + 4 * G;
    size_t clen = len - 4 * G;
    uint64_t pos = 0, total = (uint64_t)clen * 8;
    uint8_t codes[PZ_CHUNK + 64];
    if (p->elias && n >= ETAB_MIN_N) {
        etab = xmalloc(sizeof(uint64_t) << ETAB_BITS);
        etab_build(etab, b, sl, 31 - __builtin_clz((uint32_t)sl + 1));
    }
    uint64_t last_bits = 2, last_m = 1;   /* (the first chunk tries the table) */
    for (size_t a = 0; a < n; a += PZ_CHUNK) {
        size_t e = a + PZ_CHUNK < n ? a + PZ_CHUNK : n;
        if (p->elias) {
            int zmax = 31 - __builtin_clz((uint32_t)sl + 1);   /* gamma(j+1) has at most this many zeros */
            uint64_t pos0 = pos;
            /* mostly j = 0 codes (under 1.25 bits a code in the last chunk):
             * the runs of 1 bits go faster than 7 codes a lookup */
            const uint64_t *tab = etab && 4 * last_bits > 5 * (uint64_t)last_m ? etab : NULL;
            int ok = elias_fast(cin, clen, &pos, total, e - a, b, sl, zmax, tab, codes);
            last_bits = pos - pos0;
            last_m = e - a;
            if (ok) goto values;
            pos = pos0;
            uint64_t win = er_peek(cin, clen, pos), wpos = pos;   /* window of >= 57 bits from wpos */
            for (size_t i = 0; i < e - a; i++) {
                if (pos - wpos > 57 - 17) {   /* a code takes at most 2*7+2 = 16 bits */
                    win = er_peek(cin, clen, pos);
                    wpos = pos;
                }
                uint64_t w = win << (pos - wpos);
                int z = w ? __builtin_clzll(w) : 64;
                uint32_t jx = 0, sg = 0;
                int width = 2 * z + 1;
                if (z <= zmax) {
                    jx = (uint32_t)(w >> (64 - width)) - 1;
                    if (jx) {
                        sg = (uint32_t)(w >> (63 - width)) & 1;
                        width++;
                    }
                }
                if (z > zmax || jx > (uint32_t)sl || pos + (uint64_t)width > total) {
                    st = pz_fail(PZ_ERR_FORMAT, "nuq: bad or truncated Elias code at element %zu", a + i);
                    goto done;
                }
                pos += (uint64_t)width;
                codes[i] = (uint8_t)(jx | (sg << (b - 1)));
            }
        } else if (pz_unpack_codes(cin + (a / 8) * (size_t)b, pz_pack_bytes(e - a, b), e - a, b, codes) != PZ_OK) {
            st = pz_fail(PZ_ERR_FORMAT, "nuq: non-zero padding after the last code");
            goto done;
        }
    values:
        for (size_t i = a; i < e;) {
            size_t g = i / bucket, re = (g + 1) * bucket < e ? (g + 1) * bucket : e, m = re - i;
            float nv = norm[g];
            const uint8_t *cd = codes + (i - a);
            float *o = out + i;
#pragma omp simd
            for (size_t j = 0; j < m; j++) o[j] = pz_nuq_value(cd[j], nv, b, sl);
            i = re;
        }
    }
    if (p->elias) {
        /* the stream must end in the last byte, padded with zeros */
        uint64_t rest = total - pos;
        if (rest >= 8 || (rest && (er_peek(cin, clen, pos) >> (64 - rest)) != 0)) {
            st = pz_fail(PZ_ERR_FORMAT, "nuq: Elias stream has %llu bits past its last code", (unsigned long long)rest);
            goto done;
        }
    }
done:
    free(etab);
    free(norm);
    return st;
}

const pz_codec_impl pz_codec_nuq = {"nuq", PZ_CODEC_NUQ, nuq_parse, nuq_format, nuq_validate,
                                    nuq_max_payload, nuq_encode, nuq_decode, NULL, NULL};
