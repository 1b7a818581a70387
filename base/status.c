/* status.c: see status.h. */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *pz_status_name(pz_status s) {
    switch (s) {
    case PZ_OK: return "ok";
    case PZ_ERR_IO: return "i/o error";
    case PZ_ERR_FORMAT: return "format error";
    case PZ_ERR_SHAPE: return "shape error";
    case PZ_ERR_ARG: return "bad argument";
    case PZ_ERR_NOMEM: return "out of memory";
    case PZ_ERR_PEER: return "peer error";
    }
    return "unknown error";
}

/* Formats into a copy first: an argument may be pz_last_error() itself
 * (wrapping the previous message), which vsnprintf must not read while it
 * writes the same buffer. */
pz_status pz_fail(pz_status s, const char *fmt, ...) {
    char msg[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_error, msg, sizeof msg);
    return s;
}

const char *pz_last_error(void) { return last_error[0] ? last_error : "(no message)"; }

size_t pz_last_error_split(char *buf, size_t cap) {
    snprintf(buf, cap, "%s", pz_last_error());
    char *nl = strchr(buf, '\n');
    if (nl) *nl = 0;
    size_t off = 0;
    char *at = strstr(buf, " at offset ");
    if (at) {
        off = strtoul(at + 11, NULL, 10);
        *at = 0;
    }
    return off;
}

void pz_die(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs("pipezip: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}
