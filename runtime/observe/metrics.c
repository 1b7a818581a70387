/* metrics.c: see metrics.h. */
#include "runtime/observe/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
#include "runtime/edge/autospec.h"
#include "runtime/edge/edge.h"
#include "base/mem.h"

enum { S_RAW, S_WIRE, S_ENC, S_DEC, S_ERR2, S_NORM2 };

pz_status pz_metrics_init(pz_metrics *m, const pz_policy *p, const char *prefix, int micro, int error_metrics,
                          int dp_stages) {
    memset(m, 0, sizeof *m);
    m->dp_stages = dp_stages;
    m->dp_tot = xcalloc((size_t)dp_stages * PZ_DP_FIGS + 1, sizeof *m->dp_tot);
    m->edges = p->stages - 1;
    m->micro = micro;
    m->error_metrics = error_metrics;
    int n = 2 * m->edges;
    m->codec = xcalloc((size_t)n + 1, sizeof *m->codec);
    m->tot = xcalloc((size_t)n * PZ_EDGE_STATS_N + 1, sizeof *m->tot);
    m->relerr_sum = xcalloc((size_t)n + 1, sizeof *m->relerr_sum);
    m->relerr_n = xcalloc((size_t)n + 1, sizeof *m->relerr_n);
    m->is_auto = xcalloc((size_t)n + 1, sizeof *m->is_auto);
    m->next = xcalloc((size_t)5 * n + 1, sizeof *m->next);
    m->next_codec = xcalloc((size_t)n + 1, sizeof *m->next_codec);
    for (int k = 0; k < n; k++) {
        const char *spec = pz_policy_codec(p, k / 2, k % 2);
        pz_codec *c;
        pz_auto_spec as;
        if (pz_auto_is(spec)) {   /* the first candidate, until the executor names its start (pz_auto_print_start) */
            m->is_auto[k] = 1;
            pz_status st = pz_auto_parse_for(spec, pz_dir_use(k % 2), &as);
            m->codec[k] = xstrdup(st == PZ_OK ? as.canon[0] : "none");
            pz_auto_spec_free(&as);
        } else if (spec && pz_codec_create_for(spec, pz_dir_use(k % 2), &c) == PZ_OK) {
            m->codec[k] = xstrdup(pz_codec_spec(c));
            pz_codec_free(c);
        } else {
            m->codec[k] = xstrdup("none");
        }
    }
    if (prefix) {
        m->prefix = xstrdup(prefix);
        char path[4200];
        snprintf(path, sizeof path, "%s.jsonl", prefix);
        pz_status st = pz_atomic_open(&m->jl, path);
        if (st != PZ_OK) return st;
        m->have_jl = 1;
    }
    return PZ_OK;
}

void pz_metrics_dir_bytes(const double *es, int edges, int dir, double *raw, double *wire) {
    *raw = *wire = 0.0;
    for (int e = 0; e < edges; e++) {
        const double *v = es + (2 * e + dir) * PZ_EDGE_STATS_N;
        *raw += v[S_RAW];
        *wire += v[S_WIRE];
    }
}

static double rel_err(const double *v) { return v[S_NORM2] > 0 ? sqrt(v[S_ERR2] / v[S_NORM2]) : 0.0; }

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void take_next(pz_metrics *m);

void pz_metrics_dp_sum(const double *dp, int stages, double *sum) {
    for (int k = 0; k < PZ_DP_FIGS; k++) sum[k] = 0.0;
    for (int r = 0; dp && r < stages; r++)
        for (int k = 0; k < PZ_DP_FIGS; k++) sum[k] += dp[PZ_DP_FIGS * r + k];
}

