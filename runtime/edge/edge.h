/* edge.h: one end of a pipeline edge in one direction: turns a stage's
 * (B,T,C) tensor into the bytes that cross the edge and back.
 *
 * Wire format of one message (the transport wraps it in a checked frame,
 * runtime/net/frame.h; the wire bytes counted here leave that header out):
 *   fwd (activations):  B sample ids (uint64, little-endian) | payload
 *   bwd (gradients):    payload
 *   payload: the policy's codec message, or for "none" the raw float32
 *   tensor. The ids travel with the activations because every stage past the
 *   first needs them for AQ-SGD's per-sample buffers, and only the first and
 *   last stage read the data. Backward messages reuse the ids of their
 *   micro-batch's forward.
 * Both ends build their codec from the same spec, so stateful codecs (EF21,
 * AQ) keep their two halves in step; the codec context (seed, step, edge,
 * direction, micro-batch) makes stochastic rounding reproducible. */
#ifndef PZ_EDGE_H
#define PZ_EDGE_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/codec.h"

/* What crossed one (edge, direction) during a step; summed over ranks, the
 * sender fills raw..norm2 and the receiver dec_s. */
typedef struct {
    double raw, wire;      /* bytes: the float32 tensor vs the message */
    double enc_s, dec_s;   /* codec time (sender encode, receiver decode) */
    double err2, norm2;    /* sum (x - x')^2 and sum x^2 (sender, if measured) */
} pz_edge_stats;
#define PZ_EDGE_STATS_N 6

typedef struct {
    int edge, dir;         /* edge e joins stages e and e+1; dir PZ_FWD or PZ_BWD */
    int sender;            /* this rank encodes (else decodes) */
    pz_codec *codec;       /* NULL: raw float32 */
    pz_codec *shadow;      /* sender: a receiver twin, to measure x' (may be NULL) */
    float *scratch;        /* shadow's output */
    int B, T, C;
    size_t numel, ids_bytes, cap;
    pz_edge_stats st;
} pz_edge_end;

/* spec NULL or "none" = raw. measure_error: the sender decodes each message
 * with a twin codec to report ||x - x'|| / ||x|| (one extra decode, and for
 * AQ a second copy of the buffers). */
pz_status pz_edge_init(pz_edge_end *e, int edge, int dir, int sender, const char *spec, int B, int T, int C,
                       int measure_error);
void pz_edge_free(pz_edge_end *e);
/* Adds the step's statistics of e into es (PZ_EDGE_STATS_N figures per edge
 * and direction, at 2 * edge + dir) and zeroes them; returns its codec
 * seconds. An end this rank does not have (numel 0) adds nothing. */
double pz_edge_stats_take(pz_edge_end *e, double *es);
/* Bytes of codec state e holds in memory (its codec and twin); *file gets
 * those spilled to files added. */
double pz_edge_state_bytes(const pz_edge_end *e, double *file);
/* Bytes a wire buffer of this end needs. */
size_t pz_edge_capacity(const pz_edge_end *e);
/* Validation's two ends of edge e (forward only): [0] raw floats, [1] the
 * training codec fwd_spec (NULL: none) as evaluation uses it, without the
 * training state of its wrappers (pz_policy_eval_spec). */
pz_status pz_edge_init_val(pz_edge_end val[2], int edge, int sender, const char *fwd_spec, int B, int T, int C);
/* Bytes of a wire buffer that training's end live and validation's ends
 * take turns in. */
size_t pz_edge_wire_cap(const pz_edge_end *live, const pz_edge_end val[2]);

/* Sender: x (B,T,C) and its micro-batch's ids (B; fwd only) -> wire[0..*len). */
pz_status pz_edge_encode(pz_edge_end *e, const float *x, const uint64_t *ids, uint64_t seed, uint64_t step,
                         uint32_t micro, uint8_t *wire, size_t *len);
/* Receiver: wire[0..len) -> out (B,T,C). fwd: the message's ids are written
 * to ids (B); bwd: ids are the micro-batch's (from its forward) and read. */
pz_status pz_edge_decode(pz_edge_end *e, const uint8_t *wire, size_t len, uint64_t seed, uint64_t step,
                         uint32_t micro, float *out, uint64_t *ids);

/* "none" or the codec's canonical spec */
const char *pz_edge_codec_name(const pz_edge_end *e);

#endif
