/* shm.h: the data-parallel all-reduce through POSIX shared memory, for a
 * group whose members all run on this host (group.c picks it; callers of
 * pz_dp_allreduce* never do).
 *
 * Set-up (once per group, collective, in the first all-reduce that may take
 * this path): member 0 creates a segment under a random name (128 bits from
 * libcrypto's RNG; O_CREAT | O_EXCL, mode 0600) and offers its name, size,
 * slot size and a random nonce, written into its header, to every member
 * over the group's transport, whose frames carry the job's authentication:
 * a process outside the job never learns the name. Each member checks the
 * offer (name's form, sizes against the group's, the header's fields and
 * nonce as read from the mapping, so it mapped the segment member 0 made),
 * maps it and answers; member 0 unlinks the name once every answer is in,
 * then sends the verdict. A member on another host (or in another /dev/shm)
 * cannot open the name: the verdict is then the network, for good. A
 * malformed offer or answer is PZ_ERR_PEER on every member.
 *
 * Single copy (D = 2, shm_cma.c), the reduction where the kernel lets it:
 * after the verdict the two members swap their pids and the addresses of
 * their copies of the nonce over the transport, and each reads the other's
 * nonce with process_vm_readv: the pid is the peer's (not a reused pid or
 * one of another pid namespace) and the kernel grants the access (same user,
 * ptrace_scope). Both must succeed, or the group keeps the two copies below,
 * with the reason in pz_dp_shm_mode. No process gains any access it did not
 * have: the kernel's ptrace check decides, nothing here widens it. One round
 * per all-reduce: each member publishes its vector's address in its record
 * and posts 2k+1; once the peer has, it reads the peer's copy of its own
 * part (the ring's chunk of the whole vector) in pieces of 1 MiB, sums it
 * into its vector and writes the sums into the peer's vector, then posts
 * 2k+2; once the peer has, its vector holds the whole result (the ring's
 * bits: its own value plus the peer's, as the ring adds in its chunk). Neither
 * touches the other's part of its own vector meanwhile, and neither returns
 * before the other stopped touching its vector.
 *
 * Two copies (D >= 3, or no single copy): the vector passes through in
 * pieces of one slot (per member, two sets used in turn); each piece is split
 * into D parts, part r reduced by member r. Round k of a piece: every member copies the parts of the others
 * into its slot (its own part stays in its buffer) and posts 2k+1; once all
 * have, member r sums part r from the D sources into its slot and its buffer
 * and posts 2k+2; once all have, each copies the other parts' sums out. The
 * next round uses the other set, so it may start once everyone posted 2k+2.
 * Each element is summed in the order the ring sums it (group.c: starting at
 * the member whose ring chunk of the whole vector holds it, then the next
 * members in turn, the mean's division in the last add), so the bits are the
 * ring's, and with D = 2 recursive doubling's too (a + b either way).
 *
 * Waiting: poll ~20 us, then futex waits of 1 ms (a post wakes them); --peer-timeout bounds each wait, and a member whose process is gone
 * (kill(pid, 0)) is named at once. After any error the path is off for good
 * and the group's later all-reduces fail the same way (close the transport,
 * as after any dp error). */
#ifndef PZ_DP_SHM_H
#define PZ_DP_SHM_H

#include <stddef.h>

#include "runtime/dp/group.h"

/* the offer's name field: "/pz-dp-PID-" (member 0's pid, so that a later
 * member 0 removes what a killed one left) and 32 random hex digits */
#define PZ_DP_SHM_NAME_LEN 64

typedef struct pz_dp_shm_op pz_dp_shm_op;

/* *use = whether an all-reduce of n floats with algo takes the shared-memory
 * path (making the segment on the first call that may: collective). */
pz_status pz_dp_shm_pick(pz_dp_group *g, size_t n, pz_dp_algo algo, int *use);
/* Starts one (the copy-in of its first piece, when the ops before it are
 * done); g->seq counts it. */
pz_status pz_dp_shm_start(pz_dp_group *g, float *buf, size_t n, int mean, pz_dp_shm_op **op);
/* Advances the ops started before op, then op; *done = 1 when op is.
 * block: until done or an error. */
pz_status pz_dp_shm_advance(pz_dp_shm_op *op, int block, int *done);
void pz_dp_shm_op_free(pz_dp_shm_op *op);
/* Whether the group's all-reduces go through a segment now (tests). */
int pz_dp_shm_active(const pz_dp_group *g);
/* Which reduction the group's segment runs, and why not the single copy
 * ("not in use" without a segment). */
const char *pz_dp_shm_mode(const pz_dp_group *g);
/* Unmaps the group's segment (g->shm); safe when none. */
void pz_dp_shm_free(pz_dp_group *g);

#endif
