/* bootstrap.h: out-of-band TCP rendezvous for the transport (private to
 * runtime/net/transport*.c; its parts are bootstrap.c, bootstrap_rank0.c and
 * bootstrap_join.c, which share bootstrap_private.h).
 *
 * Rank 0 listens on master_addr:master_port; every other rank connects
 * (retrying until the deadline), proves that it knows the job secret and
 * checks rank 0's proof (runtime/net/bootmsg.h has the messages), then sends a
 * HELLO frame with its rank, the world size and an opaque blob (its UCX
 * worker address). Rank 0 checks every HELLO (rank in range, not seen
 * before, same world, sizes bounded) and answers with the TABLE of all
 * blobs, or with REJECT and a reason. The sockets stay open afterwards: they
 * carry the shutdown barrier and tell a rank that the other end of its
 * socket has died (EOF).
 *
 * A connection that fails the handshake (no or a wrong secret, garbage, a
 * frame over its size bound, silence past its own deadline) is refused with
 * a message on rank 0's stderr and on the other side, and takes no rank:
 * rank 0 keeps listening for the real one until the bootstrap deadline.
 * Strangers who flood the port cannot keep ranks on other addresses out: a
 * connection has 5 s for its handshake, at most 64 wait at once and at most
 * 16 from one source address, and a newcomer beyond either takes the slot of
 * the least advanced, oldest one (of its own address, when that holds 16);
 * joining ranks retry when rank 0 drops them before the table. Without a
 * secret anyone who reaches the port may join; rank 0 warns once.
 * Everything received is untrusted. */
#ifndef PZ_BOOTSTRAP_H
#define PZ_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"
#include "runtime/net/bootmsg.h"

typedef struct {
    int rank, world;
    int *fds;          /* rank 0: fds[r] = socket to rank r (r >= 1);
                          others: fds[0] = socket to rank 0; -1 = none/closed */
    int *bye;          /* rank 0: BYE already received from rank r */
    uint8_t **blobs;   /* blobs[r], lens[r]: the table after a successful run */
    size_t *lens;
    const uint8_t *secret;   /* during pz_bootstrap_run only */
    size_t secret_len;
} pz_bootstrap;

/* Runs the rendezvous; on success b holds every rank's blob and the open
 * sockets. On failure everything is released and a message is recorded.
 * secret (secret_len bytes; NULL or 0 = none) is the job secret every rank
 * must hold (runtime/net/jobsecret.h). */
pz_status pz_bootstrap_run(pz_bootstrap *b, int rank, int world, const char *master_addr,
                           int master_port, const void *blob, size_t blob_len, double deadline,
                           const uint8_t *secret, size_t secret_len);

/* Non-blocking check of the sockets: returns a rank whose socket reached EOF,
 * failed or carried garbage since the last call (its fd is then closed, *why
 * says which), or -1. Rank 0 consumes BYE frames here (a rank that finished
 * early); other ranks only peek. */
int pz_bootstrap_poll_dead(pz_bootstrap *b, const char **why);

/* Shutdown barrier: every rank sends BYE to rank 0; rank 0 answers ACK once
 * every rank has said BYE or gone away. `progress(arg)` is called between
 * non-blocking polls (it returns how much work it did) so the caller keeps serving its peers while it waits. A rank
 * that died is not waited for. Returns PZ_ERR_PEER on deadline or when rank 0
 * is gone (the caller may ignore it: it is closing anyway). */
pz_status pz_bootstrap_barrier(pz_bootstrap *b, double deadline, unsigned (*progress)(void *),
                               void *arg);

/* Closes every socket and frees the table. Safe on a zeroed struct. */
void pz_bootstrap_close(pz_bootstrap *b);

#endif
