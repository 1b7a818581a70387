/* trace.h: a rank's timeline (forward, backward, send, wait, encode, ...)
 * as Chrome / Perfetto trace events: each rank writes a fragment, the
 * launcher merges them into one file that shows the pipeline's bubbles. */
#ifndef PZ_TRACE_H
#define PZ_TRACE_H

#include <stddef.h>

#include "base/status.h"

typedef struct {
    const char *name;   /* static string: "forward", "wait", "send", ... */
    int micro;          /* -1: not about one micro-batch */
    double t0, t1;      /* pz_now() seconds */
} pz_trace_event;

/* A zeroed pz_trace records nothing; pz_trace_start turns it on. */
typedef struct {
    int on;
    pz_trace_event *ev;
    size_t n, cap;
    double t_origin;
} pz_trace;

void pz_trace_start(pz_trace *t, double t_origin);
void pz_trace_add(pz_trace *t, const char *name, int micro, double t0, double t1);
/* Writes "<path>.rank<rank>" (atomically): the events as one comma-separated
 * list, pid and tid = rank (the world rank), the process named "stage S" or,
 * with replicas (replica >= 0), "stage S replica R". */
pz_status pz_trace_write_fragment(const pz_trace *t, const char *path, int rank, int stage, int replica);
void pz_trace_free(pz_trace *t);

/* Merges the per-rank trace fragments "<path>.rank<r>" into one Chrome /
 * Perfetto trace JSON at path (atomically) and removes the fragments. */
pz_status pz_trace_merge(const char *path, int world);

#endif
