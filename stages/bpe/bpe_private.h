/* bpe_private.h: what stages/bpe/bpe_files.c (reading tokenizer files into a
 * pz_bpe) and stages/bpe/bpe.c (encoding and decoding with it) share: the
 * tokenizer's layout and the small helpers both use. Included only by those
 * two files; the API is bpe.h. */
#ifndef PZ_STAGES_BPE_PRIVATE_H
#define PZ_STAGES_BPE_PRIVATE_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include "stages/bpe/bpe.h"
#include "base/status.h"

#include <pcre2.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static inline size_t buf_put(buf *b, const void *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n + 1) c *= 2;
        b->p = realloc(b->p, c);
        if (!b->p) pz_die("out of memory");
        b->cap = c;
    }
    size_t at = b->n;
    if (n) memcpy(b->p + at, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return at;
}

static inline void *grow(void *p, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    p = realloc(p, c * size);
    if (!p) pz_die("out of memory");
    *cap = c;
    return p;
}

static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static inline uint64_t hash_pair(uint32_t a, uint32_t b) {
    uint64_t h = ((uint64_t)a << 32 | b) * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 31);
}

/* ---------------------------------------------------------------- the tokenizer */

typedef struct {
    uint64_t key;      /* a << 32 | b */
    uint32_t rank;     /* UINT32_MAX: empty */
    uint32_t id;
} merge_slot;

struct pz_bpe {
    uint32_t n_vocab;
    buf bytes;                  /* every token's bytes */
    uint32_t *tok_off, *tok_len;
    uint8_t *tok_kind;          /* 0 no token, 1 byte-level vocabulary, 2 added */
    uint32_t *vmap, vmask;      /* vocabulary bytes -> id + 1 (0 empty) */
    merge_slot *mmap;
    uint32_t mmask, nmerges;
    int32_t byte_id[256];       /* the token of each single byte, or -1 */
    uint32_t *added;            /* (nadded) ids of the added tokens, cut out of text */
    int nadded;
    pcre2_code *re;
    int jit;
};

static inline const merge_slot *merge_find(const pz_bpe *b, uint32_t x, uint32_t y) {
    uint64_t key = (uint64_t)x << 32 | y;
    for (uint32_t i = (uint32_t)hash_pair(x, y) & b->mmask;; i = (i + 1) & b->mmask) {
        const merge_slot *m = &b->mmap[i];
        if (m->rank == UINT32_MAX) return NULL;
        if (m->key == key) return m;
    }
}

#endif
