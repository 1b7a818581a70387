/* fingerprint.c: see fingerprint.h. */
#include "runtime/plan/fingerprint.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/io/file.h"
#include "base/mem.h"
#include "base/parse.h"
#include "runtime/edge/tied.h"
#include "stages/hf_dir.h"

typedef struct {
    char *s;
    size_t n, cap;
} lines;

static void add(lines *l, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add(lines *l, const char *key, const char *fmt, ...) {
    char val[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof val, fmt, ap);
    va_end(ap);
    size_t need = strlen(key) + strlen(val) + 3;
    if (l->n + need > l->cap) {
        l->cap = (l->n + need) * 2;
        char *grown = xmalloc(l->cap);
        if (l->n) memcpy(grown, l->s, l->n);
        free(l->s);
        l->s = grown;
    }
    l->n += (size_t)snprintf(l->s + l->n, l->cap - l->n, "%s\t%s\n", key, val);
}

/* FNV-1a, 64 bits: an identity check between ranks, not a defence */
static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* size and a hash of the first KiB and 16 blocks of 4 KiB spread over the bytes */
static void identity(lines *l, const char *key, const uint8_t *p, size_t n) {
    uint64_t h = fnv(0xcbf29ce484222325ull, p, n < 1024 ? n : 1024);
    const size_t blk = 4096;
    for (int k = 0; n > blk && k < 16; k++) h = fnv(h, p + (n - blk) / 15 * (size_t)k, blk);
    add(l, key, "%zu bytes, sampled hash %016llx", n, (unsigned long long)h);
}

static void file_identity(lines *l, const char *key, const char *path) {
    const void *m = NULL;
    size_t n = 0;
    if (pz_map_file(path, &m, &n) != PZ_OK) {
        add(l, key, "unreadable");
        return;
    }
    identity(l, key, m, n);
    pz_unmap_file(m, n);
}

static void dataset_identity(lines *l, const char *flag, const pz_dataset *d) {
    if (!d || !d->paths) return;
    add(l, flag, "%d shard%s", d->nshards, d->nshards == 1 ? "" : "s");
    for (int i = 0; i < d->nshards; i++) {
        char key[64];
        snprintf(key, sizeof key, "%s shard %d", flag, i);
        identity(l, key, d->maps[i], d->map_len[i]);
    }
}

/* the shortest %g that reads back as v: what the user typed, usually */
static const char *short_float(char *buf, size_t cap, float v) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, cap, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return buf;
}

