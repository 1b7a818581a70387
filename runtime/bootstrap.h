/* bootstrap.h: out-of-band TCP rendezvous for the transport (private to
 * runtime/transport.c).
 *
 * Rank 0 listens on master_addr:master_port; every other rank connects
 * (retrying until the deadline) and sends a HELLO frame with its rank, the
 * world size and an opaque blob (its UCX worker address). Rank 0 checks every
 * HELLO (rank in range, not seen before, same world, sizes bounded) and
 * answers with the TABLE of all blobs, or with REJECT and a reason. The
 * sockets stay open afterwards: they carry the shutdown barrier and tell a
 * rank that the other end of its socket has died (EOF).
 *
 * Wire format, all integers little-endian: every frame is a 12-byte header
 *   u32 magic "PZBS", u16 version, u16 type, u32 payload length
 * followed by the payload. Lengths are bounded per type before anything is
 * allocated; everything received is treated as untrusted. */
#ifndef PZ_BOOTSTRAP_H
#define PZ_BOOTSTRAP_H

#include <stddef.h>
#include <stdint.h>
#include "base/status.h"

#define PZ_BOOT_MAX_WORLD 256     /* the tag has 8 bits for the source rank */
#define PZ_BOOT_MAX_BLOB 4096     /* a full UCX worker address is ~200 B */

typedef struct {
    int rank, world;
    int *fds;          /* rank 0: fds[r] = socket to rank r (r >= 1);
                          others: fds[0] = socket to rank 0; -1 = none/closed */
    int *bye;          /* rank 0: BYE already received from rank r */
    uint8_t **blobs;   /* blobs[r], lens[r]: the table after a successful run */
    size_t *lens;
} pz_bootstrap;

/* Runs the rendezvous; on success b holds every rank's blob and the open
 * sockets. On failure everything is released and a message is recorded. */
pz_status pz_bootstrap_run(pz_bootstrap *b, int rank, int world, const char *master_addr,
                           int master_port, const void *blob, size_t blob_len, double deadline);

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
