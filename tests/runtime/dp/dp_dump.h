/* dp_dump.h: what the data-parallel model tests (test_dp_compress.c,
 * test_binsgdm.c) share to hand a NumPy model their runs: the tap that
 * decodes every message a rank sends with a codec object of its own, .npy
 * files per rank, and each configuration's folder with its meta.txt. */
#ifndef PZ_TESTS_DP_DUMP_H
#define PZ_TESTS_DP_DUMP_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/codec.h"
#include "runtime/dp/creduce.h"

/* for the test files (tests/check.h's CHECK; dp_dump.c uses none: check.h
 * counts per file) */
#define OK(expr)                                                                         \
    do {                                                                                 \
        pz_status s_ = (expr);                                                           \
        CHECK(s_ == PZ_OK, "%s -> %s: %s", #expr, pz_status_name(s_), pz_last_error()); \
    } while (0)

/* The tap's state: messages of vectors of n elements, decoded into q1
 * (all-gather and to-owner, row `step` of n) and q2 (from-owner, row `step`
 * of m). */
typedef struct {
    pz_codec *dec;
    int D;        /* the size of the group whose chunks these are */
    size_t n;
    float *q1, *q2;
    int step;
    size_t m;     /* from-owner floats: this rank's part of every bucket */
    int failed;   /* messages that did not decode, or framed ones a stored reader took */
    int sends;    /* whether this rank sends compressed messages (hierarchical: the hosts' leaders) */
    size_t lo;    /* the chunk this rank owns: [lo, lo + m) (bucketed: where its first bucket's part starts) */
    int steps;
    int q2_step;  /* the step of the from-owner messages so far, and their floats */
    size_t q2_at;
} dp_tap_ctx;

/* The tap of rank in a reduction (mode, D members, H hosts) of n-element
 * vectors over `steps` steps, with a codec object of spec of its own. */
pz_status dp_tap_init(dp_tap_ctx *tc, const char *spec, pz_dp_mode mode, int D, int H, int rank, size_t n, int steps,
                      size_t bucket, size_t hold);
/* q1 and (not all-gather) q2 as dir/r<rank>_q1.npy, _q2.npy, where this rank sends */
pz_status dp_tap_write(const dp_tap_ctx *tc, const char *dir, int rank, pz_dp_mode mode);
void dp_tap_free(dp_tap_ctx *tc);

/* "[name rank R] ", for check_tag (a static buffer: one tag at a time) */
const char *dp_tag(const char *name, int rank);

/* the group of ranks 0..D-1 (rank among them; t may be NULL for D = 1) */
pz_status dp_group_of(pz_dp_group *g, pz_transport *t, int rank, int D);

/* a pz_dp_tap (runtime/dp/creduce.h) over a dp_tap_ctx; a failure is
 * printed and counted in failed (CHECK it after the run) */
void dp_tap(void *user, int phase, int chunk, size_t lo, size_t count, const uint8_t *msg, size_t len);

/* dir/r<rank>_<what>.npy: rows x cols float32 (rows = 0: a vector of cols) */
pz_status dp_write_npy(const char *dir, int rank, const char *what, int rows, size_t cols, const float *v);

/* Makes out/name and writes meta.txt there holding `line`. 1 on success. */
int dp_write_meta(const char *out, const char *name, const char *line);

/* The name meta.txt gives a mode: twophase, allgather or hierarchical. */
const char *dp_mode_word(pz_dp_mode mode);

/* The one argument of a model test, OUTDIR (where the configurations'
 * folders go); exits 2 with a usage line naming prog when it is missing. */
const char *dp_out_arg(int argc, char **argv, const char *prog);

#endif
