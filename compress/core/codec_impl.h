/* codec_impl.h: how codecs plug into the codec framework (private to compress/).
 *
 * Two tables, both in compress/core/registry.c:
 *  - base codecs, stateless transforms between n floats and a payload. A
 *    base codec only sees its parameters, the shape, the context (for its
 *    random stream) and byte buffers;
 *  - wrappers, codecs around an inner codec (ef, ef21, aq: stateful, see
 *    compress/wrappers/wrappers.h; hadamard: a transform, compress/wrappers/hadamard.c). Each parses its own options and owns its state.
 * The framework parses specs (spec.c), writes and checks the message header,
 * which carries the codec id and its serialized parameters, and applies the
 * optional "+zstd" stage (message.c), and dispatches (codec.c); it reaches
 * every codec through these tables.
 *
 * Adding a base codec, every place:
 *  1. its file, compress/codecs/NAME.c (a codec with helpers of its own gets
 *     a room, as jointsq/ has): parse, format, validate, max_payload,
 *     encode, decode (and optionally encode_scratch), and the table
 *     `const pz_codec_impl pz_codec_NAME`;
 *  2. its wire id: a new last entry of enum pz_codec_id below (ids are on
 *     the wire and in files: never renumber or reuse one);
 *  3. X(NAME) in PZ_CODECS, compress/core/registry.c;
 *  4. its file in compress_hot, compress/meson.build. Its copies for
 *     x86-64-v3 and -v4 and their suffixed symbols follow from that list
 *     (tools/isa_rename.py generates the renaming header).
 * Only where it applies:
 *  - a parameter no field of pz_codec_params below holds: a field there, and
 *    its bytes in params_write/params_read (message.c; all 24 parameter
 *    bytes of the header are in use today: compress/README.md, "Message
 *    format");
 *  - a payload whose size never depends on the data: its case in
 *    fixed_size() (codec.c), so a decoder refuses any other length.
 * Then document it (compress/README.md: the spec grammar's list and a
 * section; docs/compression.md) and test it: a spec in test_codecs.c's
 * round trips and in the fuzz replay's list (tests/fuzz/replay/fuzz_codec_replay.c);
 * golden bytes are appended at the end of test_golden's stream
 * (tests/compress/codec_stream.h) so the existing ones stay unchanged.
 * A wrapper is the same with pz_wrap_impl: its file in compress/wrappers/,
 * a pz_wrap_kind, its entry in registry.c's wrappers[] and its file in
 * compress_cold. */
#ifndef PZ_CODEC_IMPL_H
#define PZ_CODEC_IMPL_H

#include "compress/core/codec.h"

enum pz_codec_id {
    PZ_CODEC_FP32 = 1, PZ_CODEC_FP16, PZ_CODEC_BF16, PZ_CODEC_Q, PZ_CODEC_NUQ,
    PZ_CODEC_TOPK, PZ_CODEC_SIGN, PZ_CODEC_JOINTSQ, PZ_CODEC_TAH,
};

enum pz_scale_mode { PZ_SCALE_ABSMAX = 0, PZ_SCALE_MINMAX };
enum pz_group_mode { PZ_GROUP_CHANNEL = 0, PZ_GROUP_ROW, PZ_GROUP_BLOCK, PZ_GROUP_TENSOR };
enum pz_round_mode { PZ_ROUND_STOCHASTIC = 0, PZ_ROUND_NEAREST };
/* q's parser when the spec names no round=: the framework (spec.c) puts in
 * the default of what the codec carries (pz_codec_create_for); never in a
 * message or a built codec */
#define PZ_ROUND_UNSET 0xff
/* q's grid; 0 (midrise) is what messages from before grid= hold */
enum pz_grid_mode { PZ_GRID_MIDRISE = 0, PZ_GRID_MIDTREAD };
enum pz_value_mode { PZ_VALUES_FP32 = 0, PZ_VALUES_FP16, PZ_VALUES_Q8 };

/* Parameters of every base codec (each uses the fields it documents). They
 * travel in the message header, so a decoder needs nothing but the message. */
