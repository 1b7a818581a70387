/* shm_cma.c: the single-copy reduction of a D = 2 group on one host (see
 * shm.h). Each member reads the peer's copy of the part it owns straight
 * from the peer's vector (process_vm_readv), sums it into its own, and
 * writes the sums back into the peer's vector (process_vm_writev): every
 * byte crosses once each way, where the two-copy path copies into the
 * segment, out of it, and back. The segment carries only the counters and
 * each member's vector address. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/bytes.h"
#include "base/mem.h"
#include "runtime/dp/shm_priv.h"

/* a piece of the peer's part, read, summed and written back while it is in
 * cache: two system calls a piece, whose cost outweighed staying in L2
 * (docs/results.md: 1 MiB against 64 KiB .. 4 MiB, AMD EPYC) */
#define CMA_PIECE_BYTES ((size_t)1 << 20)

/* bytes between local and the peer's address remote, in the direction
 * write; a short transfer goes on from where it stopped */
static ssize_t move(int pid, int write, void *local, uint64_t remote, size_t bytes) {
    size_t done = 0;
    while (done < bytes) {
        struct iovec l = {(char *)local + done, bytes - done}, r = {(void *)(uintptr_t)(remote + done), bytes - done};
        ssize_t got = write ? process_vm_writev(pid, &l, 1, &r, 1, 0) : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return got < 0 ? -1 : (ssize_t)done;
        done += (size_t)got;
    }
    return (ssize_t)done;
}

/* Whether the process at pid, as the peer sent it, holds the job's nonce
 * at addr (it is the peer, not another process that took a reused pid or a
 * pid of another namespace) and lets this one read it: the kernel asks the
 * same ptrace permission (same user, Yama's ptrace_scope) for a write. */
static int probe(struct pz_dp_shm *S, int pid, uint64_t addr, char *why, size_t cap) {
    uint8_t got[16];
    if (pid <= 0 || addr == 0) {
        snprintf(why, cap, "the peer sent pid %d, address %#llx", pid, (unsigned long long)addr);
        return 0;
    }
    ssize_t n = move(pid, 0, got, addr, sizeof got);
    if (n < 0) {
        int e = errno;
        snprintf(why, cap, "process_vm_readv of pid %d: %s%s", pid, strerror(e),
                 e == EPERM ? ", the kernel's ptrace check: Yama's ptrace_scope or a seccomp filter" : "");
        return 0;
    }
    if (n != (ssize_t)sizeof got || memcmp(got, S->nonce, sizeof got) != 0) {
        snprintf(why, cap, "pid %d does not hold the job's nonce (another pid namespace?)", pid);
        return 0;
    }
    return 1;
}

/* member 0 sends first, member 1 receives first: the set-up's order */
static pz_status swap(pz_dp_group *g, uint32_t k, void *mine, void *theirs, size_t bytes) {
    int peer = 1 - g->me;
    pz_status st = pz_dp_shm_msg(g, g->me == 0, peer, k, g->me == 0 ? mine : theirs, bytes);
    if (st == PZ_OK) st = pz_dp_shm_msg(g, g->me != 0, peer, k, g->me == 0 ? theirs : mine, bytes);
    return st;
}

/* Yama's ptrace_scope 1 (Ubuntu's default) lets a process read only its own
 * descendants, and the members are siblings: each names its peer, whose pid
 * came over the authenticated transport, as the one process that may read
 * it. Without Yama the call fails (EINVAL) and changes nothing; under scope
 * 2 or 3 it does not help and the probe reports the refusal. The exchange
 * after it keeps either member from probing before the other allowed it. */
static pz_status allow_peer(pz_dp_group *g, int pid) {
#ifdef PR_SET_PTRACER
    if (!g->shm_copy && pid > 0) (void)prctl(PR_SET_PTRACER, (unsigned long)pid, 0UL, 0UL, 0UL);
#endif
    uint8_t mine = 1, theirs = 0;
    return swap(g, 5, &mine, &theirs, 1);
}

