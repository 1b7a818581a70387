/* registry.c: the table of base codecs, by spec name and by wire id. */
#include <string.h>

#include "compress/codec_impl.h"

extern const pz_codec_impl pz_codec_fp32, pz_codec_fp16, pz_codec_bf16;
extern const pz_codec_impl pz_codec_q, pz_codec_nuq, pz_codec_sign;
#ifdef PZ_HAVE_TOPK
extern const pz_codec_impl pz_codec_topk;
#endif
#ifdef PZ_HAVE_JOINTSQ
extern const pz_codec_impl pz_codec_jointsq;
#endif

static const pz_codec_impl *const table[] = {
    &pz_codec_fp32, &pz_codec_fp16, &pz_codec_bf16, &pz_codec_q, &pz_codec_nuq, &pz_codec_sign,
#ifdef PZ_HAVE_TOPK
    &pz_codec_topk,
#endif
#ifdef PZ_HAVE_JOINTSQ
    &pz_codec_jointsq,
#endif
};

const pz_codec_impl *pz_codec_impl_by_name(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strlen(table[i]->name) == len && memcmp(table[i]->name, name, len) == 0) return table[i];
    return NULL;
}

const pz_codec_impl *pz_codec_impl_by_id(uint16_t id) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i]->id == id) return table[i];
    return NULL;
}
