/* schedule.c: building, simulating and printing pipeline schedules
 * (see schedule.h for the ordering contract). */
#include "schedules/schedule.h"
#include "schedules/interleaved.h"
#include "base/mem.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    pz_sched_kind kind;
} sched_names[] = {
    {"1f1b", PZ_SCHED_1F1B},
    {"gpipe", PZ_SCHED_GPIPE},
    {"zb-h1", PZ_SCHED_ZBH1},
    {"interleaved", PZ_SCHED_INTERLEAVED},
};
#define NSCHED ((int)(sizeof sched_names / sizeof sched_names[0]))

pz_sched_spec pz_sched_plain(pz_sched_kind kind) {
    pz_sched_spec sp = {kind, 0, 0, 0};
    return sp;
}

static pz_status unknown_name(const char *text, size_t n) {
    char known[128] = "";
    for (int i = 0; i < NSCHED; i++) {
        if (i) strncat(known, ", ", sizeof known - strlen(known) - 1);
        strncat(known, sched_names[i].name, sizeof known - strlen(known) - 1);
    }
    return pz_fail(PZ_ERR_ARG, "unknown schedule '%.*s' (known: auto, %s; 1f1b takes :warmup=K|auto, interleaved :v=V)",
                   (int)n, text, known);
}

pz_status pz_sched_parse(const char *text, pz_sched_spec *out) {
    if (!text) text = "(null)";
    if (strncmp(text, "auto", 4) == 0 && (text[4] == 0 || text[4] == ':')) {
        if (text[4]) return pz_fail(PZ_ERR_ARG, "schedule '%s': auto takes no options", text);
        pz_sched_spec sp = pz_sched_plain(PZ_SCHED_1F1B);
        sp.warmup_auto = PZ_SCHED_NAMED_AUTO;   /* the runtime picks K, 0 where the links keep up */
        *out = sp;
        return PZ_OK;
    }
    const char *colon = strchr(text, ':');
    size_t n = colon ? (size_t)(colon - text) : strlen(text);
    int found = -1;
    for (int i = 0; i < NSCHED; i++)
        if (strlen(sched_names[i].name) == n && strncmp(text, sched_names[i].name, n) == 0) found = i;
    if (found < 0) return unknown_name(text, n);
    pz_sched_spec sp = pz_sched_plain(sched_names[found].kind);
    if (colon && sp.kind == PZ_SCHED_INTERLEAVED) {
        const char *opt = colon + 1;
        if (strncmp(opt, "v=", 2) != 0)
            return pz_fail(PZ_ERR_ARG, "schedule '%s': unknown option '%s' (interleaved knows v=V, the model chunks "
                           "per rank)", text, opt);
        const char *v = opt + 2;
        char *end;
        errno = 0;
        long k = strtol(v, &end, 10);
        if (end == v || *end || errno || k < 1 || k > PZ_SCHED_MAX_VIRTUAL || !isdigit((unsigned char)*v))
            return pz_fail(PZ_ERR_ARG, "schedule '%s': v must be an integer in [1, %d], not '%s'", text,
                           PZ_SCHED_MAX_VIRTUAL, v);
        sp.virtual_stages = (int)k;
    } else if (colon) {
        const char *opt = colon + 1;
        if (sp.kind != PZ_SCHED_1F1B)
            return pz_fail(PZ_ERR_ARG, "schedule '%s': %s takes no options", text, sched_names[found].name);
        if (strncmp(opt, "warmup=", 7) != 0)
            return pz_fail(PZ_ERR_ARG, "schedule '%s': unknown option '%s' (1f1b knows warmup=K|auto)", text, opt);
        const char *v = opt + 7;
        if (strcmp(v, "auto") == 0) {
            sp.warmup_auto = 1;
        } else {
            char *end;
            errno = 0;
            long k = strtol(v, &end, 10);
            if (end == v || *end || errno || k < 0 || k > PZ_SCHED_MAX_WARMUP_EXTRA || !isdigit((unsigned char)*v))
                return pz_fail(PZ_ERR_ARG, "schedule '%s': warmup must be 'auto' or an integer in [0, %d], not '%s'",
                               text, PZ_SCHED_MAX_WARMUP_EXTRA, v);
            sp.warmup_extra = (int)k;
        }
    }
    *out = sp;
    return PZ_OK;
}

