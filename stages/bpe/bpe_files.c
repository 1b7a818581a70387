/* bpe_files.c: reading and checking GPT-2's tokenizer files (tokenizer.json,
 * vocab.json with merges.txt, a directory holding either) into a pz_bpe;
 * see bpe.h. Encoding and decoding: bpe.c. */
#include "stages/bpe/bpe_private.h"
#include "base/io/file.h"
#include "base/formats/json.h"
#include "base/mem.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_TOKEN 1000            /* bytes of one token (GPT-2's longest is 128) */

/* GPT-2's pattern with \s written as Unicode's White_Space property: that is
 * what \s means to GPT-2's Python `regex` and to HF's Oniguruma, while
 * PCRE2's \s (with UCP) also takes U+180E MONGOLIAN VOWEL SEPARATOR, which
 * Unicode 6.3 moved out of White_Space (a test over every code point found it) */
static const char PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\p{White_Space}\\p{L}\\p{N}]+"
    "|\\p{White_Space}+(?!\\P{White_Space})|\\p{White_Space}+";

/* ---------------------------------------------------------------- helpers */

/* GPT-2's byte <-> unicode map: the printable bytes '!'..'~', 0xA1..0xAC and
 * 0xAE..0xFF stand for themselves, the other 68 bytes (in order) for
 * U+0100, U+0101, ... */
static uint16_t byte_cp[256];
static int16_t cp_byte[324];

static void byte_map_fill(void) {
    int k = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_cp[b] = (uint16_t)(printable ? b : 256 + k++);
    }
    for (int c = 0; c < 324; c++) cp_byte[c] = -1;
    for (int b = 0; b < 256; b++) cp_byte[byte_cp[b]] = (int16_t)b;
}

static void byte_map_init(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, byte_map_fill);
}

/* One UTF-8 character of s[0..n): its code point and length, or -1. */
static int utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 0) return -1;
    uint8_t c = s[0];
    int len;
    uint32_t v, min;
    if (c < 0x80) { *cp = c; return 1; }
    if ((c & 0xE0) == 0xC0) { len = 2; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { len = 3; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { len = 4; v = c & 0x07; min = 0x10000; }
    else return -1;
    if ((size_t)len > n) return -1;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        v = v << 6 | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return -1;
    *cp = v;
    return len;
}

/* Byte-level text (each character one of the 256 of the map) to bytes;
 * 0 if it is not byte-level text. out has room for strlen(s) bytes. */
static int unmap_bytes(const char *s, size_t n, uint8_t *out, size_t *outlen) {
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = utf8_next((const uint8_t *)s + i, n - i, &cp);
        if (l < 0 || cp >= 324 || cp_byte[cp] < 0) return 0;
        out[k++] = (uint8_t)cp_byte[cp];
        i += (size_t)l;
    }
    *outlen = k;
    return 1;
}

/* s for a message: control bytes as \xNN, quote and backslash escaped, at
 * most about cap - 8 bytes (then "...") */
static const char *esc(char *out, size_t cap, const char *s) {
    size_t k = 0;
    for (; *s && k + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) k += (size_t)snprintf(out + k, cap - k, "\\x%02x", c);
        else if (c == '"' || c == '\\') { out[k++] = '\\'; out[k++] = (char)c; }
        else out[k++] = (char)c;
    }
    if (*s) { memcpy(out + k, "...", 3); k += 3; }
    out[k] = 0;
    return out;
}

/* ---------------------------------------------------------------- the tokenizer */

static uint32_t vmap_find(const pz_bpe *b, const uint8_t *s, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(s, n) & b->vmask;
    for (;; i = (i + 1) & b->vmask) {
        uint32_t v = b->vmap[i];
        if (!v) return UINT32_MAX;
        uint32_t id = v - 1;
        if (b->tok_len[id] == n && memcmp(b->bytes.p + b->tok_off[id], s, n) == 0) return id;
    }
}

static uint32_t pow2_above(size_t n) {
    uint32_t c = 16;
    while (c < 2 * n + 16) c *= 2;
    return c;
}

/* ---------------------------------------------------------------- reading */

/* what the files say, before it is checked and indexed */
typedef struct {
    const char *what, *what_merges;
    buf strs;                      /* UTF-8 strings, NUL-terminated, by offset */
    size_t *voff; uint32_t *vid; size_t nv, capv;
    size_t *ma, *mb; size_t nm, capm;
    size_t *aoff; uint32_t *aid; size_t na, capa;
    int saw_vocab, saw_merges, eot_in_vocab;
} builder;

