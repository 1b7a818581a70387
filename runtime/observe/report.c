/* report.c: see report.h. */
#include "runtime/observe/report.h"

#include "runtime/observe/metrics.h"
#include "runtime/edge/policy.h"

void pz_report_step(FILE *f, const pz_step_line *s, int world, int edges, const double *edge_stats,
                    const double *rank_s) {
    fprintf(f, "{\"step\":%d,\"loss\":%.8f,\"lr\":%.6g,\"norm\":%.4f,\"ms\":%.1f,\"tok_s\":%.1f", s->step, s->loss,
            s->lr, s->norm, s->ms, s->tok_s);
    double d[PZ_DP_FIGS];   /* the data-parallel average, summed over the stages */
    pz_metrics_dp_sum(s->dp, world, d);
    if (s->dp)
        fprintf(f, ",\"dp_raw\":%.0f,\"dp_wire\":%.0f,\"dp_sync_ms\":%.1f,\"dp_hidden_ms\":%.1f", d[PZ_DP_RAW],
                d[PZ_DP_WIRE], 1e3 * d[PZ_DP_SYNC], 1e3 * d[PZ_DP_HIDDEN]);
    if (world > 1 && edge_stats) {
        double fr, fw, br, bw;
        pz_metrics_dir_bytes(edge_stats, edges, PZ_FWD, &fr, &fw);
        pz_metrics_dir_bytes(edge_stats, edges, PZ_BWD, &br, &bw);
        fprintf(f, ",\"fwd_raw\":%.0f,\"fwd_wire\":%.0f,\"bwd_raw\":%.0f,\"bwd_wire\":%.0f,\"tied_wire\":%.0f,\"stages\":[",
                fr, fw, br, bw, s->tied_wire);
        for (int r = 0; r < world; r++)
            fprintf(f, "%s{\"compute_ms\":%.1f,\"wait_ms\":%.1f,\"codec_ms\":%.1f}", r ? "," : "", 1e3 * rank_s[3 * r],
                    1e3 * rank_s[3 * r + 1], 1e3 * rank_s[3 * r + 2]);
        fputc(']', f);
    }
    if (s->dp && s->dp_var >= 0.0) fprintf(f, ",\"dp_var\":%.6g", s->dp_var);
    fputs("}\n", f);
    fflush(f);
}

void pz_report_val(FILE *f, int step, double loss, int batches, int compressed) {
    fprintf(f, "{\"step\":%d,\"val_loss\":%.8f,\"val_batches\":%d", step, loss, batches);
    if (compressed >= 0) fprintf(f, ",\"compressed\":%s", compressed ? "true" : "false");
    fputs("}\n", f);
    fflush(f);
}
