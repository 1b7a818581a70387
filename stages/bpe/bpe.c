/* bpe.c: GPT-2's byte-level BPE with a loaded tokenizer: pre-tokenization
 * by GPT-2's pattern (PCRE2), merging by rank with a cache, encoding and
 * decoding; see bpe.h. Reading the tokenizer files: bpe_files.c. */
#include "stages/bpe/bpe_private.h"
#include "base/mem.h"

#include <stdlib.h>
#include <string.h>

#define CACHE_MAX_WORD 256        /* pieces up to this many bytes are cached */
#define CACHE_MAX_BYTES (64u << 20)
#define CACHE_MAX_SLOTS (1u << 20)  /* the cache table grows from 4096 slots up to this */

void pz_bpe_ids_push(pz_bpe_ids *v, uint32_t id) {
    if (v->n == v->cap) v->ids = grow(v->ids, &v->cap, v->n + 1, sizeof *v->ids);
    v->ids[v->n++] = id;
}

void pz_bpe_free(pz_bpe *b) {
    if (!b) return;
    PZ_FREE_ALL(b->bytes.p, b->tok_off, b->tok_len, b->tok_kind, b->vmap, b->mmap, b->added);
    if (b->re) pcre2_code_free(b->re);
    free(b);
}

uint32_t pz_bpe_n_vocab(const pz_bpe *b) { return b->n_vocab; }

long pz_bpe_added_id(const pz_bpe *b, const char *text) {
    for (int k = 0; k < b->nadded; k++) {
        uint32_t id = b->added[k];
        if (b->tok_len[id] == strlen(text) && memcmp(b->bytes.p + b->tok_off[id], text, b->tok_len[id]) == 0) return id;
    }
    return -1;
}

const uint8_t *pz_bpe_token_bytes(const pz_bpe *b, uint32_t id, size_t *len) {
    if (id >= b->n_vocab || !b->tok_kind[id]) { *len = 0; return NULL; }
    *len = b->tok_len[id];
    return b->bytes.p + b->tok_off[id];
}

/* ---------------------------------------------------------------- encoding */

typedef struct {
    uint32_t h, klen, koff, ioff, icount;   /* klen 0: empty */
} cache_slot;

/* a candidate merge of symbols pos (left) and right, valid while both still
 * hold ids a and b and are neighbours; ordered by rank, then position */
struct heap_ent {
    uint64_t key;    /* rank << 32 | pos */
    uint32_t right, a, b, merged;
};

struct pz_bpe_enc {
    const pz_bpe *b;
    pcre2_match_data *md;
    pcre2_match_context *mc;
    pcre2_jit_stack *js;
    cache_slot *cache;
    uint32_t cmask, cn;
    buf ckeys;
    pz_bpe_ids cids;
    uint32_t *sym, *rank, *mid;   /* merge scratch */
    size_t scap;
    uint32_t *nxt, *prv;          /* long pieces: the symbols as a list */
    struct heap_ent *heap;        /* long pieces: candidate merges */
    size_t lcap, hcap;
    int force_scan;               /* tests: every piece through the scan */
    size_t *next_added;           /* per added token: its next occurrence */
};

pz_bpe_enc *pz_bpe_enc_new(const pz_bpe *b) {
    pz_bpe_enc *e = xcalloc(1, sizeof *e);
    e->b = b;
    e->md = pcre2_match_data_create_from_pattern(b->re, NULL);
    e->mc = pcre2_match_context_create(NULL);
    e->js = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, NULL);
    if (!e->md || !e->mc || !e->js) pz_die("out of memory (PCRE2)");
    pcre2_jit_stack_assign(e->mc, NULL, e->js);
    e->cmask = (1u << 12) - 1;
    e->cache = xcalloc((size_t)e->cmask + 1, sizeof *e->cache);
    e->next_added = xcalloc((size_t)b->nadded + 1, sizeof *e->next_added);
    return e;
}

void pz_bpe_enc_free(pz_bpe_enc *e) {
    if (!e) return;
    pcre2_match_data_free(e->md);
    pcre2_match_context_free(e->mc);
    pcre2_jit_stack_free(e->js);
    PZ_FREE_ALL(e->cache, e->ckeys.p, e->cids.ids, e->sym, e->rank, e->mid, e->nxt, e->prv, e->heap,
                e->next_added);
    free(e);
}