/* the step's "dp" entry: bytes and times summed over stages, then each stage's times */
static void dp_json(FILE *f, const double *dp, int stages) {
    double s[PZ_DP_FIGS];
    pz_metrics_dp_sum(dp, stages, s);
    fprintf(f, "\"dp\":{\"raw_bytes\":%.0f,\"wire_bytes\":%.0f,\"sync_ms\":%.3f,\"hidden_ms\":%.3f,\"stages\":[",
            s[PZ_DP_RAW], s[PZ_DP_WIRE], 1e3 * s[PZ_DP_SYNC], 1e3 * s[PZ_DP_HIDDEN]);
    for (int r = 0; r < stages; r++)
        fprintf(f, "%s{\"sync_ms\":%.3f,\"hidden_ms\":%.3f}", r ? "," : "", 1e3 * dp[PZ_DP_FIGS * r + PZ_DP_SYNC],
                1e3 * dp[PZ_DP_FIGS * r + PZ_DP_HIDDEN]);
    fputs("]},", f);
}

void pz_metrics_step(pz_metrics *m, int step, const double *es, const double *dp, double tok_s) {
    int n = 2 * m->edges;
    if (m->steps == m->cap_tok) {
        m->cap_tok = m->cap_tok ? 2 * m->cap_tok : 256;
        m->tok_s = realloc(m->tok_s, (size_t)m->cap_tok * sizeof *m->tok_s);
        if (!m->tok_s) pz_die("out of memory for metrics");
    }
    m->tok_s[m->steps++] = tok_s;
    for (int k = 0; dp && k < m->dp_stages * PZ_DP_FIGS; k++) m->dp_tot[k] += dp[k];
    for (int k = 0; k < n; k++) {
        const double *v = es + k * PZ_EDGE_STATS_N;
        for (int j = 0; j < PZ_EDGE_STATS_N; j++) m->tot[k * PZ_EDGE_STATS_N + j] += v[j];
        int raw = strcmp(m->codec[k], "none") == 0;
        if (raw || m->error_metrics) { m->relerr_sum[k] += raw ? 0.0 : rel_err(v); m->relerr_n[k]++; }
    }
    if (!m->have_jl) { m->sched[0] = 0; take_next(m); return; }
    FILE *f = m->jl.f;
    fprintf(f, "{\"step\":%d,", step);
    if (m->sched[0]) fprintf(f, "\"schedule_next\":\"%s\",", m->sched);   /* --schedule auto's pick */
    m->sched[0] = 0;
    if (dp && m->dp_stages) dp_json(f, dp, m->dp_stages);
    fputs("\"edges\":[", f);
    for (int k = 0; k < n; k++) {
        const double *v = es + k * PZ_EDGE_STATS_N;
        int raw = strcmp(m->codec[k], "none") == 0;
        fprintf(f, "%s{\"edge\":\"%d-%d\",\"dir\":\"%s\",\"codec\":", k ? "," : "", k / 2, k / 2 + 1,
                k % 2 ? "bwd" : "fwd");
        json_str(f, m->codec[k]);
        fprintf(f, ",\"raw_bytes\":%.0f,\"wire_bytes\":%.0f,\"ratio\":%.4f,\"rel_err\":", v[S_RAW], v[S_WIRE],
                v[S_WIRE] > 0 ? v[S_RAW] / v[S_WIRE] : 0.0);
        if (raw || m->error_metrics) fprintf(f, "%.6g", raw ? 0.0 : rel_err(v));
        else fputs("null", f);
        fprintf(f, ",\"enc_ms\":%.3f,\"dec_ms\":%.3f", 1e3 * v[S_ENC], 1e3 * v[S_DEC]);
        if (m->next_codec[k]) {   /* auto decided after this step */
            const double *d = m->next + 5 * k;
            fputs(",\"auto_next\":", f);
            json_str(f, m->next_codec[k]);
            fprintf(f, ",\"auto_rel_err\":%.6g,\"auto_link_ms\":%.3f,\"auto_compute_ms\":%.3f,\"auto_mbps\":%.6g,"
                    "\"auto_step_ms\":%.3f", d[0], 1e3 * d[1], 1e3 * d[2], d[3] * 8 / 1e6, 1e3 * d[4]);
        }
        fputc('}', f);
    }
    fputs("]}\n", f);
    take_next(m);
}

/* the step's lines are written with the codec it ran; the next one with the pick */
static void take_next(pz_metrics *m) {
    for (int k = 0; k < 2 * m->edges; k++) {
        if (!m->next_codec[k]) continue;
        free(m->codec[k]);
        m->codec[k] = m->next_codec[k];
        m->next_codec[k] = NULL;
    }
}

