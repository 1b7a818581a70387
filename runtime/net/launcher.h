/* launcher.h: start the stage processes of a pipeline on this host. */
#ifndef PZ_LAUNCHER_H
#define PZ_LAUNCHER_H

#include "runtime/net/transport.h"   /* pz_rank_layout */

/* Re-executes this program `world` times with RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (a free loopback port),
 * and PIPEZIP_JOB_SECRET (unless set already, a random one, new at each start
 * of the ranks, restarts included: see runtime/net/jobsecret.h), forwards each
 * child's stderr with a "[rank r] " prefix and its stdout unchanged (only
 * rank 0 writes the JSON metrics), and waits. If any rank fails (non-zero
 * exit or a signal), it reports which one, terminates the others (SIGTERM,
 * then SIGKILL after a grace period) and, up to max_restarts times, after a
 * back-off of 1, 2, 4 ... 32 s, starts every rank again with --resume auto
 * appended (from the newest checkpoint); then returns 1. SIGTERM or SIGINT to
 * the launcher is forwarded: the ranks stop at the next step boundary (after a
 * checkpoint) and it returns 128 + the signal; a second one kills them.
 * names: how its messages name a rank (NULL: "rank R"; replicas: with stage
 * and replica, runtime/net/transport.h). */
int pz_launch_local(int world, int argc, char **argv, int max_restarts, const pz_rank_layout *names);
/* The exit status of a rank the launcher started that refused the job at
 * start (runtime/ckpt/job.h: another job's checkpoint directory, or one
 * another run holds): restarting cannot help, so the launcher does not, and
 * returns 1. */
#define PZ_EXIT_REFUSED 4
/* The exit status of a rank the launcher started that failed because a peer
 * was lost or stopped answering (PZ_ERR_PEER): the cause is another rank.
 * When ranks end in the same instant, the launcher names a rank killed by a
 * signal first, then one that failed otherwise, and one of these last. */
#define PZ_EXIT_PEER 5

/* A TCP port free on 127.0.0.1 now, drawn at random outside the kernel's
 * ephemeral range (net.ipv4.ip_local_port_range) so that no outgoing
 * connection takes it before it is bound; -1 if none. */
int pz_pick_port(void);

/* Names this process "pipezip r<rank>" for ps -e, top and /proc/PID/comm. */
void pz_name_process(int rank);

/* Rank and world from the environment: RANK/WORLD_SIZE (torchrun),
 * OMPI_COMM_WORLD_RANK/SIZE (mpirun), or SLURM_PROCID/SLURM_NTASKS (srun).
 * Returns 0 if none is set. */
int pz_env_rank(int *rank, int *world, const char **master_addr, int *master_port);

#endif
