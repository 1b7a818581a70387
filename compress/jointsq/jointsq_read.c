/* jointsq_read.c: JointSQ's decode: the width map read back (Rice runs and
 * class codes), the value streams unpacked and scaled (the format:
 * compress/jointsq/jointsq.c; the writer: compress/jointsq/jointsq_wire.c). */
#include "compress/jointsq/jointsq_priv.h"

/* the run of one bits at the bottom of acc; 64 when every bit is one
 * (__builtin_ctzll(0) is undefined) */
static inline int ones_run(uint64_t acc) { return ~acc ? __builtin_ctzll(~acc) : 64; }

/* Unpacks cnt codes starting at code index `at` of a w-bit stream (at a
 * multiple of 8 / w codes... at is a multiple of 8) into c; returns non-zero
 * when a code is the invalid 2^w - 1. */
static int jsq_unpack(const uint8_t *in, size_t at, size_t cnt, int w, uint8_t *c) {
    const uint8_t *p = in + at * (size_t)w / 8;
    uint8_t bad = (uint8_t)((1u << w) - 1), any = 0;
    if (w == 8) {
        memcpy(c, p, cnt);
    } else if (w == 4) {
        size_t full = cnt / 2;
#pragma omp simd
        for (size_t j = 0; j < full; j++) {
            c[2 * j] = p[j] & 15;
            c[2 * j + 1] = (uint8_t)(p[j] >> 4);
        }
        if (cnt & 1) c[cnt - 1] = p[full] & 15;
    } else {
        size_t full = cnt / 4;
#pragma omp simd
        for (size_t j = 0; j < full; j++) {
            c[4 * j] = p[j] & 3;
            c[4 * j + 1] = (p[j] >> 2) & 3;
            c[4 * j + 2] = (p[j] >> 4) & 3;
            c[4 * j + 3] = (uint8_t)(p[j] >> 6);
        }
        for (size_t j = 0; j < (cnt & 3); j++) c[4 * full + j] = (p[full] >> (2 * j)) & 3;
    }
#pragma omp simd reduction(| : any)
    for (size_t j = 0; j < cnt; j++) any |= (uint8_t)(c[j] == bad);
    return any;
}

/* ---- decode ---- */

typedef struct {
    const uint8_t *p, *end, *start;
    uint64_t acc;      /* next bits, LSB first; bits above n are zero */
    int n;
} mapr_;

static inline void mr_refill(mapr_ *r) {
    if (r->end - r->p >= 8) {
        uint64_t w;
        memcpy(&w, r->p, 8);
        r->acc |= w << r->n;
        int adv = (63 - r->n) >> 3;
        r->p += adv;
        r->n += adv * 8;
        r->acc &= (1ull << r->n) - 1;          /* keep the bits above n zero */
    } else {
        while (r->n <= 56 && r->p < r->end) {
            r->acc |= (uint64_t)*r->p++ << r->n;
            r->n += 8;
        }
    }
}
static inline uint32_t mr_take(mapr_ *r, int nb) {    /* nb <= n, nb < 32 */
    uint32_t v = (uint32_t)(r->acc & ((1ull << nb) - 1));
    r->acc >>= nb;
    r->n -= nb;
    return v;
}

/* k = 0: a dropped group is the bit 1, a kept one the bit 0 and its class
 * code (see jsq_write_map_k0), so the map can be read group by group. The
 * table maps the next JSQ_TBITS bits to the classes of the whole group
 * codes they hold (at most 8: one byte each, written with one 8-byte
 * store), how many, the bits they take and their count per class. */
#define JSQ_TBITS 10

typedef struct {
    uint64_t cls;     /* classes of the groups, byte j = group j (0 past them) */
    uint32_t meta;    /* groups (bits 0-3), bits used (4-7), kept of class 1, 2, 3 (8-11, 12-15, 16-19) */
    uint32_t pad;
} jsq_k0ent;

