/* job.c: a job's description, id and comparison (job.h); the lock and the
 * start-up check are in lock.c. */
#include "runtime/ckpt/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "base/parse.h"

/* fingerprint keys that do not change what training computes: validation,
 * checkpointing, the simulated links (the network's, not the job's;
 * --compress auto's decisions, which they sway, travel in the checkpoint),
 * the replicas' bucket size (the replicas must agree on it, but it only
 * moves float rounding: the sum's order with 3 replicas or more), and
 * --dp-variance's measurement beside the sync */
static const char *const not_job[] = {"--resume",        "--checkpoint-every",  "--val-every",    "--val-batches",
                                      "--val-data",      "--eval-compress",     "--link-mbps",    "--link-latency-ms",
                                      "--dp-link-mbps",  "--dp-link-latency-ms", "--dp-bucket-mb",
                                      "--dp-variance",   NULL};
/* the flags --resume DIR may change: layout, steps, learning rate */
static const char *const resume_may[] = {"--stages",      "--split",  "--schedule", "--virtual-stages",
                                         "--device",      "--compress", "--compress-tied", "--steps",
                                         "--warmup",      "--lr",     "--min-lr-frac", NULL};

static int in_list(const char *const *l, const char *k, size_t n) {
    for (; *l; l++)
        if (strlen(*l) == n && memcmp(*l, k, n) == 0) return 1;
    return 0;
}

/* FNV-1a, 64 bits: names a job, not a defence */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}
#define FNV0 0xcbf29ce484222325ull

uint64_t pz_job_id(const char *desc) { return fnv(FNV0, desc, strlen(desc)); }

void pz_job_hex(uint64_t id, char hex[17]) { snprintf(hex, 17, "%016llx", (unsigned long long)id); }

