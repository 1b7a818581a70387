/* fuzz_frame.h: what the frame fuzz entry's receiver expects (shared by
 * fuzz_frame.c and the seeds of fuzz_frame_replay.c). */
#ifndef PZ_TESTS_FUZZ_FRAME_H
#define PZ_TESTS_FUZZ_FRAME_H

#include <stddef.h>

#include "runtime/net/frame.h"

/* the expectation picked by a message's payload length (modulo 4) */
static inline pz_frame_id fuzz_frame_expect(size_t payload_len) {
    static const pz_frame_id ids[4] = {
        {0x0123456789abcdefull, 5, 2, 1, 0, 1},
        {0x0123456789abcdefull, 5, 2, 2, 1, 0},
        {0xfedcba9876543210ull, 0xffffffffu, 0xffff, 0xf1, 3, 0},
        {0, 0, 0, 0, 0, 0},
    };
    return ids[payload_len & 3];
}

#endif