static void builder_free(builder *B) {
    free(B->strs.p);
    free(B->voff); free(B->vid);
    free(B->ma); free(B->mb);
    free(B->aoff); free(B->aid);
}

static const char *bstr(const builder *B, size_t off) { return (const char *)B->strs.p + off; }

/* kind, and key when not NULL (quoted): the token, as an error names it;
 * nothing is formatted unless it fails (vocab_entry runs once a token) */
static pz_status read_id(pz_json *p, const char *kind, const char *key, uint32_t *id) {
    const char *q = key ? " \"" : "", *k = key ? key : "", *qe = key ? "\"" : "";
    double v;
    int is_int;
    char c = pz_json_peek(p);
    if (!(c == '-' || (c >= '0' && c <= '9')))
        return pz_fail(PZ_ERR_FORMAT, "%s: %s%s%s%s: the id must be a number", p->what, kind, q, k, qe);
    pz_status st = pz_json_number(p, &v, &is_int);
    if (st) return st;
    /* %.15g: 16777216 as itself (%g said 1.67772e+07, which reads as inside the range) */
    if (!is_int || !(v >= 0 && v <= PZ_BPE_MAX_ID))
        return pz_fail(PZ_ERR_FORMAT, "%s: %s%s%s%s: id %.15g is not a whole number from 0 to %u", p->what, kind, q, k,
                       qe, v, PZ_BPE_MAX_ID);
    *id = (uint32_t)v;
    return PZ_OK;
}

static pz_status vocab_entry(pz_json *p, const char *key, void *ctx) {
    builder *B = ctx;
    uint32_t id = 0;
    pz_status st = read_id(p, "vocabulary token", key, &id);
    if (st) return st;
    B->voff = grow(B->voff, &B->capv, B->nv + 1, sizeof *B->voff);
    B->vid = realloc(B->vid, B->capv * sizeof *B->vid);
    if (!B->vid) pz_die("out of memory");
    B->voff[B->nv] = buf_put(&B->strs, key, strlen(key) + 1);
    B->vid[B->nv++] = id;
    return PZ_OK;
}

static void add_merge(builder *B, const char *a, size_t la, const char *b, size_t lb) {
    B->ma = grow(B->ma, &B->capm, B->nm + 1, sizeof *B->ma);
    B->mb = realloc(B->mb, B->capm * sizeof *B->mb);
    if (!B->mb) pz_die("out of memory");
    B->ma[B->nm] = buf_put(&B->strs, a, la);
    buf_put(&B->strs, "", 1);
    B->mb[B->nm] = buf_put(&B->strs, b, lb);
    buf_put(&B->strs, "", 1);
    B->nm++;
}

/* "a b": the two parts around the one space */
static pz_status split_merge(builder *B, const char *s, size_t n, const char *what, size_t where, const char *unit) {
    const char *sp = memchr(s, ' ', n);
    if (!sp || sp == s || sp == s + n - 1 || memchr(sp + 1, ' ', (size_t)(s + n - sp - 1)))
        return pz_fail(PZ_ERR_FORMAT, "%s: merge %s %zu (\"%.*s\") is not two tokens separated by one space", what, unit,
                       where, (int)(n > 200 ? 200 : n), s);
    add_merge(B, s, (size_t)(sp - s), sp + 1, (size_t)(s + n - sp - 1));
    return PZ_OK;
}

typedef struct {
    char parts[2][MAX_TOKEN + 1];
    size_t count;
} merge_parts;

static pz_status merge_part(pz_json *p, size_t index, void *ctx) {
    merge_parts *m = ctx;
    m->count = index + 1;
    if (index >= 2 || pz_json_peek(p) != '"')
        return pz_fail(PZ_ERR_FORMAT, "%s: a merge given as an array must hold two strings", p->what);
    return pz_json_string(p, m->parts[index], MAX_TOKEN + 1, NULL);
}