void pz_sched_spec_format(const pz_sched_spec *sp, char *buf, size_t cap) {
    const char *name = pz_sched_name(sp->kind);
    if (sp->kind == PZ_SCHED_1F1B && sp->warmup_auto == PZ_SCHED_NAMED_AUTO) snprintf(buf, cap, "auto");
    else if (sp->kind == PZ_SCHED_1F1B && sp->warmup_auto) snprintf(buf, cap, "%s:warmup=auto", name);
    else if (sp->kind == PZ_SCHED_1F1B && sp->warmup_extra > 0) snprintf(buf, cap, "%s:warmup=%d", name, sp->warmup_extra);
    else if (sp->kind == PZ_SCHED_INTERLEAVED && sp->virtual_stages > 0)
        snprintf(buf, cap, "%s:v=%d", name, sp->virtual_stages);
    else snprintf(buf, cap, "%s", name);
}

const char *pz_sched_name(pz_sched_kind kind) {
    for (int i = 0; i < NSCHED; i++)
        if (sched_names[i].kind == kind) return sched_names[i].name;
    return "?";
}

const char *pz_op_name(pz_op op) {
    switch (op) {
    case PZ_OP_RECV_ACT: return "RECV_ACT";
    case PZ_OP_FORWARD: return "FORWARD";
    case PZ_OP_SEND_ACT: return "SEND_ACT";
    case PZ_OP_RECV_GRAD: return "RECV_GRAD";
    case PZ_OP_BACKWARD: return "BACKWARD";
    case PZ_OP_SEND_GRAD: return "SEND_GRAD";
    case PZ_OP_REDUCE_TIED: return "REDUCE_TIED";
    case PZ_OP_OPTIM_STEP: return "OPTIM_STEP";
    case PZ_OP_BACKWARD_WEIGHT: return "BACKWARD_WEIGHT";
    default: return "?";
    }
}

pz_peer pz_instr_peer(const pz_schedule *s, const pz_instr *in) {
    const int S = s->nstages, V = s->nchunks > 0 ? s->nchunks : 1;
    const long g = (long)in->chunk * S + s->stage;   /* this instruction's global chunk */
    long to = -1;                                    /* the other side's global chunk */
    pz_peer p = {-1, -1, -1};
    switch (in->op) {
    case PZ_OP_RECV_ACT:
    case PZ_OP_SEND_GRAD: to = g - 1; p.boundary = (int)(g - 1); break;
    case PZ_OP_SEND_ACT:
    case PZ_OP_RECV_GRAD: to = g + 1; p.boundary = (int)g; break;
    case PZ_OP_REDUCE_TIED:
        if (S > 1 && (s->stage == 0 || s->stage == S - 1)) {
            p.rank = s->stage == 0 ? S - 1 : 0;
            p.chunk = s->stage == 0 ? V - 1 : 0;
        }
        return p;
    default: return p;
    }
    if (S < 2 || to < 0 || to >= (long)S * V) {
        pz_peer none = {-1, -1, -1};
        return none;
    }
    p.rank = (int)(to % S);
    p.chunk = (int)(to / S);
    return p;
}

int pz_op_peer(pz_op op, int stage, int nstages) {
    switch (op) {
    case PZ_OP_RECV_ACT:
    case PZ_OP_SEND_GRAD: return stage - 1;
    case PZ_OP_SEND_ACT:
    case PZ_OP_RECV_GRAD: return stage + 1;
    case PZ_OP_REDUCE_TIED: return stage == 0 ? nstages - 1 : 0;
    default: return -1;
    }
}

static int known_kind(pz_sched_kind kind) {
    return kind == PZ_SCHED_1F1B || kind == PZ_SCHED_GPIPE || kind == PZ_SCHED_ZBH1 || kind == PZ_SCHED_INTERLEAVED;
}

/* V: model chunks per rank (1 for every kind but interleaved) */
static int chunks_of(const pz_sched_spec *sp) {
    return sp->kind == PZ_SCHED_INTERLEAVED ? sp->virtual_stages : 1;
}

