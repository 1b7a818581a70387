/* bpe_open.c: which files a tokenizer path stands for (by content, not by
 * name) and loading them; see bpe.h. The readers of the texts: bpe_files.c. */
#include "stages/bpe/bpe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/io/file.h"
#include "base/formats/json.h"
#include "base/mem.h"

#define MAX_FILE (256u << 20)     /* GPT-2's tokenizer.json is 1.4 MB */

static pz_status read_text(const char *path, uint8_t **text, size_t *len) {
    struct stat sb;
    if (stat(path, &sb) != 0) return pz_fail(PZ_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return pz_fail(PZ_ERR_IO, "%s: not a regular file", path);
    if ((uint64_t)sb.st_size > MAX_FILE)
        return pz_fail(PZ_ERR_FORMAT, "%s: %llu bytes, more than a tokenizer file can be (%u)", path,
                       (unsigned long long)sb.st_size, MAX_FILE);
    pz_status st = pz_read_file_max(path, (size_t)256 << 20, text, len);
    if (!st && *len > MAX_FILE) {
        free(*text);
        *text = NULL;
        return pz_fail(PZ_ERR_FORMAT, "%s: more than %u bytes", path, MAX_FILE);
    }
    return st;
}

static pz_status load_vocab(const char *vocab_path, const char *merges_path, pz_bpe **out) {
    uint8_t *v = NULL, *m = NULL;
    size_t vl = 0, ml = 0;
    if (!pz_is_regular_file(merges_path))
        return pz_fail(PZ_ERR_IO, "%s: no merges.txt beside it (looked for %s)", vocab_path, merges_path);
    if (!pz_is_regular_file(vocab_path))
        return pz_fail(PZ_ERR_IO, "%s: no vocab.json beside it (looked for %s)", merges_path, vocab_path);
    pz_status st = read_text(vocab_path, &v, &vl);
    if (!st) st = read_text(merges_path, &m, &ml);
    if (!st) st = pz_bpe_from_vocab_merges((const char *)v, vl, vocab_path, (const char *)m, ml, merges_path, out);
    free(v);
    free(m);
    return st;
}

/* What a tokenizer file holds, told by its first bytes: a JSON object whose
 * first member's value is a number maps tokens to ids (vocab.json); another
 * JSON object is a tokenizer.json; text whose first line is "#version..." or
 * two words is a merges.txt. Anything else goes to the JSON reader, whose
 * message says what is wrong. */
typedef enum { TOK_JSON, TOK_VOCAB, TOK_MERGES } tok_kind;

static tok_kind sniff(const char *path) {
    char head[4096];
    struct stat sb;   /* a FIFO would wait for a writer forever: read_text refuses it */
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) return TOK_JSON;
    FILE *f = fopen(path, "rb");
    if (!f) return TOK_JSON;
    size_t n = fread(head, 1, sizeof head, f);
    fclose(f);
    pz_json p = pz_json_at(head, n, path);
    if (pz_json_peek(&p) == '{') {
        p.i++;
        if (pz_json_peek(&p) != '"' || pz_json_string(&p, NULL, 0, NULL) != PZ_OK || pz_json_peek(&p) != ':')
            return TOK_JSON;
        p.i++;
        char c = pz_json_peek(&p);
        return c == '-' || (c >= '0' && c <= '9') ? TOK_VOCAB : TOK_JSON;
    }
    const char *nl = memchr(head, '\n', n);
    size_t line = nl ? (size_t)(nl - head) : n;
    if (line >= 8 && memcmp(head, "#version", 8) == 0) return TOK_MERGES;
    const char *sp = memchr(head, ' ', line);
    return sp && sp > head && (size_t)(sp - head) + 1 < line && !memchr(sp + 1, ' ', line - (size_t)(sp - head) - 1)
               ? TOK_MERGES : TOK_JSON;
}

/* The file beside `path` that completes it: PREFIXmine -> PREFIXtheirs when
 * there (gpt2-vocab.json -> gpt2-merges.txt, as Megatron names them), else
 * theirs in the same directory. */
static char *beside(const char *path, const char *mine, const char *theirs) {
    if (pz_ends_with(path, mine)) {
        size_t pl = strlen(path) - strlen(mine), tl = strlen(theirs);
        char *named = xmalloc(pl + tl + 1);
        memcpy(named, path, pl);
        memcpy(named + pl, theirs, tl + 1);
        if (pz_is_regular_file(named)) return named;
        free(named);
    }
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(theirs);
    char *dir = strndup(path, (size_t)(slash - path));
    if (!dir) pz_die("out of memory");
    char *p = pz_path_join(dir[0] ? dir : "", theirs);
    free(dir);
    return p;
}

pz_status pz_bpe_files(const char *path, char **json, char **vocab, char **merges) {
    *json = *vocab = *merges = NULL;
    struct stat sb;
    if (stat(path, &sb) != 0) return pz_fail(PZ_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {   /* HF's layout, by name */
        char *tj = pz_path_join(path, "tokenizer.json"), *vj = pz_path_join(path, "vocab.json");
        char *mt = pz_path_join(path, "merges.txt");
        if (pz_is_regular_file(tj)) {
            *json = tj;
            free(vj);
            free(mt);
            return PZ_OK;
        }
        free(tj);
        if (pz_is_regular_file(vj)) {
            *vocab = vj;
            *merges = mt;
            return PZ_OK;
        }
        free(vj);
        free(mt);
        return pz_fail(PZ_ERR_IO, "%s: no tokenizer.json, nor vocab.json with merges.txt, in this directory", path);
    }
    switch (sniff(path)) {
    case TOK_VOCAB:   /* the loader says when the other file is missing */
        *vocab = xstrdup(path);
        *merges = beside(path, "vocab.json", "merges.txt");
        return PZ_OK;
    case TOK_MERGES:
        *merges = xstrdup(path);
        *vocab = beside(path, "merges.txt", "vocab.json");
        return PZ_OK;
    case TOK_JSON: break;
    }
    *json = xstrdup(path);
    return PZ_OK;
}

pz_status pz_bpe_load(const char *path, pz_bpe **out) {
    *out = NULL;
    char *json, *vocab, *merges;
    pz_status st = pz_bpe_files(path, &json, &vocab, &merges);
    if (st) return st;
    if (json) {
        uint8_t *t = NULL;
        size_t n = 0;
        st = read_text(json, &t, &n);
        if (!st) st = pz_bpe_from_tokenizer_json((const char *)t, n, json, out);
        free(t);
    } else {
        st = load_vocab(vocab, merges, out);
    }
    free(json);
    free(vocab);
    free(merges);
    return st;
}