static pz_status merge_entry(pz_json *p, size_t index, void *ctx) {
    builder *B = ctx;
    pz_status st;
    if (pz_json_peek(p) == '"') {
        char s[2 * MAX_TOKEN + 2];
        size_t n;
        if ((st = pz_json_string(p, s, sizeof s, &n))) return st;
        return split_merge(B, s, n, p->what, index + 1, "number");
    }
    if (pz_json_peek(p) != '[')
        return pz_fail(PZ_ERR_FORMAT, "%s: merge number %zu must be a string \"a b\" or an array [\"a\", \"b\"]", p->what,
                       index + 1);
    merge_parts m;
    m.count = 0;
    if ((st = pz_json_elements(p, merge_part, &m))) return st;
    if (m.count != 2 || !m.parts[0][0] || !m.parts[1][0])
        return pz_fail(PZ_ERR_FORMAT, "%s: merge number %zu must hold two non-empty strings", p->what, index + 1);
    add_merge(B, m.parts[0], strlen(m.parts[0]), m.parts[1], strlen(m.parts[1]));
    return PZ_OK;
}

/* ---- tokenizer.json */

typedef struct {
    builder *B;
    char content[MAX_TOKEN + 1];
    uint32_t id;
    int has_id, has_content;
    size_t index;
} added_ctx;

/* how an error names an added token: by its text once read, else by its
 * place ("id" comes before "content" in HF's files) */
static const char *added_name(const added_ctx *a, char *buf, size_t cap) {
    if (a->has_content) snprintf(buf, cap, "added token \"%s\"", a->content);
    else snprintf(buf, cap, "added token number %zu", a->index + 1);
    return buf;
}

static pz_status need_bool(pz_json *p, const char *ctx, const char *key, int *v) {
    if (pz_json_lit(p, "true")) *v = 1;
    else if (pz_json_lit(p, "false")) *v = 0;
    else return pz_fail(PZ_ERR_FORMAT, "%s: %s \"%s\" must be true or false", p->what, ctx, key);
    return PZ_OK;
}

static pz_status added_key(pz_json *p, const char *key, void *ctx) {
    added_ctx *a = ctx;
    char who[MAX_TOKEN + 32];
    if (strcmp(key, "id") == 0) { a->has_id = 1; return read_id(p, added_name(a, who, sizeof who), NULL, &a->id); }
    if (strcmp(key, "content") == 0) {
        if (pz_json_peek(p) != '"') return pz_fail(PZ_ERR_FORMAT, "%s: an added token's \"content\" must be a string", p->what);
        a->has_content = 1;
        return pz_json_string(p, a->content, sizeof a->content, NULL);
    }
    if (strcmp(key, "single_word") == 0 || strcmp(key, "lstrip") == 0 || strcmp(key, "rstrip") == 0) {
        int v;
        pz_status st = need_bool(p, "added token", key, &v);
        if (st) return st;
        if (v) return pz_fail(PZ_ERR_FORMAT, "%s: %s: \"%s\": true is not supported", p->what, added_name(a, who, sizeof who), key);
        return PZ_OK;
    }
    return pz_json_skip(p);   /* "special", "normalized": no normalizer here, so both match the text as it is */
}

static pz_status added_entry(pz_json *p, size_t index, void *ctx) {
    builder *B = ctx;
    added_ctx a;
    memset(&a, 0, sizeof a);
    a.B = B;
    a.index = index;
    pz_status st = pz_json_members(p, added_key, &a, 1);
    if (st) return st;
    if (!a.has_id || !a.has_content || !a.content[0])
        return pz_fail(PZ_ERR_FORMAT, "%s: added token number %zu needs an \"id\" and a non-empty \"content\"", p->what,
                       index + 1);
    B->aoff = grow(B->aoff, &B->capa, B->na + 1, sizeof *B->aoff);
    B->aid = realloc(B->aid, B->capa * sizeof *B->aid);
    if (!B->aid) pz_die("out of memory");
    B->aoff[B->na] = buf_put(&B->strs, a.content, strlen(a.content) + 1);
    B->aid[B->na++] = a.id;
    return PZ_OK;
}

/* "type": "X" of a component, checked against the one accepted */
typedef struct {
    const char *section, *want;
    char type[64];
    int add_prefix_space, use_regex;
    builder *B;
} section_ctx;