pz_status pz_dp_shm_cma_setup(pz_dp_group *g, struct pz_dp_shm *S) {
    char why[sizeof S->mode - 64] = "";
    S->cma = 0;
    if (g->n != 2) {
        snprintf(S->mode, sizeof S->mode, "two copies through the segment (single copy is for D = 2, not %d)", g->n);
        return PZ_OK;
    }
    /* the pid and the nonce's address go over the transport, whose frames
     * carry the job's authentication: never read from the segment */
    uint8_t mine[12], theirs[12];
    pz_put_u32(mine, (uint32_t)getpid());
    pz_put_u64(mine + 4, (uint64_t)(uintptr_t)S->nonce);
    pz_status st = swap(g, 3, mine, theirs, sizeof mine);
    if (st != PZ_OK) return st;
    int pid = (int)pz_get_u32(theirs);
    if ((st = allow_peer(g, pid)) != PZ_OK) return st;
    uint8_t ok = 0, peer_ok = 0;
    if (g->shm_copy) snprintf(why, sizeof why, "switched off (shm_copy)");
    else ok = (uint8_t)probe(S, pid, pz_get_u64(theirs + 4), why, sizeof why);
    if ((st = swap(g, 4, &ok, &peer_ok, 1)) != PZ_OK) return st;
    if (peer_ok > 1)
        return pz_fail(PZ_ERR_PEER, "rank %d: dp shared memory set-up: rank %d answered %u to the single-copy probe",
                       g->ranks[g->me], g->ranks[1 - g->me], peer_ok);
    if (ok && !peer_ok) snprintf(why, sizeof why, "rank %d could not reach this process", g->ranks[1 - g->me]);
    S->cma = ok && peer_ok;
    if (!S->cma) {
        snprintf(S->mode, sizeof S->mode, "two copies through the segment (no single copy: %s)", why);
        /* refused by the kernel (seccomp, Yama): said, since it costs time */
        if (!g->shm_copy)
            fprintf(stderr, "pipezip: rank %d: dp all-reduce over shared memory: %s\n", g->ranks[g->me], S->mode);
        return PZ_OK;
    }
    S->peer_pid = pid;
    S->cma_piece = (g->shm_slot_bytes ? g->shm_slot_bytes : CMA_PIECE_BYTES) / sizeof(float);
    if (S->cma_piece == 0) S->cma_piece = 1;
    S->cma_scr = xmalloc(S->cma_piece * sizeof(float));
    snprintf(S->mode, sizeof S->mode, "single copy (process_vm_readv/writev of pid %d, pieces of %zu B)", pid,
             S->cma_piece * sizeof(float));
    return PZ_OK;
}

static pz_status moved_fail(pz_dp_shm_op *op, int write, ssize_t got, size_t bytes) {
    pz_dp_group *g = op->g;
    return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce #%u over shared memory: %s rank %d's vector (pid %d): %s",
                   g->ranks[g->me], op->seq, write ? "writing" : "reading", g->ranks[1 - g->me], g->shm->peer_pid,
                   got < 0 ? strerror(errno) : got < (ssize_t)bytes ? "a short transfer" : "?");
}

pz_status pz_dp_shm_cma_reduce(pz_dp_shm_op *op, uint64_t peer_buf) {
    struct pz_dp_shm *S = op->g->shm;
    size_t lo, hi;
    pz_dp_chunk(op->n, 2, op->g->me, &lo, &hi);
    if (peer_buf == 0 || peer_buf > UINT64_MAX - op->n * sizeof(float))
        return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce #%u over shared memory: rank %d published address %#llx",
                       op->g->ranks[op->g->me], op->seq, op->g->ranks[1 - op->g->me], (unsigned long long)peer_buf);
    float *scr = S->cma_scr;
    const float d = 2.0f;
    for (size_t a = lo; a < hi; a += S->cma_piece) {
        size_t len = hi - a < S->cma_piece ? hi - a : S->cma_piece, bytes = len * sizeof(float);
        uint64_t at = peer_buf + a * sizeof(float);
        ssize_t got = move(S->peer_pid, 0, scr, at, bytes);
        if (got != (ssize_t)bytes) return moved_fail(op, 0, got, bytes);
        /* the ring's order for this member's chunk: its own value, then the
         * peer's (the mean's division in that add), so the ring's bits */
        float *x = op->buf + a;
        if (op->mean)
            for (size_t j = 0; j < len; j++) x[j] = (x[j] + scr[j]) / d;
        else
            for (size_t j = 0; j < len; j++) x[j] += scr[j];
        got = move(S->peer_pid, 1, x, at, bytes);
        if (got != (ssize_t)bytes) return moved_fail(op, 1, got, bytes);
    }
    return PZ_OK;
}
