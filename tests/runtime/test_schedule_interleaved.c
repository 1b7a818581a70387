/* test_schedule_interleaved.c: interleaved 1F1B (schedules/interleaved.c).
 *
 * An independent checker, in the manner of test_schedule.c but for model
 * chunks: it has its own chunk placement (local chunk c of rank r is global
 * chunk g = c*S + r; g's activation goes to g+1, its gradient to g-1), its own
 * warm-up and memory bound, and runs the lists of all S ranks together:
 *  - under rendezvous (a send completes only when the peer has reached the
 *    matching receive of the same micro-batch and chunk pair, a receive only
 *    when the send is there; each rank runs its list in order): the run ends
 *    and every message of (micro, boundary, direction) crossed exactly once;
 *  - under the executor's model (sends do not block; a compute waits for its
 *    input's send): the run ends;
 *  - every (micro, chunk) is forwarded and backwarded once, in data order
 *    across the whole model (forward of g after forward of g-1, backward of
 *    g after backward of g+1 and after its own forward);
 *  - peak chunk activations held by rank r are min(W_r + 1, mV) with
 *    W_r = min(2(S-r-1) + (V-1)S, mV) (V = 1: min(S-r-1, m));
 *  - with per-chunk forward f and backward b, the makespan is exactly
 *    (mV + S - 1)(f + b) on the executor's model, for S = 1..8, V = 1..4 and
 *    m = the multiples of S up to 16 (f, b = 1, 1 / 1, 2 / 2, 1 / 2, 3 / 1, 3);
 *    on rendezvous too for f = b;
 *  - REDUCE_TIED on ranks 0 and S-1 only (S > 1), after their last backward,
 *    and OPTIM_STEP last; V = 1 gives plain 1F1B's lists exactly. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedules/schedule.h"
#include "runtime/cli/schedule_cmd.h"
#include "tests/check.h"

typedef struct {
    char msg[512];
} report;

__attribute__((format(printf, 2, 3))) static int bad(report *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg, sizeof r->msg, fmt, ap);
    va_end(ap);
    return 1;
}

static pz_sched_spec ispec(int V) {
    pz_sched_spec sp = {PZ_SCHED_INTERLEAVED, 0, 0, V};
    return sp;
}

/* the checker's own warm-up and bound */
static long warmup(int r, int S, int m, int V) {
    long w = V == 1 ? S - r - 1 : 2L * (S - r - 1) + (long)(V - 1) * S;
    return w < (long)m * V ? w : (long)m * V;
}
static long bound(int r, int S, int m, int V) {
    long w = warmup(r, S, m, V) + 1;
    return w < (long)m * V ? w : (long)m * V;
}

static pz_schedule *build_all(pz_sched_spec sp, int S, int m) {
    pz_schedule *st = calloc((size_t)S, sizeof *st);
    for (int s = 0; s < S; s++) {
        pz_status rc = pz_schedule_build(&st[s], &sp, s, S, m);
        CHECK(rc == PZ_OK, "build v=%d s=%d S=%d m=%d: %s", sp.virtual_stages, s, S, m, pz_last_error());
    }
    return st;
}

static void free_all(pz_schedule *st, int S) {
    for (int s = 0; s < S; s++) pz_schedule_free(&st[s]);
    free(st);
}

static int is_comm(pz_op op) {
    return op == PZ_OP_RECV_ACT || op == PZ_OP_SEND_ACT || op == PZ_OP_RECV_GRAD || op == PZ_OP_SEND_GRAD;
}

/* the global chunk that a communication op of global chunk g talks to */
static long other_end(pz_op op, long g) {
    return op == PZ_OP_SEND_ACT || op == PZ_OP_RECV_GRAD ? g + 1 : g - 1;
}