char *pz_fingerprint_build(const pz_train_opts *o, const pz_gpt2_config *c, const pz_policy *pol,
                           const pz_dataset *train, const pz_dataset *val) {
    lines l = {0};
    char fb[32];
    add(&l, "model", "L=%d NH=%d C=%d V=%d maxT=%d", c->num_layers, c->num_heads, c->channels, c->vocab_size,
        c->max_seq_len);
    add(&l, "--preset", "%s", o->model.preset ? o->model.preset : "(none)");
    if (o->model.init) {
        pz_model_files mf;
        memset(&mf, 0, sizeof mf);
        if (pz_model_files_find(o->model.init, &mf) == PZ_OK) {
            if (mf.weights) file_identity(&l, "--init weights", mf.weights);
            for (int i = 0; i < mf.nshards; i++) {
                char key[64];
                snprintf(key, sizeof key, "--init shard %d", i);
                file_identity(&l, key, mf.shards[i]);
            }
            if (mf.config) file_identity(&l, "--init config.json", mf.config);
        }
        pz_model_files_free(&mf);
    }
    add(&l, "--batch", "%d", o->model.batch);
    add(&l, "--seq", "%d", o->model.seq);
    add(&l, "--steps", "%d", o->model.steps);
    add(&l, "--micro-batches", "%d", o->model.micro);
    add(&l, "--seed", "%ld", o->model.seed);
    add(&l, "--val-every", "%d", o->model.val_every);
    add(&l, "--val-batches", "%d", o->model.val_batches);
    add(&l, "--lr", "%s", short_float(fb, sizeof fb, o->model.optim.lr));
    add(&l, "--min-lr-frac", "%s", short_float(fb, sizeof fb, o->model.optim.min_lr_frac));
    add(&l, "--warmup", "%d", o->model.warmup_given ? o->model.optim.warmup_steps : o->model.steps / 10);
    add(&l, "--beta1", "%s", short_float(fb, sizeof fb, o->model.optim.beta1));
    add(&l, "--beta2", "%s", short_float(fb, sizeof fb, o->model.optim.beta2));
    add(&l, "--eps", "%s", short_float(fb, sizeof fb, o->model.optim.eps));
    add(&l, "--weight-decay", "%s", short_float(fb, sizeof fb, o->model.optim.weight_decay));
    add(&l, "--grad-clip", "%s", short_float(fb, sizeof fb, o->model.optim.grad_clip));
    if (o->model.optim.kind == PZ_OPTIM_BINSGDM) add(&l, "--optimizer", "%s", "binsgdm");   /* absent for AdamW: old job ids stay */
    add(&l, "--stages", "%d", o->sched.stages);
    if (o->dp.replicas > 1) {   /* absent with one replica: the job ids of the runs before --replicas stay */
        add(&l, "--replicas", "%d", o->dp.replicas);
        add(&l, "--layout", "%s", o->dp.layout ? "replica-major" : "stage-major");
        add(&l, "--dp-compress", "%s", o->dp.compress ? o->dp.compress : "none");
        add(&l, "--dp-reduce", "%d", o->dp.reduce);
        add(&l, "--dp-warmup", "%d", o->dp.warmup);
        if (o->dp.freeze_v)   /* absent for grad: old job ids stay */
            add(&l, "--dp-compress-what", "%s", o->dp.momentum ? "momentum" : "grad-frozen-v");
        add(&l, "--dp-hosts", "%d", o->dp.hosts);
        add(&l, "--dp-link-mbps", "%.9g", (double)o->dp.link_mbps);
        add(&l, "--dp-link-latency-ms", "%.9g", (double)o->dp.link_latency_ms);
        add(&l, "--dp-bucket-mb", "%s", short_float(fb, sizeof fb, o->dp.bucket_mb));
        add(&l, "--dp-variance", "%d", o->dp.variance);   /* an extra all-reduce: every member or none */
    }
    add(&l, "--split", "%s", o->sched.split ? o->sched.split : "(balanced)");
    add(&l, "--schedule", "%s", o->sched.name);
    add(&l, "--virtual-stages", "%d", o->sched.virtual_stages);
    add(&l, "--device", "%s", o->host.device);
    for (int e = 0; e < pol->stages - 1; e++) {
        char key[64];
        const char *f = pz_policy_codec(pol, e, 0), *b = pz_policy_codec(pol, e, 1);
        snprintf(key, sizeof key, "--compress edge %d-%d", e, e + 1);
        add(&l, key, "fwd=%s,bwd=%s", f ? f : "none", b ? b : "none");
        snprintf(key, sizeof key, "--link-mbps edge %d-%d", e, e + 1);
        add(&l, key, "%.9g", pol->mbps[e]);
        snprintf(key, sizeof key, "--link-latency-ms edge %d-%d", e, e + 1);
        add(&l, key, "%.9g", pol->latency_ms[e]);
    }
    const char *tied = o->link.compress_tied ? o->link.compress_tied : pz_tied_follow(pol);   /* what the exchange uses */
    add(&l, "--compress-tied", "%s", tied ? tied : "none");
    add(&l, "--eval-compress", "%d", o->link.eval_compress);
    add(&l, "--checkpoint-every", "%d", o->ckpt.dir ? o->ckpt.every : -1);
    add(&l, "--resume", "%s", o->ckpt.resume ? (strcmp(o->ckpt.resume, "auto") == 0 ? "auto" : "a directory") : "(none)");
    dataset_identity(&l, "--data", train);
    dataset_identity(&l, "--val-data", val);
    if (!l.s) l.s = xstrdup("");
    return l.s;
}

int pz_fingerprint_differ(const char *mine, const char *theirs, const pz_rank_layout *names, int r, char *msg,
                          size_t cap) {
    for (const char *p = mine; *p;) {
        const char *tab = strchr(p, '\t'), *nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p);
        if (tab && tab < nl && *p != '@') {   /* '@': a rank's own line (its share), not compared */
            char key[128], a[512], b[512];
            size_t klen = (size_t)(tab - p) < sizeof key ? (size_t)(tab - p) : sizeof key - 1;
            memcpy(key, p, klen);
            key[klen] = 0;
            if (pz_kv_value(mine, key, klen, a, sizeof a) && pz_kv_value(theirs, key, klen, b, sizeof b) && strcmp(a, b)) {
                char nr[64], n0[64];
                snprintf(msg, cap, "%s does not agree with %s: %s is %s on rank %d, %s on rank 0",
                         pz_rank_name(names, r, nr, sizeof nr), pz_rank_name(names, 0, n0, sizeof n0), key, b, r, a);
                return 1;
            }
        }
        p = *nl ? nl + 1 : nl;
    }
    return 0;
}

