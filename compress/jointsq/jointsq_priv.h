/* jointsq_priv.h: what the JointSQ files share (compress/jointsq/jointsq.c:
 * spec, geometry, the scale search, encode; jointsq_assign.c: the model, the
 * item arrays and, on a sample, every group's class; jointsq_solve.c: item
 * errors; jointsq_pass.c: the assignment pass over all groups; jointsq_wire.c: the map and
 * the value streams; jointsq_read.c: decode). The format and the algorithm
 * are described at the top of jointsq.c. Private to these files (and the
 * tests); the codec is reached through its table. */
#ifndef PZ_COMPRESS_JOINTSQ_PRIV_H
#define PZ_COMPRESS_JOINTSQ_PRIV_H

#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("prefer-vector-width=512")
#endif
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec_impl.h"
#include "compress/core/elem.h"
#include "compress/core/kselect.h"
#include "compress/jointsq/mckp.h"
#include "compress/core/spec.h"
#include "base/mem.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "jointsq assumes a little-endian host"
#endif

#define JSQ_DEFAULT_GROUP 1
#define JSQ_MAX_GROUP 4096
#define JSQ_MAX_K 12             /* Rice parameter of the map */
#define JSQ_MAX_BITS 32.0
#define JSQ_RESERVE 121          /* bits: header byte, 3 scales, map pad, 2/4-bit stream pads */
#define JSQ_CANDIDATES 4         /* scale candidates tried, then one refinement */
/* s_4 candidates: the group magnitude at these fractions of groups from the top (0: max) */
static const double __attribute__((unused)) jsq_q4[JSQ_CANDIDATES] = {1.0 / 8, 1.0 / 32, 1.0 / 128, 1.0 / 512};

static const int __attribute__((unused)) jsq_width[4] = {0, 2, 4, 8};
static const int __attribute__((unused)) jsq_L[4] = {0, 1, 7, 127};


/* ---- vector helpers ---- */

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI2__)
#define JSQ_VEC 1
#endif

#define JSQ_CH 4096              /* elements per chunk of the value loops (multiple of 64) */
#define JSQ_BLOCK 1024           /* items per block of the assignment pass */
#define JSQ_SAMPLE_ELEMS 262144  /* sampled items hold at most about this many elements */
#define JSQ_YMAX 16777216.0f

/* bit i set iff p[i] != 0, i < 64 */
static inline uint64_t nz64(const uint8_t *p) {
#if defined(JSQ_VEC)
    __m512i v = _mm512_loadu_si512((const void *)p);
    return _mm512_test_epi8_mask(v, v);
#elif defined(__AVX2__)
    const __m256i z = _mm256_setzero_si256();
    uint32_t lo = (uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)p), z));
    uint32_t hi = (uint32_t)_mm256_movemask_epi8(
        _mm256_cmpeq_epi8(_mm256_loadu_si256((const __m256i *)(const void *)(p + 32)), z));
    return ~((uint64_t)hi << 32 | lo);
#else
    uint64_t m = 0;
    for (int j = 0; j < 64; j++) m |= (uint64_t)(p[j] != 0) << j;
    return m;
#endif
}


/* The solver's tuning: defaults are those every message is made with; the
 * tests shrink the bracket and the candidate buffer so the retry, narrowing
 * and fallback paths run. One copy for every instruction-set level
 * (compress/jointsq/jointsq_tuning.c is not compiled per level). */
typedef struct {
    size_t sample;      /* items sampled for the scale search and the bracket (16384) */
    double delta;       /* the bracket: sample capacity * (1 -+ delta) (0.03) */
    size_t ccap_min;    /* candidates kept: ng / 32 + ccap_min (65536) */
} pz_jsq_tuning;
extern pz_jsq_tuning pz_jsq_tune;
#define PZ_JSQ_TUNING_DEFAULT {16384, 0.03, 65536}

typedef struct {
    size_t n, G, ng;
    size_t pmax;       /* budget in bytes: floor(floor(bits*n)/8) */
} jsq_geom;

typedef struct {
    float invM;            /* errors are in units of M^2, M = max |x| */
    float s[4];            /* scales: a group may take width c iff its max |x| <= s[c] */
    float invD[4], D2[4];  /* 1 / normalised step, normalised step squared */
} jsq_model;

/* Candidates' positions, picks at lam_hi and magnitudes (bits of the group's
 * max |x|), beside their items in a pz_mckp_soa. */
typedef struct {
    uint32_t *id, *hi, *key;
    void *blk;
} jsq_cside;

typedef struct {
    uint64_t cost_hi, cost_lo;   /* sums of the picked costs */
    size_t ncand;                /* candidates (may exceed ccap: then not all stored) */
    uint64_t nh[4];              /* groups per pick at lam_hi */
    uint32_t nmax[4];            /* max |x| (bits) per pick at lam_hi over the non-candidates */
    uint32_t ucost[4];           /* the candidates' costs when all the same (cand->ucost) */
} jsq_passb;

/* ---- encode's shared state (jointsq.c, jointsq_assign.c) ----
 * Scratch of megabytes comes from the codec object's pz_scratch
 * (codec_impl.h), kept from one encode to the next: fresh pages, huge or
 * not, cost the kernel's zeroing on every call (about 12 MB per 4M-element
 * call, as much time as the pass over the groups). Its slots: */
enum { JSQ_S_GM, JSQ_S_SX, JSQ_S_SGM, JSQ_S_SAMPLE, JSQ_S_CLS, JSQ_S_CAND, JSQ_S_CSIDE, JSQ_S_CCH, JSQ_S_MCKP };

