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
        return pz_fail(PZ_ERR_ARG, "%s: %g is out of range [%g, %g]", what, v, lo, hi);
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