static pz_status section_type(pz_json *p, section_ctx *c) {
    if (pz_json_peek(p) != '"') return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\": \"type\" must be a string", p->what, c->section);
    pz_status st = pz_json_string(p, c->type, sizeof c->type, NULL);
    if (st) return st;
    if (strcmp(c->type, c->want) != 0)
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" of type \"%s\" is not supported (GPT-2's byte-level BPE needs \"%s\")",
                       p->what, c->section, c->type, c->want);
    return PZ_OK;
}

/* a key that must be null (or false / empty) for GPT-2's BPE */
static pz_status must_be_off(pz_json *p, const char *section, const char *key) {
    if (pz_json_lit(p, "null") || pz_json_lit(p, "false")) return PZ_OK;
    if (p->i + 2 <= p->n && memcmp(p->s + p->i, "\"\"", 2) == 0) { p->i += 2; return PZ_OK; }
    return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\": \"%s\" is set, which this tokenizer does not implement (GPT-2 has it "
                   "null/false)", p->what, section, key);
}

static pz_status pretok_key(pz_json *p, const char *key, void *ctx) {
    section_ctx *c = ctx;
    if (strcmp(key, "type") == 0) return section_type(p, c);
    if (strcmp(key, "add_prefix_space") == 0) return need_bool(p, "\"pre_tokenizer\"", key, &c->add_prefix_space);
    if (strcmp(key, "use_regex") == 0) return need_bool(p, "\"pre_tokenizer\"", key, &c->use_regex);
    return pz_json_skip(p);   /* trim_offsets: offsets only */
}

static pz_status post_key(pz_json *p, const char *key, void *ctx) {
    section_ctx *c = ctx;
    if (strcmp(key, "type") == 0) return section_type(p, c);
    return pz_json_skip(p);
}

static pz_status model_key(pz_json *p, const char *key, void *ctx) {
    section_ctx *c = ctx;
    builder *B = c->B;
    if (strcmp(key, "type") == 0) return section_type(p, c);
    if (strcmp(key, "vocab") == 0) {
        if (pz_json_peek(p) != '{') return pz_fail(PZ_ERR_FORMAT, "%s: \"model\": \"vocab\" must be an object", p->what);
        B->saw_vocab = 1;
        return pz_json_members(p, vocab_entry, B, 0);
    }
    if (strcmp(key, "merges") == 0) {
        if (pz_json_peek(p) != '[') return pz_fail(PZ_ERR_FORMAT, "%s: \"model\": \"merges\" must be an array", p->what);
        B->saw_merges = 1;
        return pz_json_elements(p, merge_entry, B);
    }
    if (strcmp(key, "dropout") == 0 || strcmp(key, "continuing_subword_prefix") == 0 ||
        strcmp(key, "end_of_word_suffix") == 0 || strcmp(key, "byte_fallback") == 0 || strcmp(key, "ignore_merges") == 0)
        return must_be_off(p, "model", key);
    return pz_json_skip(p);   /* unk_token (every byte has a token), fuse_unk */
}

static pz_status top_key(pz_json *p, const char *key, void *ctx) {
    builder *B = ctx;
    if (strcmp(key, "added_tokens") == 0) {
        if (pz_json_peek(p) != '[') return pz_fail(PZ_ERR_FORMAT, "%s: \"added_tokens\" must be an array", p->what);
        return pz_json_elements(p, added_entry, B);
    }
    if (strcmp(key, "normalizer") == 0 || strcmp(key, "truncation") == 0 || strcmp(key, "padding") == 0) {
        if (pz_json_lit(p, "null")) return PZ_OK;
        return pz_fail(PZ_ERR_FORMAT, "%s: \"%s\" is set, which this tokenizer does not implement (GPT-2 has null)",
                       p->what, key);
    }
    if (strcmp(key, "pre_tokenizer") == 0) {
        section_ctx c = {"pre_tokenizer", "ByteLevel", "", 0, 1, B};
        if (pz_json_peek(p) != '{')
            return pz_fail(PZ_ERR_FORMAT, "%s: \"pre_tokenizer\" must be GPT-2's {\"type\": \"ByteLevel\", ...}", p->what);
        pz_status st = pz_json_members(p, pretok_key, &c, 1);
        if (st) return st;
        if (!c.type[0]) return pz_fail(PZ_ERR_FORMAT, "%s: \"pre_tokenizer\" has no \"type\"", p->what);
        if (c.add_prefix_space)
            return pz_fail(PZ_ERR_FORMAT, "%s: \"pre_tokenizer\": \"add_prefix_space\": true is not supported (GPT-2 "
                           "has false)", p->what);
        if (!c.use_regex)
            return pz_fail(PZ_ERR_FORMAT, "%s: \"pre_tokenizer\": \"use_regex\": false is not supported (GPT-2 splits "
                           "with its pattern)", p->what);
        return PZ_OK;
    }
    if (strcmp(key, "post_processor") == 0) {
        if (pz_json_lit(p, "null")) return PZ_OK;
        section_ctx c = {"post_processor", "ByteLevel", "", 0, 1, B};
        if (pz_json_peek(p) != '{') return pz_fail(PZ_ERR_FORMAT, "%s: \"post_processor\" must be null or an object", p->what);
        return pz_json_members(p, post_key, &c, 1);
    }
    if (strcmp(key, "model") == 0) {
        section_ctx c = {"model", "BPE", "", 0, 1, B};
        if (pz_json_peek(p) != '{') return pz_fail(PZ_ERR_FORMAT, "%s: \"model\" must be an object", p->what);
        return pz_json_members(p, model_key, &c, 1);
    }
    return pz_json_skip(p);   /* version, decoder (decoding is always byte-level) */
}