static pz_status check_args(const pz_sched_spec *sp, int stage, int nstages, int nmicro) {
    if (!known_kind(sp->kind)) return pz_fail(PZ_ERR_ARG, "schedule: unknown kind %d", (int)sp->kind);
    if (sp->warmup_extra < 0 || sp->warmup_extra > PZ_SCHED_MAX_WARMUP_EXTRA ||
        (sp->kind != PZ_SCHED_1F1B && (sp->warmup_extra || sp->warmup_auto)))
        return pz_fail(PZ_ERR_ARG, "schedule: extra warm-up %d out of range or not for %s", sp->warmup_extra,
                       pz_sched_name(sp->kind));
    if (nstages < 1 || nstages > PZ_SCHED_MAX_STAGES)
        return pz_fail(PZ_ERR_ARG, "schedule: %d stages is out of range [1, %d]", nstages, PZ_SCHED_MAX_STAGES);
    if (stage < 0 || stage >= nstages)
        return pz_fail(PZ_ERR_ARG, "schedule: stage %d is out of range [0, %d]", stage, nstages - 1);
    if (nmicro < 1 || nmicro > PZ_SCHED_MAX_MICRO)
        return pz_fail(PZ_ERR_ARG, "schedule: %d micro-batches is out of range [1, %d]", nmicro,
                       PZ_SCHED_MAX_MICRO);
    if (sp->kind != PZ_SCHED_INTERLEAVED && sp->virtual_stages != 0 && sp->virtual_stages != 1)
        return pz_fail(PZ_ERR_ARG, "schedule: %d virtual stages (model chunks per rank) need the interleaved "
                       "schedule, not %s", sp->virtual_stages, pz_sched_name(sp->kind));
    if (sp->kind == PZ_SCHED_INTERLEAVED) {
        const int V = sp->virtual_stages;
        if (V == 0)
            return pz_fail(PZ_ERR_ARG, "schedule: interleaved needs the model chunks per rank: interleaved:v=V "
                           "(--virtual-stages V)");
        if (V < 1 || V > PZ_SCHED_MAX_VIRTUAL)
            return pz_fail(PZ_ERR_ARG, "schedule: interleaved v=%d is out of range [1, %d]", V,
                           PZ_SCHED_MAX_VIRTUAL);
        if ((long)nmicro * V > PZ_SCHED_MAX_MICRO)
            return pz_fail(PZ_ERR_ARG, "schedule: interleaved: %d micro-batches x v=%d chunks is more than %d",
                           nmicro, V, PZ_SCHED_MAX_MICRO);
        if (V > 1 && (long)nstages * nmicro * V > PZ_SCHED_MAX_INTERLEAVED)
            return pz_fail(PZ_ERR_ARG, "schedule: interleaved: %d stages x %d micro-batches x v=%d is more than %ld "
                           "(each rank's list comes from a run of all of them)", nstages, nmicro, V,
                           PZ_SCHED_MAX_INTERLEAVED);
        if (V > 1 && nmicro % nstages != 0)
            return pz_fail(PZ_ERR_ARG, "schedule: interleaved v=%d needs the micro-batches (%d) to be a multiple "
                           "of the stages (%d): groups of %d go through each chunk in turn", V, nmicro, nstages,
                           nstages);
    }
    return PZ_OK;
}

int pz_sched_splits_last(const pz_sched_spec *sp, int nstages) {
    return sp->kind == PZ_SCHED_1F1B && sp->warmup_auto == PZ_SCHED_NAMED_AUTO && nstages > 1;
}

int pz_sched_halves(const pz_sched_spec *sp, int nstages, int replicas, int batch, int nmicro) {
    return pz_sched_splits_last(sp, nstages) && replicas == 1 && batch % 2 == 0 && nmicro <= 32768;   /* 2m tags */
}

int pz_sched_defers(const pz_sched_spec *sp, int stage, int nstages) {
    if (sp->kind == PZ_SCHED_ZBH1) return stage;
    return pz_sched_splits_last(sp, nstages) && stage > 0 ? 1 : 0;
}

/* 1F1B's warm-up forwards on stage s: (S-s-1)(1+K), at most m. */
static int warmup_1f1b(const pz_sched_spec *sp, int stage, int nstages, int nmicro) {
    long w = (long)(nstages - stage - 1) * (1L + sp->warmup_extra);
    return w < nmicro ? (int)w : nmicro;
}

int pz_schedule_in_flight_bound(const pz_sched_spec *sp, int stage, int nstages, int nmicro) {
    switch (sp->kind) {
    case PZ_SCHED_1F1B: {   /* auto: one more slot where a weight half waits for the next B */
        int w = warmup_1f1b(sp, stage, nstages, nmicro) + pz_sched_defers(sp, stage, nstages);
        return w + 1 < nmicro ? w + 1 : nmicro;
    }
    case PZ_SCHED_GPIPE: return nmicro;
    case PZ_SCHED_ZBH1: return nstages < nmicro ? nstages : nmicro;
    case PZ_SCHED_INTERLEAVED: {
        const int V = sp->virtual_stages;
        if (V < 1) return 0;
        long w = pz_interleaved_warmup(stage, nstages, nmicro, V), total = (long)nmicro * V;
        return (int)(w + 1 < total ? w + 1 : total);
    }
    default: return 0;
    }
}

void pz_sched_link_rtt(int nstages, const double *rtt, const double *hold, double *link_rtt) {
    for (int e = 0; e + 1 < nstages; e++) link_rtt[e] = fmax(0.0, rtt[e] - hold[e + 1]);
}

