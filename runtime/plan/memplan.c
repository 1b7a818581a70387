/* memplan.c: see memplan.h. */
#include "runtime/plan/memplan.h"

#include "runtime/edge/autospec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress/core/codec.h"
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
    /* the executor's (runtime/exec/pipeline_slots.c): per slot d(input) (not on
     * the first stage); receive rings of at most one message per slot, an
     * activation (not on the first) and a gradient (not on the last), and
     * one decoded tensor of each; a send ring of min(slots + 2, micro)
     * messages each way. A message is at most the raw tensor and its header */
    const double per_slot = (first ? 0 : 2 * act) + (last ? 0 : act);
    const int ring = slots + 2 < micro ? slots + 2 : micro;
    n.buffers = slots * per_slot + (ring + 1) * ((first ? 0 : act) + (last ? 0 : act));
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
            "%d micro-batch%s in flight, buffers %.2f, codec state %.2f", gib(n->total), gib(n->model),
            gib(n->optim), gib(n->scratch), gib(n->acts), n->slots, n->slots == 1 ? "" : "es", gib(n->buffers),
            gib(n->codec));
    if (n->dp > 0) fprintf(f, ", data-parallel buckets and error feedback %.2f", gib(n->dp));
    fputc(')', f);
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
            pz_auto_spec as;
            if (pz_auto_is(spec)) {   /* stateless candidates; the sender's scratch: n twins' outputs, one decoding, one message */
                if (pz_auto_parse(spec, &as) == PZ_OK && (side == 0) == (d == 0))
                    total += (double)(as.n + 2) * B * T * C * sizeof(float);
                pz_auto_spec_free(&as);
                continue;
            }
            if (!spec || pz_codec_create(spec, &c) != PZ_OK) continue;   /* a bad spec fails later, named */
            total += (double)pz_codec_state_bound(c, &sh);
            pz_codec_free(c);
        }
    }
    return total;
}

/* Interleaved (V > 1): rank r's chunks g = c*S + r (ranges has S*V), each a
 * stage of its own with its chunk's peak of activations. */
static pz_mem_need chunks_need(const pz_mem_job *j, int r) {
    const int S = j->world, V = j->spec->virtual_stages, G = S * V;
    pz_mem_need n;
    memset(&n, 0, sizeof n);
    pz_schedule s;
    if (pz_schedule_build(&s, j->spec, r, S, j->micro) != PZ_OK) return n;   /* fails later, named */
    for (int c = 0; c < V; c++) {
        const int g = c * S + r, peak = pz_schedule_chunk_peak(&s, c);
        pz_mem_need k = pz_mem_need_of(j->cfg, &j->ranges[g], j->B, j->T, 0, peak, j->micro, g == 0, g == G - 1,
                                       pz_mem_codec_bound(j->pol, g, G, j->B, j->T, j->cfg->channels));
        n.model += k.model, n.optim += k.optim, n.scratch += k.scratch, n.acts += k.acts;
        n.buffers += k.buffers, n.codec += k.codec, n.slots += k.slots, n.total += k.total;
    }
    pz_schedule_free(&s);
    return n;
}

static pz_mem_need stage_need(const pz_mem_job *j, int r) {
    const int defer = j->spec->kind == PZ_SCHED_ZBH1 || pz_sched_defers(j->spec, r, j->world) > 0;
    if (j->spec->kind == PZ_SCHED_INTERLEAVED && j->spec->virtual_stages > 1) {
        pz_mem_need n = chunks_need(j, r);
        if (!j->host_memory) n.total = n.buffers + n.codec;
        return n;
    }
    const int slots = pz_schedule_in_flight_bound(j->spec, r, j->world, j->micro);
    pz_mem_need n = pz_mem_need_of(j->cfg, &j->ranges[r], j->B, j->T, defer, slots, j->micro, r == 0,
                                   r == j->world - 1,
                                   pz_mem_codec_bound(j->pol, r, j->world, j->B, j->T, j->cfg->channels));
    if (!defer && pz_sched_splits_last(j->spec, j->world)) {   /* one slot also keeps the matmuls' output gradients */
        const double more = sizeof(float) * ((double)pz_acts_slot_numel(j->cfg, &j->ranges[r], j->B, j->T, 1) -
                                             (double)pz_acts_slot_numel(j->cfg, &j->ranges[r], j->B, j->T, 0));
        n.acts += more;
        n.total += more;
    }
    if (!j->host_memory) {   /* only the host side counts here */
        n.total = n.buffers + n.codec;
    }
    return n;
}

pz_mem_need pz_mem_rank_need(const pz_mem_job *j, int r) {
    pz_mem_need n = stage_need(j, r);
    n.dp = j->dp_bytes ? j->dp_bytes(j, r) : 0.0;   /* host memory, whatever the backend */
    n.total += n.dp;
    return n;
}

static double local_need(const pz_mem_job *j, int local_first, int local_count) {
    double local = 0;
    for (int r = local_first; r < local_first + local_count && r < j->world; r++) local += pz_mem_rank_need(j, r).total;
    return local;
}

int pz_mem_max_warmup(const pz_mem_job *j, int local_first, int local_count, int kmax) {
    const char *source = "", *skip = getenv("PIPEZIP_MEM_CHECK");
    double avail = pz_mem_available(&source);
    if (avail <= 0 || (skip && strcmp(skip, "0") == 0)) return kmax;
    pz_sched_spec sp = *j->spec;
    pz_mem_job jk = *j;
    jk.spec = &sp;
    int k = 0;
    for (; k < kmax; k++) {   /* the need grows with K: the first K + 1 that does not fit ends it */
        sp.warmup_extra = k + 1;
        if (local_need(&jk, local_first, local_count) > avail) break;
    }
    return k;
}

pz_status pz_mem_check(const pz_mem_job *j, int rank, int local_first, int local_count, const char *prefix) {
    pz_mem_need mine = pz_mem_rank_need(j, rank);
    fprintf(stderr, "%smemory: about ", prefix);
    pz_mem_need_print(stderr, &mine);
    fprintf(stderr, "%s\n", j->host_memory ? "" : " on the device; host part counted below");
    double local = local_need(j, local_first, local_count);
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

pz_status pz_mem_check_eval(const pz_gpt2_config *cfg, int B, int T) {
    pz_stage_range all = {0, cfg->num_layers, 1, 1};
    pz_mem_need n = pz_mem_need_of(cfg, &all, B, T, 0, 1, 1, 1, 1, 0.0);
    n.total -= n.optim + n.buffers;   /* eval builds a stage: no AdamW moments, no messages */
    const char *source = "", *skip = getenv("PIPEZIP_MEM_CHECK");
    double avail = pz_mem_available(&source);
    if (avail <= 0 || n.total <= avail || (skip && strcmp(skip, "0") == 0)) return PZ_OK;
    return pz_fail(PZ_ERR_ARG, "not enough memory: --batch %d x --seq %d needs about %.2f GiB (%.0f bytes: activations "
                   "%.2f GiB, model and gradients %.2f GiB, scratch %.2f GiB), but %.2f GiB (%.0f bytes) is available "
                   "(%s). Lower --batch or --seq; PIPEZIP_MEM_CHECK=0 runs anyway", B, T, gib(n.total), n.total, gib(n.acts),
                   gib(n.model), gib(n.scratch), gib(avail), avail, source);
}
