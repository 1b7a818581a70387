/* fuzz_dpmsg.h: what the data-parallel header fuzz entry's receiver expects
 * (shared by fuzz_dpmsg.c and the seeds of fuzz_dpmsg_replay.c). */
#ifndef PZ_TESTS_FUZZ_DPMSG_H
#define PZ_TESTS_FUZZ_DPMSG_H

#include <stddef.h>

#include "runtime/dp/dpmsg.h"

/* the expectation picked by a message's length (modulo 4) */
static inline pz_dpmsg fuzz_dpmsg_expect(size_t len) {
    static const pz_dpmsg w[4] = {
        {PZ_DPMSG_ALLGATHER, 2, 1, 0, 7, 0, 1001, 0},
        {PZ_DPMSG_TO_OWNER, 3, 2, 1, 0, 334, 333, 0},
        {PZ_DPMSG_FROM_OWNER, 256, 255, 255, 0xffffffffu, ~0ull - 5, 5, 0},
        {0, 0, 0, 0, 0, 0, 0, 0},
    };
    return w[len & 3];
}

#endif
