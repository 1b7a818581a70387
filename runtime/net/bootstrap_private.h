/* bootstrap_private.h: what the parts of the bootstrap share (private to
 * runtime/net/bootstrap*.c): the socket and frame helpers (bootstrap.c)
 * and the two sides of the rendezvous, rank 0's (bootstrap_rank0.c) and a
 * joining rank's (bootstrap_join.c). bootstrap.c runs one of them and holds
 * what comes after: the dead-peer poll and the shutdown barrier. */
#ifndef PZ_BOOTSTRAP_PRIVATE_H
#define PZ_BOOTSTRAP_PRIVATE_H

#include <netdb.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/net/bootmsg.h"
#include "runtime/net/bootstrap.h"

#define HDR_LEN PZ_BOOT_HDR
#define REJECT_MAX PZ_BOOT_REJECT_MAX
enum { F_HELLO = PZ_F_HELLO, F_TABLE = PZ_F_TABLE, F_REJECT = PZ_F_REJECT, F_BYE = PZ_F_BYE, F_ACK = PZ_F_ACK,
       F_AUTH = PZ_F_AUTH, F_CHALLENGE = PZ_F_CHALLENGE, F_PROOF = PZ_F_PROOF, F_ACCEPT = PZ_F_ACCEPT };

#define WAIT_NOTE_S 3.0   /* start-up says what it waits for after this long, then every 4x */

void boot_sleep(double s);
/* Waits for `events` on fd until the deadline: 1 ready, 0 timed out. */
int boot_wait_fd(int fd, short events, double deadline);
/* One frame (header, payload) until the deadline; `who` starts messages. */
pz_status boot_send_frame(int fd, unsigned type, const void *payload, size_t len, double deadline, const char *who);
/* Reads one whole frame; *payload is malloc'ed (NULL when empty). */
pz_status boot_recv_frame(int fd, int world, unsigned *type, uint8_t **payload, size_t *len, double deadline,
                          const char *who);
void boot_socket_options(int fd);   /* no delay, keep-alive */
void boot_close_fd(int *fd);        /* closes and sets -1; -1 is a no-op */
pz_status boot_resolve(const char *host, int port, int passive, struct addrinfo **res, const char *who);

/* The rendezvous of rank 0 (listens, checks every connection, sends the
 * table) and of a joining rank (connects, retries, proves the secret); on
 * failure a message is recorded, and pz_bootstrap_run releases everything
 * in b (closing twice is harmless). */
pz_status boot_run_rank0(pz_bootstrap *b, const char *host, int port, double deadline);
pz_status boot_run_joining(pz_bootstrap *b, const char *host, int port, const void *blob, size_t blen,
                           double deadline);

#endif
