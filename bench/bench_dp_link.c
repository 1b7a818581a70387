/* bench_dp_link.c: what compressing the data-parallel exchange buys on a
 * slow link. D forked ranks on 127.0.0.1 (runtime/dp/), every pair joined by
 * the transport's simulated link (pz_transport_set_link: each direction its
 * own link of --mbps, plus --latency-ms), reduce an n-float gradient per step:
 * uncompressed (ring all-reduce) and every codec spec in each mode given.
 * Prints per row the bytes a rank sends per step, the median step time over
 * --steps steps (rank 0's clock; the calls are collective), the speed-up over
 * the uncompressed row and the link's bound for those bytes (the busiest
 * rank's bytes / rate). A printout, not an assertion.
 *
 *   bench_dp_link [--D 2] [--n FLOATS] [--mbps 100] [--latency-ms 0] [--steps 5]
 *                 [--specs sign,q4:group=512,nuq4:code=elias,topk:0.01,jointsq:2]
 *                 [--modes twophase,allgather] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/mem.h"
#include "bench/bench_util.h"
#include "runtime/dp/creduce.h"
#include "tests/runtime/dp/dp_fork.h"

#define MAX_STEPS 64

typedef struct {
    int D, steps;
    size_t n;
    double mbps, lat;
    char specs[512], modes[64];
} opts;

static void die_on(pz_status st, int rank) {
    if (st == PZ_OK) return;
    fprintf(stderr, "rank %d: %s\n", rank, pz_last_error());
    exit(1);
}

static void row(int rank, const char *name, double bytes, double t, double t0, const opts *o) {
    if (rank != 0) return;
    double bound = bytes / (o->mbps * 1e6 / 8.0);
    printf("%-34s %12.0f %10.1f ms %8.2fx %10.1f ms\n", name, bytes, t * 1e3, t0 > 0 ? t0 / t : 1.0, bound * 1e3);
    fflush(stdout);
}

static int child(int rank, int world, int port, void *arg) {
    const opts *o = arg;
    pz_transport *t = NULL;
    die_on(dp_transport(&t, rank, world, port, 120.0), rank);
    int ranks[PZ_DP_MAX];
    pz_dp_layout_ranks(PZ_DP_LAYOUT_CONTIGUOUS, 0, 1, world, ranks);
    pz_dp_group g = {0};
    die_on(pz_dp_group_init(&g, t, rank, ranks, world), rank);
    pz_dp_group_set_link(&g, 0, o->mbps, o->lat);
    float *x = xmalloc(o->n * sizeof *x), *out = xmalloc(o->n * sizeof *out);
    double ts[MAX_STEPS];
    if (rank == 0) {
        printf("D = %d, n = %zu floats, links of %g Mbit/s + %g ms, median of %d steps\n", world, o->n, o->mbps, o->lat,
               o->steps);
        printf("%-34s %12s %13s %9s %13s\n", "exchange", "bytes/rank", "step", "speed-up", "link bound");
    }
    /* uncompressed */
    uint64_t b0 = g.bytes_sent;
    for (int s = 0; s < o->steps; s++) {
        for (size_t i = 0; i < o->n; i++) x[i] = (float)((i * 13 + (size_t)rank + (size_t)s) % 97) * 0.01f - 0.48f;
        die_on(pz_transport_barrier(t), rank);
        double a = pz_now();
        die_on(pz_dp_allreduce(&g, x, o->n, 1, PZ_DP_AUTO), rank);
        ts[s] = pz_now() - a;
    }
    double t_raw = bench_median(ts, o->steps);
    row(rank, "fp32 all-reduce", (double)(g.bytes_sent - b0) / o->steps, t_raw, 0, o);
    char modes[64], specs[512];
    snprintf(modes, sizeof modes, "%s", o->modes);
    for (char *ms = NULL, *m = strtok_r(modes, ",", &ms); m; m = strtok_r(NULL, ",", &ms)) {
        pz_dp_mode mode = !strcmp(m, "allgather") ? PZ_DP_ALLGATHER : PZ_DP_TWOPHASE;
        snprintf(specs, sizeof specs, "%s", o->specs);
        for (char *ss = NULL, *sp = strtok_r(specs, ",", &ss); sp; sp = strtok_r(NULL, ",", &ss)) {
            pz_dp_copts co = {mode, 1, 1, 0, 0, 0};
            pz_dp_creduce *c = NULL;
            die_on(pz_dp_creduce_create(&c, &g, sp, &co, o->n), rank);
            for (int s = 0; s < o->steps; s++) {
                for (size_t i = 0; i < o->n; i++) x[i] = (float)((i * 13 + (size_t)rank + (size_t)s) % 97) * 0.01f - 0.48f;
                die_on(pz_transport_barrier(t), rank);
                double a = pz_now();
                die_on(pz_dp_creduce_run(c, x, out, (uint64_t)s), rank);
                ts[s] = pz_now() - a;
            }
            double sent = 0;
            for (int j = 0; j < world; j++) sent += (double)pz_dp_creduce_sent_to(c)[j];
            char name[96];
            snprintf(name, sizeof name, "%s %s", m, sp);
            row(rank, name, sent / o->steps, bench_median(ts, o->steps), t_raw, o);
            pz_dp_creduce_free(c);
        }
    }
    free(x);
    free(out);
    pz_dp_group_free(&g);
    pz_transport_close(t, 0);
    return 0;
}

int main(int argc, char **argv) {
    opts o = {2, 5, (size_t)1 << 20, 100, 0, "sign,q4:group=512,nuq4:code=elias,topk:0.01,jointsq:2", "twophase,allgather"};
    for (int i = 1; i < argc; i += 2) {   /* every option takes a value */
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { fprintf(stderr, "bench_dp_link: %s needs a value\n", a); return 2; }
        if (!strcmp(a, "--D")) o.D = atoi(v);
        else if (!strcmp(a, "--n")) o.n = (size_t)atol(v);
        else if (!strcmp(a, "--mbps")) o.mbps = atof(v);
        else if (!strcmp(a, "--latency-ms")) o.lat = atof(v);
        else if (!strcmp(a, "--steps")) o.steps = atoi(v);
        else if (!strcmp(a, "--specs")) snprintf(o.specs, sizeof o.specs, "%s", v);
        else if (!strcmp(a, "--modes")) snprintf(o.modes, sizeof o.modes, "%s", v);
        else { fprintf(stderr, "bench_dp_link: unknown option %s\n", a); return 2; }
    }
    if (o.D < 1 || o.D > 16 || o.n < (size_t)o.D || !(o.mbps > 0) || o.lat < 0 || o.steps < 1 || o.steps > MAX_STEPS) {
        fprintf(stderr, "bench_dp_link: bad values (D 1..16, n >= D, mbps > 0, latency >= 0, steps 1..%d)\n", MAX_STEPS);
        return 2;
    }
    return dp_fork_run("bench_dp_link", o.D, 3000, child, &o) ? 0 : 1;
}