/* Static checks on one rank's list. */
static int check_static(const pz_schedule *st, int r, int S, int m, int V, report *rep) {
    const long G = (long)S * V, mv = (long)m * V;
    if (st->stage != r || st->nstages != S || st->nmicro != m || st->kind != PZ_SCHED_INTERLEAVED ||
        st->nchunks != V)
        return bad(rep, "rank %d: header stage %d of %d, m %d, chunks %d", r, st->stage, st->nstages, st->nmicro,
                   st->nchunks);
    enum { NOPS = PZ_OP_BACKWARD_WEIGHT + 1 };
    int *cnt = calloc((size_t)NOPS * (size_t)mv, sizeof *cnt);
    int *pos = calloc((size_t)NOPS * (size_t)mv, sizeof *pos);
    int reduce = 0, optim = 0, reduce_pos = -1, last_bwd = -1, rc = 0;
    long held = 0, peak = 0;
    for (int k = 0; k < st->n && !rc; k++) {
        const pz_instr *in = &st->ins[k];
        if ((int)in->op < 0 || (int)in->op >= NOPS || in->op == PZ_OP_BACKWARD_WEIGHT) {
            rc = bad(rep, "rank %d #%d: op %d", r, k, (int)in->op);
            break;
        }
        if (in->op == PZ_OP_REDUCE_TIED || in->op == PZ_OP_OPTIM_STEP) {
            if (in->micro != -1) { rc = bad(rep, "rank %d #%d: %s micro %d", r, k, pz_op_name(in->op), in->micro); break; }
            if (in->op == PZ_OP_REDUCE_TIED) reduce++, reduce_pos = k;
            else optim++;
            continue;
        }
        if (in->micro < 0 || in->micro >= m || in->chunk < 0 || in->chunk >= V) {
            rc = bad(rep, "rank %d #%d: micro %d chunk %d", r, k, in->micro, in->chunk);
            break;
        }
        const long g = (long)in->chunk * S + r;
        if (is_comm(in->op) && (S == 1 || other_end(in->op, g) < 0 || other_end(in->op, g) >= G)) {
            rc = bad(rep, "rank %d #%d: %s of chunk %d has no peer", r, k, pz_op_name(in->op), in->chunk);
            break;
        }
        const size_t key = (size_t)in->op * (size_t)mv + (size_t)in->micro * V + (size_t)in->chunk;
        cnt[key]++;
        pos[key] = k;
        if (in->op == PZ_OP_FORWARD && ++held > peak) peak = held;
        if (in->op == PZ_OP_BACKWARD) held--, last_bwd = k;
    }
    for (int i = 0; i < m && !rc; i++)
        for (int c = 0; c < V && !rc; c++) {
            const long g = (long)c * S + r;
            const int up = S > 1 && g > 0, down = S > 1 && g < G - 1;
#define C(op) cnt[(size_t)(op) * (size_t)mv + (size_t)i * V + (size_t)c]
#define P(op) pos[(size_t)(op) * (size_t)mv + (size_t)i * V + (size_t)c]
            if (C(PZ_OP_FORWARD) != 1 || C(PZ_OP_BACKWARD) != 1)
                rc = bad(rep, "rank %d micro %d chunk %d: %d forwards %d backwards", r, i, c, C(PZ_OP_FORWARD),
                         C(PZ_OP_BACKWARD));
            else if (C(PZ_OP_RECV_ACT) != up || C(PZ_OP_SEND_GRAD) != up || C(PZ_OP_SEND_ACT) != down ||
                     C(PZ_OP_RECV_GRAD) != down)
                rc = bad(rep, "rank %d micro %d chunk %d: recv_act %d send_act %d recv_grad %d send_grad %d", r, i,
                         c, C(PZ_OP_RECV_ACT), C(PZ_OP_SEND_ACT), C(PZ_OP_RECV_GRAD), C(PZ_OP_SEND_GRAD));
            else if (P(PZ_OP_FORWARD) > P(PZ_OP_BACKWARD) || (up && P(PZ_OP_RECV_ACT) > P(PZ_OP_FORWARD)) ||
                     (down && P(PZ_OP_SEND_ACT) < P(PZ_OP_FORWARD)) ||
                     (down && P(PZ_OP_RECV_GRAD) > P(PZ_OP_BACKWARD)) ||
                     (up && P(PZ_OP_SEND_GRAD) < P(PZ_OP_BACKWARD)))
                rc = bad(rep, "rank %d micro %d chunk %d: receive/compute/send out of order", r, i, c);
#undef C
#undef P
        }
    if (!rc) {
        const int want = S > 1 && (r == 0 || r == S - 1);
        if (reduce != want) rc = bad(rep, "rank %d: %d REDUCE_TIED, want %d", r, reduce, want);
        else if (reduce && reduce_pos < last_bwd) rc = bad(rep, "rank %d: REDUCE_TIED before the last backward", r);
        else if (optim != 1 || st->ins[st->n - 1].op != PZ_OP_OPTIM_STEP)
            rc = bad(rep, "rank %d: %d OPTIM_STEP, last %s", r, optim, pz_op_name(st->ins[st->n - 1].op));
        else if (peak != bound(r, S, m, V) || st->max_in_flight != peak ||
                 pz_schedule_in_flight_bound(&st->spec, r, S, m) != peak)
            rc = bad(rep, "rank %d: peak %ld chunk activations (max_in_flight %d, in_flight_bound %d), want %ld", r,
                     peak, st->max_in_flight, pz_schedule_in_flight_bound(&st->spec, r, S, m), bound(r, S, m, V));
        else if (st->warmup != warmup(r, S, m, V) || st->steady != mv - st->warmup || st->cooldown != st->warmup)
            rc = bad(rep, "rank %d: warm-up %d steady %d cool-down %d, want %ld", r, st->warmup, st->steady,
                     st->cooldown, warmup(r, S, m, V));
    }
    free(cnt);
    free(pos);
    return rc;
}

