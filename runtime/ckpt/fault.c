/* fault.c: see fault.h. */
#include "runtime/ckpt/fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fault_armed;
void pz_fault_arm(int armed) { fault_armed = armed; }

void pz_fault_point(const char *what, int step, int rank) {
    const char *f = fault_armed ? getenv("PIPEZIP_FAULT") : NULL;
    char w[32];
    int s, r;
    if (!f || sscanf(f, "%31[a-z]:%d:%d", w, &s, &r) != 3) return;
    if (strcmp(w, what) == 0 && s == step && r == rank) {
        int freeze = strcmp(what, "end") == 0;
        fprintf(stderr, "pipezip train: rank %d: PIPEZIP_FAULT=%s: %s at %s %d\n", rank, f,
                freeze ? "stopping (SIGSTOP)" : "exiting", what, step);
        fflush(NULL);
        if (freeze) raise(SIGSTOP);
        else _exit(3);
    }
}

void pz_fault_flip(pz_transport *tp, int rank, int armed) {
    const char *f = armed ? getenv("PIPEZIP_FAULT_FLIP") : NULL;
    char w[32], at[32] = "payload";
    int s, r;
    if (!f || !tp || sscanf(f, "%31[a-z]:%d:%d:%31s", w, &s, &r, at) < 3 || r != rank || s < 0) return;
    static const char *const names[] = {"activation", "gradient", "tied"};
    static const unsigned kinds[] = {PZ_KIND_ACT, PZ_KIND_GRAD, PZ_KIND_TIED};
    long off = !strcmp(at, "payload") ? -1 : !strcmp(at, "header") ? 16 : strtol(at, NULL, 10);
    for (int k = 0; k < 3; k++)
        if (!strcmp(w, names[k])) pz_transport_fault_flip(tp, kinds[k], (uint32_t)s, off);
}
