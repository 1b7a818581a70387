/* transport_init.c: the transport's init and close (transport.h): the
 * bootstrap, the UCP context, worker and endpoints to every peer, the
 * all-to-all hello that wires every pair, the progress thread; close
 * drains, says goodbye over the bootstrap and frees everything. The UCX
 * settings it chooses are explained in transport.c. */
#include "runtime/net/transport_private.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucp/api/ucp.h>

#include "base/clock.h"
#include "base/mem.h"

static void destroy(pz_transport *t, int failed) {
    tp_thread_stop(t);   /* from here on only this thread touches UCX */
    t->closing = 1;
    /* the caller's requests are void from here on; posted receives are cancelled */
    for (pz_request *r = t->live, *nx; r; r = nx) {
        nx = r->next;
        tp_req_release(r);
    }
    if (t->peers) {
        double deadline = pz_now() + (failed ? 2.0 : t->peer_timeout_s);
        /* clean: let outstanding sends finish before the endpoints flush */
        while (!failed && t->live && pz_now() < deadline) tp_step(t);
        for (int i = 0; i < t->world; i++) tp_ep_close(&t->peers[i], failed || t->peers[i].failed || t->live);
        for (;;) {
            unsigned work = tp_step(t);
            int pending = 0;
            for (int i = 0; i < t->world; i++) pending += t->peers[i].close_req != NULL;
            if (!pending || pz_now() > deadline) break;
            if (!work) {
                struct timespec ts = {0, 20000};
                nanosleep(&ts, NULL);
            }
        }
        /* no one leaves while someone may still be flushing towards it */
        if (!failed) pz_bootstrap_barrier(&t->boot, pz_now() + t->peer_timeout_s, tp_step_cb, t);
        for (int i = 0; i < t->world; i++)
            if (t->peers[i].close_req) {
                ucp_request_free(t->peers[i].close_req);
                t->peers[i].close_req = NULL;
            }
    }
    if (t->worker) ucp_worker_destroy(t->worker);
    if (t->ctx) ucp_cleanup(t->ctx);
    while (t->live) tp_req_free(t->live); /* ops UCX never completed; no callback can come now */
    pz_bootstrap_close(&t->boot);
    free(t->peers);
    if (t->has_mu) pthread_mutex_destroy(&t->mu);
    free(t);
}

void pz_transport_close(pz_transport *t, int failed) {
    if (t) destroy(t, failed);
}

/* Every rank sends a small hello to every other rank and receives theirs,
 * so all endpoints are wired up before the caller starts timing anything. */
static pz_status hello_all(pz_transport *t) {
    int W = t->world;
    double deadline = pz_now() + t->connect_timeout_s;
    uint32_t *in = xcalloc((size_t)W * 2, sizeof *in), out[2] = {HELLO_MAGIC, (uint32_t)t->rank};
    pz_request **rr = xcalloc((size_t)W, sizeof *rr), **sr = xcalloc((size_t)W, sizeof *sr);
    char what[WHAT_MAX];
    pz_status st = PZ_OK;
    for (int p = 0; p < W && st == PZ_OK; p++) {
        if (p == t->rank) continue;
        snprintf(what, sizeof what, "UCX hello from rank %d", p);
        st = tp_post_recv(t, p, pz_tag(p, 0, 0, K_HELLO), in + 2 * p, 8, what, &rr[p]);
        snprintf(what, sizeof what, "UCX hello to rank %d", p);
        if (st == PZ_OK) st = tp_post_send(t, p, pz_tag(t->rank, 0, 0, K_HELLO), out, 8, what, &sr[p], NULL);
    }
    for (int p = 0; p < W && st == PZ_OK; p++) {
        if (p == t->rank) continue;
        size_t got = 0;
        st = tp_wait_for(t, rr[p], &got, tp_left_until(deadline), NULL);
        rr[p] = NULL;
        if (st == PZ_OK && (got != 8 || in[2 * p] != HELLO_MAGIC || in[2 * p + 1] != (uint32_t)p))
            st = pz_fail(PZ_ERR_PEER, "rank %d: bad UCX hello from rank %d", t->rank, p);
        if (st == PZ_OK) st = tp_wait_for(t, sr[p], NULL, tp_left_until(deadline), NULL);
        sr[p] = NULL;
    }
    for (int p = 0; p < W; p++) {
        if (rr[p]) tp_req_release(rr[p]);
        if (sr[p]) tp_req_release(sr[p]);
    }
    free(rr);
    free(sr);
    free(in);
    return st;
}