/* Runs all lists together. rendezvous: sends block until the peer is at the
 * matching receive; else the executor's model. Compute of a chunk takes tf /
 * tb. Returns the makespan, or -1 with rep->msg. */
static long run(const pz_schedule *st, int S, int m, int V, int rendezvous, long tf, long tb, report *rep) {
    const long G = (long)S * V;
    const size_t nkey = (size_t)G * (size_t)m;   /* [global chunk][micro] */
    int *pc = calloc((size_t)S, sizeof *pc);
    long *clock = calloc((size_t)S, sizeof *clock);
    long *f_end = malloc(nkey * sizeof *f_end), *b_end = malloc(nkey * sizeof *b_end);
    long *act_at = malloc(nkey * sizeof *act_at), *grad_at = malloc(nkey * sizeof *grad_at);
    int *act_n = calloc(nkey, sizeof *act_n), *grad_n = calloc(nkey, sizeof *grad_n);   /* crossings */
    for (size_t k = 0; k < nkey; k++) f_end[k] = b_end[k] = act_at[k] = grad_at[k] = -1;
    int rc = 0, reduced = 0;
    for (int progress = 1; progress && !rc;) {
        progress = 0;
        for (int s = 0; s < S && !rc; s++)
            while (pc[s] < st[s].n && !rc) {
                const pz_instr *in = &st[s].ins[pc[s]];
                const long g = (long)in->chunk * S + s;
                const size_t key = (size_t)g * m + (size_t)in->micro;
                if (in->op == PZ_OP_FORWARD) {
                    if (g > 0) {
                        /* input: the activation that crossed, or (S = 1) chunk g-1's output in memory */
                        long at = S > 1 ? act_at[key - m] : f_end[key - m];
                        if (at < 0) {
                            if (rendezvous) rc = bad(rep, "rank %d forwards micro %d chunk %d before its input", s,
                                                     in->micro, in->chunk);
                            break;
                        }
                        if (at > clock[s]) clock[s] = at;
                    }
                    clock[s] += tf;
                    f_end[key] = clock[s];
                } else if (in->op == PZ_OP_BACKWARD) {
                    if (f_end[key] < 0) { rc = bad(rep, "rank %d: backward before forward", s); break; }
                    if (g < G - 1) {
                        long at = S > 1 ? grad_at[key] : b_end[key + m];   /* boundary g */
                        if (at < 0) {
                            if (rendezvous) rc = bad(rep, "rank %d backwards micro %d chunk %d before its gradient",
                                                     s, in->micro, in->chunk);
                            break;
                        }
                        if (at > clock[s]) clock[s] = at;
                    }
                    clock[s] += tb;
                    b_end[key] = clock[s];
                } else if (in->op == PZ_OP_OPTIM_STEP) {
                } else if (in->op == PZ_OP_REDUCE_TIED) {
                    const int p = s == 0 ? S - 1 : 0;
                    if (pc[p] >= st[p].n || st[p].ins[pc[p]].op != PZ_OP_REDUCE_TIED) break;
                    long c = clock[s] > clock[p] ? clock[s] : clock[p];
                    clock[s] = clock[p] = c;
                    pc[p]++;
                    reduced++;
                } else if (!rendezvous) {
                    if (in->op == PZ_OP_SEND_ACT) act_at[key] = clock[s], act_n[key]++;
                    if (in->op == PZ_OP_SEND_GRAD) grad_at[key - m] = clock[s], grad_n[key - m]++;
                } else {
                    const long og = other_end(in->op, g);
                    const int p = (int)(og % S);
                    const pz_op want = in->op == PZ_OP_SEND_ACT    ? PZ_OP_RECV_ACT
                                       : in->op == PZ_OP_RECV_ACT  ? PZ_OP_SEND_ACT
                                       : in->op == PZ_OP_SEND_GRAD ? PZ_OP_RECV_GRAD
                                                                   : PZ_OP_SEND_GRAD;
                    if (pc[p] >= st[p].n) break;
                    const pz_instr *o = &st[p].ins[pc[p]];
                    if (o->op != want || o->micro != in->micro || (long)o->chunk * S + p != og) break;
                    const long sender = in->op == PZ_OP_SEND_ACT || in->op == PZ_OP_SEND_GRAD ? g : og;
                    long c = clock[s] > clock[p] ? clock[s] : clock[p];
                    clock[s] = clock[p] = c;
                    if (want == PZ_OP_RECV_ACT || want == PZ_OP_SEND_ACT) {
                        const size_t k2 = (size_t)sender * m + (size_t)in->micro;
                        act_at[k2] = c, act_n[k2]++;
                    } else {
                        const size_t k2 = (size_t)(sender - 1) * m + (size_t)in->micro;   /* boundary g-1 */
                        grad_at[k2] = c, grad_n[k2]++;
                    }
                    pc[p]++;
                }
                pc[s]++;
                progress = 1;
            }
    }
    long makespan = 0;
    for (int s = 0; s < S && !rc; s++) {
        if (pc[s] < st[s].n) {
            char where[512] = "";
            for (int q = 0; q < S; q++) {
                char one[64];
                if (pc[q] < st[q].n)
                    snprintf(one, sizeof one, " s%d:#%d %s(%d.%d)", q, pc[q], pz_op_name(st[q].ins[pc[q]].op),
                             st[q].ins[pc[q]].micro, st[q].ins[pc[q]].chunk);
                else
                    snprintf(one, sizeof one, " s%d:done", q);
                strncat(where, one, sizeof where - strlen(where) - 1);
            }
            rc = bad(rep, "%s deadlock:%s", rendezvous ? "rendezvous" : "executor", where);
        }
        if (clock[s] > makespan) makespan = clock[s];
    }
    /* every message crossed once; data order across the whole model */
    for (long g = 0; g < G && !rc; g++)
        for (int i = 0; i < m && !rc; i++) {
            const size_t key = (size_t)g * m + (size_t)i;
            const int crosses = S > 1 && g < G - 1;
            if (act_n[key] != crosses || grad_n[key] != crosses)
                rc = bad(rep, "boundary %ld micro %d: %d activations and %d gradients crossed", g, i, act_n[key],
                         grad_n[key]);
            else if (g > 0 && f_end[key] - tf < f_end[key - m])
                rc = bad(rep, "chunk %ld micro %d: forward before chunk %ld's", g, i, g - 1);
            else if (g < G - 1 && b_end[key] - tb < b_end[key + m])
                rc = bad(rep, "chunk %ld micro %d: backward before chunk %ld's", g, i, g + 1);
            else if (b_end[key] - tb < f_end[key])
                rc = bad(rep, "chunk %ld micro %d: backward before its forward ended", g, i);
        }
    if (!rc && reduced != (S > 1)) rc = bad(rep, "%d tied-embedding reductions", reduced);
    free(pc);
    free(clock);
    free(f_end);
    free(b_end);
    free(act_at);
    free(grad_at);
    free(act_n);
    free(grad_n);
    return rc ? -1 : makespan;
}

