/* no_cma.h: makes the kernel refuse this process (and what it forks or
 * execs) process_vm_readv and process_vm_writev with EPERM, as a seccomp
 * filter of a container or Yama's ptrace_scope does, so that the tests see
 * the single-copy all-reduce (runtime/dp/shm_cma.c) refused for real. */
#ifndef PZ_TESTS_DP_NO_CMA_H
#define PZ_TESTS_DP_NO_CMA_H

/* 0 when the filter is in place; else -1 with the reason in why (no seccomp
 * on this kernel or architecture: the caller skips). */
int no_cma_install(char *why, unsigned long cap);

#endif
