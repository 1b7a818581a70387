/* hadamard.c: hadamard(C[,block=N]), a randomized Hadamard rotation of
 * every row's channels around an inner codec C (compress/README.md,
 * "hadamard"; the arithmetic in compress/wrappers/hadamard_elem.h).
 *
 * Encode: y = H_N D x per block of N channels of each row (the shape's last
 * dim is C, rows are the rest); the payload is C's message of y, same
 * shape, same ctx (sample ids included, so aq() may sit inside). Decode: C
 * decodes y' and the output is D H_N y'. The rotation spreads an outlier
 * channel over its block, so a grid scaled to the block's largest value
 * wastes less of its range on the other channels.
 *
 * flags (header byte 7 when hadamard is the outermost wrapper) = log2 N,
 * 0..16. The decoder derives N itself (block= or the default for the
 * message's C) and refuses a message whose flags say otherwise.
 * No state across messages: the signs follow from the ctx (seed, edge,
 * dir) and are cached per C and key. Inputs with inf or NaN (or whose
 * rotation overflows) are refused (PZ_ERR_ARG): the rotation would spread
 * them over their whole block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec_ext.h"
#include "compress/wrappers/hadamard.h"
#include "compress/wrappers/hadamard_elem.h"
#include "compress/core/spec.h"
#include "compress/wrappers/wrapper_priv.h"
#include "compress/wrappers/wrappers.h"
#include "base/isa.h"
#include "base/mem.h"

/* ---- the transform (compress/wrappers/fwht.c, one copy per ISA level) ------------- */

#ifdef PZ_ISA_MULTI
int pz_hadamard_forward_v3(const float *x, float *y, size_t rows, size_t C, int logn, const float *signs);
void pz_hadamard_inverse_v3(float *v, size_t rows, size_t C, int logn, const float *signs);
#endif

/* The level base/isa.h chooses, as registry.c does for the codec tables,
 * except that AVX-512 machines run the x86-64-v3 copy: the butterflies are
 * bound by loads and stores, and the 512-bit copy measured slower (4.1 vs
 * 5.4 GB/s forward, C = 1024, N = 256). Every copy gives the same bits. */
static int forward(const float *x, float *y, size_t rows, size_t C, int logn, const float *signs) {
#ifdef PZ_ISA_MULTI
    if (pz_isa_level() >= PZ_ISA_AVX2) return pz_hadamard_forward_v3(x, y, rows, C, logn, signs);
#endif
    return pz_hadamard_forward(x, y, rows, C, logn, signs);
}

static void inverse(float *v, size_t rows, size_t C, int logn, const float *signs) {
#ifdef PZ_ISA_MULTI
    if (pz_isa_level() >= PZ_ISA_AVX2) {
        pz_hadamard_inverse_v3(v, rows, C, logn, signs);
        return;
    }
#endif
    pz_hadamard_inverse(v, rows, C, logn, signs);
}

void pz_hadamard_signs(uint64_t key, float *signs, size_t C) {
    for (size_t c = 0; c < C; c++) signs[c] = pz_hd_sign(key, c);
}

/* ---- block size --------------------------------------------------------------- */

static int log2_exact(uint64_t n) {
    int l = 0;
    while (((uint64_t)1 << l) < n) l++;
    return ((uint64_t)1 << l) == n ? l : -1;
}

/* log2 of the block for this shape: block= or the default for its C */
static pz_status block_log(const pz_wrapper *w, const pz_shape *s, int *logn) {
    int64_t C = s->dims[s->ndim - 1];
    if (!w->hd_block) {
        *logn = pz_hd_default_log(C);
        return PZ_OK;
    }
    if (C % (int64_t)w->hd_block) {
        char a[96];
        pz_shape_format(s, a, sizeof a);
        return pz_fail(PZ_ERR_SHAPE, "hadamard: block=%u does not divide the %lld channels of shape %s",
                       w->hd_block, (long long)C, a);
    }
    *logn = log2_exact(w->hd_block);
    return PZ_OK;
}

/* the decoder's side: flags must be the block it derives itself */
static pz_status check_flags(const pz_wrapper *w, uint8_t flags, const pz_shape *s, int *logn) {
    pz_status st = block_log(w, s, logn);
    if (st) return pz_wrap_rewrap(st, PZ_ERR_FORMAT, "hadamard: message");
    if (flags != *logn)
        return pz_fail(PZ_ERR_FORMAT, "hadamard: message has flags 0x%02x, this decoder uses block %u (flags %d) "
                       "for %lld channels", flags, 1u << *logn, *logn, (long long)s->dims[s->ndim - 1]);
    return PZ_OK;
}

pz_status pz_hadamard_block(pz_codec *c, const pz_shape *s, int *logn) {
    return block_log(pz_codec_wrapper(c), s, logn);
}

pz_status pz_hadamard_check_flags(pz_codec *c, uint8_t flags, const pz_shape *s, int *logn) {
    return check_flags(pz_codec_wrapper(c), flags, s, logn);
}

uint64_t pz_hadamard_key(const pz_codec_ctx *ctx) { return pz_hd_key(ctx); }

/* the signs for C channels and this ctx, cached */
static pz_status signs_for(pz_wrapper *w, const pz_codec_ctx *ctx, size_t C, const float **out) {
    uint64_t key = pz_hd_key(ctx);
    if (!w->hd_signs || w->hd_signs_n != C || w->hd_key != key) {
        float *s = realloc(w->hd_signs, C * sizeof(float));
        if (!s) return pz_fail(PZ_ERR_NOMEM, "hadamard: cannot allocate %zu signs", C);
        w->hd_signs = s;
        pz_hadamard_signs(key, s, C);
        w->hd_signs_n = C;
        w->hd_key = key;
    }
    *out = w->hd_signs;
    return PZ_OK;
}