typedef struct {
    uint16_t id;          /* enum pz_codec_id */
    uint8_t bits;         /* q<b>, nuq<b>: 1..8 */
    uint8_t scale_mode;   /* q: enum pz_scale_mode */
    uint8_t group_mode;   /* q, sign, jointsq: enum pz_group_mode */
    uint8_t round_mode;   /* q: enum pz_round_mode */
    uint8_t scale_fp32;   /* q, sign: scales as fp32 (1) or fp16 (0) */
    uint8_t value_mode;   /* topk: enum pz_value_mode */
    uint8_t per_row;      /* topk: select per row (1) or over the tensor (0); tah: alloc=token (1) or tile (0) */
    uint8_t elias;        /* nuq: Elias-coded level indices (1) or fixed-width (0) */
    uint8_t stochastic;   /* sign: binary randomisation (1) or scaled sign (0) */
    uint8_t grid;         /* q: enum pz_grid_mode */
    uint32_t group_size;  /* q, sign, jointsq: block size for PZ_GROUP_BLOCK; nuq: bucket; tah: tile */
    float fraction;       /* topk: fraction kept, (0, 1] */
    float budget;         /* jointsq, tah: bits per element, everything on the wire counted */
} pz_codec_params;

/* Scratch a codec object keeps between encodes (codec.c): slot i holds one
 * buffer that only grows. A pz_codec is used by one thread at a time, so
 * its scratch needs no lock; a zeroed struct is empty. */
#define PZ_SCRATCH_SLOTS 9
typedef struct pz_scratch {
    void *buf[PZ_SCRATCH_SLOTS];
    size_t cap[PZ_SCRATCH_SLOTS];
} pz_scratch;
/* At least n bytes in slot i (i < PZ_SCRATCH_SLOTS): the buffer kept there
 * when it is large enough, with whatever the last call left in it (callers
 * initialise what they read), else a new one (pz_alloc_huge; the old one is
 * freed). Aborts when out of memory, like xmalloc. */
void *pz_scratch_get(pz_scratch *s, int slot, size_t n);
/* Frees every buffer and leaves s empty (safe on an empty one). */
void pz_scratch_release(pz_scratch *s);
/* Bytes held. */
size_t pz_scratch_bytes(const pz_scratch *s);

typedef struct {
    const char *name;     /* spec name: "fp16", "q", "nuq", "topk", "sign", "jointsq", "tah" */
    uint16_t id;
    /* Parses the text after the name ("4:scale=minmax", ":0.1", "") into p,
     * with defaults for what is not given. `where` is the offset of args in the
     * whole spec, for error messages that point at the offending text. */
    pz_status (*parse)(pz_codec_params *p, const char *args, const char *spec, size_t where);
    /* Canonical spec text with every parameter. */
    void (*format)(const pz_codec_params *p, char *buf, size_t cap);
    /* Checks parameters read back from a message header (untrusted). */
    pz_status (*validate)(const pz_codec_params *p);
    /* Exact payload size for this shape when it does not depend on the data,
     * else an upper bound. */
    size_t (*max_payload)(const pz_codec_params *p, const pz_shape *s);
    pz_status (*encode)(const pz_codec_params *p, const float *x, const pz_shape *s,
                        const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len);
    /* payload is untrusted: every length and index is checked. */
    pz_status (*decode)(const pz_codec_params *p, const uint8_t *payload, size_t len,
                        const pz_shape *s, float *out);
    /* Optional (NULL: encode above): encode with scratch buffers that the
     * codec object keeps from one call to the next (pz_scratch above), for
     * codecs whose scratch is megabytes: fresh pages cost the kernel's
     * zeroing on every call. Same bytes as encode. */
    pz_status (*encode_scratch)(const pz_codec_params *p, const float *x, const pz_shape *s,
                                const pz_codec_ctx *ctx, uint8_t *payload, size_t cap, size_t *len,
                                pz_scratch *scratch);
    /* With encode_scratch: the most bytes of scratch it keeps for shape s. */
    size_t (*scratch_bound)(const pz_codec_params *p, const pz_shape *s);
} pz_codec_impl;

/* The table of base codecs (compress/core/registry.c). */
const pz_codec_impl *pz_codec_impl_by_name(const char *name, size_t len);
const pz_codec_impl *pz_codec_impl_by_id(uint16_t id);

