/* dp_dump.c: see dp_dump.h. */
#include "tests/runtime/dp/dp_dump.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/mem.h"
#include "compress/core/npy.h"
#include "runtime/dp/creduce.h"
#include "runtime/dp/dpmsg.h"

pz_status dp_tap_init(dp_tap_ctx *tc, const char *spec, pz_dp_mode mode, int D, int H, int rank, size_t n, int steps,
                      size_t bucket, size_t hold) {
    int hier = mode == PZ_DP_HIERARCHICAL, inner_D = hier ? H : D, inner_me = hier ? rank / (D / H) : rank;
    size_t lo, hi, m = 0, first = 0;
    int nb = pz_dp_buckets(n, hold, bucket, NULL, NULL);
    size_t *b = xcalloc((size_t)nb * 2, sizeof *b);
    pz_dp_buckets(n, hold, bucket, b, b + nb);
    for (int k = 0; k < nb; k++) {   /* the part this rank owns of every bucket */
        pz_dp_chunk(b[nb + k] - b[k], inner_D, inner_me, &lo, &hi);
        if (k == 0) first = b[k] + lo;
        m += hi - lo;
    }
    free(b);
    *tc = (dp_tap_ctx){NULL, inner_D, n, xcalloc((size_t)steps * n, 4), xcalloc((size_t)steps * (m ? m : 1), 4), 0,
                       m, 0, !hier || rank % (D / H) == 0, first, steps, -1, 0};
    pz_status st = pz_codec_create_for(spec, PZ_USE_GRADIENT, &tc->dec);
    if (st == PZ_OK) pz_codec_set_framed(tc->dec, 1);   /* the messages it taps are framed, as they go on the wire */
    return st;
}

pz_status dp_tap_write(const dp_tap_ctx *tc, const char *dir, int rank, pz_dp_mode mode) {
    pz_status st = PZ_OK;
    if (tc->sends) st = dp_write_npy(dir, rank, "q1", tc->steps, tc->n, tc->q1);
    if (st == PZ_OK && tc->sends && mode != PZ_DP_ALLGATHER) st = dp_write_npy(dir, rank, "q2", tc->steps, tc->m, tc->q2);
    return st;
}

void dp_tap_free(dp_tap_ctx *tc) {
    free(tc->q1);
    free(tc->q2);
    pz_codec_free(tc->dec);
}

const char *dp_tag(const char *name, int rank) {
    static char tag[96];
    snprintf(tag, sizeof tag, "[%s rank %d] ", name, rank);
    return tag;
}

pz_status dp_group_of(pz_dp_group *g, pz_transport *t, int rank, int D) {
    int ranks[PZ_DP_MAX];
    pz_dp_layout_ranks(PZ_DP_LAYOUT_CONTIGUOUS, 0, 1, D, ranks);
    *g = (pz_dp_group){0};
    return pz_dp_group_init(g, t, rank, ranks, D);
}

void dp_tap(void *user, int phase, int chunk, size_t lo, size_t count, const uint8_t *msg, size_t len) {
    dp_tap_ctx *tc = user;
    if (tc->q2_step != tc->step) tc->q2_step = tc->step, tc->q2_at = 0;   /* this step's first message */
    /* from-owner: this rank's parts, in bucket order; else at the message's elements */
    float *dst = phase == PZ_DPMSG_FROM_OWNER ? tc->q2 + (size_t)tc->step * tc->m + tc->q2_at
                                              : tc->q1 + (size_t)tc->step * tc->n + lo;
    size_t cap = count;
    if (phase == PZ_DPMSG_FROM_OWNER && tc->q2_at + count > tc->m) {
        fprintf(stderr, "FAIL tap: step %d: from-owner messages beyond the %zu floats owned\n", tc->step, tc->m);
        tc->failed++;
        return;
    }
    if (phase == PZ_DPMSG_FROM_OWNER) tc->q2_at += count;
    pz_codec_ctx ctx = {0};
    pz_shape s;
    if (pz_codec_decode(tc->dec, msg, len, &ctx, dst, cap, &s) != PZ_OK) {
        fprintf(stderr, "FAIL tap: step %d phase %d chunk %d: %s\n", tc->step, phase, chunk, pz_last_error());
        tc->failed++;
    }
    /* framed: the transport's frame has the one CRC over it (a stored reader refuses it) */
    if (pz_codec_peek(msg, len, NULL, 0, NULL) != PZ_ERR_FORMAT) {
        fprintf(stderr, "FAIL tap: step %d: a framed message read as a stored one\n", tc->step);
        tc->failed++;
    }
}

pz_status dp_write_npy(const char *dir, int rank, const char *what, int rows, size_t cols, const float *v) {
    char path[640];
    snprintf(path, sizeof path, "%s/r%d_%s.npy", dir, rank, what);
    pz_shape s = rows ? (pz_shape){2, {rows, (int64_t)cols}} : (pz_shape){1, {(int64_t)cols}};
    return pz_npy_write(path, &s, v);
}

int dp_write_meta(const char *out, const char *name, const char *line) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", out, name);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        perror(dir);
        return 0;
    }
    snprintf(dir + strlen(dir), sizeof dir - strlen(dir), "/meta.txt");
    FILE *f = fopen(dir, "w");
    if (!f) {
        perror(dir);
        return 0;
    }
    fputs(line, f);
    fclose(f);
    return 1;
}

const char *dp_mode_word(pz_dp_mode mode) {
    return mode == PZ_DP_TWOPHASE ? "twophase" : mode == PZ_DP_ALLGATHER ? "allgather" : "hierarchical";
}

const char *dp_out_arg(int argc, char **argv, const char *prog) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUTDIR\n", prog);
        exit(2);
    }
    return argv[1];
}
