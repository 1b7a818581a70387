/* report.h: how the schedule checkers of test_schedule and
 * test_schedule_interleaved say what is wrong with a schedule. */
#ifndef PZ_TESTS_SCHED_REPORT_H
#define PZ_TESTS_SCHED_REPORT_H

#include <stdarg.h>
#include <stdio.h>

typedef struct {
    char msg[512];
} report;

/* the checker's verdict: the message into r, and 1 (a defect) */
__attribute__((format(printf, 2, 3))) static inline int bad(report *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    return 1;
}

#endif
