/* registry.c: the table of base codecs, by spec name and by wire id, and
 * the table of wrappers, by spec name and by wire code.
 *
 * With PZ_ISA_MULTI (the default, portable build on x86-64) the codec files
 * are also compiled for x86-64-v3 and x86-64-v4 (compress/core/isa_rename.h gives
 * those copies the suffixes _v3 and _v4); the table of the level base/isa.h
 * chooses is the one handed out, the same for the whole process, so every
 * codec built in it runs at one level. */
#include <string.h>

#include "base/isa.h"
#include "compress/core/codec_impl.h"

#define DECLARE_CODECS(S)                                                                   \
    extern const pz_codec_impl pz_codec_fp32##S, pz_codec_fp16##S, pz_codec_bf16##S,       \
        pz_codec_q##S, pz_codec_nuq##S, pz_codec_sign##S, pz_codec_topk##S, pz_codec_jointsq##S,  \
        pz_codec_tah##S;
#define CODEC_TABLE(S)                                                                      \
    {&pz_codec_fp32##S, &pz_codec_fp16##S, &pz_codec_bf16##S, &pz_codec_q##S, &pz_codec_nuq##S, \
     &pz_codec_sign##S, &pz_codec_topk##S, &pz_codec_jointsq##S, &pz_codec_tah##S}

DECLARE_CODECS()
enum { NCODECS = 9 };
#ifdef PZ_ISA_MULTI
DECLARE_CODECS(_v3)
DECLARE_CODECS(_v4)
/* [0]: x86-64 and x86-64-v2 (the v2 gain, hardware CRC, is in crc32c.c) */
static const pz_codec_impl *const tables[3][NCODECS] = {CODEC_TABLE(), CODEC_TABLE(_v3), CODEC_TABLE(_v4)};
static const pz_codec_impl *const *table_now(void) {
    pz_isa l = pz_isa_level();
    return tables[l >= PZ_ISA_AVX512 ? 2 : l >= PZ_ISA_AVX2 ? 1 : 0];
}
#else
static const pz_codec_impl *const table[NCODECS] = CODEC_TABLE();
static const pz_codec_impl *const *table_now(void) { return table; }
#endif

const pz_codec_impl *pz_codec_impl_by_name(const char *name, size_t len) {
    const pz_codec_impl *const *t = table_now();
    for (size_t i = 0; i < NCODECS; i++)
        if (strlen(t[i]->name) == len && memcmp(t[i]->name, name, len) == 0) return t[i];
    return NULL;
}

const pz_codec_impl *pz_codec_impl_by_id(uint16_t id) {
    const pz_codec_impl *const *t = table_now();
    for (size_t i = 0; i < NCODECS; i++)
        if (t[i]->id == id) return t[i];
    return NULL;
}

/* The wrappers run around an inner codec, some with state, so they are
 * built once (compress/wrappers/wrappers.c, hadamard.c), whatever the ISA level. */
extern const pz_wrap_impl pz_wrap_ef, pz_wrap_ef21, pz_wrap_aq, pz_wrap_hadamard;
static const pz_wrap_impl *const wrappers[] = {&pz_wrap_ef, &pz_wrap_ef21, &pz_wrap_aq, &pz_wrap_hadamard};
enum { NWRAPPERS = sizeof wrappers / sizeof wrappers[0] };

const pz_wrap_impl *pz_wrap_impl_by_name(const char *name, size_t len) {
    for (size_t i = 0; i < NWRAPPERS; i++)
        if (strlen(wrappers[i]->name) == len && memcmp(wrappers[i]->name, name, len) == 0) return wrappers[i];
    return NULL;
}

const pz_wrap_impl *pz_wrap_impl_by_kind(unsigned kind) {
    for (size_t i = 0; i < NWRAPPERS; i++)
        if ((unsigned)wrappers[i]->kind == kind) return wrappers[i];
    return NULL;
}

const pz_wrap_impl *pz_wrap_impl_at(size_t i) { return i < NWRAPPERS ? wrappers[i] : NULL; }
