/* elem_specs.h: the codec specs whose element functions run both in
 * test_elem_shared (the shared element code against its CPU callers) and in
 * test_gpu_codecs (the CUDA kernels against the CPU codecs): one list, so
 * that a case added for one is tried by both. */
#ifndef PZ_TESTS_ELEM_SPECS_H
#define PZ_TESTS_ELEM_SPECS_H

#define PZ_TEST_ELEM_SPECS                                                                                          \
    "fp16", "bf16", "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8", "q4:scale=minmax", "q3:group=row",             \
        "q2:group=tensor", "q5:group=37", "q8:group=1", "q4:round=nearest", "q1:round=nearest,scale=minmax,group=row", \
        "q4:sdtype=fp16", "q6:scale=minmax,sdtype=fp16,group=64", "q1:grid=midrise", "q2:grid=midrise",            \
        "q4:grid=midrise", "q8:grid=midrise", "q4:scale=minmax,grid=midrise", "q3:round=nearest,grid=midrise",      \
        "q5:group=37,sdtype=fp16,grid=midrise", "q2:scale=minmax,round=nearest", "sign", "sign:stochastic",        \
        "sign:group=channel", "sign:stochastic,group=channel", "sign:group=tensor", "sign:group=100",              \
        "sign:sdtype=fp16", "sign:stochastic,group=13,sdtype=fp16", "nuq1", "nuq2", "nuq3", "nuq4", "nuq8",         \
        "nuq4:bucket=100", "nuq3:bucket=1", "nuq2:code=elias", "nuq4:code=elias,bucket=300", "nuq8:code=elias",    \
        "topk:0.1", "topk:0.01,values=fp16", "topk:0.3,values=q8", "topk:0.05,scope=tensor", "topk:1",             \
        "topk:0.5,scope=tensor,values=q8"

#endif