void pz_bpe_enc_force_scan(pz_bpe_enc *e, int on) { e->force_scan = on; }

static void set_rank(const pz_bpe *b, pz_bpe_enc *e, size_t i) {
    const merge_slot *m = merge_find(b, e->sym[i], e->sym[i + 1]);
    e->rank[i] = m ? m->rank : UINT32_MAX;
    e->mid[i] = m ? m->id : 0;
}

#define DEAD UINT32_MAX
#define LONG_PIECE 48   /* pieces longer than this merge through a heap: O(n log n), not O(n^2) */

static void heap_push(pz_bpe_enc *e, size_t *hn, uint32_t pos, uint32_t right) {
    const merge_slot *m = merge_find(e->b, e->sym[pos], e->sym[right]);
    if (!m) return;
    if (*hn == e->hcap) e->heap = grow(e->heap, &e->hcap, *hn + 1, sizeof *e->heap);
    struct heap_ent x = {(uint64_t)m->rank << 32 | pos, right, e->sym[pos], e->sym[right], m->id};
    size_t i = (*hn)++;
    while (i > 0 && e->heap[(i - 1) / 2].key > x.key) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = x;
}

static struct heap_ent heap_pop(pz_bpe_enc *e, size_t *hn) {
    struct heap_ent top = e->heap[0], x = e->heap[--*hn];
    size_t i = 0, n = *hn;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && e->heap[c + 1].key < e->heap[c].key) c++;
        if (e->heap[c].key >= x.key) break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n) e->heap[i] = x;
    return top;
}

/* the same merges as the scan in merge_piece, in the same order (lowest
 * rank, then leftmost), for e->sym[0..n) */
static size_t merge_long(pz_bpe_enc *e, size_t n) {
    if (n > e->lcap) {
        e->lcap = 2 * n;
        e->nxt = realloc(e->nxt, e->lcap * sizeof *e->nxt);
        e->prv = realloc(e->prv, e->lcap * sizeof *e->prv);
        if (!e->nxt || !e->prv) pz_die("out of memory");
    }
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        e->nxt[i] = (uint32_t)(i + 1);
        e->prv[i] = i ? (uint32_t)(i - 1) : DEAD;
    }
    for (size_t i = 0; i + 1 < n; i++) heap_push(e, &hn, (uint32_t)i, (uint32_t)(i + 1));
    while (hn) {
        struct heap_ent t = heap_pop(e, &hn);
        uint32_t pos = (uint32_t)t.key, r = t.right;
        if (e->sym[pos] != t.a || e->nxt[pos] != r || e->sym[r] != t.b) continue;   /* stale */
        e->sym[pos] = t.merged;
        e->sym[r] = DEAD;
        e->nxt[pos] = e->nxt[r];
        if (e->nxt[r] < n) e->prv[e->nxt[r]] = pos;
        if (e->prv[pos] != DEAD) heap_push(e, &hn, e->prv[pos], pos);
        if (e->nxt[pos] < n) heap_push(e, &hn, pos, e->nxt[pos]);
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i = e->nxt[i]) e->sym[m++] = e->sym[i];
    return m;
}

