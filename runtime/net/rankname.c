/* rankname.c: see rankname.h. */
#include "runtime/net/rankname.h"

#include <stdio.h>

const char *pz_rank_name(const pz_rank_layout *l, int rank, char *buf, size_t cap) {
    if (!l || l->replicas <= 1 || l->stages < 1 || rank < 0 || rank >= l->stages * l->replicas) {
        snprintf(buf, cap, "rank %d", rank);
        return buf;
    }
    int stage = l->replica_major ? rank % l->stages : rank / l->replicas;
    int replica = l->replica_major ? rank / l->stages : rank % l->replicas;
    snprintf(buf, cap, "rank %d (stage %d, replica %d)", rank, stage, replica);
    return buf;
}
