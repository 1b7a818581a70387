/* json.c: see json.h. */
#include "base/formats/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

pz_status pz_json_fail(pz_json *p, const char *msg) {
    return pz_fail(PZ_ERR_FORMAT, "%s: bad JSON at byte %zu: %s", p->what, p->i, msg);
}

void pz_json_ws(pz_json *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A string at p->i (the opening quote); decoded UTF-8 into out (cap bytes,
 * NUL-terminated) when out is not NULL. A string longer than cap - 1 bytes
 * or holding a NUL is refused when out is given. */
pz_status pz_json_string(pz_json *p, char *out, size_t cap, size_t *len) {
    if (p->i >= p->n || p->s[p->i] != '"') return pz_json_fail(p, "expected a string");
    p->i++;
    size_t k = 0;
    for (;;) {
        if (p->i >= p->n) return pz_json_fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->i++];
        unsigned long cp;
        if (c == '"') break;
        if (c < 0x20) return pz_json_fail(p, "control character in a string");
        if (c != '\\') {
            cp = c;   /* a byte of UTF-8, copied as is */
        } else {
            if (p->i >= p->n) return pz_json_fail(p, "unterminated escape");
            char e = p->s[p->i++];
            switch (e) {
            case '"': cp = '"'; break;
            case '\\': cp = '\\'; break;
            case '/': cp = '/'; break;
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u': {
                if (p->i + 4 > p->n) return pz_json_fail(p, "short \\u escape");
                cp = 0;
                for (int d = 0; d < 4; d++) {
                    int h = hexval(p->s[p->i++]);
                    if (h < 0) return pz_json_fail(p, "bad hex digit in \\u escape");
                    cp = cp * 16 + (unsigned long)h;
                }
                if (cp >= 0xD800 && cp <= 0xDBFF) {   /* a surrogate pair */
                    if (p->i + 6 > p->n || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                        return pz_json_fail(p, "lone high surrogate");
                    p->i += 2;
                    unsigned long lo = 0;
                    for (int d = 0; d < 4; d++) {
                        int h = hexval(p->s[p->i++]);
                        if (h < 0) return pz_json_fail(p, "bad hex digit in \\u escape");
                        lo = lo * 16 + (unsigned long)h;
                    }
                    if (lo < 0xDC00 || lo > 0xDFFF) return pz_json_fail(p, "bad low surrogate");
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return pz_json_fail(p, "lone low surrogate");
                }
                break;
            }
            default: return pz_json_fail(p, "unknown escape");
            }
            if (cp == 0 && out) return pz_json_fail(p, "NUL in a string");
        }
        if (!out) continue;
        /* UTF-8 encode cp (escapes) or copy the byte */
        unsigned char buf[4];
        int m;
        if (c != '\\' || cp < 0x80) { buf[0] = (unsigned char)cp; m = 1; }
        else if (cp < 0x800) { buf[0] = (unsigned char)(0xC0 | (cp >> 6)); buf[1] = (unsigned char)(0x80 | (cp & 63)); m = 2; }
        else if (cp < 0x10000) {
            buf[0] = (unsigned char)(0xE0 | (cp >> 12)); buf[1] = (unsigned char)(0x80 | ((cp >> 6) & 63));
            buf[2] = (unsigned char)(0x80 | (cp & 63)); m = 3;
        } else {
            buf[0] = (unsigned char)(0xF0 | (cp >> 18)); buf[1] = (unsigned char)(0x80 | ((cp >> 12) & 63));
            buf[2] = (unsigned char)(0x80 | ((cp >> 6) & 63)); buf[3] = (unsigned char)(0x80 | (cp & 63)); m = 4;
        }
        if (k + (size_t)m >= cap) return pz_json_fail(p, "string too long");
        memcpy(out + k, buf, (size_t)m);
        k += (size_t)m;
    }
    if (out) out[k] = 0;
    if (len) *len = k;
    return PZ_OK;
}

/* A number (JSON grammar exactly); *is_int when it has no fraction or exponent. */
pz_status pz_json_number(pz_json *p, double *v, int *is_int) {
    size_t b = p->i;
    if (p->i < p->n && p->s[p->i] == '-') p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return pz_json_fail(p, "expected a number");
    if (p->s[p->i] == '0') p->i++;
    else while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    *is_int = 1;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        *is_int = 0;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return pz_json_fail(p, "digit expected after '.'");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        *is_int = 0;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9') return pz_json_fail(p, "digit expected in exponent");
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') p->i++;
    }
    char buf[64];
    size_t len = p->i - b;
    if (len >= sizeof buf) { *v = HUGE_VAL; return PZ_OK; }   /* out of every range we accept */
    memcpy(buf, p->s + b, len);
    buf[len] = 0;
    *v = strtod(buf, NULL);
    return PZ_OK;
}