/* A wrapper's code on the wire: 3 bits a level of the header's chain (the
 * low 2 bits in the chain byte, the high bit in byte 10; 0 ends the chain),
 * and message id 0x80 + code for the outermost one. */
typedef enum { PZ_WRAP_EF = 1, PZ_WRAP_EF21, PZ_WRAP_AQ, PZ_WRAP_HADAMARD } pz_wrap_kind;
/* Levels of wrappers: the header holds 4 codes. */
#define PZ_WRAP_MAX_DEPTH 4

/* A wrapper's state (compress/wrappers/wrappers.c). */
typedef struct pz_wrapper pz_wrapper;

typedef struct {
    const char *name;           /* spec name: "ef", "ef21", "aq", "hadamard" */
    pz_wrap_kind kind;          /* its code on the wire */
    int stateful_decoder;       /* decoding needs state built by earlier messages */
    /* Option keys ("mem=", ...), NULL-terminated; NULL: no options. In
     * "name(inner,key=...)" a ',' outside parentheses followed by one of
     * them ends the inner spec. */
    const char *const *opt_keys;
    /* Parses the options spec[b..e) (spec[b] is the ',' before the first;
     * called only when there are some) into *opts; errors point into spec. */
    pz_status (*parse_opts)(const char *spec, size_t b, size_t e, void **opts);
    void (*free_opts)(void *opts);   /* options that never reached create */
    /* Makes the wrapper around inner with opts (NULL: defaults). Takes
     * ownership of both, also when it fails. */
    pz_status (*create)(void *opts, pz_codec *inner, pz_wrapper **out);
    void (*free)(pz_wrapper *w);
    const char *(*spec)(const pz_wrapper *w);     /* canonical spec */
    pz_codec *(*inner)(pz_wrapper *w);            /* owned by the wrapper */
    pz_codec *(*warmup)(pz_wrapper *w);           /* a second codec it owns, or NULL */
    size_t (*max_payload)(const pz_wrapper *w, const pz_shape *s);
    /* payload and the header's flags byte, which the wrapper defines */
    pz_status (*encode)(pz_wrapper *w, const float *x, const pz_shape *s, const pz_codec_ctx *ctx,
                        uint8_t *payload, size_t cap, size_t *len, uint8_t *flags);
    pz_status (*decode)(pz_wrapper *w, uint8_t flags, const uint8_t *payload, size_t len, const pz_shape *s,
                        const pz_codec_ctx *ctx, float *out);
    /* bytes in memory; *file_bytes (may be NULL) gets those in files */
    size_t (*state_bytes)(const pz_wrapper *w, size_t *file_bytes);
    /* the most bytes in memory it may come to hold for tensors of shape s
     * (its own state and scratch, not its inner codecs'); NULL: none */
    size_t (*state_bound)(const pz_wrapper *w, const pz_shape *s);
    /* Optional (NULL: none): for a message whose outermost wrapper this is,
     * the options text (",block=64", or "") that its flags byte implies for
     * the spec pz_codec_peek reports; returns 0 when no message of this
     * wrapper has these flags for shape s (pz_msg_read then refuses it). */
    int (*msg_opts)(uint8_t flags, const pz_shape *s, char *buf, size_t cap);
} pz_wrap_impl;

/* The table of wrappers (compress/core/registry.c): by spec name, by wire code,
 * and the i-th (NULL past the end). */
const pz_wrap_impl *pz_wrap_impl_by_name(const char *name, size_t len);
const pz_wrap_impl *pz_wrap_impl_by_kind(unsigned kind);
const pz_wrap_impl *pz_wrap_impl_at(size_t i);

/* Codec objects (codec.c) as the spec grammar (spec.c) builds them: a base
 * codec with checked parameters; a wrapper around inner with the options
 * its parse_opts made (it takes both, also when it fails); and the +zstd
 * stage added to either. */
pz_codec *pz_codec_make_base(const pz_codec_impl *impl, const pz_codec_params *p);
pz_status pz_codec_make_wrapper(const pz_wrap_impl *wrap, void *opts, pz_codec *inner, pz_codec **out);
void pz_codec_add_zstd(pz_codec *c);

#endif
