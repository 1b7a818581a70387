/* spec.h: helpers for parsing codec spec arguments (private to compress/).
 *
 * A base codec's parse() gets its argument text (NUL-terminated, e.g.
 * "4:scale=minmax,group=row" for "q4:...") plus the whole spec and the
 * offset of the arguments in it. These helpers split "k=v,word,..." lists and
 * report errors that point at the offending text:
 *   bad codec spec 'q9': bits must be 1..8 at offset 1: q9
 *                                                         ^
 * (the caret sits under the offending character of the spec echoed at the
 * end of the first line). All errors are PZ_ERR_ARG. */
#ifndef PZ_SPEC_H
#define PZ_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "compress/core/codec_impl.h"

pz_status pz_spec_fail(const char *spec, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One item of a comma-separated option list: "key=value" or a bare "word"
 * (then key is the word and val is NULL). off = offset of the key in spec. */
typedef struct {
    const char *key;
    size_t klen;
    const char *val;
    size_t vlen;
    size_t off, voff;   /* offsets of key and value in the whole spec */
} pz_spec_opt;

/* Reads the next item of list[*pos..]; base = offset of list[0] in spec.
 * Returns 1 with *o filled, 0 at the end of the list. An empty item (",,",
 * leading or trailing comma) is reported as an error: returns -1 after
 * pz_spec_fail. */
int pz_spec_next_opt(const char *spec, size_t base, const char *list, size_t *pos, pz_spec_opt *o);

int pz_spec_key_is(const pz_spec_opt *o, const char *key);
int pz_spec_val_is(const pz_spec_opt *o, const char *val);

/* The error for an option the codec does not take: "unknown <codec> option
 * '<key>' (<known>)", pointing at the key. */
pz_status pz_spec_unknown(const char *spec, const pz_spec_opt *o, const char *codec, const char *known);
/* Where a leading argument (topk's fraction, jointsq's budget) ends at
 * args[*pos]: either the end of args or a ',' followed by an option list;
 * *pos moves past the ','. where = offset of args in spec. */
pz_status pz_spec_list_after(const char *spec, size_t where, const char *args, size_t *pos);

/* A codec's handling of one option, as pz_spec_scale_opt: returns 1 when o
 * is one of its options (applied to p; *st, PZ_OK on entry, says how it
 * went), 0 when it is not (the caller reports it, naming the known ones). */
typedef int (*pz_spec_take_fn)(const char *spec, const pz_spec_opt *o, pz_codec_params *p, pz_status *st);
/* A spec whose arguments are ":<number>[,option...]" (topk's fraction,
 * jointsq's and tah's budget): how to read them, and the parameters before
 * they are read (the codec id and its defaults; every other field 0). */
typedef struct {
    const char *what;      /* names the number in errors: "tah budget" */
    const char *needs;     /* the error when there is no number */
    double lo, hi;         /* its range */
    float above;           /* and, as a float, it must be > this (-INFINITY: no such bound) */
    const char *low;       /* the error when it is not */
    pz_spec_take_fn take;  /* each option after it */
    const char *codec, *known;  /* for pz_spec_unknown: "tah", "tile=<G>, ..." */
    pz_codec_params init;  /* p before the arguments */
} pz_spec_lead;
/* Sets *p to L->init, then reads args (at offset where of spec) as L says:
 * the number into *v, then the options into p; the first error stops, in
 * that order. */
pz_status pz_spec_parse_lead(const char *spec, size_t where, const char *args, const pz_spec_lead *L, float *v,
                             pz_codec_params *p);

/* Whole text [s, s+n) as a number in [lo, hi]; errors point at off. */
pz_status pz_spec_uint(const char *spec, size_t off, const char *s, size_t n,
                       uint64_t lo, uint64_t hi, uint64_t *out, const char *what);
pz_status pz_spec_float(const char *spec, size_t off, const char *s, size_t n,
                        double lo, double hi, double *out, const char *what);

/* group=channel|row|tensor|<N> for q and sign (N in 1..2^31). */
pz_status pz_spec_group(const char *spec, const pz_spec_opt *o, pz_codec_params *p);
/* sdtype=fp16|fp32 for q and sign: how scales travel. */
pz_status pz_spec_sdtype(const char *spec, const pz_spec_opt *o, pz_codec_params *p);
/* The bit width that leads q's and nuq's arguments ("4" of "q4:..."): 1..8
 * into p->bits; *len = the digits read. codec names the codec in the error. */
pz_status pz_spec_bits(const char *spec, size_t where, const char *args, const char *codec, size_t *len,
                       pz_codec_params *p);
/* The scale options q and sign share, group= and sdtype=: returns 1 when o
 * is one of them (applied to p, *st says how it went), 0 when it is not. */
int pz_spec_scale_opt(const char *spec, const pz_spec_opt *o, pz_codec_params *p, pz_status *st);
/* Canonical text of a group setting ("channel", "row", "tensor", "256"). */
const char *pz_spec_group_name(const pz_codec_params *p, char *buf, size_t cap);
/* Writes v as the shortest decimal that reads back as the same float, never
 * in exponent form (the grammar allows '+' only in "+zstd"): a canonical
 * spec's budgets (jointsq, tah). */
void pz_spec_format_float(float v, char out[64]);

/* The grammar, for wrappers whose options hold a codec spec (aq's warmup=):
 * the codec spelled by spec[b..e) (no "+zstd") at wrapper nesting level
 * depth (PZ_WRAP_MAX_DEPTH: no wrapper allowed), with the defaults of use
 * (enum pz_codec_use); errors point into spec. */
pz_status pz_spec_parse_codec(const char *spec, size_t b, size_t e, int depth, int use, pz_codec **out);
/* The first ',' in s[b..e) outside parentheses that is followed by one of
 * keys (NULL-terminated), else e: where a wrapper's options begin, or where
 * one option's value ends. */
size_t pz_spec_find_opt(const char *s, size_t b, size_t e, const char *const *keys);
/* Whether s[b..e) starts with w. */
int pz_spec_starts_with(const char *s, size_t b, size_t e, const char *w);

/* Number of scale groups of p's group mode for shape s, and the elements per
 * group (0 when groups are strided columns). */
size_t pz_group_count(const pz_codec_params *p, const pz_shape *s);

#endif
