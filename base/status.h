/* status.h: error codes returned up the stack, with a message per thread.
 *
 * Two kinds of failure, two mechanisms:
 *  - programming or resource failures (out of memory, a write that fails on a
 *    file we already opened) abort through xmalloc/xfwrite (base/mem.h,
 *    base/io/file.h) with file and line;
 *  - bad input from outside (files, flags, peers) is reported with a pz_status
 *    returned up the stack and a message kept in pz_last_error(), so the caller
 *    decides how to fail (the CLI prints it and exits non-zero). */
#ifndef PZ_BASE_STATUS_H
#define PZ_BASE_STATUS_H

#include <stddef.h>

/* C11's _Noreturn; the CUDA files that include this are C++ */
#ifdef __cplusplus
#define PZ_NORETURN [[noreturn]]
#else
#define PZ_NORETURN _Noreturn
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PZ_OK = 0,
    PZ_ERR_IO,      /* open/read/write failed, file truncated */
    PZ_ERR_FORMAT,  /* bad magic, version, header, JSON */
    PZ_ERR_SHAPE,   /* sizes that do not fit together */
    PZ_ERR_ARG,     /* bad command-line or API argument */
    PZ_ERR_NOMEM,   /* an allocation asked for by input was refused */
    PZ_ERR_PEER,    /* a remote process failed or sent garbage */
} pz_status;

const char *pz_status_name(pz_status s);

/* Records a formatted message for the current thread and returns `s`, so
 * library code can write `return pz_fail(PZ_ERR_FORMAT, "%s: bad magic", p);` */
pz_status pz_fail(pz_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *pz_last_error(void);
/* Copies the first line of the last error into buf (cap bytes) and cuts a
 * trailing " at offset N" from it, returning N (0 if there is none): for
 * callers that move a parser's caret into their own, longer text. */
size_t pz_last_error_split(char *buf, size_t cap);

/* Print "pipezip: error: ..." and exit(1). */
PZ_NORETURN void pz_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#ifdef __cplusplus
}
#endif

#endif
