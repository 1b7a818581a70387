/* dp_fork.h: runs one function as `world` forked ranks on 127.0.0.1 (the
 * data-parallel tests; the pattern of tests/runtime/net/test_transport.c): the
 * parent never touches UCX, waits with a deadline, kills what is left and
 * checks that every rank exited 0. The child sets its own check_tag and
 * check_fatal (tests/check.h keeps them per file). */
#ifndef PZ_TESTS_DP_FORK_H
#define PZ_TESTS_DP_FORK_H

#include "runtime/dp/group.h"
#include "runtime/net/transport.h"

typedef int (*dp_child_fn)(int rank, int world, int port, void *arg);

/* 1 when every rank exited 0 within limit_s; prints "ok/FAIL - name". */
int dp_fork_run(const char *name, int world, double limit_s, dp_child_fn fn, void *arg);
/* The same with one rank, `victim`, that kills or stops itself: it is
 * SIGKILLed once the others are done, and must end by SIGKILL. */
int dp_fork_run_victim(const char *name, int world, double limit_s, dp_child_fn fn, void *arg, int victim);

/* A transport for rank of world on port (UCX over shared memory or tcp as
 * the environment says), with a job secret and peer timeout. */
pz_status dp_transport(pz_transport **t, int rank, int world, int port, double peer_timeout_s);
/* dp_transport, and *g the group of all `world` ranks in rank order. */
pz_status dp_world_group(pz_transport **t, pz_dp_group *g, int rank, int world, int port, double peer_timeout_s);

#endif