/* ---- building */

/* The merges, by rank, into b's merge table; every merge's halves and its
 * result must be vocabulary tokens, and no pair may repeat. */
static pz_status build_merges(const builder *B, pz_bpe *b) {
    uint8_t tmp[2 * MAX_TOKEN + 2];
    char e1[96], e2[96];   /* tokens shown in messages */
    if (B->nm >= UINT32_MAX / 2) return pz_fail(PZ_ERR_FORMAT, "%s: too many merges", B->what);
    b->mmask = pow2_above(B->nm) - 1;
    b->mmap = xmalloc(((size_t)b->mmask + 1) * sizeof *b->mmap);
    for (size_t i = 0; i <= b->mmask; i++) b->mmap[i].rank = UINT32_MAX;
    const char *mwhat = B->what_merges ? B->what_merges : B->what;
    for (size_t r = 0; r < B->nm; r++) {
        const char *sa = bstr(B, B->ma[r]), *sb = bstr(B, B->mb[r]);
        uint32_t ida = UINT32_MAX, idb = UINT32_MAX, idm = UINT32_MAX;
        size_t la = 0, lb = 0;
        if (unmap_bytes(sa, strlen(sa), tmp, &la)) ida = vmap_find(b, tmp, la);
        if (unmap_bytes(sb, strlen(sb), tmp + la, &lb)) idb = vmap_find(b, tmp + la, lb);
        if (ida == UINT32_MAX || idb == UINT32_MAX) {
            return pz_fail(PZ_ERR_FORMAT, "%s: merge %zu (\"%s %s\"): \"%s\" is not in the vocabulary", mwhat, r + 1,
                           esc(e1, sizeof e1, sa), esc(e2, sizeof e2, sb), ida == UINT32_MAX ? e1 : e2);
        }
        idm = vmap_find(b, tmp, la + lb);
        if (idm == UINT32_MAX) {
            return pz_fail(PZ_ERR_FORMAT, "%s: merge %zu (\"%s %s\"): the merged token \"%s%s\" is not in the vocabulary",
                           mwhat, r + 1, esc(e1, sizeof e1, sa), esc(e2, sizeof e2, sb), e1, e2);
        }
        const merge_slot *m = merge_find(b, ida, idb);
        if (m) {
            return pz_fail(PZ_ERR_FORMAT, "%s: merge %zu (\"%s %s\") repeats merge %u", mwhat, r + 1,
                           esc(e1, sizeof e1, sa), esc(e2, sizeof e2, sb), m->rank + 1);
        }
        uint32_t h = (uint32_t)hash_pair(ida, idb) & b->mmask;
        while (b->mmap[h].rank != UINT32_MAX) h = (h + 1) & b->mmask;
        b->mmap[h].key = (uint64_t)ida << 32 | idb;
        b->mmap[h].rank = (uint32_t)r;
        b->mmap[h].id = idm;
    }
    b->nmerges = (uint32_t)B->nm;
    return PZ_OK;
}

