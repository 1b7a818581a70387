/* creduce_priv.h: the compressed reduction's object, shared by creduce.c
 * (the modes) and creduce_state.c (save/load of its error feedback);
 * private to those two files. */
#ifndef PZ_DP_CREDUCE_PRIV_H
#define PZ_DP_CREDUCE_PRIV_H

#include "runtime/dp/creduce.h"

/* One bucket [lo, lo + n) of the vector and its exchange in flight. */
typedef struct {
    size_t lo, n;
    size_t es_lo, es_len, es_at; /* twophase: my part [es_lo, es_lo + es_len) of it; its server error at es + es_at */
    size_t *off, *soff;          /* receive / send slots: offsets into rbuf (2D + 1) / sbuf (D + 2) */
    pz_request **rreq, **sreq;   /* 2D each */
    size_t *rlen;                /* 2D: bytes arrived in each receive slot */
    uint8_t *used;               /* 2D: the slot's message is decoded */
    const float *grad;
    float *out;
    uint64_t step;
    uint32_t seq;                /* the group's collective number at start */
    int phase;                   /* 0 idle, 1 the first messages, 2 the owners', 3 the sends' completion;
                                  * hierarchical: 1 the host's mean, 2 the leaders' exchange, 3 the broadcast */
    pz_dp_op *hop;               /* hierarchical: the host's all-reduce in flight */
    uint32_t hseq;               /* ... and the host group's number of the bucket's broadcast */
} pz_dp_cbucket;

struct pz_dp_creduce {
    pz_dp_group *g;
    pz_codec *codec;
    pz_dp_copts o;
    size_t n;
    char spec[256];            /* the codec's canonical spec */
    char base_spec[256];       /* ... without +zstd, as messages name it */
    float *x, *q, *tmp, *acc;  /* n floats each: input + e_w, decoded own messages, scratch */
    float *ew;                 /* worker error, n floats (ef) */
    float *es;                 /* owner's error: each bucket's part, in bucket order (twophase, ef) */
    size_t es_len;             /* its floats */
    int nb;                    /* buckets (o.bucket, o.hold; pz_dp_buckets) */
    pz_dp_cbucket *b;
    size_t *offs;              /* the buckets' slot offsets, lengths and flags, in one block each */
    pz_request **reqs;
    uint8_t *flags;
    uint8_t *rbuf, *sbuf;
    uint64_t *sent_to;         /* bytes sent to each member */
    pz_dp_tap tap;
    void *tap_user;
    /* hierarchical */
    pz_dp_group host;          /* this member's host */
    pz_dp_group *leaders;      /* leaders only: the hosts' first members */
    pz_dp_creduce *inner;      /* leaders only: twophase over `leaders` */
    int leader;
    int hnext;                 /* leaders: the next bucket whose exchange starts (bucket order) */
};

#endif
