/* tied.h: the tied-embedding gradient exchange between the first and the
 * last stage, optionally through a codec (--compress-tied).
 *
 * Both ends hold wte (the first stage for the token embedding, the last for
 * the logits) and must keep identical copies. Each sends its gradient g_r to
 * the other and adds the other's. Raw, g_0 + g_1 == g_1 + g_0 bitwise. With a
 * codec, each end replaces its own g_r by D(E(g_r)), the very floats the peer
 * decodes from the message, before adding D(E(g_peer)): both sums are then
 * D(E(g_0)) + D(E(g_1)), bitwise equal again. Only stateless codecs qualify
 * (an ef residual or aq buffer would live on one side only). The message of
 * rank r is encoded with the context (seed, step, edge = PZ_TIED_EDGE,
 * dir 0, micro = r), so stochastic rounding and hadamard() signs are the
 * same on both sides. Where edge 0-1's bwd is `auto`, the exchange follows
 * auto's live candidate (pz_tied_init_auto): auto's candidates keep no
 * state, and every rank switches at the same step boundary. */
#ifndef PZ_TIED_H
#define PZ_TIED_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/codec.h"
#include "runtime/edge/autospec.h"
#include "runtime/edge/policy.h"

#define PZ_TIED_EDGE 0xffffffffu   /* codec context's edge: no pipeline edge */

typedef struct {
    pz_codec *codec;   /* NULL: raw float32 */
    pz_shape shape;    /* (V, C) */
    size_t n;          /* V * C */
    size_t cap;        /* bytes of a message */
    uint8_t *out;      /* this end's message (kept until its send completes) */
    uint8_t *in;       /* the peer's message */
    float *dec;        /* with a codec: the peer's decoded gradient (V*C) */
    const pz_auto_spec *follow;   /* edge 0-1's bwd auto that the codec follows, or NULL */
    int cur;                      /* with follow: the candidate in use */
} pz_tied;

/* spec NULL or "none": raw. Refuses codecs with state. A zeroed pz_tied is
 * safe to free. */
pz_status pz_tied_init(pz_tied *t, const char *spec, int V, int C);
void pz_tied_free(pz_tied *t);

/* The default where edge 0-1's bwd is auto (pz_tied_follows_auto): the
 * codec of auto's candidate cur, and later the one pz_tied_use names. The
 * buffers hold the largest candidate's message, so a switch never
 * reallocates one that a send may still read. */
pz_status pz_tied_init_auto(pz_tied *t, const pz_auto_spec *a, int cur, int V, int C);
/* With follow: auto's candidate cur from the next exchange on. Both ends
 * call it with the same cur where both have added the step's messages. */
pz_status pz_tied_use(pz_tied *t, int cur);

/* Encodes g (V*C floats) into t->out (*len bytes) and, with a codec, replaces
 * g by its decoded message. end: 0 at the stage with the embedding (the
 * first), 1 at the one with the head (the last); it, not the rank, seeds the
 * codec's context, so stochastic rounding draws the same numbers whatever
 * the ranks are called (interleaved on S ranks = 1F1B on S*V stages). */
pz_status pz_tied_encode(pz_tied *t, float *g, uint64_t seed, uint64_t step, int end, size_t *len);
/* Adds the peer's message (t->in, len bytes; peer_end: the sender's end) to g. */
pz_status pz_tied_add(pz_tied *t, size_t len, uint64_t seed, uint64_t step, int peer_end, float *g);

/* --compress-tied's default: the tied exchange follows the edges. Where one
 * edge joins the first and the last stage (2 chunks), and its backward
 * direction is compressed with a stateless codec (not auto, no ef, ef21 or
 * aq), that spec (the gradient codec the link already carries); else NULL,
 * the raw exchange. */
const char *pz_tied_follow(const pz_policy *p);
/* Whether that edge's bwd is auto instead: the exchange then follows auto's
 * live candidate (pz_tied_init_auto); without --compress-tied. */
int pz_tied_follows_auto(const pz_policy *p);

/* "none" or the codec's canonical spec */
const char *pz_tied_codec_name(const pz_tied *t);

#endif