void pz_metrics_auto(pz_metrics *m, int k, const char *codec, double rel_err, double link_s, double compute_s,
                     double rate, double step_s) {
    free(m->next_codec[k]);
    m->next_codec[k] = xstrdup(codec);
    double *d = m->next + 5 * k;
    d[0] = rel_err, d[1] = link_s, d[2] = compute_s, d[3] = rate, d[4] = step_s;
}

/* per stage: bytes over the run, times per step, the part hidden */
static void dp_table(const pz_metrics *m) {
    double steps = m->steps > 0 ? m->steps : 1;
    fprintf(stderr, "pipezip train: data-parallel average over %d steps (one replica's figures)\n", m->steps);
    fprintf(stderr, "  %-5s %10s %10s %12s %14s %8s\n", "stage", "raw MB", "wire MB", "sync ms/step", "hidden ms/step",
            "hidden");
    for (int r = 0; r < m->dp_stages; r++) {
        const double *v = m->dp_tot + PZ_DP_FIGS * r;
        fprintf(stderr, "  %-5d %10.2f %10.2f %12.2f %14.2f %7.1f%%\n", r, v[PZ_DP_RAW] / 1e6, v[PZ_DP_WIRE] / 1e6,
                1e3 * v[PZ_DP_SYNC] / steps, 1e3 * v[PZ_DP_HIDDEN] / steps,
                v[PZ_DP_SYNC] > 0 ? 100.0 * v[PZ_DP_HIDDEN] / v[PZ_DP_SYNC] : 0.0);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

pz_status pz_metrics_finish(pz_metrics *m, const char *policy_text, const double *state_bytes,
                            const double *spill_bytes, int world) {
    int n = 2 * m->edges;
    double msgs = (double)m->steps * m->micro;
    pz_status st = PZ_OK;
    /* tables on stderr */
    if (m->dp_stages) dp_table(m);
    if (n) fprintf(stderr, "pipezip train: compression over %d steps (%.0f messages per edge and direction)\n", m->steps, msgs);
    if (n) fprintf(stderr, "  %-5s %-3s %-34s %10s %10s %7s %9s %8s %8s %8s\n", "edge", "dir", "codec", "raw MB", "wire MB",
            "ratio", "bits/elem", "rel err", "enc ms", "dec ms");
    for (int k = 0; k < n; k++) {
        const double *v = m->tot + k * PZ_EDGE_STATS_N;
        char edge[32], err[32];
        snprintf(edge, sizeof edge, "%d-%d", k / 2, k / 2 + 1);
        if (m->relerr_n[k]) snprintf(err, sizeof err, "%.4f", m->relerr_sum[k] / m->relerr_n[k]);
        else snprintf(err, sizeof err, "-");
        char label[64];   /* auto: the codec it ended with */
        snprintf(label, sizeof label, "%s%s", m->is_auto[k] ? "auto, last " : "", m->codec[k]);
        fprintf(stderr, "  %-5s %-3s %-34.34s %10.2f %10.2f %7.2f %9.3f %8s %8.3f %8.3f\n", edge, k % 2 ? "bwd" : "fwd",
                label, v[S_RAW] / 1e6, v[S_WIRE] / 1e6, v[S_WIRE] > 0 ? v[S_RAW] / v[S_WIRE] : 0.0,
                v[S_RAW] > 0 ? 32.0 * v[S_WIRE] / v[S_RAW] : 0.0, err, msgs > 0 ? 1e3 * v[S_ENC] / msgs : 0.0,
                msgs > 0 ? 1e3 * v[S_DEC] / msgs : 0.0);
    }
    /* CSV and JSONL */
    if (m->prefix) {
        char path[4200];
        snprintf(path, sizeof path, "%s.csv", m->prefix);
        pz_atomic_file af;
        if ((st = pz_atomic_open(&af, path)) == PZ_OK) {
            fputs("edge,dir,codec,raw_bytes,wire_bytes,ratio,bits_per_elem,rel_err_mean,enc_ms_mean,dec_ms_mean\n", af.f);
            for (int k = 0; k < n; k++) {
                const double *v = m->tot + k * PZ_EDGE_STATS_N;
                fprintf(af.f, "%d-%d,%s,\"%s%s\",%.0f,%.0f,%.6g,%.6g,", k / 2, k / 2 + 1, k % 2 ? "bwd" : "fwd",
                        m->is_auto[k] ? "auto, last " : "", m->codec[k],
                        v[S_RAW], v[S_WIRE], v[S_WIRE] > 0 ? v[S_RAW] / v[S_WIRE] : 0.0,
                        v[S_RAW] > 0 ? 32.0 * v[S_WIRE] / v[S_RAW] : 0.0);
                if (m->relerr_n[k]) fprintf(af.f, "%.6g", m->relerr_sum[k] / m->relerr_n[k]);
                fprintf(af.f, ",%.6g,%.6g\n", msgs > 0 ? 1e3 * v[S_ENC] / msgs : 0.0, msgs > 0 ? 1e3 * v[S_DEC] / msgs : 0.0);
            }
            st = pz_atomic_commit(&af);
        }
        if (st == PZ_OK && m->have_jl) {
            m->have_jl = 0;
            st = pz_atomic_commit(&m->jl);
        }
        if (st == PZ_OK) fprintf(stderr, "pipezip train: wrote %s.jsonl and %s.csv\n", m->prefix, m->prefix);
    }
    /* summary line */
    double med = 0.0;
    if (m->steps > 0) {
        double *t = xmalloc((size_t)m->steps * sizeof *t);
        memcpy(t, m->tok_s, (size_t)m->steps * sizeof *t);
        qsort(t, (size_t)m->steps, sizeof *t, cmp_double);
        med = m->steps % 2 ? t[m->steps / 2] : 0.5 * (t[m->steps / 2 - 1] + t[m->steps / 2]);
        free(t);
    }
    double fr = 0, fw = 0, br = 0, bw = 0;
    pz_metrics_dir_bytes(m->tot, m->edges, 0, &fr, &fw);
    pz_metrics_dir_bytes(m->tot, m->edges, 1, &br, &bw);
    printf("{\"summary\":true,\"steps\":%d,\"tok_s_median\":%.1f,\"fwd_raw\":%.0f,\"fwd_wire\":%.0f,\"bwd_raw\":%.0f,"
           "\"bwd_wire\":%.0f,\"policy\":", m->steps, med, fr, fw, br, bw);
    json_str(stdout, policy_text);
    if (m->dp_stages) {   /* over the run, summed over the stages */
        double s[PZ_DP_FIGS];
        pz_metrics_dp_sum(m->dp_tot, m->dp_stages, s);
        printf(",\"dp_raw\":%.0f,\"dp_wire\":%.0f,\"dp_sync_s\":%.4f,\"dp_hidden_s\":%.4f", s[PZ_DP_RAW],
               s[PZ_DP_WIRE], s[PZ_DP_SYNC], s[PZ_DP_HIDDEN]);
    }
    fputs(",\"codec_state_bytes\":[", stdout);
    for (int r = 0; r < world; r++) printf("%s%.0f", r ? "," : "", state_bytes[r]);
    fputs("],\"aq_spill_bytes\":[", stdout);
    for (int r = 0; r < world; r++) printf("%s%.0f", r ? "," : "", spill_bytes[r]);
    fputs("]}\n", stdout);
    fflush(stdout);
    return st;
}

void pz_metrics_schedule(pz_metrics *m, const char *sched) {
    snprintf(m->sched, sizeof m->sched, "%s", sched);
}

void pz_metrics_free(pz_metrics *m) {
    if (m->have_jl) pz_atomic_abort(&m->jl);
    for (int k = 0; m->codec && k < 2 * m->edges; k++) free(m->codec[k]);
    for (int k = 0; m->next_codec && k < 2 * m->edges; k++) free(m->next_codec[k]);
    PZ_FREE_ALL(m->is_auto, m->next, m->next_codec, m->dp_tot);
    PZ_FREE_ALL(m->codec, m->tot, m->relerr_sum, m->relerr_n, m->tok_s, m->prefix);
    memset(m, 0, sizeof *m);
}