static pz_status build(builder *B, pz_bpe **out) {
    const char *what = B->what;
    *out = NULL;
    if (!B->saw_vocab) return pz_fail(PZ_ERR_FORMAT, "%s: no vocabulary (\"model\": {\"vocab\": ...})", what);
    if (!B->saw_merges) return pz_fail(PZ_ERR_FORMAT, "%s: no merges (\"model\": {\"merges\": [...]})", what);
    if (B->nv == 0) return pz_fail(PZ_ERR_FORMAT, "%s: the vocabulary is empty", what);
    byte_map_init();
    uint32_t maxid = 0;
    for (size_t i = 0; i < B->nv; i++) maxid = B->vid[i] > maxid ? B->vid[i] : maxid;
    for (size_t i = 0; i < B->na; i++) maxid = B->aid[i] > maxid ? B->aid[i] : maxid;
    pz_bpe *b = xcalloc(1, sizeof *b);
    b->n_vocab = maxid + 1;
    b->tok_off = xcalloc(b->n_vocab, sizeof *b->tok_off);
    b->tok_len = xcalloc(b->n_vocab, sizeof *b->tok_len);
    b->tok_kind = xcalloc(b->n_vocab, 1);
    uint32_t *vkey = xmalloc(b->n_vocab * sizeof *vkey);   /* id -> its vocabulary string (offset in B->strs) */
    uint8_t *vseen = xcalloc(b->n_vocab, 1);
    b->vmask = pow2_above(B->nv) - 1;
    b->vmap = xcalloc((size_t)b->vmask + 1, sizeof *b->vmap);
    uint8_t tmp[2 * MAX_TOKEN + 2];
    size_t tl;
    char e1[96], e2[96];   /* tokens shown in messages */
    pz_status st = PZ_OK;
    for (size_t i = 0; i < B->nv; i++) {
        const char *s = bstr(B, B->voff[i]);
        uint32_t id = B->vid[i];
        if (vseen[id]) {
            st = pz_fail(PZ_ERR_FORMAT, "%s: duplicate id %u: tokens \"%s\" and \"%s\"", what, id,
                         esc(e1, sizeof e1, bstr(B, vkey[id])), esc(e2, sizeof e2, s));
            goto fail;
        }
        if (!unmap_bytes(s, strlen(s), tmp, &tl)) {
            /* an added token's text (e.g. "<s> ") may sit in the vocabulary as it is */
            int added = 0;
            for (size_t k = 0; k < B->na; k++) added |= B->aid[k] == id && strcmp(bstr(B, B->aoff[k]), s) == 0;
            if (!added) {
                st = pz_fail(PZ_ERR_FORMAT, "%s: vocabulary token \"%s\" (id %u) is not byte-level text (GPT-2's "
                             "byte-to-unicode characters)", what, esc(e1, sizeof e1, s), id);
                goto fail;
            }
            vkey[id] = (uint32_t)B->voff[i];
            vseen[id] = 1;
            continue;   /* entered with the added tokens below */
        }
        if (tl == 0) { st = pz_fail(PZ_ERR_FORMAT, "%s: the vocabulary has an empty token (id %u)", what, id); goto fail; }
        if (vmap_find(b, tmp, tl) != UINT32_MAX) {
            st = pz_fail(PZ_ERR_FORMAT, "%s: vocabulary token \"%s\" appears twice", what, esc(e1, sizeof e1, s));
            goto fail;
        }
        b->tok_kind[id] = 1;
        vseen[id] = 1;
        vkey[id] = (uint32_t)B->voff[i];
        b->tok_off[id] = (uint32_t)buf_put(&b->bytes, tmp, tl);
        b->tok_len[id] = (uint32_t)tl;
        uint32_t h = (uint32_t)hash_bytes(tmp, tl) & b->vmask;
        while (b->vmap[h]) h = (h + 1) & b->vmask;
        b->vmap[h] = id + 1;
    }
    b->added = xmalloc((B->na + 1) * sizeof *b->added);
    for (size_t k = 0; k < B->na; k++) {
        const char *s = bstr(B, B->aoff[k]);
        uint32_t id = B->aid[k];
        for (int j = 0; j < b->nadded; j++)
            if (b->added[j] == id || strcmp((const char *)b->bytes.p + b->tok_off[b->added[j]], s) == 0) {
                st = pz_fail(PZ_ERR_FORMAT, "%s: added token \"%s\" (id %u) repeats the id or text of added token \"%s\" "
                             "(id %u)", what, esc(e1, sizeof e1, s), id, esc(e2, sizeof e2, (const char *)b->bytes.p + b->tok_off[b->added[j]]),
                             b->added[j]);
                goto fail;
            }
        if (b->tok_kind[id] == 1 && strcmp(bstr(B, vkey[id]), s) != 0) {
            st = pz_fail(PZ_ERR_FORMAT, "%s: added token \"%s\" has id %u, which the vocabulary gives to \"%s\"", what,
                         esc(e1, sizeof e1, s), id, esc(e2, sizeof e2, bstr(B, vkey[id])));
            goto fail;
        }
        /* the text, as it is: in GPT-2's <|endoftext|> it equals the byte-level bytes */
        if (b->tok_kind[id] != 1) {
            b->tok_off[id] = (uint32_t)buf_put(&b->bytes, s, strlen(s));
            b->tok_len[id] = (uint32_t)strlen(s);
            b->tok_kind[id] = 2;
        }
        b->added[b->nadded++] = id;
    }
    for (int c = 0; c < 256; c++) {
        uint8_t byte = (uint8_t)c;
        uint32_t id = vmap_find(b, &byte, 1);
        b->byte_id[c] = id == UINT32_MAX ? -1 : (int32_t)id;
    }
    st = build_merges(B, b);
    if (st) goto fail;
    /* the pattern */
    int err;
    PCRE2_SIZE eoff;
    b->re = pcre2_compile((PCRE2_SPTR)PATTERN, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
    if (!b->re) pz_die("GPT-2's pattern does not compile with this PCRE2 (error %d at %zu)", err, (size_t)eoff);
    b->jit = pcre2_jit_compile(b->re, PCRE2_JIT_COMPLETE) == 0;
    free(vkey);
    free(vseen);
    *out = b;
    return PZ_OK;
fail:
    free(vkey);
    free(vseen);
    pz_bpe_free(b);
    return st;
}

pz_status pz_bpe_from_tokenizer_json(const char *text, size_t len, const char *what, pz_bpe **out) {
    *out = NULL;
    builder B;
    memset(&B, 0, sizeof B);
    B.what = what;
    pz_json p = pz_json_at(text, len, what);
    pz_status st = pz_json_object(&p, top_key, &B, 1);
    if (!st) st = build(&B, out);
    builder_free(&B);
    return st;
}

pz_status pz_bpe_from_vocab_merges(const char *vocab, size_t vlen, const char *what, const char *merges, size_t mlen,
                                   const char *what_merges, pz_bpe **out) {
    *out = NULL;
    builder B;
    memset(&B, 0, sizeof B);
    B.what = what;
    B.what_merges = what_merges;
    B.saw_vocab = B.saw_merges = 1;
    pz_json p = pz_json_at(vocab, vlen, what);
    pz_status st = pz_json_object(&p, vocab_entry, &B, 0);
    /* merges.txt: an optional "#version" line, then "a b" per line */
    for (size_t i = 0, line = 1; !st && i < mlen; line++) {
        const char *nl = memchr(merges + i, '\n', mlen - i);
        size_t e = nl ? (size_t)(nl - merges) : mlen;
        if (!(e - i >= 8 && memcmp(merges + i, "#version", 8) == 0)) {
            if (memchr(merges + i, 0, e - i))
                st = pz_fail(PZ_ERR_FORMAT, "%s: line %zu holds a NUL byte", what_merges, line);
            else if (e - i > 2 * MAX_TOKEN + 1)
                st = pz_fail(PZ_ERR_FORMAT, "%s: line %zu is longer than two tokens can be", what_merges, line);
            else
                st = split_merge(&B, merges + i, e - i, what_merges, line, "on line");
        }
        i = e + 1;
    }
    /* GPT-2's vocab.json holds <|endoftext|>; HF's GPT-2 tokenizer treats it as special */
    for (size_t i = 0; !st && i < B.nv; i++)
        if (strcmp(bstr(&B, B.voff[i]), "<|endoftext|>") == 0) {
            B.aoff = grow(B.aoff, &B.capa, 1, sizeof *B.aoff);
            B.aid = xmalloc(B.capa * sizeof *B.aid);
            B.aoff[0] = B.voff[i];
            B.aid[0] = B.vid[i];
            B.na = 1;
            break;
        }
    if (!st) st = build(&B, out);
    builder_free(&B);
    return st;
}