int pz_sched_auto_warmup(int nstages, int nmicro, const double *c, const double *link_rtt,
                         const double *link_period) {
    const int S = nstages;
    double period = 0.0;
    for (int q = 0; q < S; q++) period = fmax(period, c[q]);
    for (int e = 0; e + 1 < S; e++) period = fmax(period, link_period[e]);
    if (!(period > 0.0)) return 0;
    int k = 0;
    for (int s = 0; s + 1 < S; s++) {
        double rtt = 0.0, links = 0.0;
        for (int q = s; q < S; q++) rtt += c[q];
        for (int e = s; e + 1 < S; e++) links += link_rtt[e];
        rtt += links;
        /* micro-batches in flight at stage s, plus one behind links: compute
         * times jitter, and a gradient that arrives just late stalls a whole
         * backward (measured on the demo preset over 10 Mbit/s: the exact
         * K ran 15-20% slower than K+1) */
        double need = ceil(rtt / period) + (links > 0.0 ? 1.0 : 0.0);
        /* (S-s-1)(1+K) + 1 >= need */
        double ks = ceil((need - 1.0) / (double)(S - s - 1)) - 1.0;
        if (ks > k) k = ks > PZ_SCHED_MAX_WARMUP_EXTRA ? PZ_SCHED_MAX_WARMUP_EXTRA : (int)ks;
    }
    /* past the K at which stage 0 already warms up with all m, more changes nothing */
    if (S > 1) {
        int kmax = (nmicro + S - 2) / (S - 1) - 1;
        if (kmax < 0) kmax = 0;
        if (k > kmax) k = kmax;
    }
    return k;
}

/* Peak activations held at once by local chunk `chunk` (-1: all chunks
 * together): a micro-batch's live from its FORWARD to its last compute,
 * BACKWARD_WEIGHT where the list has one for it (zb-h1, auto), else
 * BACKWARD. */
static int peak_of(const pz_schedule *s, int chunk) {
    const size_t V = s->nchunks > 0 ? (size_t)s->nchunks : 1, cells = (size_t)s->nmicro * V;
    unsigned char *split = xcalloc(cells, 1);
    for (int k = 0; k < s->n; k++) {
        const pz_instr *in = &s->ins[k];
        if (in->op == PZ_OP_BACKWARD_WEIGHT && in->micro >= 0 && (size_t)in->micro * V + (size_t)in->chunk < cells)
            split[(size_t)in->micro * V + (size_t)in->chunk] = 1;
    }
    int held = 0, peak = 0;
    for (int k = 0; k < s->n; k++) {
        const pz_instr *in = &s->ins[k];
        if (in->micro < 0 || (chunk >= 0 && in->chunk != chunk)) continue;
        const size_t at = (size_t)in->micro * V + (size_t)in->chunk;
        if (in->op == PZ_OP_FORWARD && ++held > peak) peak = held;
        if (in->op == (at < cells && split[at] ? PZ_OP_BACKWARD_WEIGHT : PZ_OP_BACKWARD)) held--;
    }
    free(split);
    return peak;
}

/* Appends one instruction (the buffer is sized for the longest list). */
static void emit(pz_schedule *s, pz_op op, int micro) {
    s->ins[s->n].op = op;
    s->ins[s->n].micro = micro;
    s->ins[s->n].chunk = 0;
    s->n++;
}