void pz_transport_print_info(pz_transport *t, FILE *f) {
    lock(t);
    for (int p = 0; p < t->world; p++) {
        if (p == t->rank) continue;
        fprintf(f, "rank %d: endpoint to rank %d%s\n", t->rank, p, t->peers[p].ep ? "" : " (closed)");
        if (t->peers[p].ep) ucp_ep_print_info(t->peers[p].ep, f);
    }
    fflush(f);
    unlock(t);
}

int pz_transport_has_cuda_memory(pz_transport *t) {
    ucp_context_attr_t ca;
    memset(&ca, 0, sizeof ca);
    ca.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(t->ctx, &ca) != UCS_OK) return 0;
    return (ca.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
}

/* Sets UCX_<name> unless the environment already does. */
static void set_default(ucp_config_t *cfg, const char *name, const char *value) {
    char env[64];
    snprintf(env, sizeof env, "UCX_%s", name);
    if (!getenv(env)) ucp_config_modify(cfg, name, value);
}

/* Whether UCX_TLS may enable a shared-memory (mm) transport: unset, an
 * exclusion list (^...), or a list naming one. Otherwise UCX would warn that
 * MM_ERROR_HANDLING configures nothing. */
static int tls_may_use_mm(void) {
    const char *tls = getenv("UCX_TLS");
    if (!tls || !*tls || tls[0] == '^') return 1;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", tls);
    static const char *const mm[] = {"all", "sm", "shm", "mm", "posix", "sysv"};
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (*tok == '\\') tok++; /* a leading backslash names that exact transport */
        for (size_t i = 0; i < sizeof mm / sizeof mm[0]; i++)
            if (!strcmp(tok, mm[i])) return 1;
    }
    return 0;
}

static pz_status ucx_fail(pz_transport *t, const char *what, ucs_status_t st) {
    return pz_fail(PZ_ERR_IO, "rank %d: %s failed: %s", t->rank, what, ucs_status_string(st));
}

