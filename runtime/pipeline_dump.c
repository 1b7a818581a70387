/* pipeline_dump.c: --dump-edge STEP. At that step (1-based, as the step
 * lines count), each sender writes the tensor it is about to encode, before
 * any codec touches it, as float32 .npy of shape (B, T, C):
 *   DIR/step<S>-edge<e>-<e+1>-fwd-micro<m>.npy   activations, by stage e
 *   DIR/step<S>-edge<e>-<e+1>-bwd-micro<m>.npy   their gradients, by stage e+1
 * so codecs can be studied on real tensors (`pipezip codec --in`, the sweep). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "compress/npy.h"
#include "runtime/pipeline_exec.h"

pz_status exec_dump_edge(exec *x, const pz_edge_end *e, int kind, uint64_t step, int micro, const float *src) {
    const pz_train_opts *o = x->o;
    if (!o->dump_edge || step + 1 != (uint64_t)o->dump_edge || (kind != KIND_ACT && kind != KIND_GRAD)) return PZ_OK;
    if (mkdir(o->dump_dir, 0755) != 0 && errno != EEXIST)
        return pz_fail(PZ_ERR_IO, "--dump-dir %s: %s", o->dump_dir, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/step%llu-edge%d-%d-%s-micro%d.npy", o->dump_dir, (unsigned long long)step + 1,
             e->edge, e->edge + 1, kind == KIND_ACT ? "fwd" : "bwd", micro);
    pz_shape sh = {3, {(size_t)o->batch, (size_t)o->seq, (size_t)x->stage.cfg.channels}};
    pz_status st = pz_npy_write(path, &sh, src);
    if (st != PZ_OK) return pz_fail(st, "--dump-edge: %s", pz_last_error());
    return PZ_OK;
}