pz_status pz_schedule_build(pz_schedule *s, const pz_sched_spec *sp, int stage, int nstages, int nmicro) {
    memset(s, 0, sizeof *s);
    pz_status st = check_args(sp, stage, nstages, nmicro);
    if (st != PZ_OK) return st;
    const int first = stage == 0, last = stage == nstages - 1, m = nmicro;
    s->kind = sp->kind;
    s->spec = *sp;
    s->stage = stage;
    s->nstages = nstages;
    s->nmicro = m;
    s->nchunks = chunks_of(sp);
    /* at most 7 instructions per micro-batch (6 per micro-batch and chunk)
     * plus 2 at the end; m (x V) <= 2^20 */
    s->ins = xmalloc(((size_t)7 * (size_t)m * (size_t)s->nchunks + 2) * sizeof *s->ins);
    int wlate = m;   /* the first W emitted after REDUCE_TIED (auto) */

    if (sp->kind == PZ_SCHED_INTERLEAVED && s->nchunks > 1) {
        if ((st = pz_interleaved_fill(s, stage, nstages, m, s->nchunks)) != PZ_OK) {
            pz_schedule_free(s);
            return st;
        }
    } else if (sp->kind == PZ_SCHED_GPIPE) {
        s->warmup = m;
        s->steady = 0;
        s->cooldown = m;
        for (int i = 0; i < m; i++) {
            if (!first) emit(s, PZ_OP_RECV_ACT, i);
            emit(s, PZ_OP_FORWARD, i);
            if (!last) emit(s, PZ_OP_SEND_ACT, i);
        }
        for (int i = 0; i < m; i++) {
            if (!last) emit(s, PZ_OP_RECV_GRAD, i);
            emit(s, PZ_OP_BACKWARD, i);
            if (!first) emit(s, PZ_OP_SEND_GRAD, i);
        }
    } else {
        /* zb-h1 and auto (pz_sched_defers): 1F1B's list; after each B (and
         * its SEND_GRAD) the oldest W's run until at most `keep` are pending.
         * Otherwise only auto's W m-1 is left for the step's end. */
        const int zb = sp->kind == PZ_SCHED_ZBH1, keep0 = pz_sched_defers(sp, stage, nstages);
        const int keep = keep0 < m ? keep0 : m, split = zb || keep > 0;
        int wdone = split ? 0 : pz_sched_splits_last(sp, nstages) ? m - 1 : m;   /* W's emitted (or none due) */
        const int w = warmup_1f1b(sp, stage, nstages, m);
        /* the next stage's warm-up: it sends gradient j between receiving
         * activations wn+j and wn+j+1 */
        const int wn = last ? 0 : warmup_1f1b(sp, stage + 1, nstages, m);
        s->warmup = w;
        s->steady = m - w;
        s->cooldown = w;
        int grads = 0;   /* RECV_GRADs emitted so far (in micro order) */
        int backs = 0;   /* BACKWARDs emitted so far */
        for (int i = 0; i < m; i++) {
            if (!first) emit(s, PZ_OP_RECV_ACT, i);
            emit(s, PZ_OP_FORWARD, i);
            if (!last) {
                /* Megatron exchanges {SEND_ACT i, RECV_GRAD i-wn-1} with the
                 * next stage as one combined operation; its mirror there is
                 * {SEND_GRAD i-wn-1, RECV_ACT i}. In a sequential list one
                 * side must receive first: here the upstream side does, so
                 * the downstream stage keeps "B j, SEND_GRAD j, RECV_ACT next".
                 * Under rendezvous RECV_GRAD j must sit between SEND_ACT wn+j
                 * and SEND_ACT wn+j+1, whatever this stage's own warm-up. */
                for (; grads <= i - wn - 1; grads++) emit(s, PZ_OP_RECV_GRAD, grads);
                emit(s, PZ_OP_SEND_ACT, i);
            }
            if (i >= w) {   /* steady: one backward per forward after the warm-up */
                for (; !last && grads <= backs; grads++) emit(s, PZ_OP_RECV_GRAD, grads);
                emit(s, PZ_OP_BACKWARD, backs);
                if (!first) emit(s, PZ_OP_SEND_GRAD, backs);
                backs++;
                for (; split && backs - wdone > keep; wdone++) emit(s, PZ_OP_BACKWARD_WEIGHT, wdone);
            }
        }
        for (; backs < m;) {   /* cool-down */
            for (; !last && grads <= backs; grads++) emit(s, PZ_OP_RECV_GRAD, grads);
            emit(s, PZ_OP_BACKWARD, backs);
            if (!first) emit(s, PZ_OP_SEND_GRAD, backs);
            backs++;
            for (; split && backs - wdone > keep; wdone++) emit(s, PZ_OP_BACKWARD_WEIGHT, wdone);
        }
        for (; zb && wdone < m; wdone++) emit(s, PZ_OP_BACKWARD_WEIGHT, wdone);
        wlate = wdone;
    }
    if (nstages > 1 && (first || last)) emit(s, PZ_OP_REDUCE_TIED, -1);
    /* auto: the weight halves still pending (m-1's) run after the gradient
     * and the tied gradient (both final after B) have left */
    for (; wlate < m; wlate++) emit(s, PZ_OP_BACKWARD_WEIGHT, wlate);
    emit(s, PZ_OP_OPTIM_STEP, -1);
    s->max_in_flight = peak_of(s, -1);
    return PZ_OK;
}

int pz_schedule_chunk_peak(const pz_schedule *s, int chunk) {
    if (chunk < 0 || chunk >= (s->nchunks > 0 ? s->nchunks : 1)) return 0;
    return peak_of(s, chunk);
}

void pz_schedule_free(pz_schedule *s) {
    free(s->ins);
    memset(s, 0, sizeof *s);
}

/* ---- timing: all stages together, unit compute slots ---- */

