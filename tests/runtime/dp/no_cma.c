/* no_cma.c: see no_cma.h. A classic BPF seccomp filter written by hand (no
 * libseccomp): other architectures, and every other system call, pass. */
#include "tests/runtime/dp/no_cma.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#if defined(__x86_64__)
#define NO_CMA_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NO_CMA_ARCH AUDIT_ARCH_AARCH64
#endif

int no_cma_install(char *why, unsigned long cap) {
#ifndef NO_CMA_ARCH
    snprintf(why, cap, "no seccomp filter for this architecture in the test");
    return -1;
#else
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_CMA_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof f / sizeof f[0]), f};
    /* without it an unprivileged process may not install a filter */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        snprintf(why, cap, "seccomp filter: %s", strerror(errno));
        return -1;
    }
    return 0;
#endif
}