/* BPE of one piece of n bytes, appended to out */
static pz_status merge_piece(pz_bpe_enc *e, const uint8_t *s, size_t n, const char *what, size_t at, pz_bpe_ids *out) {
    const pz_bpe *b = e->b;
    if (n > e->scap) {
        e->scap = 2 * n;
        e->sym = realloc(e->sym, e->scap * sizeof *e->sym);
        e->rank = realloc(e->rank, e->scap * sizeof *e->rank);
        e->mid = realloc(e->mid, e->scap * sizeof *e->mid);
        if (!e->sym || !e->rank || !e->mid) pz_die("out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = b->byte_id[s[i]];
        if (id < 0)
            return pz_fail(PZ_ERR_FORMAT, "%s: byte 0x%02x at byte %zu has no token in the vocabulary", what, s[i], at + i);
        e->sym[i] = (uint32_t)id;
    }
    size_t m = n;
    if (n > LONG_PIECE && !e->force_scan) {
        m = merge_long(e, n);
    } else {
        /* short pieces: scan for the lowest rank; the pairs' ranks kept in step */
        for (size_t i = 0; i + 1 < m; i++) set_rank(b, e, i);
        while (m > 1) {
            size_t best = 0;
            for (size_t i = 1; i + 1 < m; i++)
                if (e->rank[i] < e->rank[best]) best = i;
            if (e->rank[best] == UINT32_MAX) break;
            e->sym[best] = e->mid[best];
            m--;
            memmove(e->sym + best + 1, e->sym + best + 2, (m - best - 1) * sizeof *e->sym);
            memmove(e->rank + best + 1, e->rank + best + 2, (m > best + 2 ? m - best - 2 : 0) * sizeof *e->rank);
            memmove(e->mid + best + 1, e->mid + best + 2, (m > best + 2 ? m - best - 2 : 0) * sizeof *e->mid);
            if (best > 0) set_rank(b, e, best - 1);
            if (best + 1 < m) set_rank(b, e, best);
        }
    }
    for (size_t i = 0; i < m; i++) pz_bpe_ids_push(out, e->sym[i]);
    return PZ_OK;
}

static void cache_clear(pz_bpe_enc *e) {
    memset(e->cache, 0, ((size_t)e->cmask + 1) * sizeof *e->cache);
    e->cn = 0;
    e->ckeys.n = 0;
    e->cids.n = 0;
}

/* twice the slots, the entries moved: a small table while few pieces have
 * been seen stays in the CPU's caches */
static void cache_grow(pz_bpe_enc *e) {
    uint32_t mask = 2 * e->cmask + 1;
    cache_slot *t = xcalloc((size_t)mask + 1, sizeof *t);
    for (uint32_t k = 0; k <= e->cmask; k++) {
        if (!e->cache[k].klen) continue;
        uint32_t i = e->cache[k].h & mask;
        while (t[i].klen) i = (i + 1) & mask;
        t[i] = e->cache[k];
    }
    free(e->cache);
    e->cache = t;
    e->cmask = mask;
}

static pz_status piece(pz_bpe_enc *e, const uint8_t *s, size_t n, const char *what, size_t at, pz_bpe_ids *out) {
    if (n == 1 && e->b->byte_id[s[0]] >= 0) { pz_bpe_ids_push(out, (uint32_t)e->b->byte_id[s[0]]); return PZ_OK; }
    if (n > CACHE_MAX_WORD) return merge_piece(e, s, n, what, at, out);
    uint32_t h = (uint32_t)hash_bytes(s, n), i = h & e->cmask;
    for (;; i = (i + 1) & e->cmask) {
        cache_slot *c = &e->cache[i];
        if (!c->klen) break;
        if (c->h == h && c->klen == n && memcmp(e->ckeys.p + c->koff, s, n) == 0) {
            for (uint32_t k = 0; k < c->icount; k++) pz_bpe_ids_push(out, e->cids.ids[c->ioff + k]);
            return PZ_OK;
        }
    }
    size_t before = out->n;
    pz_status st = merge_piece(e, s, n, what, at, out);
    if (st) return st;
    if (e->cn >= e->cmask / 2 || e->ckeys.n > CACHE_MAX_BYTES || e->cids.n > CACHE_MAX_BYTES / 4) {
        if (e->cmask < CACHE_MAX_SLOTS - 1 && e->ckeys.n <= CACHE_MAX_BYTES && e->cids.n <= CACHE_MAX_BYTES / 4)
            cache_grow(e);
        else
            cache_clear(e);
        for (i = h & e->cmask; e->cache[i].klen; i = (i + 1) & e->cmask) {}
    }
    cache_slot *c = &e->cache[i];
    c->h = h;
    c->klen = (uint32_t)n;
    c->koff = (uint32_t)buf_put(&e->ckeys, s, n);
    c->ioff = (uint32_t)e->cids.n;
    c->icount = (uint32_t)(out->n - before);
    for (size_t k = before; k < out->n; k++) pz_bpe_ids_push(&e->cids, out->ids[k]);
    e->cn++;
    return PZ_OK;
}

/* text without added tokens: GPT-2's pattern, then BPE of each piece */
static pz_status plain(pz_bpe_enc *e, const uint8_t *s, size_t n, const char *what, size_t at, pz_bpe_ids *out) {
    const pz_bpe *b = e->b;
    size_t off = 0;
    pz_status st;
    while (off < n) {
        int rc = b->jit ? pcre2_jit_match(b->re, s, n, off, 0, e->md, e->mc)
                        : pcre2_match(b->re, s, n, off, PCRE2_NO_UTF_CHECK, e->md, e->mc);
        size_t ms = n, me = n;
        if (rc >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
            ms = ov[0];
            me = ov[1];
        } else if (rc != PCRE2_ERROR_NOMATCH) {
            PCRE2_UCHAR msg[120];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return pz_fail(PZ_ERR_FORMAT, "%s: at byte %zu: splitting by GPT-2's pattern failed: %s", what, at + off,
                           (const char *)msg);
        }
        /* every character matches one alternative, so there is no gap; kept as its own piece if there were */
        if (ms > off && (st = piece(e, s + off, ms - off, what, at + off, out))) return st;
        if (me <= ms) { off = ms < n ? n : ms; continue; }   /* no empty matches in this pattern */
        if ((st = piece(e, s + ms, me - ms, what, at + ms, out))) return st;
        off = me;
    }
    return PZ_OK;
}

pz_status pz_bpe_encode(pz_bpe_enc *e, const char *text, size_t len, const char *what, pz_bpe_ids *out) {
    const pz_bpe *b = e->b;
    const uint8_t *s = (const uint8_t *)text;
    if (len == 0) return PZ_OK;
    /* UTF-8 check of the whole text once (pcre2_match checks before matching) */
    int rc = pcre2_match(b->re, s, len, 0, 0, e->md, e->mc);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
        PCRE2_UCHAR msg[120];
        pcre2_get_error_message(rc, msg, sizeof msg);
        if (rc <= PCRE2_ERROR_UTF8_ERR1 && rc >= PCRE2_ERROR_UTF8_ERR21)
            return pz_fail(PZ_ERR_FORMAT, "%s: not UTF-8 text at byte %zu: %s", what, (size_t)pcre2_get_startchar(e->md),
                           (const char *)msg);
        return pz_fail(PZ_ERR_FORMAT, "%s: splitting by GPT-2's pattern failed: %s", what, (const char *)msg);
    }
    for (int k = 0; k < b->nadded; k++) e->next_added[k] = SIZE_MAX;
    size_t pos = 0;
    pz_status st;
    while (pos < len) {
        /* the leftmost added token from pos on, the longest of those starting there */
        int best = -1;
        size_t best_at = len;
        for (int k = 0; k < b->nadded; k++) {
            uint32_t id = b->added[k];
            size_t tl = b->tok_len[id];
            if (e->next_added[k] == SIZE_MAX || e->next_added[k] < pos) {
                const uint8_t *f = memmem(s + pos, len - pos, b->bytes.p + b->tok_off[id], tl);
                e->next_added[k] = f ? (size_t)(f - s) : len;   /* len: none */
            }
            size_t at = e->next_added[k];
            if (at < len && (at < best_at || (at == best_at && tl > b->tok_len[b->added[best]]))) {
                best = k;
                best_at = at;
            }
        }
        if ((st = plain(e, s + pos, best_at - pos, what, pos, out))) return st;
        if (best < 0) break;
        pz_bpe_ids_push(out, b->added[best]);
        pos = best_at + b->tok_len[b->added[best]];
    }
    return PZ_OK;
}

pz_status pz_bpe_decode(const pz_bpe *b, const uint32_t *ids, size_t n, char **text, size_t *len) {
    buf o = {0};
    buf_put(&o, "", 0);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] >= b->n_vocab || !b->tok_kind[ids[i]]) {
            free(o.p);
            *text = NULL;
            *len = 0;
            return pz_fail(PZ_ERR_FORMAT, "decode: id %u at position %zu is no token (vocabulary of %u)", ids[i], i,
                           b->n_vocab);
        }
        buf_put(&o, b->bytes.p + b->tok_off[ids[i]], b->tok_len[ids[i]]);
    }
    *text = (char *)o.p;
    *len = o.n;
    return PZ_OK;
}