static pz_op matching_op(pz_op op) {
    switch (op) {
    case PZ_OP_SEND_ACT: return PZ_OP_RECV_ACT;
    case PZ_OP_RECV_ACT: return PZ_OP_SEND_ACT;
    case PZ_OP_SEND_GRAD: return PZ_OP_RECV_GRAD;
    case PZ_OP_RECV_GRAD: return PZ_OP_SEND_GRAD;
    default: return op; /* REDUCE_TIED pairs with itself */
    }
}

/* The two ends of an exchange meet: both go on at the later one's clock. */
static void meet(long *clock, int s, int p) {
    long t = clock[s] > clock[p] ? clock[s] : clock[p];
    clock[s] = clock[p] = t;
}

/* The end of a simulation: the latest clock when every stage ran its whole
 * list, else -1 (stuck); frees pc and clock. */
static long finish(const pz_schedule *st, int S, int *pc, long *clock) {
    long makespan = 0;
    for (int s = 0; s < S && makespan >= 0; s++) {
        if (pc[s] < st[s].n) makespan = -1;
        else if (clock[s] > makespan) makespan = clock[s];
    }
    free(pc);
    free(clock);
    return makespan;
}

/* Runs the lists under rendezvous (every send waits for its receive): the
 * strict model the lists must be deadlock-free in. Returns the makespan, or
 * -1 on a deadlock. */
static long simulate_rendezvous(const pz_schedule *st, int S) {
    int *pc = xcalloc((size_t)S, sizeof *pc);
    long *clock = xcalloc((size_t)S, sizeof *clock);
    /* sweep down, then up, so that activations and gradients both travel
     * the whole pipeline in one pass */
    int progress = 1;
    for (int down = 1; progress; down = !down) {
        progress = 0;
        for (int q = 0; q < S; q++) {
            const int s = down ? q : S - 1 - q;
            while (pc[s] < st[s].n) {
                const pz_instr *in = &st[s].ins[pc[s]];
                if (in->op == PZ_OP_FORWARD || in->op == PZ_OP_BACKWARD || in->op == PZ_OP_BACKWARD_WEIGHT) {
                    clock[s] += 1;
                    pc[s]++;
                } else if (in->op == PZ_OP_OPTIM_STEP) {
                    pc[s]++;
                } else {
                    const pz_peer pe = pz_instr_peer(&st[s], in);
                    const int p = pe.rank;
                    if (p < 0 || p >= S || pc[p] >= st[p].n) break;
                    const pz_instr *o = &st[p].ins[pc[p]];
                    const pz_peer back = pz_instr_peer(&st[p], o);
                    /* (REDUCE_TIED's chunks are those of the tied copies, not the instruction's) */
                    const int chunks_match = in->op == PZ_OP_REDUCE_TIED || (o->chunk == pe.chunk && back.chunk == in->chunk);
                    if (o->op != matching_op(in->op) || o->micro != in->micro || back.rank != s || !chunks_match)
                        break;
                    meet(clock, s, p);
                    pc[s]++;
                    pc[p]++;
                }
                progress = 1;
            }
        }
    }
    return finish(st, S, pc, clock);
}

/* Runs the lists as the executor does: a send never blocks, a receive only
 * posts, and the FORWARD or BACKWARD that uses a message waits until its
 * send has happened; the tied exchange pairs the two ends. start[s][k] = the
 * start slot of compute instruction k of stage s. Returns the makespan, or -1
 * if some stage can never go on. Messages are keyed by the model boundary
 * they cross (S x V - 1 of them; with S = 1 chunks hand over in memory, in
 * list order). */