/* Candidates a pass over all groups keeps before a retry takes memory of
 * its own: ng / 32 + the tuning's minimum, at most ng. */
static inline size_t pz_jsq_default_ccap(size_t ng) {
    size_t ccap = ng / 32 + pz_jsq_tune.ccap_min;
    return ccap < ng ? ccap : ng;
}


/* What the phases of one encode share: the input, what the first look at it
 * found, and the sample the scales are searched on. */
typedef struct {
    const float *x;
    jsq_geom g;
    pz_scratch *scr;
    const float *gm;          /* group maxima (G > 1), else NULL: |x| is its own */
    float M;                  /* max |x|: s_8, and the unit of the model's errors */
    uint64_t room_bits;       /* map + values: the budget less JSQ_RESERVE */
    int exact;                /* the sample is the whole tensor */
    const float *sx, *sgm;    /* the sample's elements and group maxima */
    size_t snel, ms;          /* its elements and groups */
    double sfrac;             /* its share: sample capacity = capacity * sfrac */
} jsq_enc;

/* The scale search's result on the sample. */
typedef struct {
    float sc[4];
    int k;
    float lam;
    double err;
    uint8_t *cls;             /* the sample's classes (ms, xmalloc: the caller frees) */
} jsq_best;

/* Every group's class when the scales were searched on a sample: bracket the
 * critical multiplier on the sample, pass over all groups, then solve exactly
 * among the candidates. Returns 1 with the class counts and maxima in
 * gcount, cmax, 0 when the caller must count them. */
int pz_jsq_assign_all(const jsq_enc *e, const jsq_best *best, uint8_t *cls, size_t gcount[4], uint32_t cmax[4]);

/* jointsq.c */
pz_status pz_jsq_geom(const pz_codec_params *p, const pz_shape *s, jsq_geom *g);

/* Item costs in units of 2^-k bits (see jointsq.c's header comment). */
static inline void jsq_costs(int k, uint32_t sz, uint32_t c[4]) {
    c[0] = 1;
    c[1] = (1 + (uint32_t)k + 1 + 2 * sz) << k;
    c[2] = (1 + (uint32_t)k + 2 + 4 * sz) << k;
    c[3] = (1 + (uint32_t)k + 2 + 8 * sz) << k;
}

/* jointsq_solve.c, jointsq_pass.c, jointsq_assign.c */
void pz_jsq_model(jsq_model *md, float M, const float s[4]);
/* Model errors of the items (groups of G, the last one shorter) covering
 * x[0..nel), the same bits at every level (gm: group maxima, NULL when G == 1) */
void pz_jsq_errs(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md, float *e0, float *e1,
                 float *e2, float *e3);
void pz_jsq_soa_fill(const float *x, size_t nel, size_t G, const float *gm, const jsq_model *md, int k,
                          pz_mckp_soa *s, uint32_t *ucost);
/* items (candidates) of n (cap): the bytes, the arrays in a block of that
 * size, or in a new one (*blk, or .blk, to free) */
size_t pz_jsq_soa_bytes(size_t n);
pz_mckp_soa pz_jsq_soa_at(void *blk, size_t n);
pz_mckp_soa pz_jsq_soa_alloc(size_t n, void **blk);
int pz_jsq_best_k(const uint8_t *cls, size_t ng);
size_t pz_jsq_cside_bytes(size_t cap);
jsq_cside pz_jsq_cside_at(void *blk, size_t cap);
jsq_cside pz_jsq_cside_alloc(size_t cap);
void pz_jsq_pass_b(const float *x, const jsq_geom *g, const float *gm, const jsq_model *md, int k,
                        float lam_lo, float lam_hi, uint8_t *cls, pz_mckp_soa *cand, jsq_cside *cs_,
                        size_t ccap, jsq_passb *r);

/* jointsq_wire.c, jointsq_read.c */
void pz_jsq_class_stats(const uint8_t *cls, size_t ng, const float *mag, size_t cnt[4], uint32_t mx[4]);
uint64_t pz_jsq_write_map(const uint8_t *cls, size_t ng, int k, uint8_t *out);
size_t pz_jsq_pack(const uint8_t *c, size_t cnt, int w, uint8_t *out);
/* The map writer's state while the map's codes (Rice parameter k > 0,
 * groups of 1) are written in the values' sweep: pz_jsq_codes with a map
 * state appends the codes of its elements' groups, pz_jsq_map_finish ends
 * the map. Where JSQ_FUSED_MAP is defined (x86-64-v3) the sweep takes the
 * kept elements once for both, instead of the map's own scan of every
 * group (a fifth of a jointsq:2 encode's instructions); the values then go
 * through a buffer, since the map's length sets their offsets. */
typedef struct {
    uint8_t *p;          /* the byte of the next bit */
    uint64_t acc;        /* the n < 8 pending bits */
    unsigned n;
    int k;
    size_t last;         /* the group after the last kept one */
} jsq_mapst;
#if defined(__AVX2__) && !defined(JSQ_VEC)
#define JSQ_FUSED_MAP 1
#endif
void pz_jsq_codes(const float *x, const uint8_t *ec, size_t cnt, uint32_t i0, pz_ukey uk, const float inv[4],
                       uint8_t *st[4], size_t ns[4], jsq_mapst *ms);
uint64_t pz_jsq_map_finish(jsq_mapst *ms, size_t ng, const uint8_t *out);
pz_status pz_jsq_decode(const pz_codec_params *p, const uint8_t *payload, size_t len,
                            const pz_shape *s, float *out);
void pz_jsq_expand_cls(const uint8_t *cls, size_t G, size_t i0, size_t cnt, uint8_t *ec);

#endif
