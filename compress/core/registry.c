/* registry.c: the table of base codecs, by spec name and by wire id, and
 * the table of wrappers, by spec name and by wire code.
 *
 * With PZ_ISA_MULTI (the default, portable build on x86-64) the codec files
 * are also compiled for x86-64-v3 and x86-64-v4 (tools/isa_rename.py gives
 * those copies the suffixes _v3 and _v4); the table of the level base/isa.h
 * chooses is the one handed out, the same for the whole process, so every
 * codec built in it runs at one level. */
#include <string.h>

#include "base/isa.h"
#include "compress/core/codec_impl.h"

/* Every base codec, once: X(name) for the table pz_codec_<name> its file
 * defines (a codec in compress/codecs/ or its own room, in compress_hot of
 * compress/meson.build; "Adding a codec" in codec_impl.h). */
#define PZ_CODECS(X) X(fp32) X(fp16) X(bf16) X(q) X(nuq) X(sign) X(topk) X(jointsq) X(tah)

#define DECLARE_ONE(n, S) extern const pz_codec_impl pz_codec_##n##S;
#define DECLARE_PLAIN(n) DECLARE_ONE(n, )
#define ENTRY_PLAIN(n) &pz_codec_##n,
PZ_CODECS(DECLARE_PLAIN)
static const pz_codec_impl *const table_base[] = {PZ_CODECS(ENTRY_PLAIN)};
enum { NCODECS = sizeof table_base / sizeof table_base[0] };
#ifdef PZ_ISA_MULTI
#define DECLARE_V3(n) DECLARE_ONE(n, _v3)
#define DECLARE_V4(n) DECLARE_ONE(n, _v4)
#define ENTRY_V3(n) &pz_codec_##n##_v3,
#define ENTRY_V4(n) &pz_codec_##n##_v4,
PZ_CODECS(DECLARE_V3)
PZ_CODECS(DECLARE_V4)
static const pz_codec_impl *const table_v3[NCODECS] = {PZ_CODECS(ENTRY_V3)};
static const pz_codec_impl *const table_v4[NCODECS] = {PZ_CODECS(ENTRY_V4)};
/* table_base: x86-64 and x86-64-v2 (the v2 gain, hardware CRC, is in crc32c.c) */
static const pz_codec_impl *const *table_now(void) {
    pz_isa l = pz_isa_level();
    return l >= PZ_ISA_AVX512 ? table_v4 : l >= PZ_ISA_AVX2 ? table_v3 : table_base;
}
#else
static const pz_codec_impl *const *table_now(void) { return table_base; }
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
