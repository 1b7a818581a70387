/* transport_util.h: what the tests and benchmarks that fork ranks
 * (test_transport, test_boot_auth, tests/runtime/dp/dp_fork.c, bench_transport)
 * need around them. */
#ifndef PZ_TESTS_TRANSPORT_UTIL_H
#define PZ_TESTS_TRANSPORT_UTIL_H

/* a TCP port on 127.0.0.1 that was free a moment ago (exits if none) */
int free_port(void);

/* sets each NAME=VALUE of env (a NULL-terminated list, or NULL) in this
 * process's environment; "NAME=" unsets NAME */
void apply_env(const char *const *env);

/* a line "  [rank R] ..." on stderr: what a forked rank is doing */
void rank_say(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 1 when rank's wait status is what the test expects: killed by SIGKILL
 * for the victim (it kills or stops itself), exit code 0 for the others;
 * else 0 and a line on stderr saying how it ended */
int rank_ended_ok(int rank, int status, int is_victim);

#endif