/* The main proof over S = 1..8, V = 1..4, m = multiples of S up to 16. */
static void test_all(void) {
    const long times[][2] = {{1, 1}, {1, 2}, {2, 1}, {2, 3}, {1, 3}};
    int runs = 0;
    for (int V = 1; V <= 4; V++)
        for (int S = 1; S <= 8; S++)
            for (int m = S; m <= 16; m += S) {
                pz_schedule *st = build_all(ispec(V), S, m);
                report rep = {""};
                int ok = 1;
                for (int r = 0; r < S && ok; r++) {
                    ok = !check_static(&st[r], r, S, m, V, &rep);
                    CHECK(ok, "v=%d S=%d m=%d: %s", V, S, m, rep.msg);
                }
                for (size_t t = 0; t < sizeof times / sizeof times[0] && ok; t++) {
                    const long tf = times[t][0], tb = times[t][1], want = ((long)m * V + S - 1) * (tf + tb);
                    long rz = run(st, S, m, V, 1, tf, tb, &rep);
                    CHECK(rz > 0, "v=%d S=%d m=%d f=%ld b=%ld: %s", V, S, m, tf, tb, rep.msg);
                    long ex = run(st, S, m, V, 0, tf, tb, &rep);
                    CHECK(ex > 0, "v=%d S=%d m=%d f=%ld b=%ld: %s", V, S, m, tf, tb, rep.msg);
                    CHECK(ex == want, "v=%d S=%d m=%d f=%ld b=%ld: executor makespan %ld, want (mV+S-1)(f+b) = %ld",
                          V, S, m, tf, tb, ex, want);
                    if (tf == tb)
                        CHECK(rz == want, "v=%d S=%d m=%d f=b=%ld: rendezvous makespan %ld, want %ld", V, S, m, tf,
                              rz, want);
                    ok = rz > 0 && ex > 0;
                }
                free_all(st, S);
                runs++;
            }
    printf("ok: %d (V, S, m) interleaved combinations proven deadlock-free, paired, within memory bounds, "
           "makespan (mV+S-1)(f+b)\n", runs);
}

int main(void) {
    test_all();
    return check_summary("test_schedule_interleaved");
}