static jsq_k0ent *jsq_map_table_k0(void) {
    jsq_k0ent *tab = xmalloc(sizeof *tab << JSQ_TBITS);
    for (uint32_t w = 0; w < (1u << JSQ_TBITS); w++) {
        uint64_t cls = 0;
        unsigned bits = 0, g = 0, cnt[4] = {0, 0, 0, 0};
        while (g < 8) {
            unsigned c, len;
            if ((w >> bits) & 1) {
                c = 0;
                len = 1;
            } else if (bits + 2 <= JSQ_TBITS && !((w >> (bits + 1)) & 1)) {
                c = 1;
                len = 2;
            } else if (bits + 3 <= JSQ_TBITS) {
                c = 2 + ((w >> (bits + 2)) & 1);
                len = 3;
            } else {
                break;                               /* the next code does not fit */
            }
            cls |= (uint64_t)c << (8 * g);
            cnt[c]++;
            bits += len;
            g++;
        }
        tab[w].cls = cls;
        tab[w].meta = g | bits << 4 | cnt[1] << 8 | cnt[2] << 12 | cnt[3] << 16;
        tab[w].pad = 0;
    }
    return tab;
}

/* A kept group after its run (the run took `used` bits): its class code,
 * "0" = 2-bit, "10" = 4-bit, "11" = 8-bit, into *cls; counts[0..2] count the
 * kept groups, those of 4 or 8 bits, and those of 8 bits. */
static inline void mr_kept(mapr_ *mr, int used, uint8_t *cls, size_t counts[3]) {
    unsigned b = (unsigned)(mr->acc >> used) & 3u;
    used += 1 + (int)(b & 1);
    mr->acc >>= used;
    mr->n -= used;
    *cls = (uint8_t)((b & 1) ? 2 + (b >> 1) : 1);
    counts[0]++;
    counts[1] += b & 1;
    counts[2] += b == 3;
}

/* Reads the width map (Rice runs and class codes) into cls[] (zeroed);
 * counts the groups per class. Returns non-zero on a malformed map; *state
 * is the reader after the map (for its end and padding). */
