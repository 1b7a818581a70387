/* loss.c: softmax cross-entropy over the first V of Vp logits per row, fused
 * with its backward so the (N,Vp) logits are swept while still in cache. */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>

/* losses (N) = logsumexp(logits[r, :V]) - logits[r, target]; targets (N) in
 * [0, V). If dscale != 0, logits (N,Vp) are overwritten with
 * dlogits = (softmax - onehot) * dscale in [0,V) and 0 in [V,Vp); with
 * dscale == 0 the logits are left untouched.
 * Per row: max, then sum of exp(x - max) (so no exp overflows, and the sum
 * is >= 1), loss = log(sum) + max - x[target], which never takes the log of
 * a tiny probability. The sum runs in double: 50257 terms in float would lose
 * ~1e-5 relative in the worst case. With dscale != 0 the exps are stored in
 * place on the way and scaled by dscale/sum in a third pass (the row is
 * 200 KB, still in L2). */
void pz_cpu_crossentropy_forward(float *losses, float *logits, const int *targets,
                                 int N, int V, int Vp, float dscale) {
    #pragma omp parallel for schedule(static) num_threads(pz_cpu_nt())
    for (int r = 0; r < N; r++) {
        float *x = logits + (size_t)r * Vp;
        const int tgt = targets[r];
        const float xt = x[tgt];
        float mx = x[0];
        #pragma omp simd reduction(max:mx)
        for (int i = 0; i < V; i++) mx = x[i] > mx ? x[i] : mx;
        double sum = 0.0;
        if (dscale == 0.0f) {
            #pragma omp simd reduction(+:sum)
            for (int i = 0; i < V; i++) sum += (double)pz_cpu_expf(x[i] - mx);
        } else {
            #pragma omp simd reduction(+:sum)
            for (int i = 0; i < V; i++) {
                const float e = pz_cpu_expf(x[i] - mx);
                x[i] = e;
                sum += (double)e;
            }
            const float scale = (float)((double)dscale / sum);
            #pragma omp simd
            for (int i = 0; i < V; i++) x[i] *= scale;
            x[tgt] -= dscale;
            for (int i = V; i < Vp; i++) x[i] = 0.0f;
        }
        losses[r] = (float)(log(sum) + (double)mx - (double)xt);
    }
}
