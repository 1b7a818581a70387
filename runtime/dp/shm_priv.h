/* shm_priv.h: what shm.c (set-up, waits, the two-copy reduction) and
 * shm_cma.c (the single-copy reduction of a D = 2 group) share; see shm.h. */
#ifndef PZ_DP_SHM_PRIV_H
#define PZ_DP_SHM_PRIV_H

#include <stdatomic.h>
#include <stdint.h>

#include "runtime/dp/shm.h"

#define PZ_DP_SHM_HDR_BYTES 4096      /* header page, then a member record each */
#define PZ_DP_SHM_MEMBER_BYTES 128    /* two cache lines: no false sharing */

/* one per member, written only by that member */
typedef struct {
    _Atomic uint32_t ctr;       /* the phases it finished: 2k+1, 2k+2 in round k */
    _Atomic uint32_t waiters;   /* members in a futex wait on ctr */
    int32_t pid;
    uint32_t seq;               /* the all-reduce of its current round, and its length */
    uint64_t n;
    uint64_t buf;               /* single copy: its vector's address, for the peer's
                                 * process_vm_readv / writev (set before posting 2k+1) */
} pz_dp_shm_member;

struct pz_dp_shm {
    int state;                  /* 0 undecided, 1 in use, 2 the network (for good), 3 failed */
    uint8_t *base;
    size_t total, slot_bytes, data_off;
    uint32_t next_round;        /* rounds handed to ops so far */
    pz_dp_shm_op *head, *tail;  /* ops in start order */
    char err[256];              /* state 3: the first error */
    uint8_t nonce[16];          /* the offer's; single copy's probe reads the peer's */
    int cma;                    /* 1: the single-copy reduction (shm_cma.c) */
    int peer_pid;               /* its peer's pid, as the peer sent it over the transport */
    size_t cma_piece;           /* floats per read-sum-write piece */
    float *cma_scr;             /* the peer's piece, read here (cma_piece floats) */
    char mode[320];             /* which reduction, and why not the single copy */
};

struct pz_dp_shm_op {
    pz_dp_group *g;
    float *buf;
    size_t n, piece;
    int mean, phase, done;      /* phase: 0 copy in, 1 wait to reduce, 2 wait to copy out */
    uint32_t seq, k0, rounds, r;
    pz_dp_shm_op *next;
};

static inline pz_dp_shm_member *pz_dp_shm_member_at(const struct pz_dp_shm *S, int i) {
    return (pz_dp_shm_member *)(S->base + PZ_DP_SHM_HDR_BYTES + (size_t)i * PZ_DP_SHM_MEMBER_BYTES);
}

/* one set-up message of the group's transport (kind PZ_DP_KIND_SHM, step k),
 * blocking; a receive of another length is PZ_ERR_PEER */
pz_status pz_dp_shm_msg(pz_dp_group *g, int send, int peer, uint32_t k, void *buf, size_t bytes);

/* shm_cma.c. Set-up, collective, after a verdict of 1: whether the group
 * (D = 2) reduces with a single copy, into S->cma, S->mode. */
pz_status pz_dp_shm_cma_setup(pz_dp_group *g, struct pz_dp_shm *S);
/* op's part: the peer's part read piece by piece, summed into op->buf, and
 * the sums written back into the peer's vector (its address: peer_buf). */
pz_status pz_dp_shm_cma_reduce(pz_dp_shm_op *op, uint64_t peer_buf);

#endif