static long simulate_executor(const pz_schedule *st, int S, int m, long **start) {
    const int V = st[0].nchunks > 0 ? st[0].nchunks : 1;
    const size_t nb = (size_t)S * (size_t)V;
    int *pc = xcalloc((size_t)S, sizeof *pc);
    long *clock = xcalloc((size_t)S, sizeof *clock);
    long *sent = xmalloc(nb * 2 * (size_t)m * sizeof *sent);   /* [boundary][dir][micro] */
    for (size_t k = 0; k < nb * 2 * (size_t)m; k++) sent[k] = -1;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < S; s++)
            while (pc[s] < st[s].n) {
                const pz_instr *in = &st[s].ins[pc[s]];
                if (S > 1 && (in->op == PZ_OP_FORWARD || in->op == PZ_OP_BACKWARD)) {
                    const int fwd = in->op == PZ_OP_FORWARD;
                    const long g = (long)in->chunk * S + s, b = fwd ? g - 1 : g;
                    if (b >= 0 && b < (long)nb - 1) {
                        long at = sent[((size_t)b * 2 + (fwd ? 0 : 1)) * m + in->micro];
                        if (at < 0) break;
                        if (at > clock[s]) clock[s] = at;
                    }
                }
                if (in->op == PZ_OP_FORWARD || in->op == PZ_OP_BACKWARD || in->op == PZ_OP_BACKWARD_WEIGHT) {
                    start[s][pc[s]] = clock[s];
                    clock[s] += 1;
                } else if (in->op == PZ_OP_SEND_ACT || in->op == PZ_OP_SEND_GRAD) {
                    const pz_peer pe = pz_instr_peer(&st[s], in);
                    if (pe.boundary < 0) break;   /* a send to nowhere: never goes on */
                    sent[((size_t)pe.boundary * 2 + (in->op == PZ_OP_SEND_GRAD)) * m + in->micro] = clock[s];
                } else if (in->op == PZ_OP_REDUCE_TIED) {
                    int p = pz_op_peer(in->op, s, S);
                    if (p < 0 || p >= S || pc[p] >= st[p].n || st[p].ins[pc[p]].op != PZ_OP_REDUCE_TIED) break;
                    meet(clock, s, p);
                    pc[p]++;
                }
                pc[s]++;
                progress = 1;
            }
    }
    free(sent);
    return finish(st, S, pc, clock);
}