int pz_json_lit(pz_json *p, const char *w) {
    size_t l = strlen(w);
    if (p->i + l > p->n || memcmp(p->s + p->i, w, l) != 0) return 0;
    p->i += l;
    return 1;
}

/* Any value, validated and skipped. */
pz_status pz_json_skip(pz_json *p) {
    pz_json_ws(p);
    if (p->i >= p->n) return pz_json_fail(p, "value expected");
    char c = p->s[p->i];
    pz_status st;
    if (c == '"') return pz_json_string(p, NULL, 0, NULL);
    if (c == '{' || c == '[') {
        if (++p->depth > PZ_JSON_MAX_DEPTH) return pz_json_fail(p, "nested too deeply");
        char close = c == '{' ? '}' : ']';
        p->i++;
        pz_json_ws(p);
        if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return PZ_OK; }
        for (;;) {
            pz_json_ws(p);
            if (c == '{') {
                if ((st = pz_json_string(p, NULL, 0, NULL))) return st;
                pz_json_ws(p);
                if (p->i >= p->n || p->s[p->i] != ':') return pz_json_fail(p, "':' expected");
                p->i++;
            }
            if ((st = pz_json_skip(p))) return st;
            pz_json_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
            if (p->i < p->n && p->s[p->i] == close) { p->i++; p->depth--; return PZ_OK; }
            return pz_json_fail(p, c == '{' ? "',' or '}' expected" : "',' or ']' expected");
        }
    }
    if (pz_json_lit(p, "true") || pz_json_lit(p, "false") || pz_json_lit(p, "null")) return PZ_OK;
    double v;
    int is_int;
    return pz_json_number(p, &v, &is_int);
}

char pz_json_peek(pz_json *p) {
    pz_json_ws(p);
    return p->i < p->n ? p->s[p->i] : 0;
}

pz_status pz_json_members(pz_json *p, pz_json_key_fn on_key, void *ctx, int check_dups) {
    pz_status st = PZ_OK;
    char **seen = NULL;
    int nseen = 0, capseen = 0;
    char key[PZ_JSON_KEY_MAX];
    if (pz_json_peek(p) != '{') return pz_json_fail(p, "an object expected");
    if (++p->depth > PZ_JSON_MAX_DEPTH) return pz_json_fail(p, "nested too deeply");
    p->i++;
    if (pz_json_peek(p) == '}') { p->i++; goto done; }
    for (;;) {
        pz_json_ws(p);
        if ((st = pz_json_string(p, key, sizeof key, NULL))) goto cleanup;
        if (check_dups) {
            for (int k = 0; k < nseen; k++)
                if (strcmp(seen[k], key) == 0) { st = pz_json_fail(p, "duplicate key"); goto cleanup; }
            if (nseen == capseen) {
                capseen = capseen ? 2 * capseen : 32;
                seen = realloc(seen, (size_t)capseen * sizeof *seen);
                if (!seen) pz_die("out of memory");
            }
            if (!(seen[nseen++] = strdup(key))) pz_die("out of memory");
        }
        if (pz_json_peek(p) != ':') { st = pz_json_fail(p, "':' expected"); goto cleanup; }
        p->i++;
        pz_json_ws(p);
        if ((st = on_key(p, key, ctx))) goto cleanup;
        char c = pz_json_peek(p);
        if (c == ',') { p->i++; continue; }
        if (c == '}') { p->i++; break; }
        st = pz_json_fail(p, "',' or '}' expected");
        goto cleanup;
    }
done:
    p->depth--;
cleanup:
    for (int k = 0; k < nseen; k++) free(seen[k]);
    free(seen);
    return st;
}

pz_status pz_json_elements(pz_json *p, pz_json_elem_fn on_elem, void *ctx) {
    pz_status st;
    if (pz_json_peek(p) != '[') return pz_json_fail(p, "an array expected");
    if (++p->depth > PZ_JSON_MAX_DEPTH) return pz_json_fail(p, "nested too deeply");
    p->i++;
    if (pz_json_peek(p) == ']') { p->i++; p->depth--; return PZ_OK; }
    for (size_t k = 0;; k++) {
        pz_json_ws(p);
        if ((st = on_elem(p, k, ctx))) return st;
        char c = pz_json_peek(p);
        if (c == ',') { p->i++; continue; }
        if (c == ']') { p->i++; break; }
        return pz_json_fail(p, "',' or ']' expected");
    }
    p->depth--;
    return PZ_OK;
}

pz_status pz_json_object(pz_json *p, pz_json_key_fn on_key, void *ctx, int check_dups) {
    if (pz_json_peek(p) != '{') return pz_json_fail(p, "the top level must be an object");
    pz_status st = pz_json_members(p, on_key, ctx, check_dups);
    if (st) return st;
    pz_json_ws(p);
    if (p->i != p->n) return pz_json_fail(p, "text after the top-level object");
    return PZ_OK;
}
