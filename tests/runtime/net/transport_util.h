/* transport_util.h: what tests/runtime/net/test_transport.c and bench/bench_transport.c
 * need around the ranks they fork. */
#ifndef PZ_TESTS_TRANSPORT_UTIL_H
#define PZ_TESTS_TRANSPORT_UTIL_H

/* a TCP port on 127.0.0.1 that was free a moment ago (exits if none) */
int free_port(void);

/* sets each NAME=VALUE of env (a NULL-terminated list, or NULL) in this
 * process's environment; "NAME=" unsets NAME */
void apply_env(const char *const *env);

#endif
