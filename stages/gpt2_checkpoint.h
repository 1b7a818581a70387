/* checkpoint.h: GPT-2 model files in two formats.
 *
 *  - safetensors with Hugging Face GPT-2 names (what openai-community/gpt2
 *    publishes): wte (V, C) unpadded, the four Conv1D weights stored (in, out),
 *    no lm_head (tied). Files we write carry __metadata__ with the config and,
 *    for a pipeline stage's part of the model, "block_range": "l0-l1".
 *  - llm.c's model .bin: 256 int32 header (magic 20240326, version 3 = fp32,
 *    5 = bf16), then 16 tensors, the per-layer ones stacked tensor-major
 *    across layers, wte padded to (Vp, C).
 *
 * Status conventions: PZ_ERR_IO for files that cannot be opened or read and
 * for an llm.c file shorter than its header says; PZ_ERR_FORMAT for anything
 * structurally wrong (magic, version, JSON, missing / unknown / duplicate
 * tensors, metadata, an untied lm_head); PZ_ERR_SHAPE for a tensor or header
 * field that does not fit the model config; PZ_ERR_ARG for bad calls. */
#ifndef PZ_CHECKPOINT_H
#define PZ_CHECKPOINT_H

#include "stages/hf_dir.h"
#include "base/formats/safetensors.h"
#include "stages/gpt2_params.h"

typedef enum { PZ_CKPT_AUTO, PZ_CKPT_SAFETENSORS, PZ_CKPT_LLMC } pz_ckpt_format;

#define PZ_LLMC_MODEL_MAGIC 20240326
#define PZ_LLMC_HEADER_INTS 256 /* int32 header of an llm.c model file */

/* Detects the format (llm.c magic 20240326 in the first int32, else safetensors) and
 * derives the model config. safetensors: V and C from wte.weight (V, C), maxT from wpe, L from
 * the h.N indices (must be 0..L-1 with no gap, each block complete), NH from __metadata__ "n_head"
 * if present else C/64 when 64 divides C (GPT-2 family convention) else error asking for it;
 * Vp = pz_pad_vocab(V) unless metadata "padded_vocab_size" says otherwise.
 * A stage file (metadata "block_range") takes L, V, maxT from "n_layer",
 * "vocab_size", "n_ctx" where its tensors do not tell, and must hold exactly
 * the blocks of its range.
 * llm.c: header slots [2..7] maxT, V, L, NH, C, Vp; versions 3 (fp32) and 5 (bf16) accepted,
 * 1, 2, 4 rejected with a clear message naming the retired version.
 * fmt (may be NULL) receives the detected format. */
pz_status pz_ckpt_read_config(const char *path, pz_gpt2_config *cfg, pz_ckpt_format *fmt);
/* The same, for a file or an HF model directory (stages/hf_dir.h), with
 * config.json beside the weights checked against the tensors, and --heads
 * (heads > 0) where the head count is in neither the file nor a config.json.
 * Without any of the three, a head size of 64 is assumed only for the
 * published GPT-2 widths (768, 1024, 1280, 1600), with a line on stderr;
 * any other width is an error naming --heads and config.json.
 * pz_ckpt_read_config(p, c, f) is pz_ckpt_read_config_heads(p, 0, c, f). */
pz_status pz_ckpt_read_config_heads(const char *path, int heads, pz_gpt2_config *cfg, pz_ckpt_format *fmt);

/* Loads every tensor of p's stage range (p bound over host memory) from the file, whatever
 * the format; checks shapes against p->cfg; HF names with optional "transformer." prefix;
 * transposes the four Conv1D weights into our (out, in) layout; pads wte rows V..Vp-1 with 0
 * (safetensors stores (V, C); llm.c stores (Vp, C)); ignores h.N.attn.bias / attn.masked_bias
 * buffers; accepts lm_head.weight only if absent or bitwise equal to wte (else error: untied
 * heads unsupported); extra unknown tensors are an error naming them; missing ones too.
 * Loading a partial stage range reads just those tensors (a pipeline stage loads its part).
 * safetensors dtypes F32, BF16 and F16 are converted to fp32. */
pz_status pz_ckpt_load(const char *path, pz_gpt2_params *p);

/* Saves p's tensors as HF-style safetensors (Conv1D weights transposed back to (in, out),
 * wte unpadded (V, C)), with __metadata__ {"format":"pt","n_head":..,"n_ctx":..,"vocab_size":..,
 * "padded_vocab_size":..,"n_layer":..,"n_embd":.., and "block_range":"l0-l1" for a partial stage}.
 * Atomic (temporary file + rename). */
pz_status pz_ckpt_save_safetensors(const char *path, const pz_gpt2_params *p);

/* Saves the whole model (range must be the whole model) in llm.c layout: header magic 20240326,
 * version 3 (fp32) or 5 (bf16, round-to-nearest-even), tensors tensor-major across layers
 * (llm.c stacks each tensor across layers; our memory is block-major: convert). Atomic. */
pz_status pz_ckpt_save_llmc(const char *path, const pz_gpt2_params *p, int version);

/* Saves in `fmt`; PZ_CKPT_AUTO picks llm.c v3 for a ".bin" path and
 * safetensors otherwise. */
pz_status pz_ckpt_save(const char *path, const pz_gpt2_params *p, pz_ckpt_format fmt);

/* The config derivation of pz_ckpt_read_config on an already parsed
 * safetensors image (`what` names it in messages). Exposed for the fuzzer. */
pz_status pz_ckpt_config_from_safetensors(const pz_st_file *f, const char *what, int heads,
                                          const pz_hf_config *hc, pz_gpt2_config *cfg);

#endif
