/* check.h: the CHECK macro of the C tests.
 *
 *   CHECK(cond, fmt, ...)   counts a check; if cond is false, counts a
 *                           failure and prints "FAIL file:line: message"
 *                           (the first CHECK_MAX_PRINTED failures). The
 *                           message arguments are evaluated on failure only.
 *   check_fail(file, line, fmt, ...)
 *                           the failure half of CHECK, for helpers that
 *                           report at their caller's line (count the check
 *                           with checks++ first).
 *   CHECK_STATUS(call, want, needle)
 *                           counts a check: call must return status want and,
 *                           if that is an error and needle is not NULL, its
 *                           message must contain needle (a message must say
 *                           what is wrong, not just that something is).
 *                           PZ_TEST_VERBOSE=1 prints each expected error.
 *   check_status_at(file, line, what, st, want, needle)
 *                           the same on a status already returned, for
 *                           helpers that report at their caller's line.
 *   check_summary(name)     prints "NAME: N checks, M failed" and returns the
 *                           exit status (0 or 1).
 *
 * A test never stops at a failed CHECK, so one run reports every broken
 * case, unless it sets check_fatal (a forked child whose later steps depend
 * on each one: it exits 1 at its first failure). check_tag, if set, comes
 * before each failure line (which rank of a multi-process test failed).
 * Failure lines go to stdout, flushed, in order with the test's own lines. */
#ifndef PZ_TESTS_CHECK_H
#define PZ_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

#ifndef CHECK_MAX_PRINTED
#define CHECK_MAX_PRINTED 50
#endif

static int failures = 0, checks = 0;
static int check_fatal = 0;
static const char *check_tag = "";

__attribute__((format(printf, 3, 4))) static inline void check_fail(const char *file, int line, const char *fmt,
                                                                    ...) {
    failures++;
    if (failures <= CHECK_MAX_PRINTED || check_fatal) {
        va_list ap;
        va_start(ap, fmt);
        printf("%sFAIL %s:%d: ", check_tag, file, line);
        vprintf(fmt, ap);
        printf("\n");
        va_end(ap);
        fflush(stdout);
    }
    if (check_fatal) exit(1);
}

#define CHECK(cond, ...)                                          \
    do {                                                          \
        checks++;                                                 \
        if (!(cond)) check_fail(__FILE__, __LINE__, __VA_ARGS__); \
    } while (0)

#define CHECK_STATUS(call, want, needle) check_status_at(__FILE__, __LINE__, #call, (call), (want), (needle))

static inline void check_status_at(const char *file, int line, const char *what, pz_status st, pz_status want,
                                   const char *needle) {
    checks++;
    if (st != want)
        check_fail(file, line, "%s -> %s [%s], expected %s", what, pz_status_name(st), st ? pz_last_error() : "",
                   pz_status_name(want));
    else if (st && needle && !strstr(pz_last_error(), needle))
        check_fail(file, line, "%s: message [%s] lacks '%s'", what, pz_last_error(), needle);
    else if (st && getenv("PZ_TEST_VERBOSE"))
        printf("  ok %s: %s\n", pz_status_name(st), pz_last_error());
}

static inline int check_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, checks, failures);
    return failures ? 1 : 0;
}

#endif
