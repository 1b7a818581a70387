/* parse.c: see parse.h. */
#include "base/parse.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

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