static long gcd_l(long a, long b) {
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

pz_status pz_schedule_print_table(FILE *f, const pz_sched_spec *sp, int nstages, int nmicro) {
    pz_status status = check_args(sp, 0, nstages, nmicro);
    if (status != PZ_OK) return status;
    const int V = chunks_of(sp);
    long cells = (long)nstages * (sp->kind == PZ_SCHED_ZBH1 ? 3 : 2) * ((long)nmicro * V + nstages - 1);
    if (cells > PZ_SCHED_MAX_TABLE)
        return pz_fail(PZ_ERR_ARG, "a table of %d stages x %d micro-batches has %ld cells, more than %ld",
                       nstages, nmicro, cells, PZ_SCHED_MAX_TABLE);
    const int S = nstages, m = nmicro;
    char name[64];
    pz_sched_spec_format(sp, name, sizeof name);
    pz_schedule *st = xcalloc((size_t)S, sizeof *st);
    long **start = xcalloc((size_t)S, sizeof *start);
    for (int s = 0; s < S; s++) {
        if ((status = pz_schedule_build(&st[s], sp, s, S, m)) != PZ_OK) goto out;
        start[s] = xcalloc((size_t)st[s].n, sizeof **start);
    }
    long makespan = simulate_rendezvous(st, S) < 0 ? -1 : simulate_executor(st, S, m, start);
    if (makespan < 0) {
        status = pz_fail(PZ_ERR_SHAPE, "schedule %s with %d stages and %d micro-batches deadlocks",
                         name, S, m);
        goto out;
    }

    /* column width: the widest of "F<m-1>" ("F<m-1>.<V-1>") and "s<S-1>", plus a space */
    int mdigits = 1, sdigits = 1;
    for (int v = m - 1; v >= 10; v /= 10) mdigits++;
    if (V > 1) mdigits++;
    for (int v = V - 1; V > 1 && v > 0; v /= 10) mdigits++;
    for (int v = S - 1; v >= 10; v /= 10) sdigits++;
    int width = (mdigits > sdigits ? mdigits : sdigits) + 2;
    if (width < 4) width = 4;

    fprintf(f, "%s schedule, %d stage%s, %d micro-batch%s\n", name, S, S == 1 ? "" : "s", m,
            m == 1 ? "" : "es");
    if (V > 1)
        fprintf(f, "(Fi.c / Bi.c = forward / backward of micro-batch i on the rank's model chunk c\n"
                   " (global chunk c*S + stage), one slot each; . = idle; as the executor runs: sends\n"
                   " do not block, a compute waits for its input, communication takes no time)\n\n");
    else if (sp->kind == PZ_SCHED_ZBH1)
        fprintf(f, "(Fi / Bi / Wi = forward / input gradient / weight gradients of micro-batch i,\n"
                   " one slot each; . = idle; as the executor runs: sends do not block, a compute\n"
                   " waits for its input, communication takes no time)\n\n");
    else
        fprintf(f, "(Fi / Bi = forward / backward of micro-batch i, one slot each; . = idle; as the\n"
                   " executor runs: sends do not block, a compute waits for its input,\n"
                   " communication takes no time)\n\n");
    fprintf(f, "slot");
    for (int s = 0; s < S; s++) {
        char h[32];
        snprintf(h, sizeof h, "s%d", s);
        fprintf(f, " %-*s", s == S - 1 ? 0 : width - 1, h);
    }
    fputc('\n', f);
    int *next = xcalloc((size_t)S, sizeof *next); /* next instruction to look at */
    for (long t = 0; t < makespan; t++) {
        fprintf(f, "%4ld", t);
        for (int s = 0; s < S; s++) {
            while (next[s] < st[s].n && st[s].ins[next[s]].op != PZ_OP_FORWARD &&
                   st[s].ins[next[s]].op != PZ_OP_BACKWARD && st[s].ins[next[s]].op != PZ_OP_BACKWARD_WEIGHT)
                next[s]++;
            char cell[32] = ".";
            if (next[s] < st[s].n && start[s][next[s]] == t) {
                const pz_instr *in = &st[s].ins[next[s]];
                const char c = in->op == PZ_OP_FORWARD ? 'F' : in->op == PZ_OP_BACKWARD ? 'B' : 'W';
                if (V > 1) snprintf(cell, sizeof cell, "%c%d.%d", c, in->micro, in->chunk);
                else snprintf(cell, sizeof cell, "%c%d", c, in->micro);
                next[s]++;
            }
            fprintf(f, " %-*s", s == S - 1 ? 0 : width - 1, cell);
        }
        fputc('\n', f);
    }
    free(next);

    fprintf(f, "\nstage  warm-up  steady  cool-down  peak-in-flight  instructions\n");
    for (int s = 0; s < S; s++)
        fprintf(f, "%5d  %7d  %6d  %9d  %14d  %12d\n", s, st[s].warmup, st[s].steady, st[s].cooldown,
                st[s].max_in_flight, st[s].n);
    /* busy = 2mV slots per stage (3m for zb-h1); bubble = 1 - busy / (S * makespan) */
    const int zb = sp->kind == PZ_SCHED_ZBH1, per = zb ? 3 : 2;
    long idle = (long)S * makespan - (long)per * m * V * S, total = (long)S * makespan;
    long g = gcd_l(idle, total);
    long fn = S - 1, fd = zb ? 3L * m + S - 1 : (long)m * V + S - 1, g2 = gcd_l(fn, fd);
    fprintf(f, "\nbubble: %ld/%ld = %.4f of stage time simulated; %s = %ld/%ld = %.4f\n", idle / g, total / g,
            (double)idle / (double)total,
            zb ? "(S-1)/(3m+S-1)" : sp->kind == PZ_SCHED_INTERLEAVED ? "(S-1)/(mV+S-1)" : "(S-1)/(m+S-1)", fn / g2,
            fd / g2, (double)fn / (double)fd);
out:
    for (int s = 0; s < S; s++) {
        pz_schedule_free(&st[s]);
        free(start[s]);
    }
    PZ_FREE_ALL(st, start);
    return status;
}

void pz_schedule_print_list(FILE *f, const pz_schedule *s) {
    char name[64];
    pz_sched_spec_format(&s->spec, name, sizeof name);
    fprintf(f, "%s schedule, stage %d of %d, %d micro-batch%s, %d instructions\n", name,
            s->stage, s->nstages, s->nmicro, s->nmicro == 1 ? "" : "es", s->n);
    if (s->nchunks > 1)
        fprintf(f, "(model chunks: local chunk c of this stage is global chunk c*%d + %d of %d)\n", s->nstages,
                s->stage, s->nstages * s->nchunks);
    for (int k = 0; k < s->n; k++) {
        const pz_instr *in = &s->ins[k];
        const int chunks = s->nchunks > 1;
        fprintf(f, "%6d  %s", k, pz_op_name(in->op));
        if (in->micro >= 0) fprintf(f, "%*smicro %d", 13 - (int)strlen(pz_op_name(in->op)), "", in->micro);
        if (chunks && in->micro >= 0) fprintf(f, " chunk %d", in->chunk);
        const pz_peer p = pz_instr_peer(s, in);
        const char *arrow = in->op == PZ_OP_REDUCE_TIED                                  ? "<->"
                            : in->op == PZ_OP_SEND_ACT || in->op == PZ_OP_SEND_GRAD ? "->"
                                                                                    : "<-";
        if (p.rank >= 0 && !chunks) fprintf(f, "  %s stage %d", arrow, p.rank);
        else if (p.rank >= 0 && p.boundary >= 0)
            fprintf(f, "  %s stage %d chunk %d (boundary %d)", arrow, p.rank, p.chunk, p.boundary);
        else if (p.rank >= 0) fprintf(f, "  %s stage %d chunk %d", arrow, p.rank, p.chunk);
        fputc('\n', f);
    }
}
