/* parse.h: numbers from the command line and other text, whole string or
 * an error naming what was being parsed. */
#ifndef PZ_BASE_PARSE_H
#define PZ_BASE_PARSE_H

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse helpers for the command line: whole string must be a number in range. */
pz_status pz_parse_int(const char *s, long lo, long hi, long *out, const char *what);
pz_status pz_parse_float(const char *s, double lo, double hi, double *out, const char *what);

#ifdef __cplusplus
}
#endif

#endif