int pz_job_parse_hex(const char *hex, uint64_t *id) {
    uint64_t v = 0;
    if (!hex || strlen(hex) != 16) return 0;
    for (int i = 0; i < 16; i++) {
        char c = hex[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (uint64_t)d;
    }
    *id = v;
    return 1;
}

typedef struct {
    char key[64];
    char *val;   /* the values of its lines, "; "-joined */
    size_t n;
} entry;

/* appends "flag\tvalue\n" to out (at *n of cap), a long value as its hash */
static void put(char *out, size_t cap, size_t *n, const entry *e) {
    char h[96];
    const char *v = e->val ? e->val : "";
    if (e->n > PZ_JOB_VALUE_MAX) {
        snprintf(h, sizeof h, "hash %016llx of %zu bytes", (unsigned long long)fnv(FNV0, v, e->n), e->n);
        v = h;
    }
    int w = snprintf(out + *n, cap - *n, "%s\t%s\n", e->key, v);
    if (w > 0 && (size_t)w < cap - *n) *n += (size_t)w;
}

char *pz_job_desc(const char *fp) {
    /* one entry per flag, in the order of first appearance */
    int cap = 64, ne = 0;
    entry *es = xcalloc((size_t)cap, sizeof *es);
    for (const char *p = fp; *p;) {
        const char *nl = strchr(p, '\n'), *tab = strchr(p, '\t');
        if (!nl) nl = p + strlen(p);
        if (tab && tab < nl) {
            size_t kl = strcspn(p, " \t");   /* "--data shard 3" is --data's */
            if (kl >= sizeof es[0].key) kl = sizeof es[0].key - 1;
            if (!in_list(not_job, p, kl)) {
                int i = 0;
                while (i < ne && !(strlen(es[i].key) == kl && memcmp(es[i].key, p, kl) == 0)) i++;
                if (i == ne) {
                    if (ne == cap) {
                        entry *g = xcalloc((size_t)cap * 2, sizeof *g);
                        memcpy(g, es, (size_t)cap * sizeof *g);
                        free(es);
                        es = g;
                        cap *= 2;
                    }
                    memcpy(es[i].key, p, kl);
                    ne++;
                }
                /* the line less its flag: "shard 3\tN bytes..." or just the value */
                const char *v = p + kl;
                if (*v == '\t') v++;
                else while (*v == ' ') v++;
                size_t vl = (size_t)(nl - v), add = vl + (es[i].n ? 2 : 0);
                char *g = xmalloc(es[i].n + add + 1);
                if (es[i].n) memcpy(g, es[i].val, es[i].n), memcpy(g + es[i].n, "; ", 2);
                memcpy(g + es[i].n + (es[i].n ? 2 : 0), v, vl);
                for (size_t k = 0; k < vl; k++) {   /* the tab between a sub-key and its value; no control bytes */
                    char *c = &g[es[i].n + add - vl + k];
                    if (*c == '\t') *c = ' ';
                    else if ((unsigned char)*c < 0x20) *c = '?';
                }
                g[es[i].n + add] = 0;
                free(es[i].val);
                es[i].val = g;
                es[i].n += add;
            }
        }
        p = *nl ? nl + 1 : nl;
    }
    size_t n = 0;
    char *out = xmalloc(PZ_JOB_DESC_MAX);
    out[0] = 0;
    for (int i = 0; i < ne; i++) {
        put(out, PZ_JOB_DESC_MAX, &n, &es[i]);
        free(es[i].val);
    }
    free(es);
    return out;
}

/* a value the fingerprint keeps as a number (runtime/plan/fingerprint.c:
 * so that the job ids of old checkpoints stay) as the flag's word, for the
 * messages: --dp-reduce 0 (no --dp-compress), 1, 2, 3 (runtime/plan/options.c) */
static const char *shown(const char *key, size_t kl, const char *v) {
    static const char *const reduce[] = {"(uncompressed)", "allgather", "twophase", "hierarchical"};
    if (kl == 11 && !memcmp(key, "--dp-reduce", 11) && v[0] >= '0' && v[0] <= '3' && !v[1]) return reduce[v[0] - '0'];
    return v;
}

/* the differences of a's keys against b, allowed ones (pass 1) or not (pass 0) */
static int diff_pass(const char *a, const char *b, int swap, int pass, char *msg, size_t cap, size_t *n) {
    int found = 0;
    for (const char *p = a; *p;) {
        const char *nl = strchr(p, '\n'), *tab = strchr(p, '\t');
        if (!nl) nl = p + strlen(p);
        if (tab && tab < nl) {
            size_t kl = (size_t)(tab - p);
            char va[PZ_JOB_VALUE_MAX + 64], vb[PZ_JOB_VALUE_MAX + 64];
            pz_kv_value(a, p, kl, va, sizeof va);
            int inb = pz_kv_value(b, p, kl, vb, sizeof vb);
            if (swap && inb) goto next;   /* keys of b that a lacks only */
            if (!inb) snprintf(vb, sizeof vb, "(none)");
            if (strcmp(va, vb) != 0 && in_list(resume_may, p, kl) == pass) {
                found = 1;
                int w = snprintf(msg + *n, cap - *n, "%s%.*s is %s here, %s there", *n ? "; " : "", (int)kl, p,
                                 shown(p, kl, swap ? vb : va), shown(p, kl, swap ? va : vb));
                if (w > 0) *n = (size_t)w < cap - *n ? *n + (size_t)w : cap - 1;
            }
        }
    next:
        p = *nl ? nl + 1 : nl;
    }
    return found;
}

int pz_job_compare(const char *mine, const char *theirs, char *msg, size_t cap) {
    size_t n = 0;
    msg[0] = 0;
    int bad = diff_pass(mine, theirs, 0, 0, msg, cap, &n) | diff_pass(theirs, mine, 1, 0, msg, cap, &n);
    int may = diff_pass(mine, theirs, 0, 1, msg, cap, &n) | diff_pass(theirs, mine, 1, 1, msg, cap, &n);
    return bad ? 2 : may ? 1 : 0;
}
