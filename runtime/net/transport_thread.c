/* transport_thread.c: the progress thread of the transport (transport.h,
 * opts.progress_thread): it drives UCX while the caller computes. */
#include "runtime/net/transport_private.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"

/* ---- the progress thread ---------------------------------------------------- */

/* Sleeps on the condition variable until `until` (CLOCK_MONOTONIC seconds)
 * or a kick. Called with the lock held once (cond waits release it). */
static void sleep_until(pz_transport *t, double until) {
    double sec = floor(until);
    struct timespec ts = {(time_t)sec, (long)((until - sec) * 1e9)};
    if (ts.tv_nsec >= 1000000000L) ts.tv_nsec = 999999999L;
    t->thread_sleeps++;
    pthread_cond_timedwait(&t->kick, &t->mu, &ts);
}

/* Drives UCX while the caller computes. Policy, chosen by measurement (see
 * transport.h): after any progress, poll again at once; while a request is
 * in UCX's hands, poll every PROGRESS_POLL_US, doubling the pause after every
 * 8 idle polls up to PROGRESS_POLL_MAX_US (a message being moved makes
 * progress at every poll and keeps the short pause; a receive posted long
 * before its sender computes waits at the long one: 0.1 ms late on a
 * micro-batch of tens of ms, against 6% of a core that polling every 50 us
 * cost on the demo preset); while only throttled sends wait for their
 * simulated release, sleep until the first is due; with nothing in flight,
 * sleep until a post kicks the thread (or 50 ms, for the bootstrap failure
 * checks). */
#define PROGRESS_POLL_US 50
#define PROGRESS_POLL_MAX_US 800
static void *progress_main(void *arg) {
    pz_transport *t = arg;
    unsigned idle = 0;   /* polls in a row that found nothing */
    lock(t);
    while (!t->stop) {
        unsigned work = tp_step(t);
        t->thread_rounds++;
        if (work) {
            idle = 0;
            continue;
        }
        idle++;
        int in_ucx = 0;
        double next_release = INFINITY;
        for (pz_request *r = t->live; r; r = r->next) {
            if (r->queued) {
                if (r->release_at < next_release) next_release = r->release_at;
            } else if (!r->done) {
                in_ucx = 1;
            }
        }
        double now = pz_now();
        if (in_ucx) {
            unlock(t);
            long us = PROGRESS_POLL_US;
            for (unsigned k = idle / 8; k && us < PROGRESS_POLL_MAX_US; k--) us *= 2;
            if (us > PROGRESS_POLL_MAX_US) us = PROGRESS_POLL_MAX_US;
            struct timespec ts = {0, us * 1000L};
            t->thread_sleeps++;   /* a plain counter: only this thread writes it */
            nanosleep(&ts, NULL);
            lock(t);
        } else {
            double until = now + 0.05;
            if (next_release < until) until = next_release;
            if (until > now) sleep_until(t, until);
        }
    }
    unlock(t);
    return NULL;
}

pz_status tp_thread_start(pz_transport *t) {
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0) return pz_fail(PZ_ERR_IO, "rank %d: pthread_condattr_init failed", t->rank);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&t->kick, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) return pz_fail(PZ_ERR_IO, "rank %d: pthread_cond_init: %s", t->rank, strerror(rc));
    t->stop = 0;
    if ((rc = pthread_create(&t->thread, NULL, progress_main, t)) != 0) {
        pthread_cond_destroy(&t->kick);
        return pz_fail(PZ_ERR_IO, "rank %d: cannot start the progress thread: %s", t->rank, strerror(rc));
    }
    t->has_thread = 1;
    return PZ_OK;
}

void tp_thread_stop(pz_transport *t) {
    if (!t->has_thread) return;
    lock(t);
    t->stop = 1;
    pthread_cond_signal(&t->kick);
    unlock(t);
    pthread_join(t->thread, NULL);
    pthread_cond_destroy(&t->kick);
    t->has_thread = 0;
}

int pz_transport_thread_stats(pz_transport *t, double *cpu_s, unsigned long *rounds, unsigned long *sleeps) {
    if (!t || !t->has_thread) return 0;
    clockid_t cid;
    struct timespec ts = {0, 0};
    if (pthread_getcpuclockid(t->thread, &cid) == 0) clock_gettime(cid, &ts);
    *cpu_s = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    lock(t);
    *rounds = t->thread_rounds;
    *sleeps = t->thread_sleeps;
    unlock(t);
    return 1;
}

