/* rankname.h: how messages name a rank of a job with data-parallel replicas.
 *
 * `train --stages S --replicas D` runs S x D ranks; "rank 5 was killed"
 * leaves the user to work out which stage of which replica that is, under
 * either layout. With D > 1 the launcher's and the transport's messages say
 * "rank 5 (stage 2, replica 1)"; with one replica, "rank 5" as before. The
 * layouts are those of docs/data-parallel.md (runtime/dp/group.h computes
 * the groups from the same rule). */
#ifndef PZ_RANKNAME_H
#define PZ_RANKNAME_H

#include <stddef.h>

typedef struct {
    int stages, replicas;   /* replicas <= 1 (or a zeroed struct): a plain pipeline */
    int replica_major;      /* --layout replica-major: rank = replica x S + stage; else stage x D + replica */
} pz_rank_layout;

/* "rank R" or "rank R (stage s, replica r)" into buf[cap]; returns buf. */
const char *pz_rank_name(const pz_rank_layout *l, int rank, char *buf, size_t cap);

#endif
