/* json.h: a small strict JSON reader over text in memory, for the JSON files
 * pipezip reads (config.json, model.safetensors.index.json, tokenizer.json,
 * vocab.json). It walks the text in place, without building a tree: callers
 * hand a callback for each member of an object or element of an array and
 * consume the value there (read it, or pz_json_skip it).
 *
 * Strict: RFC 8259 grammar exactly (no comments, trailing commas, NaN,
 * single quotes), control characters refused in strings, \u escapes checked
 * (surrogate pairs must pair), nesting at most PZ_JSON_MAX_DEPTH deep. Every
 * failure is PZ_ERR_FORMAT with a message "WHAT: bad JSON at byte N: ...". */
#ifndef PZ_BASE_JSON_H
#define PZ_BASE_JSON_H

#include <stddef.h>
#include "base/status.h"

#define PZ_JSON_MAX_DEPTH 64
#define PZ_JSON_KEY_MAX 1024   /* longest object key a walk hands out, with its NUL */

typedef struct {
    const char *s;     /* the text (not NUL-terminated) */
    size_t n, i;       /* its length and the read position */
    const char *what;  /* names the text in messages (a path) */
    int depth;
} pz_json;

static inline pz_json pz_json_at(const char *text, size_t len, const char *what) {
    pz_json p = {text, len, 0, what, 0};
    return p;
}

/* "WHAT: bad JSON at byte N: msg", PZ_ERR_FORMAT */
pz_status pz_json_fail(pz_json *p, const char *msg);
void pz_json_ws(pz_json *p);
/* the byte at the read position after white space, or 0 at the end */
char pz_json_peek(pz_json *p);
/* A string at p->i (the opening quote), decoded to UTF-8 into out (cap
 * bytes, NUL-terminated) when out is not NULL, else only checked. With out,
 * a string of cap bytes or more, or holding a NUL, is refused. Raw bytes
 * are copied as they are (not checked for UTF-8). *len (may be NULL) gets
 * the decoded length (with out). */
pz_status pz_json_string(pz_json *p, char *out, size_t cap, size_t *len);
/* A number (JSON grammar exactly); *is_int when it has no fraction or exponent. */
pz_status pz_json_number(pz_json *p, double *v, int *is_int);
/* Consumes the literal w ("true", "null") if it is next; 1 if it was. */
int pz_json_lit(pz_json *p, const char *w);
/* Any value, validated and skipped. */
pz_status pz_json_skip(pz_json *p);

/* The object at p->i: on_key(p, key, ctx) is called for each member with
 * p->i at the value, which the callback consumes. With check_dups a key seen
 * twice is refused (linear search: for objects of few keys). Leaves p->i
 * after the closing brace. */
typedef pz_status (*pz_json_key_fn)(pz_json *p, const char *key, void *ctx);
pz_status pz_json_members(pz_json *p, pz_json_key_fn on_key, void *ctx, int check_dups);
/* The array at p->i: on_elem(p, index, ctx) for each element, likewise. */
typedef pz_status (*pz_json_elem_fn)(pz_json *p, size_t index, void *ctx);
pz_status pz_json_elements(pz_json *p, pz_json_elem_fn on_elem, void *ctx);
/* The whole text as one top-level object (members as above), with nothing
 * but white space after it. */
pz_status pz_json_object(pz_json *p, pz_json_key_fn on_key, void *ctx, int check_dups);

#endif
