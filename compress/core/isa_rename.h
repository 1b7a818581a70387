/* isa_rename.h: forced into the x86-64-v3 and x86-64-v4 compilations of the
 * codec files (compress/meson.build, -include), so each level's copy of an
 * external symbol gets its own name (pz_codec_q_v3, ...) and the copies link
 * side by side; registry.c picks a level's codec table at run time
 * (base/isa.h). Every external symbol those files define is listed: a
 * missing one shows up as a duplicate definition at link time. */
#ifndef PZ_COMPRESS_ISA_RENAME_H
#define PZ_COMPRESS_ISA_RENAME_H

#define PZ_ISA_CAT2(a, b) a##b
#define PZ_ISA_CAT(a, b) PZ_ISA_CAT2(a, b)
#define PZ_ISA_NAME(n) PZ_ISA_CAT(n, PZ_ISA_SUFFIX)

/* the codec tables (fp.c, quant.c, nuq.c, sign.c, topk.c, jointsq.c, tah.c) */
#define pz_codec_fp32 PZ_ISA_NAME(pz_codec_fp32)
#define pz_codec_fp16 PZ_ISA_NAME(pz_codec_fp16)
#define pz_codec_bf16 PZ_ISA_NAME(pz_codec_bf16)
#define pz_codec_q PZ_ISA_NAME(pz_codec_q)
#define pz_codec_nuq PZ_ISA_NAME(pz_codec_nuq)
#define pz_codec_sign PZ_ISA_NAME(pz_codec_sign)
#define pz_codec_topk PZ_ISA_NAME(pz_codec_topk)
#define pz_codec_jointsq PZ_ISA_NAME(pz_codec_jointsq)
#define pz_codec_tah PZ_ISA_NAME(pz_codec_tah)
#define pz_nuq_elias_stream PZ_ISA_NAME(pz_nuq_elias_stream)
#define pz_topk_geometry PZ_ISA_NAME(pz_topk_geometry)
/* jointsq.c, jointsq_solve.c, jointsq_wire.c, jointsq_read.c (compress/jointsq/jointsq_priv.h) */
#define pz_jsq_geom PZ_ISA_NAME(pz_jsq_geom)
#define pz_jsq_model PZ_ISA_NAME(pz_jsq_model)
#define pz_jsq_soa_fill PZ_ISA_NAME(pz_jsq_soa_fill)
#define pz_jsq_soa_alloc PZ_ISA_NAME(pz_jsq_soa_alloc)
#define pz_jsq_soa_bytes PZ_ISA_NAME(pz_jsq_soa_bytes)
#define pz_jsq_soa_at PZ_ISA_NAME(pz_jsq_soa_at)
#define pz_jsq_best_k PZ_ISA_NAME(pz_jsq_best_k)
#define pz_jsq_cside_alloc PZ_ISA_NAME(pz_jsq_cside_alloc)
#define pz_jsq_cside_bytes PZ_ISA_NAME(pz_jsq_cside_bytes)
#define pz_jsq_cside_at PZ_ISA_NAME(pz_jsq_cside_at)
#define pz_jsq_pass_b PZ_ISA_NAME(pz_jsq_pass_b)
#define pz_jsq_class_stats PZ_ISA_NAME(pz_jsq_class_stats)
#define pz_jsq_write_map PZ_ISA_NAME(pz_jsq_write_map)
#define pz_jsq_pack PZ_ISA_NAME(pz_jsq_pack)
#define pz_jsq_codes PZ_ISA_NAME(pz_jsq_codes)
#define pz_jsq_expand_cls PZ_ISA_NAME(pz_jsq_expand_cls)
#define pz_jsq_decode PZ_ISA_NAME(pz_jsq_decode)
/* fwht.c (compress/wrappers/hadamard.h) */
#define pz_hadamard_forward PZ_ISA_NAME(pz_hadamard_forward)
#define pz_hadamard_inverse PZ_ISA_NAME(pz_hadamard_inverse)
#define pz_hadamard_all_finite PZ_ISA_NAME(pz_hadamard_all_finite)
/* kselect.c */
#define pz_kth_largest_abs PZ_ISA_NAME(pz_kth_largest_abs)
#define pz_kth_largest_key PZ_ISA_NAME(pz_kth_largest_key)
/* mckp.c */
#define pz_mckp_brute PZ_ISA_NAME(pz_mckp_brute)
#define pz_mckp_cost_at PZ_ISA_NAME(pz_mckp_cost_at)
#define pz_mckp_lambda PZ_ISA_NAME(pz_mckp_lambda)
#define pz_mckp_pick_uniform PZ_ISA_NAME(pz_mckp_pick_uniform)
#define pz_mckp_solve PZ_ISA_NAME(pz_mckp_solve)
#define pz_mckp_solve_soa PZ_ISA_NAME(pz_mckp_solve_soa)
#define pz_mckp_work_bytes PZ_ISA_NAME(pz_mckp_work_bytes)
/* bitpack.c */
#define pz_bitr_get PZ_ISA_NAME(pz_bitr_get)
#define pz_bitr_init PZ_ISA_NAME(pz_bitr_init)
#define pz_bits_to_pm1 PZ_ISA_NAME(pz_bits_to_pm1)
#define pz_bitw_finish PZ_ISA_NAME(pz_bitw_finish)
#define pz_bitw_init PZ_ISA_NAME(pz_bitw_init)
#define pz_bitw_put PZ_ISA_NAME(pz_bitw_put)
#define pz_elias_delta_bits PZ_ISA_NAME(pz_elias_delta_bits)
#define pz_elias_delta_get PZ_ISA_NAME(pz_elias_delta_get)
#define pz_elias_delta_put PZ_ISA_NAME(pz_elias_delta_put)
#define pz_elias_gamma_bits PZ_ISA_NAME(pz_elias_gamma_bits)
#define pz_elias_gamma_get PZ_ISA_NAME(pz_elias_gamma_get)
#define pz_elias_gamma_put PZ_ISA_NAME(pz_elias_gamma_put)
#define pz_elias_omega_bits PZ_ISA_NAME(pz_elias_omega_bits)
#define pz_elias_omega_get PZ_ISA_NAME(pz_elias_omega_get)
#define pz_elias_omega_put PZ_ISA_NAME(pz_elias_omega_put)
#define pz_pack_codes PZ_ISA_NAME(pz_pack_codes)
#define pz_unpack_codes PZ_ISA_NAME(pz_unpack_codes)
#define pz_varint_get PZ_ISA_NAME(pz_varint_get)
#define pz_varint_put PZ_ISA_NAME(pz_varint_put)

#endif
