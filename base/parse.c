/* parse.c: see parse.h. */
#include "base/parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

pz_status pz_parse_int(const char *s, long lo, long hi, long *out, const char *what) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno)
        return pz_fail(PZ_ERR_ARG, "%s: '%s' is not an integer", what, s);
    if (v < lo || v > hi)
        return pz_fail(PZ_ERR_ARG, "%s: %ld is out of range [%ld, %ld]", what, v, lo, hi);
    *out = v;
    return PZ_OK;
}

pz_status pz_parse_float(const char *s, double lo, double hi, double *out, const char *what) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return pz_fail(PZ_ERR_ARG, "%s: '%s' is not a finite number", what, s);
    if (v < lo || v > hi)
        /* the value as written: %g said '--lr: 10 is out of range [0, 10]' for 10.000001 */
        return pz_fail(PZ_ERR_ARG, "%s: %s is out of range [%.15g, %.15g]", what, s, lo, hi);
    *out = v;
    return PZ_OK;
}

pz_status pz_fail_caret(pz_status s, const char *head, const char *indent, const char *text, size_t pos) {
    size_t len = strlen(text);
    if (pos > len) pos = len;
    /* the column: what of head and indent stands on the text's line */
    const char *nl = strrchr(head, '\n');
    size_t col = strlen(nl ? nl + 1 : head) + strlen(indent) + pos;
    if (col > 2000) col = 2000;   /* the message is cut long before (pz_fail) */
    return pz_fail(s, "%s%s%.2000s\n%*s^", head, indent, text, (int)col, "");
}

/* the value of key in text ("key\tvalue\n" lines), copied to out; 0 if absent */
int pz_kv_value(const char *text, const char *key, size_t klen, char *out, size_t cap) {
    for (const char *p = text; *p;) {
        const char *tab = strchr(p, '\t'), *nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (tab && tab < nl && (size_t)(tab - p) == klen && memcmp(p, key, klen) == 0) {
            size_t n = (size_t)(nl - tab - 1);
            if (n >= cap) n = cap - 1;
            memcpy(out, tab + 1, n);
            out[n] = 0;
            return 1;
        }
        p = *nl ? nl + 1 : nl;
    }
    return 0;
}