pz_status pz_transport_init(pz_transport **out, const pz_transport_opts *o) {
    if (!out || !o) return pz_fail(PZ_ERR_ARG, "pz_transport_init: NULL argument");
    *out = NULL;
    if (o->world < 1 || o->world > PZ_BOOT_MAX_WORLD)
        return pz_fail(PZ_ERR_ARG, "world size %d out of range 1..%d", o->world, PZ_BOOT_MAX_WORLD);
    if (o->rank < 0 || o->rank >= o->world)
        return pz_fail(PZ_ERR_ARG, "rank %d out of range 0..%d", o->rank, o->world - 1);
    if (!(o->peer_timeout_s >= 0) || !(o->connect_timeout_s >= 0))
        return pz_fail(PZ_ERR_ARG, "negative or NaN timeout");

    pz_transport *t = xcalloc(1, sizeof *t);
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
    t->has_mu = pthread_mutex_init(&t->mu, &ma) == 0;
    pthread_mutexattr_destroy(&ma);
    t->rank = o->rank;
    t->world = o->world;
    t->fault_kind = -1;
    t->peer_timeout_s = o->peer_timeout_s > 0 ? o->peer_timeout_s : 60.0;
    t->connect_timeout_s = o->connect_timeout_s > 0 ? o->connect_timeout_s : 60.0;
    double deadline = pz_now() + t->connect_timeout_s;

    pz_status st = PZ_OK;
    ucp_config_t *cfg;
    ucs_status_t us = ucp_config_read(NULL, NULL, &cfg);
    if (us != UCS_OK) { st = ucx_fail(t, "reading the UCX configuration", us); goto fail; }
    /* Defaults that the environment can override (see the top of this file):
     * shared memory may carry same-host traffic under error mode PEER, and
     * keepalive runs every second so a killed peer behind a shared-memory
     * lane (no socket to break) is noticed within ~2 s. */
    if (tls_may_use_mm()) {
        set_default(cfg, "MM_ERROR_HANDLING", "y");
        set_default(cfg, "MM_FIFO_SIZE", "1024");
    }
    set_default(cfg, "KEEPALIVE_INTERVAL", "1s");
    ucp_params_t prm;
    memset(&prm, 0, sizeof prm);
    prm.field_mask = UCP_PARAM_FIELD_FEATURES;
    prm.features = UCP_FEATURE_TAG;
    us = ucp_init(&prm, cfg, &t->ctx);
    ucp_config_release(cfg);
    if (us != UCS_OK) { t->ctx = NULL; st = ucx_fail(t, "ucp_init", us); goto fail; }

    ucp_worker_params_t wp;
    memset(&wp, 0, sizeof wp);
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    /* with a progress thread two threads use the worker, never at once (mu) */
    wp.thread_mode = o->progress_thread ? UCS_THREAD_MODE_SERIALIZED : UCS_THREAD_MODE_SINGLE;
    us = ucp_worker_create(t->ctx, &wp, &t->worker);
    if (us != UCS_OK) { t->worker = NULL; st = ucx_fail(t, "ucp_worker_create", us); goto fail; }

    ucp_worker_attr_t wa;
    memset(&wa, 0, sizeof wa);
    wa.field_mask = UCP_WORKER_ATTR_FIELD_ADDRESS;
    us = ucp_worker_query(t->worker, &wa);
    if (us != UCS_OK) { st = ucx_fail(t, "ucp_worker_query", us); goto fail; }
    st = pz_bootstrap_run(&t->boot, t->rank, t->world, o->master_addr, o->master_port, wa.address,
                                    wa.address_length, deadline, o->secret, o->secret_len);
    ucp_worker_release_address(t->worker, wa.address);
    if (st != PZ_OK) goto fail;
    t->job = tp_job_id(&t->boot);

    t->peers = xcalloc((size_t)t->world, sizeof *t->peers);
    for (int p = 0; p < t->world; p++) {
        tp_peer *pp = &t->peers[p];
        pp->t = t;
        pp->rank = p;
        if (p == t->rank) continue;
        ucp_ep_params_t ep;
        memset(&ep, 0, sizeof ep);
        ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
        ep.address = (const ucp_address_t *)t->boot.blobs[p];
        ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        ep.err_handler.cb = tp_on_ep_error;
        ep.err_handler.arg = pp;
        us = ucp_ep_create(t->worker, &ep, &pp->ep);
        if (us != UCS_OK) {
            pp->ep = NULL;
            st = pz_fail(PZ_ERR_PEER, "rank %d: cannot create a UCX endpoint to rank %d: %s (check UCX_TLS)",
                         t->rank, p, ucs_status_string(us));
            goto fail;
        }
    }
    if (t->world > 1 && (st = hello_all(t)) != PZ_OK) goto fail;
    if (o->progress_thread && t->world > 1) {
        if (!t->has_mu) { st = pz_fail(PZ_ERR_IO, "rank %d: cannot create the transport lock", t->rank); goto fail; }
        if ((st = tp_thread_start(t)) != PZ_OK) goto fail;
    }
    const char *info = getenv("PZ_TRANSPORT_INFO");
    if (info && *info && *info != '0') pz_transport_print_info(t, stderr);
    *out = t;
    return PZ_OK;

fail:
    destroy(t, 1);   /* failed: no shutdown barrier, so the message above stays */
    return st;
}