int pz_fingerprint_overlap(const pz_fp_share *sh, int n, const pz_rank_layout *names, char *msg, size_t cap) {
    for (int j = 1; j < n; j++)
        for (int i = 0; i < j; i++) {
            const pz_fp_share *a = &sh[i], *b = &sh[j];
            if (a->stage != b->stage || a->first >= b->first + b->count || b->first >= a->first + a->count) continue;
            int lo = a->first > b->first ? a->first : b->first;
            char ni[64], nj[64];
            snprintf(msg, cap, "%s and %s would train on the same data: their shares of every global batch "
                     "(micro-batches %d..%d and %d..%d) overlap from micro-batch %d", pz_rank_name(names, j, nj, sizeof nj),
                     pz_rank_name(names, i, ni, sizeof ni), b->first, b->first + b->count - 1, a->first,
                     a->first + a->count - 1, lo);
            return 1;
        }
    return 0;
}

/* rank 0: every rank's fingerprint and share, compared with its own; the
 * first difference (or an overlap) into verdict */
static pz_status judge(pz_transport *t, int world, const char *mine, const pz_fp_share *share, char *verdict,
                       size_t cap) {
    char *buf = xmalloc(PZ_FINGERPRINT_MAX + 1), sv[64];
    pz_fp_share *all = xcalloc((size_t)world, sizeof *all);
    const pz_rank_layout *names = pz_transport_names(t);
    all[0] = *share;
    pz_request *r = NULL;
    pz_status st = PZ_OK;
    for (int q = 1; q < world && st == PZ_OK; q++) {
        size_t n = 0;
        st = pz_transport_recv(t, q, pz_tag(q, 0, 0, PZ_KIND_FINGERPRINT), buf, PZ_FINGERPRINT_MAX,
                               "the job's fingerprint", &r);
        if (st == PZ_OK) st = pz_transport_wait(t, r, &n);
        if (st != PZ_OK) break;
        buf[n] = 0;
        pz_fp_share *s = &all[q];
        if (verdict[0]) continue;   /* the first difference is the one named */
        if (strlen(buf) != n) snprintf(verdict, cap, "rank %d sent a fingerprint with a NUL byte", q);
        else if (!pz_kv_value(buf, "@share", 6, sv, sizeof sv) || sscanf(sv, "%d %d %d", &s->stage, &s->first, &s->count) != 3)
            snprintf(verdict, cap, "rank %d sent a fingerprint without its share of the data", q);
        if (!verdict[0]) pz_fingerprint_differ(mine, buf, names, q, verdict, cap);
    }
    if (st == PZ_OK && !verdict[0]) pz_fingerprint_overlap(all, world, names, verdict, cap);
    free(all);
    free(buf);
    return st;
}

pz_status pz_fingerprint_agree(pz_transport *t, int rank, int world, const char *mine, const pz_fp_share *share) {
    if (world < 2) return PZ_OK;
    size_t len = strlen(mine);
    if (len + 64 > PZ_FINGERPRINT_MAX)
        return pz_fail(PZ_ERR_ARG, "the job's fingerprint is %zu bytes, more than %d (too many data shards?)", len,
                       PZ_FINGERPRINT_MAX - 64);
    char verdict[1024] = "";
    pz_request *r = NULL;
    pz_status st = PZ_OK;
    if (rank == 0) {
        st = judge(t, world, mine, share, verdict, sizeof verdict);
        for (int q = 1; q < world && st == PZ_OK; q++) {
            st = pz_transport_send(t, q, pz_tag(0, 0, 0, PZ_KIND_VERDICT), verdict, strlen(verdict) + 1,
                                   "the fingerprint verdict", &r);
            if (st == PZ_OK) st = pz_transport_wait(t, r, NULL);
        }
    } else {
        char *sent = xmalloc(len + 64);   /* the fingerprint and this rank's share */
        size_t n = (size_t)snprintf(sent, len + 64, "%s@share\t%d %d %d\n", mine, share->stage, share->first,
                                    share->count);
        st = pz_transport_send(t, 0, pz_tag(rank, 0, 0, PZ_KIND_FINGERPRINT), sent, n, "the job's fingerprint", &r);
        if (st == PZ_OK) st = pz_transport_wait(t, r, NULL);
        free(sent);
        if (st == PZ_OK)
            st = pz_transport_recv(t, 0, pz_tag(0, 0, 0, PZ_KIND_VERDICT), verdict, sizeof verdict,
                                   "the fingerprint verdict", &r);
        if (st == PZ_OK) st = pz_transport_wait(t, r, &n);
        if (st == PZ_OK && (n == 0 || verdict[n - 1] != 0))
            st = pz_fail(PZ_ERR_PEER, "rank 0 sent a malformed fingerprint verdict (%zu bytes)", n);
    }
    if (st == PZ_OK && verdict[0]) st = pz_fail(PZ_ERR_ARG, "%s", verdict);
    return st;
}