/* ---- encode / decode ------------------------------------------------------------ */

static pz_status hd_encode(pz_wrapper *w, const float *x, const pz_shape *shape, const pz_codec_ctx *ctx,
                           uint8_t *payload, size_t cap, size_t *len, uint8_t *flags) {
    *len = 0;
    *flags = 0;
    size_t n;
    int logn = 0;
    float *y = NULL;
    const float *signs = NULL;
    pz_status st = pz_wrap_check_shape("hadamard", shape, &n);
    if (!st) st = block_log(w, shape, &logn);
    if (st) return st;
    size_t C = (size_t)shape->dims[shape->ndim - 1];
    if (!n) return pz_fail(PZ_ERR_SHAPE, "hadamard: empty tensor");
    if ((st = pz_wrap_scratch(w, 0, n, &y)) || (st = signs_for(w, ctx, C, &signs))) return st;
    /* inf or NaN in x, or block sums beyond the float range */
    if (!forward(x, y, n / C, C, logn, signs))
        return pz_fail(PZ_ERR_ARG, "hadamard encode: input holds inf or NaN (or its rotation overflows)");
    st = pz_codec_encode(w->inner, y, shape, ctx, payload, cap, len);
    if (st) return pz_wrap_rewrap(st, PZ_ERR_SHAPE, "hadamard");
    *flags = (uint8_t)logn;
    return PZ_OK;
}

static pz_status hd_decode(pz_wrapper *w, uint8_t flags, const uint8_t *payload, size_t len,
                           const pz_shape *shape, const pz_codec_ctx *ctx, float *out) {
    size_t n;
    int logn = 0;
    const float *signs = NULL;
    pz_status st = pz_wrap_check_shape("hadamard", shape, &n);
    if (st) return st;
    if ((st = check_flags(w, flags, shape, &logn))) return st;
    size_t C = (size_t)shape->dims[shape->ndim - 1];
    if ((st = signs_for(w, ctx, C, &signs))) return st;
    if ((st = pz_wrap_decode_exact(w->inner, "hadamard: message", payload, len, ctx, out, shape))) return st;
    inverse(out, n / C, C, logn, signs);
    return PZ_OK;
}

/* ---- table entry (compress/core/registry.c) -------------------------------------------- */

static const char *const hd_keys_[] = {"block=", NULL};

static void hd_opts_free(void *opts) { free(opts); }

/* ",block=N" (repeated: the last counts); N a power of two, 1..2^16 */
static pz_status hd_parse_opts(const char *spec, size_t b, size_t e, void **out) {
    uint32_t *block = xcalloc(1, sizeof *block);
    for (size_t i = b; i < e;) {
        size_t kb = i + 1;
        size_t ve = pz_spec_find_opt(spec, kb, e, hd_keys_);
        size_t vb = kb + 6;   /* every option here is "block=" */
        uint64_t v;
        pz_status st = pz_spec_uint(spec, vb, spec + vb, ve - vb, 1, (uint64_t)1 << PZ_HD_MAX_LOG, &v, "block");
        if (st == PZ_OK && log2_exact(v) < 0)
            st = pz_spec_fail(spec, vb, "block must be a power of two, not %llu", (unsigned long long)v);
        if (st != PZ_OK) {
            free(block);
            return st;
        }
        *block = (uint32_t)v;
        i = ve;
    }
    *out = block;
    return PZ_OK;
}

static pz_status hd_create(void *opts, pz_codec *inner, pz_wrapper **out) {
    uint32_t block = opts ? *(uint32_t *)opts : 0;
    free(opts);
    pz_status st = pz_wrapper_create(PZ_WRAP_HADAMARD, NULL, inner, out);
    if (st || !block) return st;
    pz_wrapper *w = *out;
    w->hd_block = block;
    const char *is = pz_codec_spec(inner);
    size_t cap = strlen(is) + 32;
    char *spec = xmalloc(cap);
    snprintf(spec, cap, "hadamard(%s,block=%u)", is, block);
    free(w->spec);
    w->spec = spec;
    return PZ_OK;
}

/* scratch for y (encode) and the signs of one row */
static size_t hd_state_bound(const pz_wrapper *w, const pz_shape *s) {
    (void)w;
    return (pz_shape_numel(s) + (size_t)s->dims[s->ndim - 1]) * sizeof(float);
}

/* flags = log2 of a block that divides C */
static int hd_msg_opts(uint8_t flags, const pz_shape *s, char *buf, size_t cap) {
    int64_t C = s->dims[s->ndim - 1];
    snprintf(buf, cap, "%s", "");
    if (flags > PZ_HD_MAX_LOG || C % ((int64_t)1 << flags)) return 0;
    if (flags != pz_hd_default_log(C)) snprintf(buf, cap, ",block=%u", 1u << flags);
    return 1;
}

const pz_wrap_impl pz_wrap_hadamard = {
    .name = "hadamard", .kind = PZ_WRAP_HADAMARD, .stateful_decoder = 0, .opt_keys = hd_keys_,
    .parse_opts = hd_parse_opts, .free_opts = hd_opts_free, .create = hd_create, .free = pz_wrapper_free,
    .spec = pz_wrapper_spec, .inner = pz_wrapper_inner, .warmup = pz_wrapper_warm,
    .max_payload = pz_wrapper_max_payload, .encode = hd_encode, .decode = hd_decode,
    .state_bytes = pz_wrapper_state_bytes, .state_bound = hd_state_bound, .msg_opts = hd_msg_opts};
