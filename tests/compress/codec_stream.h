/* codec_stream.h: every spec of a list on every shape of a list, over a few
 * rounds, each message decoded by a second codec object, for the tests that
 * compare whole streams of messages and decoded floats byte for byte
 * (test_golden against a committed file, test_isa across ISA levels). */
#ifndef PZ_TESTS_CODEC_STREAM_H
#define PZ_TESTS_CODEC_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/codec.h"

/* The specs both streams start with: base codecs and their options.
 * tests/fixtures/golden/codecs.bin depends on them and on their order. The q
 * specs name grid=midrise, the grid of every q message written before grid=
 * existed (the file predates it). */
#define CODEC_STREAM_BASE_SPECS                                                           \
    "fp32", "fp16", "bf16",                                                               \
    "q1:round=stochastic,grid=midrise", "q2:round=stochastic,grid=midrise",                    \
    "q3:round=stochastic,grid=midrise", "q4:round=stochastic,grid=midrise",                    \
    "q5:round=stochastic,grid=midrise", "q6:round=stochastic,grid=midrise",                    \
    "q7:round=stochastic,grid=midrise", "q8:round=stochastic,grid=midrise",                    \
    "q4:round=nearest,grid=midrise", "q2:round=nearest,group=row,grid=midrise",                \
    "q4:scale=minmax,group=row,round=stochastic,grid=midrise",                                 \
    "q4:group=256,round=stochastic,grid=midrise", "q8:sdtype=fp16,round=stochastic,grid=midrise", \
    "q4:scale=minmax,group=256,round=nearest,grid=midrise",                                    \
    "nuq4", "nuq8", "nuq4:code=elias", "nuq2:bucket=64",                                  \
    "sign", "sign:stochastic", "sign:group=channel",                                      \
    "topk:0.1", "topk:0.01", "topk:0.3,values=fp16", "topk:0.1,values=q8", "topk:0.05,scope=tensor", \
    "jointsq:1.5", "jointsq:0.5", "jointsq:3"

/* tah (codec 9), which came later: test_golden appends its stream to the end
 * of the file, so the bytes of the specs above stay where they were. */
#define CODEC_STREAM_TAH_SPECS \
    "tah:4", "tah:4.5,alloc=token,rank=range", "tah:5,tile=32,rank=range", "ef(tah:4)"

typedef struct {
    const char *const *specs;
    size_t nspecs;
    const pz_shape *shapes;
    size_t nshapes;
    int rounds;
    int sample_ids;   /* 1: ids 100, 101, ... for the samples (dims[0] <= 8), for aq() */
    /* fills x (n floats, last dimension C) for shape k, spec i, round r */
    void (*input)(float *x, size_t n, size_t C, size_t k, size_t i, int r);
    /* takes a round's message and decoded floats; returns non-zero to stop */
    int (*emit)(void *arg, const uint8_t *msg, size_t len, const float *y, size_t n);
    void *arg;
} codec_stream;

/* Runs the stream: for each shape, spec and round, input, encode (ctx seed 7,
 * step = round, edge 1, micro 3), decode, emit. Returns 0, or 1 after saying
 * on stderr which spec failed (or 1 when emit stops it). */
int codec_stream_run(const codec_stream *cs);

/* heavy-tailed data with zeros, an outlier channel (3), tiny values and,
 * with neg_zero, negative zeros */
void codec_stream_fill(float *x, size_t n, size_t C, uint64_t seed, int neg_zero);

#endif