static __attribute__((noinline)) int jsq_read_map(mapr_ *state, size_t ng, int k, uint8_t *cls, size_t gcount[4]) {
    mapr_ mr = *state;
    int err = 0;
    size_t pos = 0;
    uint64_t maxq = (uint64_t)(mr.end - mr.start + 1) * 8;
    const uint64_t kmask = ((uint64_t)1 << k) - 1;
    size_t cnt3[3] = {0, 0, 0};   /* kept groups; of them 4- or 8-bit; 8-bit */
    /* table path (k = 0, the short codes of large budgets): up to 8 groups
     * per look-up, while at least JSQ_TBITS bits of data are left and the
     * map is more than 8 groups from its end (the end and the final run go
     * the per-code way below, which may start in the middle of a run: with
     * k = 0 each 1 bit of a run is one dropped group) */
    if (ng >= 16384 && k == 0) {
        jsq_k0ent *tab = jsq_map_table_k0();
        uint64_t packed = 0;                        /* kept per class, 16 bits each, emptied every 4096 look-ups */
        unsigned since = 0;
        for (;;) {
            if (mr.n < 48) mr_refill(&mr);
            if (ng - pos <= 8 || mr.n < JSQ_TBITS) break;
            const jsq_k0ent *e = &tab[mr.acc & ((1u << JSQ_TBITS) - 1)];
            uint32_t m = e->meta;
            memcpy(cls + pos, &e->cls, 8);
            pos += m & 15u;
            mr.acc >>= (m >> 4) & 15u;
            mr.n -= (int)((m >> 4) & 15u);
            packed += (uint64_t)(m >> 8 & 15u) | (uint64_t)(m >> 12 & 15u) << 16 | (uint64_t)(m >> 16 & 15u) << 32;
            if (++since == 4096) {
                cnt3[0] += (packed & 0xffff) + (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
                cnt3[1] += (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
                cnt3[2] += packed >> 32 & 0xffff;
                packed = 0;
                since = 0;
            }
        }
        cnt3[0] += (packed & 0xffff) + (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
        cnt3[1] += (packed >> 16 & 0xffff) + (packed >> 32 & 0xffff);
        cnt3[2] += packed >> 32 & 0xffff;
        free(tab);
    }
    for (;;) {
        /* fast path: the whole code is in the bit buffer */
        if (mr.n < 48) mr_refill(&mr);
        int ones = ones_run(mr.acc);                 /* <= n: bits above n are zero */
        if (ones + 3 + k <= mr.n) {
            uint64_t r = ((uint64_t)ones << k) | ((mr.acc >> (ones + 1)) & kmask);
            int used = ones + 1 + k;
            if (r >= ng - pos) {
                if (r != ng - pos) { err = 1; break; }
                mr.acc >>= used;
                mr.n -= used;
                break;                                       /* final run */
            }
            pos += (size_t)r;
            mr_kept(&mr, used, &cls[pos], cnt3);
            pos++;
            continue;
        }
        /* slow path: long runs, the end of the data */
        uint64_t q = 0;
        for (;;) {
            if (mr.n < 57) mr_refill(&mr);
            if (mr.n == 0) { err = 1; break; }
            ones = ones_run(mr.acc);
            if (ones < mr.n) {
                q += (uint64_t)ones;
                mr.acc >>= ones;
                mr.acc >>= 1;
                mr.n -= ones + 1;
                break;
            }
            q += (uint64_t)mr.n;
            mr.acc = 0;
            mr.n = 0;
            if (q > maxq) { err = 1; break; }
        }
        if (err) break;
        if (mr.n < k + 2) mr_refill(&mr);
        if (mr.n < k) { err = 1; break; }
        uint64_t r = k ? mr_take(&mr, k) : 0;
        r |= q << k;
        if (r > ng - pos) { err = 1; break; }
        pos += (size_t)r;
        if (pos == ng) break;                              /* final run */
        if (mr.n < 1) { err = 1; break; }
        int c = 1;
        if (mr_take(&mr, 1)) {
            if (mr.n < 1) { err = 1; break; }
            c = 2 + (int)mr_take(&mr, 1);
        }
        cls[pos] = (uint8_t)c;
        cnt3[1] += c >= 2;
        cnt3[2] += c == 3;
        cnt3[0]++;
        pos++;
    }
    gcount[3] = cnt3[2];
    gcount[2] = cnt3[1] - cnt3[2];
    gcount[1] = cnt3[0] - cnt3[1];
    *state = mr;
    return err;
}

/* The width map (classes into cls, group counts per class) and the layout
 * it implies: elements per class, the offset of the scales and of each
 * class's value stream; the map's padding must be zero and the sizes must
 * add up to the payload's length. Then each used class's scale, as the step
 * of its grid (finite and positive). */
static pz_status jsq_read_layout(const uint8_t *payload, size_t len, const jsq_geom *g, int k, uint8_t *cls,
                                 size_t gcount[4], size_t mcount[4], size_t off[4], float step[4]) {
    const size_t G = g->G, ng = g->ng;
    int err = 0;
    size_t off_sc = 0;
    mapr_ mr = {payload + 1, payload + len, payload + 1, 0, 0};
    err = jsq_read_map(&mr, ng, k, cls, gcount);
    size_t kept = gcount[1] + gcount[2] + gcount[3];
    if (!err) {
        uint64_t bitpos = (uint64_t)(mr.p - mr.start) * 8 - (uint64_t)mr.n;
        int pad = (int)((8 - bitpos % 8) % 8);
        if (pad > mr.n || (mr.acc & ((1ull << pad) - 1)) != 0) err = 1;   /* padding must be zero */
        off_sc = 1 + (size_t)((bitpos + 7) / 8);
    }
    if (err || kept == 0) return pz_fail(PZ_ERR_FORMAT, "jointsq: corrupt width map");
    for (int c = 1; c < 4; c++) mcount[c] = gcount[c] * G;
    if (g->n % G && cls[ng - 1]) mcount[cls[ng - 1]] -= G - g->n % G;
    size_t nsc = 0;
    for (int c = 1; c < 4; c++) nsc += gcount[c] > 0;
    size_t total = off_sc + 4 * nsc;
    for (int c = 1; c < 4; c++) {
        off[c] = total;
        total += (mcount[c] * (size_t)jsq_width[c] + 7) / 8;
    }
    if (total != len)
        return pz_fail(PZ_ERR_FORMAT, "jointsq: payload of %zu bytes, the width map implies %zu", len, total);
    size_t so = off_sc;
    for (int c = 1; c < 4; c++) {
        if (!gcount[c]) continue;
        float sv;
        memcpy(&sv, payload + so, 4);
        so += 4;
        if (!(sv > 0.0f) || !isfinite(sv))
            return pz_fail(PZ_ERR_FORMAT, "jointsq: bad scale for the %d-bit class", jsq_width[c]);
        step[c] = sv / (float)jsq_L[c];
    }
    return PZ_OK;
}

pz_status pz_jsq_decode(const pz_codec_params *p, const uint8_t *payload, size_t len,
                            const pz_shape *s, float *out) {
    jsq_geom g;
    pz_status st = pz_jsq_geom(p, s, &g);
    if (st != PZ_OK) return st;
    if (len == 0) {
        memset(out, 0, g.n * sizeof *out);
        return PZ_OK;
    }
    if (len > g.pmax) return pz_fail(PZ_ERR_FORMAT, "jointsq: payload of %zu bytes over the budget of %zu", len, g.pmax);
    int k = payload[0];
    if (k > JSQ_MAX_K) return pz_fail(PZ_ERR_FORMAT, "jointsq: bad Rice parameter %d", k);
    const size_t G = g.G, ng = g.ng;
    /* the classes: for G = 1 in the last n bytes of out (writing out[i]
     * later only overwrites classes of elements <= i, already read), else
     * in a buffer */
    uint8_t *cls, *clsb = NULL;
    if (G == 1) {
        cls = (uint8_t *)(void *)out + 3 * g.n;
        memset(cls, 0, ng);
    } else {
        cls = clsb = xcalloc(ng + 64, 1);
    }
    size_t gcount[4] = {0, 0, 0, 0}, mcount[4] = {0, 0, 0, 0}, off[4] = {0, 0, 0, 0};
    float step[4] = {0, 0, 0, 0};
    st = jsq_read_layout(payload, len, &g, k, cls, gcount, mcount, off, step);
    if (st != PZ_OK) {
        free(clsb);
        return st;
    }
    int err = 0;
    /* padding bits of each value stream must be zero */
    for (int c = 1; c < 4; c++) {
        size_t bits = mcount[c] * (size_t)jsq_width[c];
        if (bits % 8 && (payload[off[c] + bits / 8] >> (bits % 8)) != 0) err = 1;
    }
    /* values: codes unpacked per class into staging buffers, JSQ_CH at a time */
    uint8_t *stb = xcalloc(4 * (2 * JSQ_CH + 128), 1), *ecb = G > 1 ? xmalloc(JSQ_CH + 64) : NULL;
    uint8_t *stg[4];
    size_t sp[4] = {0, 0, 0, 0}, sa[4] = {0, 0, 0, 0}, rd[4] = {0, 0, 0, 0};
    for (int c = 0; c < 4; c++) stg[c] = stb + (size_t)c * (2 * JSQ_CH + 128);
    static const int Li[4] = {0, 1, 7, 127};
#if defined(JSQ_VEC)
    const __m512i Lt = _mm512_setr_epi32(0, 1, 7, 127, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512 St = _mm512_setr_ps(step[0], step[1], step[2], step[3], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
#elif defined(__AVX2__)
    const __m256i Lt = _mm256_setr_epi32(0, 1, 7, 127, 0, 0, 0, 0);
    const __m256 St = _mm256_setr_ps(step[0], step[1], step[2], step[3], 0, 0, 0, 0);
#endif
    for (size_t i0 = 0; i0 < g.n && !err; i0 += JSQ_CH) {
        size_t cnt = g.n - i0 < JSQ_CH ? g.n - i0 : JSQ_CH;
        const uint8_t *ec = cls + i0;
        if (G > 1) {
            pz_jsq_expand_cls(cls, G, i0, cnt, ecb);
            ec = ecb;
        }
        /* enough codes staged for this chunk: at most cnt per class */
        for (int c = 1; c < 4 && !err; c++) {
            size_t have = sa[c] - sp[c];
            if (have >= cnt || rd[c] == mcount[c]) continue;
            memmove(stg[c], stg[c] + sp[c], have);
            sp[c] = 0;
            size_t want = (2 * JSQ_CH - have) & ~(size_t)7;
            if (want > mcount[c] - rd[c]) want = mcount[c] - rd[c];
            err |= jsq_unpack(payload + off[c], rd[c], want, jsq_width[c], stg[c] + have);
            rd[c] += want;
            sa[c] = have + want;
        }
        size_t j = 0;
#if defined(JSQ_VEC)
        for (; j + 64 <= cnt; j += 64) {
            __m512i cv = _mm512_loadu_si512((const void *)(ec + j));
            __m512i codes = _mm512_setzero_si512();
            for (int c = 1; c < 4; c++) {
                __mmask64 m = _mm512_cmpeq_epi8_mask(cv, _mm512_set1_epi8((char)c));
                codes = _mm512_mask_expand_epi8(codes, m, _mm512_loadu_si512((const void *)(stg[c] + sp[c])));
                sp[c] += (size_t)__builtin_popcountll(m);
            }
            uint8_t cb[64];
            _mm512_storeu_si512((void *)cb, codes);
            for (int q = 0; q < 4; q++) {
                __m512i c32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(ec + j + 16 * q)));
                __m512i v32 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(cb + 16 * q)));
                __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(v32, _mm512_permutexvar_epi32(c32, Lt)));
                _mm512_storeu_ps(out + i0 + j + 16 * q, _mm512_mul_ps(v, _mm512_permutexvar_ps(c32, St)));
            }
        }
#elif defined(__AVX2__)
        for (; j + 8 <= cnt; j += 8) {
            __m128i c8 = _mm_loadl_epi64((const __m128i *)(const void *)(ec + j)), codes = _mm_setzero_si128();
            for (int c = 1; c < 4; c++) {
                unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(c8, _mm_set1_epi8((char)c))) & 0xffu;
                __m128i src = _mm_loadl_epi64((const __m128i *)(const void *)(stg[c] + sp[c]));
                codes = _mm_or_si128(codes, pz_v8_expand_b(m, src));
                sp[c] += (size_t)__builtin_popcount(m);
            }
            __m256i c32 = _mm256_cvtepu8_epi32(c8), v32 = _mm256_cvtepu8_epi32(codes);
            __m256 v = _mm256_cvtepi32_ps(_mm256_sub_epi32(v32, _mm256_permutevar8x32_epi32(Lt, c32)));
            _mm256_storeu_ps(out + i0 + j, _mm256_mul_ps(v, _mm256_permutevar8x32_ps(St, c32)));
        }
#endif
        for (; j < cnt; j++) {
            int c = ec[j];
            uint8_t v = stg[c][sp[c]];
            sp[c] += c != 0;
            out[i0 + j] = (float)((int)v - Li[c]) * step[c];
        }
        for (int c = 1; c < 4; c++) err |= sp[c] > sa[c];
    }
    for (int c = 1; c < 4 && !err; c++) err |= rd[c] != mcount[c] || sp[c] != sa[c];
    free(stb);
    free(ecb);
    free(clsb);
    if (err) return pz_fail(PZ_ERR_FORMAT, "jointsq: corrupt value codes");
    return PZ_OK;
}

