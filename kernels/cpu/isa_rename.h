/* isa_rename.h: forced into the x86-64-v3 and x86-64-v4 compilations of the
 * CPU ops (kernels/meson.build, -include), so each level's copy of an op gets
 * its own name (pz_cpu_gelu_forward_v3, ...); backend_cpu.c builds one op
 * table per level and hands out the one base/isa.h chooses. Every external
 * symbol of those files is listed: a missing one is a duplicate definition
 * at link time. */
#ifndef PZ_CPU_ISA_RENAME_H
#define PZ_CPU_ISA_RENAME_H

#define PZ_ISA_CAT2(a, b) a##b
#define PZ_ISA_CAT(a, b) PZ_ISA_CAT2(a, b)
#define PZ_ISA_NAME(n) PZ_ISA_CAT(n, PZ_ISA_SUFFIX)

#define pz_cpu_encoder_forward PZ_ISA_NAME(pz_cpu_encoder_forward)
#define pz_cpu_encoder_backward PZ_ISA_NAME(pz_cpu_encoder_backward)
#define pz_cpu_layernorm_forward PZ_ISA_NAME(pz_cpu_layernorm_forward)
#define pz_cpu_layernorm_backward PZ_ISA_NAME(pz_cpu_layernorm_backward)
#define pz_cpu_matmul_forward PZ_ISA_NAME(pz_cpu_matmul_forward)
#define pz_cpu_matmul_backward PZ_ISA_NAME(pz_cpu_matmul_backward)
#define pz_cpu_attention_forward PZ_ISA_NAME(pz_cpu_attention_forward)
#define pz_cpu_attention_backward PZ_ISA_NAME(pz_cpu_attention_backward)
#define pz_cpu_attention_cached_forward PZ_ISA_NAME(pz_cpu_attention_cached_forward)
#define pz_cpu_gelu_forward PZ_ISA_NAME(pz_cpu_gelu_forward)
#define pz_cpu_gelu_backward PZ_ISA_NAME(pz_cpu_gelu_backward)
#define pz_cpu_residual_forward PZ_ISA_NAME(pz_cpu_residual_forward)
#define pz_cpu_residual_backward PZ_ISA_NAME(pz_cpu_residual_backward)
#define pz_cpu_crossentropy_forward PZ_ISA_NAME(pz_cpu_crossentropy_forward)
#define pz_cpu_sumsq PZ_ISA_NAME(pz_cpu_sumsq)
#define pz_cpu_adamw_update PZ_ISA_NAME(pz_cpu_adamw_update)

#endif
