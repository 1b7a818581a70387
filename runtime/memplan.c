/* memplan.c: see memplan.h. */
#include "runtime/memplan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "stages/stage.h"

pz_mem_need pz_mem_need_of(const pz_gpt2_config *cfg, const pz_stage_range *r, int B, int T, int defer_weights,
                           int slots, int micro, int first, int last, double codec_bytes) {
    pz_mem_need n;
    memset(&n, 0, sizeof n);
    const double f = sizeof(float), numel = (double)pz_stage_numel(cfg, r);
    const double act = (double)B * T * cfg->channels * f;   /* one (B, T, C) tensor */
    n.model = 2 * numel * f;
    n.optim = 2 * numel * f;
    n.scratch = ((double)pz_stage_fixed_numel(cfg, r, B, T) - 2 * numel) * f;
    n.slots = slots;
    n.acts = (double)slots * (double)pz_acts_slot_numel(cfg, r, B, T, defer_weights) * f;
    /* per slot: received activation, d(input) and its message (not on the
     * first stage), received gradient and its message (not on the last);
     * a message is at most the raw tensor and its header */
    const double per_slot = (first ? 0 : 3 * act) + (last ? 0 : 2 * act);
    const int ring = slots + 2 < micro ? slots + 2 : micro;
    n.buffers = slots * per_slot + ring * ((first ? 0 : act) + (last ? 0 : act));
    n.codec = codec_bytes;
    n.total = n.model + n.optim + n.scratch + n.acts + n.buffers + n.codec;
    return n;
}

/* a "Key:   N kB" line of /proc/meminfo, in bytes; < 0 when absent */
static double meminfo(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtod(line + kl + 1, NULL) * 1024.0;
            break;
        }
    fclose(f);
    return v;
}

/* a number in a one-line file; < 0 when absent or "max" */
static double file_number(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char buf[64] = {0};
    double v = -1;
    if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9') v = strtod(buf, NULL);
    fclose(f);
    return v;
}

double pz_mem_available(const char **source) {
    const char *env = getenv("PIPEZIP_MEM_AVAILABLE");
    if (env && *env) {
        *source = "PIPEZIP_MEM_AVAILABLE";
        return strtod(env, NULL);
    }
    double avail = meminfo("MemAvailable");
    *source = "MemAvailable in /proc/meminfo";
    /* cgroup v2, then v1: what the group may still take */
    double lim = file_number("/sys/fs/cgroup/memory.max"), used = file_number("/sys/fs/cgroup/memory.current");
    const char *cg = "the cgroup's memory.max less memory.current";
    if (lim < 0) {
        lim = file_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
        used = file_number("/sys/fs/cgroup/memory/memory.usage_in_bytes");
        cg = "the cgroup's memory.limit_in_bytes less its usage";
        if (lim > 1e18) lim = -1;   /* v1 writes a huge number for "no limit" */
    }
    if (lim >= 0) {
        double room = lim - (used > 0 ? used : 0);
        if (avail < 0 || room < avail) {
            avail = room > 0 ? room : 0;
            *source = cg;
        }
    }
    return avail > 0 ? avail : 0;
}

static double gib(double b) { return b / (1024.0 * 1024.0 * 1024.0); }

void pz_mem_need_print(FILE *f, const pz_mem_need *n) {
    fprintf(f, "%.2f GiB (parameters and gradients %.2f, AdamW %.2f, backward scratch %.2f, activations %.2f for "
            "%d micro-batch%s in flight, buffers %.2f, codec state %.2f)", gib(n->total), gib(n->model),
            gib(n->optim), gib(n->scratch), gib(n->acts), n->slots, n->slots == 1 ? "" : "es", gib(n->buffers),
            gib(n->codec));
}

double pz_mem_codec_bound(const pz_policy *pol, int rank, int world, int B, int T, int C) {
    pz_shape sh = {3, {(size_t)B, (size_t)T, (size_t)C}};
    double total = 0;
    for (int side = 0; side < 2; side++) {   /* the out edge, the in edge */
        int e = side == 0 ? rank : rank - 1;
        if (e < 0 || e >= world - 1) continue;
        for (int d = 0; d < 2; d++) {
            const char *spec = pz_policy_codec(pol, e, d);
            pz_codec *c = NULL;
            if (!spec || pz_codec_create(spec, &c) != PZ_OK) continue;   /* a bad spec fails later, named */
            total += (double)pz_codec_state_bound(c, &sh);
            pz_codec_free(c);
        }
    }
    return total;
}

static pz_mem_need rank_need(const pz_mem_job *j, int r) {
    const int defer = j->spec->kind == PZ_SCHED_ZBH1;
    const int slots = pz_schedule_in_flight_bound(j->spec, r, j->world, j->micro);
    pz_mem_need n = pz_mem_need_of(j->cfg, &j->ranges[r], j->B, j->T, defer, slots, j->micro, r == 0,
                                   r == j->world - 1,
                                   pz_mem_codec_bound(j->pol, r, j->world, j->B, j->T, j->cfg->channels));
    if (!j->host_memory) {   /* only the host side counts here */
        n.total = n.buffers + n.codec;
    }
    return n;
}

pz_status pz_mem_check(const pz_mem_job *j, int rank, int local_first, int local_count, const char *prefix) {
    pz_mem_need mine = rank_need(j, rank);
    fprintf(stderr, "%smemory: about ", prefix);
    pz_mem_need_print(stderr, &mine);
    fprintf(stderr, "%s\n", j->host_memory ? "" : " on the device; host part counted below");
    double local = 0;
    for (int r = local_first; r < local_first + local_count && r < j->world; r++) local += rank_need(j, r).total;
    const char *source = "";
    double avail = pz_mem_available(&source);
    const char *skip = getenv("PIPEZIP_MEM_CHECK");
    if (avail <= 0 || local <= avail || (skip && strcmp(skip, "0") == 0)) return PZ_OK;
    char ranks[64] = "";
    if (local_count > 1)
        snprintf(ranks, sizeof ranks, " (with the other %d rank%s on this host)", local_count - 1,
                 local_count == 2 ? "" : "s");
    return pz_fail(PZ_ERR_ARG, "not enough memory: this run needs about %.2f GiB%s, but %.2f GiB is available (%s). "
                   "This rank: %.2f GiB, of which activations %.2f GiB for %d micro-batch%s of %d x %d in flight and "
                   "model, gradients and AdamW %.2f GiB. Lower --batch or --seq, use more --stages (or hosts), a "
                   "schedule that holds fewer micro-batches (1f1b rather than gpipe; no extra warm-up), or a smaller "
                   "aq(...,mem=); PIPEZIP_MEM_CHECK=0 runs anyway", gib(local), ranks, gib(avail), source,
                   gib(mine.total), gib(mine.acts), mine.slots, mine.slots == 1 ? "" : "es", j->B, j->T,
                   gib(mine.model + mine.optim));
}
