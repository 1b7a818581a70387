/* trace.c: see trace.h. */
#include "runtime/observe/trace.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/io/file.h"
#include "base/status.h"

void pz_trace_start(pz_trace *t, double t_origin) {
    t->on = 1;
    t->t_origin = t_origin;
}

void pz_trace_add(pz_trace *t, const char *name, int micro, double t0, double t1) {
    if (!t->on) return;
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 1024;
        t->ev = realloc(t->ev, t->cap * sizeof *t->ev);
        if (!t->ev) pz_die("out of memory for trace events");
    }
    t->ev[t->n++] = (pz_trace_event){name, micro, t0, t1};
}

pz_status pz_trace_write_fragment(const pz_trace *t, const char *path, int rank, int stage, int replica) {
    char frag[4096];
    snprintf(frag, sizeof frag, "%s.rank%d", path, rank);
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, frag);
    if (st != PZ_OK) return st;
    for (size_t k = 0; k < t->n; k++) {
        const pz_trace_event *e = &t->ev[k];
        char name[48];
        if (e->micro >= 0) snprintf(name, sizeof name, "%s %d", e->name, e->micro);
        else snprintf(name, sizeof name, "%s", e->name);
        fprintf(af.f, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f},\n",
                name, e->name, rank, rank, 1e6 * (e->t0 - t->t_origin), 1e6 * (e->t1 - e->t0));
    }
    char who[48];
    if (replica >= 0) snprintf(who, sizeof who, "stage %d replica %d", stage, replica);
    else snprintf(who, sizeof who, "stage %d", stage);
    fprintf(af.f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"%s\"}}\n", rank, who);
    return pz_atomic_commit(&af);
}

void pz_trace_free(pz_trace *t) {
    free(t->ev);
    t->ev = NULL;
    t->n = t->cap = 0;
}

pz_status pz_trace_merge(const char *path, int world) {
    pz_atomic_file af;
    pz_status st = pz_atomic_open(&af, path);
    if (st != PZ_OK) return st;
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", af.f);
    for (int r = 0; r < world && st == PZ_OK; r++) {
        char frag[4096];
        snprintf(frag, sizeof frag, "%s.rank%d", path, r);
        uint8_t *buf;
        size_t len;
        if ((st = pz_read_file(frag, &buf, &len)) != PZ_OK) break;
        /* each fragment is a comma-separated list of events ending without a comma */
        if (r > 0) fputs(",\n", af.f);
        fwrite(buf, 1, len, af.f);
        free(buf);
        remove(frag);
    }
    fputs("]}\n", af.f);
    if (st != PZ_OK) { pz_atomic_abort(&af); return st; }
    return pz_atomic_commit(&af);
}
