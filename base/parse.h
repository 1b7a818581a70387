/* parse.h: numbers from the command line and other text, whole string or
 * an error naming what was being parsed. */
#ifndef PZ_BASE_PARSE_H
#define PZ_BASE_PARSE_H

#include <stddef.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse helpers for the command line: whole string must be a number in range. */
pz_status pz_parse_int(const char *s, long lo, long hi, long *out, const char *what);
pz_status pz_parse_float(const char *s, double lo, double hi, double *out, const char *what);

/* An error about one character of a piece of text, with a caret under it:
 * the message is head, indent, text, then a line of spaces ending in '^'
 * under text[pos], counted from the start of the line head and indent end
 * on. E.g. head "policy: unknown edge\n", indent "  " gives
 *     policy: unknown edge
 *       0-2:fwd=q4
 *       ^                                        */
pz_status pz_fail_caret(pz_status s, const char *head, const char *indent, const char *text, size_t pos);

/* The value of key (klen bytes) in text made of "key\tvalue\n" lines (the
 * fingerprints and job descriptions), copied to out (cap bytes, NUL-terminated,
 * truncated); 0 when text has no such key. */
int pz_kv_value(const char *text, const char *key, size_t klen, char *out, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
