/* creduce_priv.h: the compressed reduction's object, shared by creduce.c
 * (the modes) and creduce_state.c (save/load of its error feedback);
 * private to those two files. */
#ifndef PZ_DP_CREDUCE_PRIV_H
#define PZ_DP_CREDUCE_PRIV_H

#include "runtime/dp/creduce.h"

struct pz_dp_creduce {
    pz_dp_group *g;
    pz_codec *codec;
    pz_dp_copts o;
    size_t n;
    char spec[256];            /* the codec's canonical spec */
    char base_spec[256];       /* ... without +zstd, as messages name it */
    float *x, *q, *tmp, *acc;  /* n floats each: input + e_w, decoded own messages, scratch */
    float *ew;                 /* worker error, n floats (ef) */
    float *es;                 /* owner's error for chunk [es_lo, es_lo + es_len) (twophase, ef) */
    size_t es_lo, es_len;
    size_t *off, *soff;        /* receive / send slot offsets into rbuf / sbuf */
    uint8_t *rbuf, *sbuf;
    pz_request **rreq, **sreq;
    uint64_t *sent_to;         /* bytes sent to each member */
    pz_dp_tap tap;
    void *tap_user;
    /* hierarchical */
    pz_dp_group host;          /* this member's host */
    pz_dp_group *leaders;      /* leaders only: the hosts' first members */
    pz_dp_creduce *inner;      /* leaders only: twophase over `leaders` */
    int leader;
};

#endif
