/* test_schedule.c: pipeline schedules (schedules/schedule.c).
 *
 * The core is an independent checker: it runs the instruction lists of all S
 * stages together under the strictest execution model (each stage executes its
 * list in order; a send completes only when its receiver has reached the
 * matching receive, a receive only when the matching send is there; compute
 * takes t_f / t_b, communication takes no time) and proves, for S = 1..8 and
 * m = 1..16 and every schedule (1F1B with 0..3 extra warm-up forwards per
 * downstream stage, GPipe, ZB-H1):
 *  - the run ends (no deadlock) and every send met exactly one receive of the
 *    same micro-batch, direction and neighbour pair, and vice versa;
 *  - every micro-batch is forwarded and backwarded exactly once per stage, in
 *    the data order (receive -> forward -> send, receive -> backward -> send,
 *    forward before backward, downstream backward before upstream backward);
 *  - the activations held by stage s never exceed the bound (min(S-s, m) for
 *    1F1B, min((S-s-1)(1+K)+1, m) with K extra warm-up, m for GPipe, min(S, m)
 *    for ZB-H1, whose activations live until their weight gradients) and
 *    reach it; ZB-H1 runs each micro-batch's weight gradients once, after its
 *    input gradient, in micro-batch order;
 *  - with t_f = 1, t_b = 2 the bubble 1 - busy/(S x makespan) is exactly
 *    (S-1)/(m+S-1) (for extra warm-up on the executor's model, non-blocking
 *    sends: simulate_eager), and ZB-H1's makespan with F = B = W = 1 is
 *    3m + S - 1 (m >= S); warm-up K and a link delay: test_link_delay;
 *  - REDUCE_TIED only on the first and last stage when S > 1, after all their
 *    backwards; OPTIM_STEP last.
 * The checker shares no code with the library beyond the types and
 * pz_op_name (for messages): it has its own peers, matching and in-flight
 * bound. Mutation tests show that each kind of defect makes it fail. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedules/schedule.h"
#include "runtime/cli/schedule_cmd.h"
#include "tests/check.h"
#include "tests/slurp.h"
#include "tests/schedules/report.h"

/* ---------------------------------------------------------------- checker */

/* time of a zb-h1 weight-gradient op (BACKWARD is then the input gradient only) */
static long g_tw = 1;

static int is_comm(pz_op op) {
    return op == PZ_OP_RECV_ACT || op == PZ_OP_SEND_ACT || op == PZ_OP_RECV_GRAD || op == PZ_OP_SEND_GRAD;
}

/* the checker's own notion of neighbours: where a message goes / comes from */
static int peer_of(pz_op op, int s) {
    if (op == PZ_OP_SEND_ACT || op == PZ_OP_RECV_GRAD) return s + 1;
    if (op == PZ_OP_RECV_ACT || op == PZ_OP_SEND_GRAD) return s - 1;
    return -1;
}

/* The checker's own bound: GPipe holds all m; 1F1B with K extra warm-up
 * forwards per downstream stage holds W_s + 1, W_s = (S-s-1)(1+K), at most m. */
static int expected_bound(pz_sched_spec sp, int s, int S, int m) {
    if (sp.kind == PZ_SCHED_GPIPE) return m;
    if (sp.kind == PZ_SCHED_ZBH1) return S < m ? S : m;   /* 1F1B's first stage, on every stage */
    long b = (long)(S - s - 1) * (1 + sp.warmup_extra) + 1;
    return b < m ? (int)b : m;
}

static pz_sched_spec spec_k(pz_sched_kind kind, int extra) {
    pz_sched_spec sp = {kind, extra, 0, 0};
    return sp;
}

/* "1f1b", "1f1b:warmup=2", "gpipe" for messages (a static buffer per call site is enough) */
static const char *spec_name(pz_sched_spec sp) {
    static char buf[4][64];
    static int next;
    char *b = buf[next++ & 3];
    pz_sched_spec_format(&sp, b, sizeof buf[0]);
    return b;
}

typedef struct {
    long makespan;   /* time when the last stage finished its list */
    long busy;       /* sum of compute time over all stages */
} sim_result;

/* Per (stage, micro) bookkeeping. */
typedef struct {
    long f_start, f_end, b_start, b_end;  /* simulated times */
    long f_seq, b_seq;                    /* global completion order */
} micro_times;

/* Static checks on one stage's list (counts, program order, memory, end ops). */
static int check_static(const pz_schedule *st, pz_sched_spec sp, int s, int S, int m, int reach, report *r) {
    if (st->stage != s || st->nstages != S || st->nmicro != m || st->kind != sp.kind)
        return bad(r, "stage %d: header says stage %d of %d, m %d", s, st->stage, st->nstages, st->nmicro);
    if (st->n < 1 || !st->ins) return bad(r, "stage %d: empty list", s);
    enum { NOPS = PZ_OP_BACKWARD_WEIGHT + 1 };
    const int zb = sp.kind == PZ_SCHED_ZBH1;
    int *cnt = calloc((size_t)NOPS * (size_t)m, sizeof *cnt);   /* cnt[op * m + micro] */
    int *pos = calloc((size_t)NOPS * (size_t)m, sizeof *pos);   /* position of (op, micro) */
    int reduce = 0, optim = 0, reduce_pos = -1, last_bwd = -1, rc = 0;
    const int first = s == 0, last = s == S - 1;
    for (int k = 0; k < st->n && !rc; k++) {
        const pz_instr *in = &st->ins[k];
        if ((int)in->op < 0 || (int)in->op >= NOPS) { rc = bad(r, "stage %d #%d: op %d", s, k, (int)in->op); break; }
        if (in->chunk != 0) { rc = bad(r, "stage %d #%d: chunk %d", s, k, in->chunk); break; }
        if (in->op == PZ_OP_BACKWARD_WEIGHT && !zb) { rc = bad(r, "stage %d #%d: BACKWARD_WEIGHT outside zb-h1", s, k); break; }
        if (in->op == PZ_OP_REDUCE_TIED || in->op == PZ_OP_OPTIM_STEP) {
            if (in->micro != -1) { rc = bad(r, "stage %d #%d: %s with micro %d", s, k, pz_op_name(in->op), in->micro); break; }
            if (in->op == PZ_OP_REDUCE_TIED) { reduce++; reduce_pos = k; }
            else optim++;
            continue;
        }
        if (in->micro < 0 || in->micro >= m) { rc = bad(r, "stage %d #%d: micro %d", s, k, in->micro); break; }
        if (is_comm(in->op) && (peer_of(in->op, s) < 0 || peer_of(in->op, s) >= S)) {
            rc = bad(r, "stage %d #%d: %s has no neighbour there", s, k, pz_op_name(in->op));
            break;
        }
        cnt[in->op * m + in->micro]++;
        pos[in->op * m + in->micro] = k;
        if (in->op == PZ_OP_BACKWARD || in->op == PZ_OP_BACKWARD_WEIGHT) last_bwd = k;
    }
    for (int i = 0; i < m && !rc; i++) {
#define C(op) cnt[(op) * m + i]
#define P(op) pos[(op) * m + i]
        if (C(PZ_OP_FORWARD) != 1 || C(PZ_OP_BACKWARD) != 1)
            rc = bad(r, "stage %d micro %d: %d forwards, %d backwards", s, i, C(PZ_OP_FORWARD), C(PZ_OP_BACKWARD));
        else if (C(PZ_OP_RECV_ACT) != !first || C(PZ_OP_SEND_GRAD) != !first || C(PZ_OP_SEND_ACT) != !last ||
                 C(PZ_OP_RECV_GRAD) != !last)
            rc = bad(r, "stage %d micro %d: recv_act %d send_act %d recv_grad %d send_grad %d", s, i,
                     C(PZ_OP_RECV_ACT), C(PZ_OP_SEND_ACT), C(PZ_OP_RECV_GRAD), C(PZ_OP_SEND_GRAD));
        else if (P(PZ_OP_FORWARD) > P(PZ_OP_BACKWARD))
            rc = bad(r, "stage %d micro %d: backward before forward", s, i);
        else if (!first && P(PZ_OP_RECV_ACT) > P(PZ_OP_FORWARD))
            rc = bad(r, "stage %d micro %d: forward before its input arrived", s, i);
        else if (!last && P(PZ_OP_SEND_ACT) < P(PZ_OP_FORWARD))
            rc = bad(r, "stage %d micro %d: activation sent before the forward", s, i);
        else if (!last && P(PZ_OP_RECV_GRAD) > P(PZ_OP_BACKWARD))
            rc = bad(r, "stage %d micro %d: backward before its gradient arrived", s, i);
        else if (!first && P(PZ_OP_SEND_GRAD) < P(PZ_OP_BACKWARD))
            rc = bad(r, "stage %d micro %d: gradient sent before the backward", s, i);
        else if (C(PZ_OP_BACKWARD_WEIGHT) != zb)
            rc = bad(r, "stage %d micro %d: %d weight-gradient ops", s, i, C(PZ_OP_BACKWARD_WEIGHT));
        else if (zb && P(PZ_OP_BACKWARD_WEIGHT) < P(PZ_OP_BACKWARD))
            rc = bad(r, "stage %d micro %d: weight gradients before the input gradient", s, i);
        else if (zb && i > 0 && P(PZ_OP_BACKWARD_WEIGHT) < pos[PZ_OP_BACKWARD_WEIGHT * m + i - 1])
            rc = bad(r, "stage %d micro %d: weight gradients out of micro-batch order", s, i);
#undef C
#undef P
    }
    if (!rc) {
        int want_reduce = S > 1 && (first || last);
        if (reduce != want_reduce)
            rc = bad(r, "stage %d: %d REDUCE_TIED, want %d", s, reduce, want_reduce);
        else if (reduce && reduce_pos < last_bwd)
            rc = bad(r, "stage %d: REDUCE_TIED at #%d before the last backward #%d", s, reduce_pos, last_bwd);
        else if (optim != 1 || st->ins[st->n - 1].op != PZ_OP_OPTIM_STEP)
            rc = bad(r, "stage %d: %d OPTIM_STEP, last instruction %s", s, optim, pz_op_name(st->ins[st->n - 1].op));
    }
    if (!rc) {
        /* activations live until the backward (zb-h1: until the weight gradients) */
        const pz_op frees = zb ? PZ_OP_BACKWARD_WEIGHT : PZ_OP_BACKWARD;
        int held = 0, peak = 0, bound = expected_bound(sp, s, S, m);
        for (int k = 0; k < st->n; k++) {
            if (st->ins[k].op == PZ_OP_FORWARD && ++held > peak) peak = held;
            if (st->ins[k].op == frees) held--;
        }
        if (peak > bound) rc = bad(r, "stage %d: %d activations held, bound %d", s, peak, bound);
        else if (reach && peak != bound) rc = bad(r, "stage %d: peak %d never reaches the bound %d", s, peak, bound);
        else if (reach && st->max_in_flight != bound)
            rc = bad(r, "stage %d: max_in_flight %d, bound %d", s, st->max_in_flight, bound);
    }
    free(cnt);
    free(pos);
    return rc;
}

/* Runs all lists together; fills *res. Returns 0 or 1 with r->msg.
 * reach = 0 skips only the "peak reaches the bound" checks (for the test that
 * the bubble check can fail). */
static int check_schedules_ex(const pz_schedule *st, pz_sched_spec sp, int S, int m, long tf, long tb, int reach,
                              sim_result *res, report *r) {
    for (int s = 0; s < S; s++)
        if (check_static(&st[s], sp, s, S, m, reach, r)) return 1;

    int *pc = calloc((size_t)S, sizeof *pc);
    long *clock = calloc((size_t)S, sizeof *clock);
    int *held = calloc((size_t)S, sizeof *held), *peak = calloc((size_t)S, sizeof *peak);
    micro_times *mt = calloc((size_t)S * (size_t)m, sizeof *mt);
    /* matched[s][dir][i]: messages stage s sent downstream (dir 0, activation)
     * or upstream (dir 1, gradient) for micro i that met their receive */
    int *matched = calloc((size_t)S * 2 * (size_t)m, sizeof *matched);
    int reduce_done = 0, rc = 0;
    long seq = 0, busy = 0;
    for (int progress = 1; progress && !rc;) {
        progress = 0;
        for (int s = 0; s < S && !rc; s++) {
            while (pc[s] < st[s].n && !rc) {
                const pz_instr *in = &st[s].ins[pc[s]];
                micro_times *t = in->micro >= 0 ? &mt[(size_t)s * m + in->micro] : NULL;
                if (in->op == PZ_OP_FORWARD) {
                    if (s > 0 && mt[(size_t)(s - 1) * m + in->micro].f_seq == 0)
                        rc = bad(r, "stage %d forwards micro %d before stage %d did", s, in->micro, s - 1);
                    t->f_start = clock[s];
                    clock[s] += tf;
                    t->f_end = clock[s];
                    t->f_seq = ++seq;
                    busy += tf;
                    if (++held[s] > peak[s]) peak[s] = held[s];
                    if (held[s] > expected_bound(sp, s, S, m))
                        rc = bad(r, "stage %d holds %d activations, bound %d", s, held[s],
                                 expected_bound(sp, s, S, m));
                } else if (in->op == PZ_OP_BACKWARD) {
                    if (t->f_seq == 0) rc = bad(r, "stage %d backwards micro %d before its forward", s, in->micro);
                    if (s < S - 1 && mt[(size_t)(s + 1) * m + in->micro].b_seq == 0)
                        rc = bad(r, "stage %d backwards micro %d before stage %d did", s, in->micro, s + 1);
                    t->b_start = clock[s];
                    clock[s] += tb;
                    t->b_end = clock[s];
                    t->b_seq = ++seq;
                    busy += tb;
                    if (sp.kind != PZ_SCHED_ZBH1) held[s]--;
                } else if (in->op == PZ_OP_BACKWARD_WEIGHT) {
                    if (t->b_seq == 0) rc = bad(r, "stage %d: weight gradients of micro %d before its backward", s,
                                                in->micro);
                    clock[s] += g_tw;
                    busy += g_tw;
                    held[s]--;
                } else if (in->op == PZ_OP_OPTIM_STEP) {
                    /* zero time */
                } else if (in->op == PZ_OP_REDUCE_TIED) {
                    int p = s == 0 ? S - 1 : 0;
                    if (S < 2 || (s != 0 && s != S - 1)) { rc = bad(r, "stage %d: REDUCE_TIED", s); break; }
                    if (pc[p] >= st[p].n || st[p].ins[pc[p]].op != PZ_OP_REDUCE_TIED) break; /* wait */
                    long c = clock[s] > clock[p] ? clock[s] : clock[p];
                    clock[s] = clock[p] = c;
                    pc[p]++;
                    reduce_done++;
                } else {
                    /* a send or a receive: both sides must be at the matching pair */
                    int p = peer_of(in->op, s);
                    if (p < 0 || p >= S) { rc = bad(r, "stage %d: %s to stage %d", s, pz_op_name(in->op), p); break; }
                    pz_op want = in->op == PZ_OP_SEND_ACT    ? PZ_OP_RECV_ACT
                                 : in->op == PZ_OP_RECV_ACT  ? PZ_OP_SEND_ACT
                                 : in->op == PZ_OP_SEND_GRAD ? PZ_OP_RECV_GRAD
                                                             : PZ_OP_SEND_GRAD;
                    if (pc[p] >= st[p].n) break;
                    const pz_instr *o = &st[p].ins[pc[p]];
                    if (o->op != want || o->micro != in->micro || peer_of(o->op, p) != s) break; /* blocked */
                    int sender = in->op == PZ_OP_SEND_ACT || in->op == PZ_OP_SEND_GRAD ? s : p;
                    int dir = in->op == PZ_OP_SEND_ACT || in->op == PZ_OP_RECV_ACT ? 0 : 1;
                    matched[((size_t)sender * 2 + dir) * m + in->micro]++;
                    long c = clock[s] > clock[p] ? clock[s] : clock[p];
                    clock[s] = clock[p] = c;
                    pc[p]++;
                }
                pc[s]++;
                progress = 1;
            }
        }
    }
    if (!rc) {
        for (int s = 0; s < S; s++)
            if (pc[s] < st[s].n) {
                char where[256] = "";
                for (int q = 0; q < S; q++) {
                    char one[48];
                    if (pc[q] < st[q].n)
                        snprintf(one, sizeof one, " s%d:%s(%d)", q, pz_op_name(st[q].ins[pc[q]].op),
                                 st[q].ins[pc[q]].micro);
                    else
                        snprintf(one, sizeof one, " s%d:done", q);
                    strncat(where, one, sizeof where - strlen(where) - 1);
                }
                rc = bad(r, "deadlock:%s", where);
                break;
            }
    }
    for (int s = 0; s < S && !rc; s++) {
        if (reach && peak[s] != expected_bound(sp, s, S, m))
            rc = bad(r, "stage %d: simulated peak %d, bound %d", s, peak[s], expected_bound(sp, s, S, m));
        for (int i = 0; i < m && !rc; i++) {
            const micro_times *t = &mt[(size_t)s * m + i];
            if (matched[((size_t)s * 2 + 0) * m + i] != (s < S - 1) ||
                matched[((size_t)s * 2 + 1) * m + i] != (s > 0))
                rc = bad(r, "stage %d micro %d: %d activation and %d gradient sends matched", s, i,
                         matched[((size_t)s * 2 + 0) * m + i], matched[((size_t)s * 2 + 1) * m + i]);
            else if (t->f_seq == 0 || t->b_seq == 0 || t->b_seq < t->f_seq || t->b_start < t->f_end)
                rc = bad(r, "stage %d micro %d: forward/backward order", s, i);
            else if (s > 0 && t->f_start < mt[(size_t)(s - 1) * m + i].f_end)
                rc = bad(r, "stage %d micro %d: forward starts before the upstream forward ended", s, i);
            else if (s < S - 1 && (t->b_start < mt[(size_t)(s + 1) * m + i].b_end ||
                                   t->b_seq < mt[(size_t)(s + 1) * m + i].b_seq))
                rc = bad(r, "stage %d micro %d: backward before the downstream backward", s, i);
        }
    }
    if (!rc && reduce_done != (S > 1)) rc = bad(r, "%d tied-embedding reductions", reduce_done);
    res->makespan = 0;
    for (int s = 0; s < S; s++)
        if (clock[s] > res->makespan) res->makespan = clock[s];
    res->busy = busy;
    free(pc);
    free(clock);
    free(held);
    free(peak);
    free(mt);
    free(matched);
    return rc;
}

static int check_schedules(const pz_schedule *st, pz_sched_spec sp, int S, int m, long tf, long tb,
                           sim_result *res, report *r) {
    return check_schedules_ex(st, sp, S, m, tf, tb, 1, res, r);
}

/* The executor's own model: a send never blocks (it hands the message to
 * the transport and goes on), a receive only posts, and the FORWARD or
 * BACKWARD that uses its message waits until it has arrived, `delay` after
 * its send; the tied-embedding exchange is a
 * rendezvous. Returns the makespan, or -1 if some stage can never go on.
 * (The rendezvous checker above is stricter: lists that pass it run here.) */
static long simulate_eager(const pz_schedule *st, int S, int m, long tf, long tb, long delay) {
    int *pc = calloc((size_t)S, sizeof *pc);
    long *clock = calloc((size_t)S, sizeof *clock);
    long *sent = malloc((size_t)S * 2 * (size_t)m * sizeof *sent);   /* [sender][dir][micro]: send time */
    for (size_t k = 0; k < (size_t)S * 2 * (size_t)m; k++) sent[k] = -1;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int s = 0; s < S; s++)
            while (pc[s] < st[s].n) {
                const pz_instr *in = &st[s].ins[pc[s]];
                if (in->op == PZ_OP_FORWARD || in->op == PZ_OP_BACKWARD) {
                    /* the compute waits for its input (its receive was posted earlier) */
                    int fwd = in->op == PZ_OP_FORWARD, from = fwd ? s - 1 : s + 1;
                    if (from >= 0 && from < S) {
                        long at = sent[((size_t)from * 2 + (fwd ? 0 : 1)) * m + in->micro];
                        if (at < 0) break;
                        if (at + delay > clock[s]) clock[s] = at + delay;
                    }
                    clock[s] += fwd ? tf : tb;
                } else if (in->op == PZ_OP_BACKWARD_WEIGHT) clock[s] += g_tw;
                else if (in->op == PZ_OP_SEND_ACT) sent[((size_t)s * 2 + 0) * m + in->micro] = clock[s];
                else if (in->op == PZ_OP_SEND_GRAD) sent[((size_t)s * 2 + 1) * m + in->micro] = clock[s];
                else if (in->op == PZ_OP_REDUCE_TIED) {
                    int p = s == 0 ? S - 1 : 0;
                    if (pc[p] >= st[p].n || st[p].ins[pc[p]].op != PZ_OP_REDUCE_TIED) break;
                    long c = clock[s] > clock[p] ? clock[s] : clock[p];
                    clock[s] = clock[p] = c;
                    pc[p]++;
                }
                pc[s]++;
                progress = 1;
            }
    }
    long makespan = 0;
    for (int s = 0; s < S; s++) {
        if (pc[s] < st[s].n) { makespan = -1; break; }
        if (clock[s] > makespan) makespan = clock[s];
    }
    free(pc);
    free(clock);
    free(sent);
    return makespan;
}

/* bubble = 1 - busy / (S * makespan) == (S-1)/(m+S-1), exactly, in integers:
 * (S*makespan - busy) * (m+S-1) == (S-1) * S * makespan */
static int bubble_exact(int S, int m, const sim_result *res) {
    long lhs = ((long)S * res->makespan - res->busy) * (long)(m + S - 1);
    long rhs = (long)(S - 1) * S * res->makespan;
    return lhs == rhs;
}

/* ---------------------------------------------------------------- helpers */

static pz_schedule *build_all(pz_sched_spec sp, int S, int m) {
    pz_schedule *st = calloc((size_t)S, sizeof *st);
    for (int s = 0; s < S; s++) {
        pz_status rc = pz_schedule_build(&st[s], &sp, s, S, m);
        CHECK(rc == PZ_OK, "build %s s=%d S=%d m=%d: %s", spec_name(sp), s, S, m, pz_last_error());
    }
    return st;
}

static void free_all(pz_schedule *st, int S) {
    for (int s = 0; s < S; s++) pz_schedule_free(&st[s]);
    free(st);
}

/* ----------------------------------------------------------------- tests */

/* Every schedule the library builds: 1F1B with 0..3 extra warm-up forwards
 * per downstream stage, and GPipe. */
static const pz_sched_spec all_specs[] = {
    {PZ_SCHED_1F1B, 0, 0, 0}, {PZ_SCHED_1F1B, 1, 0, 0}, {PZ_SCHED_1F1B, 2, 0, 0},
    {PZ_SCHED_1F1B, 3, 0, 0}, {PZ_SCHED_GPIPE, 0, 0, 0}, {PZ_SCHED_ZBH1, 0, 0, 0},
};
#define NSPECS ((int)(sizeof all_specs / sizeof all_specs[0]))

/* The main proof: every (schedule, S, m) in range. Extra warm-up changes what
 * is in flight, not the makespan when communication takes no time: the bubble
 * stays (S-1)/(m+S-1). */
static void test_all_schedules(void) {
    int runs = 0;
    for (int k = 0; k < NSPECS; k++)
        for (int S = 1; S <= 8; S++)
            for (int m = 1; m <= 16; m++) {
                const pz_sched_spec sp = all_specs[k];
                pz_schedule *st = build_all(sp, S, m);
                report r = {""};
                sim_result res;
                if (sp.kind == PZ_SCHED_ZBH1) {
                    /* F = B = W = 1: m(F+B+W) + (S-1)(F+B-W) once m >= S, never
                     * more than 1F1B's (m+S-1)(F+B+W) */
                    int rc = check_schedules(st, sp, S, m, 1, 1, &res, &r);
                    CHECK(rc == 0, "%s S=%d m=%d: %s", spec_name(sp), S, m, r.msg);
                    long ms = simulate_eager(st, S, m, 1, 1, 0);
                    CHECK(rc != 0 || res.busy == 3L * S * m, "%s S=%d m=%d: busy %ld", spec_name(sp), S, m, res.busy);
                    CHECK(m < S ? ms > 0 && ms <= 3L * (m + S - 1) : ms == 3L * m + S - 1,
                          "%s S=%d m=%d: makespan %ld, want 3m+S-1 = %d", spec_name(sp), S, m, ms, 3 * m + S - 1);
                    for (int s = 0; s < S; s++)
                        CHECK(pz_schedule_in_flight_bound(&sp, s, S, m) == expected_bound(sp, s, S, m),
                              "%s S=%d m=%d s=%d: in_flight_bound", spec_name(sp), S, m, s);
                    free_all(st, S);
                    runs++;
                    continue;
                }
                int rc = check_schedules(st, sp, S, m, 1, 2, &res, &r);
                CHECK(rc == 0, "%s S=%d m=%d: %s", spec_name(sp), S, m, r.msg);
                if (rc == 0) {
                    CHECK(res.busy == 3L * S * m, "%s S=%d m=%d: busy %ld", spec_name(sp), S, m, res.busy);
                    /* extra warm-up pays off only where sends do not block:
                     * under rendezvous its early gradient receives cost
                     * slots, so the formula is checked on the executor's
                     * model (non-blocking sends) for every schedule, and on
                     * rendezvous for those without extra warm-up */
                    sim_result eager = {simulate_eager(st, S, m, 1, 2, 0), res.busy};
                    CHECK(bubble_exact(S, m, &eager), "%s S=%d m=%d: bubble %.6f, want %d/%d = %.6f (makespan %ld)",
                          spec_name(sp), S, m, 1.0 - (double)eager.busy / ((double)S * (double)eager.makespan),
                          S - 1, m + S - 1, (double)(S - 1) / (m + S - 1), eager.makespan);
                    if (sp.warmup_extra == 0)
                        CHECK(bubble_exact(S, m, &res) && res.makespan == 3L * (m + S - 1),
                              "%s S=%d m=%d: rendezvous makespan %ld, want %d", spec_name(sp), S, m, res.makespan,
                              3 * (m + S - 1));
                }
                for (int s = 0; s < S; s++)
                    CHECK(pz_schedule_in_flight_bound(&sp, s, S, m) == expected_bound(sp, s, S, m),
                          "%s S=%d m=%d s=%d: in_flight_bound %d", spec_name(sp), S, m, s,
                          pz_schedule_in_flight_bound(&sp, s, S, m));
                free_all(st, S);
                runs++;
            }
    printf("ok: %d (schedule, S, m) combinations proven deadlock-free, paired, within memory bounds, bubble exact\n",
           runs);
}

/* Deadlock-freedom does not depend on the times; the bubble formula holds for
 * any equal stage times. Other ratios and a few larger pipelines. */
static void test_other_times(void) {
    const long times[][2] = {{1, 1}, {2, 3}, {5, 1}};
    const int sizes[][2] = {{12, 1}, {12, 5}, {12, 12}, {12, 30}, {16, 64}, {3, 100}};
    for (int k = 0; k < NSPECS; k++)
        for (int ti = 0; ti < 3; ti++)
            for (int zi = 0; zi < 6; zi++) {
                const pz_sched_spec sp = all_specs[k];
                int S = sizes[zi][0], m = sizes[zi][1];
                long tf = times[ti][0], tb = times[ti][1];
                pz_schedule *st = build_all(sp, S, m);
                report r = {""};
                sim_result res;
                int rc = check_schedules(st, sp, S, m, tf, tb, &res, &r);
                CHECK(rc == 0, "%s S=%d m=%d tf=%ld tb=%ld: %s", spec_name(sp), S, m, tf, tb, r.msg);
                long eager = simulate_eager(st, S, m, tf, tb, 0);
                if (rc == 0 && sp.kind == PZ_SCHED_ZBH1)   /* B = tb, W = g_tw: never slower than 1F1B */
                    CHECK(eager > 0 && eager <= (tf + tb + g_tw) * (m + S - 1), "%s S=%d m=%d tf=%ld tb=%ld: makespan %ld",
                          spec_name(sp), S, m, tf, tb, eager);
                else if (rc == 0)
                    CHECK(eager == (tf + tb) * (m + S - 1) &&
                              (sp.warmup_extra > 0 || res.makespan == (tf + tb) * (m + S - 1)),
                          "%s S=%d m=%d tf=%ld tb=%ld: makespan %ld (rendezvous %ld)", spec_name(sp), S, m, tf, tb,
                          eager, res.makespan);
                free_all(st, S);
            }
    printf("ok: other stage times and larger pipelines\n");
}

/* What extra warm-up is for: a link that takes `delay` per message. With
 * plain 1F1B each stage waits for its gradient's round trip; with the K
 * that pz_sched_auto_warmup picks, the pipeline runs at the compute bound
 * again, (tf+tb)(m+S-1) plus the fill and drain over the links. Also: more
 * warm-up never makes it slower, and auto is the smallest K that gets there
 * or one more (its slack for jittering compute times). */
static void test_link_delay(void) {
    const int cases[][3] = {{2, 8, 3}, {2, 16, 6}, {3, 12, 2}, {4, 16, 4}, {4, 32, 9}, {8, 32, 3}};
    const long tf = 1, tb = 2;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int S = cases[c][0], m = cases[c][1];
        long d = cases[c][2];
        double *ct = calloc((size_t)S, sizeof *ct), *f = calloc((size_t)S, sizeof *f);
        double *b = calloc((size_t)S, sizeof *b), *lat = calloc((size_t)S, sizeof *lat);
        for (int q = 0; q < S; q++) ct[q] = (double)(tf + tb), f[q] = 2.0 * (double)d;   /* down and up */
        int kauto = pz_sched_auto_warmup(S, m, ct, f, b);
        /* compute bound plus one trip down and one up through every link */
        long bound = (tf + tb) * (m + S - 1) + 2L * (S - 1) * d;
        long prev = -1, best = -1;
        int kbest = -1;
        for (int k = 0; k <= kauto + 2; k++) {
            pz_sched_spec sp = spec_k(PZ_SCHED_1F1B, k);
            pz_schedule *st = build_all(sp, S, m);
            long ms = simulate_eager(st, S, m, tf, tb, d);
            CHECK(ms > 0, "S=%d m=%d delay %ld K=%d: stuck", S, m, d, k);
            CHECK(prev < 0 || ms <= prev, "S=%d m=%d delay %ld: K=%d slower (%ld) than K=%d (%ld)", S, m, d, k, ms,
                  k - 1, prev);
            if (k == kauto) {
                CHECK(ms <= bound, "S=%d m=%d delay %ld: auto K=%d makespan %ld, above %ld", S, m, d, k, ms, bound);
                best = ms;
            }
            if (ms <= bound && kbest < 0) kbest = k;
            if (k == 0)
                printf("ok: S=%d m=%d link delay %ld (compute 1+2): 1f1b makespan %ld", S, m, d, ms);
            prev = ms;
            free_all(st, S);
        }
        printf(", warmup=auto K=%d makespan %ld (bound %ld, smallest K reaching it %d)\n", kauto, best, bound,
               kbest);
        CHECK(kbest == kauto || (kbest >= 0 && kbest < kauto && kauto <= kbest + 1),
              "S=%d m=%d delay %ld: auto K=%d, smallest sufficient K=%d", S, m, d, kauto, kbest);
        free(ct);
        free(f);
        free(b);
        free(lat);
    }
    /* no link time: no extra warm-up; capped where stage 0 holds all m */
    double one[4] = {3, 3, 3, 3}, zero[4] = {0, 0, 0, 0}, far[4] = {1000, 1000, 1000, 1000};
    CHECK(pz_sched_auto_warmup(4, 16, one, zero, zero) == 0, "auto without links");
    CHECK(pz_sched_auto_warmup(4, 16, one, far, zero) == 5, "auto capped: (16+2)/3-1 = %d",
          pz_sched_auto_warmup(4, 16, one, far, zero));
    CHECK(pz_sched_auto_warmup(1, 16, one, zero, zero) == 0, "auto with one stage");
    /* a link slower than compute: the period is the link's, so fewer in flight
     * cover the same round trip (S=2: rtt 3+3+8 = 14; period 4: ceil 4, +1 = 5
     * in flight, K = 3; with the compute's period 3 it would be 5 + 1, K = 4) */
    double c2[2] = {3, 3}, rtt2[2] = {8, 0}, per2[2] = {4, 0}, none2[2] = {0, 0};
    CHECK(pz_sched_auto_warmup(2, 64, c2, rtt2, per2) == 3 && pz_sched_auto_warmup(2, 64, c2, rtt2, none2) == 4,
          "link-bound period: K %d and %d", pz_sched_auto_warmup(2, 64, c2, rtt2, per2),
          pz_sched_auto_warmup(2, 64, c2, rtt2, none2));
    printf("ok: warmup=auto picks the smallest K that hides a link delay, plus one\n");
}

/* warmup=auto's link round trips from micro-batch 0's timestamps, built here
 * from a known timeline (3 stages; edge 0-1 takes 50 ms each way, edge 1-2
 * 20 ms): stage 2 holds micro-batch 0 for 0.5 s, its forward and backward,
 * although a busy CPU made its average 1.2 s; stage 1 holds it for its
 * forward, its round trip down, a forward of micro-batch 1 that kept the
 * arrived gradient waiting, and its backward. Every edge's figure comes back
 * whatever the compute took (the formula that subtracted the average compute
 * per micro-batch, rtt[e] - c[e+1] - rtt[e+1], read 0.40 s and 0 s here). */
static void test_link_rtt(void) {
    const double down[2] = {0.050, 0.020}, up[2] = {0.050, 0.020};
    double hold[3] = {0.0, 0.0, 0.5}, rtt[3] = {0.0, 0.0, 0.0}, link[3] = {-1, -1, -1};
    rtt[1] = down[1] + hold[2] + up[1];
    hold[1] = 0.3 + rtt[1] + 0.4 + 0.6;
    rtt[0] = down[0] + hold[1] + up[0];
    pz_sched_link_rtt(3, rtt, hold, link);
    CHECK(fabs(link[0] - 0.100) < 1e-12 && fabs(link[1] - 0.040) < 1e-12 && link[2] == -1,
          "link round trips %.3f %.3f, want 0.100 0.040 (and the last untouched)", link[0], link[1]);
    /* the memory-check run on a loaded host: 2 stages, 8 micro-batches,
     * about 0.9 s of compute per micro-batch, a 50 ms link: K >= 1 */
    double h2[2] = {0.0, 0.75}, r2[2] = {0.1 + 0.75, 0.0}, l2[2], c2[2] = {0.9, 0.9}, p2[2] = {0, 0};
    pz_sched_link_rtt(2, r2, h2, l2);
    CHECK(fabs(l2[0] - 0.1) < 1e-12 && pz_sched_auto_warmup(2, 8, c2, l2, p2) >= 1,
          "2 stages: link %.3f, K %d", l2[0], pz_sched_auto_warmup(2, 8, c2, l2, p2));
    /* clock skew cannot make a round trip negative */
    double h3[2] = {0.0, 0.2}, r3[2] = {0.1, 0.0}, l3[2];
    pz_sched_link_rtt(2, r3, h3, l3);
    CHECK(l3[0] == 0.0, "negative round trip %.3f not clamped", l3[0]);
    printf("ok: link round trips from micro-batch 0's timestamps: %.0f and %.0f ms, whatever the compute took\n",
           1e3 * link[0], 1e3 * link[1]);
}

/* ZB-H1's point: at S = 4, m = 8 with F = B = W (1F1B's backward = B + W),
 * the stages' idle time falls by at least 30% (the formula: from
 * (S-1)(F+B+W) per stage to (S-1)(F+B-W), i.e. by two thirds). */
static void test_zb_idle(void) {
    const int S = 4, m = 8;
    pz_schedule *a = build_all(spec_k(PZ_SCHED_1F1B, 0), S, m), *z = build_all(spec_k(PZ_SCHED_ZBH1, 0), S, m);
    long ma = simulate_eager(a, S, m, 1, 2, 0), mz = simulate_eager(z, S, m, 1, 1, 0);
    long busy = 3L * S * m, ia = S * ma - busy, iz = S * mz - busy;
    CHECK(ma > 0 && mz > 0 && (double)iz <= 0.7 * (double)ia, "zb-h1 idle %ld vs 1f1b %ld", iz, ia);
    CHECK(ia == 3L * S * (S - 1) && iz == (long)S * (S - 1), "idle %ld and %ld, want S(S-1)(F+B+W) = %d and "
          "S(S-1)(F+B-W) = %d", ia, iz, 3 * S * (S - 1), S * (S - 1));
    printf("ok: S=4 m=8, F=B=W=1: 1f1b makespan %ld (idle %ld slots), zb-h1 %ld (idle %ld, %.0f%% less)\n", ma, ia,
           mz, iz, 100.0 * (1.0 - (double)iz / (double)ia));
    free_all(a, S);
    free_all(z, S);
}

/* Copies a schedule so that a test may corrupt it. */
static pz_schedule *clone_all(const pz_schedule *st, int S, int extra) {
    pz_schedule *c = calloc((size_t)S, sizeof *c);
    for (int s = 0; s < S; s++) {
        c[s] = st[s];
        c[s].ins = malloc(((size_t)st[s].n + (size_t)extra) * sizeof *c[s].ins);
        memcpy(c[s].ins, st[s].ins, (size_t)st[s].n * sizeof *c[s].ins);
    }
    return c;
}

static int find(const pz_schedule *s, pz_op op, int micro) {
    for (int k = 0; k < s->n; k++)
        if (s->ins[k].op == op && s->ins[k].micro == micro) return k;
    return -1;
}

static void expect_reject(pz_schedule *c, pz_sched_spec sp, int S, int m, const char *what, const char *needle) {
    report r = {""};
    sim_result res;
    int rc = check_schedules(c, sp, S, m, 1, 2, &res, &r);
    CHECK(rc != 0, "checker accepted %s", what);
    CHECK(rc == 0 || strstr(r.msg, needle), "%s: message '%s' lacks '%s'", what, r.msg, needle);
    if (rc) printf("ok: checker rejects %s: %s\n", what, r.msg);
    for (int s = 0; s < S; s++) free(c[s].ins);
    free(c);
}

/* Each kind of defect must make the checker fail. */
static void test_checker_catches_defects(void) {
    const int S = 4, m = 8;
    pz_schedule *good = build_all(spec_k(PZ_SCHED_1F1B, 0), S, m);
    pz_schedule *c;

    /* Megatron's combined {send act, recv grad} written naively as SEND_ACT
     * then RECV_GRAD on every stage deadlocks under rendezvous sends */
    c = clone_all(good, S, 0);
    for (int s = 0; s < S; s++)
        for (int k = 0; k + 1 < c[s].n; k++)
            if (c[s].ins[k].op == PZ_OP_RECV_GRAD && c[s].ins[k + 1].op == PZ_OP_SEND_ACT) {
                pz_instr t = c[s].ins[k];
                c[s].ins[k] = c[s].ins[k + 1];
                c[s].ins[k + 1] = t;
            }
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "send-before-receive on both sides of an edge", "deadlock");

    /* a receive expecting the wrong micro-batch */
    c = clone_all(good, S, 0);
    {
        int k5 = find(&c[2], PZ_OP_RECV_ACT, 5), k6 = find(&c[2], PZ_OP_RECV_ACT, 6);
        c[2].ins[k5].micro = 6;
        c[2].ins[k6].micro = 5;
    }
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "receives of swapped micro-batches", "forward before its input");

    /* the same swap, but forwards swapped too: the lists are each consistent,
     * only the pairing across the edge is wrong */
    c = clone_all(good, S, 0);
    for (int k = 0; k < c[2].n; k++)
        if ((c[2].ins[k].op == PZ_OP_RECV_ACT || c[2].ins[k].op == PZ_OP_FORWARD || c[2].ins[k].op == PZ_OP_SEND_ACT) &&
            (c[2].ins[k].micro == 2 || c[2].ins[k].micro == 3))
            c[2].ins[k].micro = 5 - c[2].ins[k].micro;
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "a stage forwarding micro-batches out of its neighbours' order", "deadlock");

    /* a missing gradient send */
    c = clone_all(good, S, 0);
    {
        int k = find(&c[1], PZ_OP_SEND_GRAD, 3);
        memmove(&c[1].ins[k], &c[1].ins[k + 1], (size_t)(c[1].n - k - 1) * sizeof *c[1].ins);
        c[1].n--;
    }
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "a missing SEND_GRAD", "send_grad 0");

    /* a send on the first stage to a stage that does not exist */
    c = clone_all(good, S, 1);
    memmove(&c[0].ins[1], &c[0].ins[0], (size_t)c[0].n * sizeof *c[0].ins);
    c[0].ins[0] = (pz_instr){PZ_OP_SEND_GRAD, 0, 0};
    c[0].n++;
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "a gradient sent upstream of the first stage", "no neighbour");

    /* a backward before the gradient that it needs */
    c = clone_all(good, S, 0);
    {
        int kr = find(&c[0], PZ_OP_RECV_GRAD, 0), kb = find(&c[0], PZ_OP_BACKWARD, 0);
        c[0].ins[kr].op = PZ_OP_BACKWARD;
        c[0].ins[kb].op = PZ_OP_RECV_GRAD;
    }
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "a backward before its gradient arrives", "before its gradient");

    /* one forward too many in the warm-up: more activations than 1F1B allows */
    c = clone_all(good, S, 0);
    {
        /* stage 3 (last): F0 B0 F1 B1 ... -> F0 F1 B0 B1 */
        int kb0 = find(&c[3], PZ_OP_BACKWARD, 0), kf1 = find(&c[3], PZ_OP_FORWARD, 1);
        int ks0 = find(&c[3], PZ_OP_SEND_GRAD, 0), kr1 = find(&c[3], PZ_OP_RECV_ACT, 1);
        /* order was B0, SEND_GRAD0, RECV_ACT1, F1; make it RECV_ACT1, F1, B0, SEND_GRAD0 */
        CHECK(kb0 + 1 == ks0 && ks0 + 1 == kr1 && kr1 + 1 == kf1, "unexpected last-stage order");
        c[3].ins[kb0] = (pz_instr){PZ_OP_RECV_ACT, 1, 0};
        c[3].ins[ks0] = (pz_instr){PZ_OP_FORWARD, 1, 0};
        c[3].ins[kr1] = (pz_instr){PZ_OP_BACKWARD, 0, 0};
        c[3].ins[kf1] = (pz_instr){PZ_OP_SEND_GRAD, 0, 0};
    }
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "two activations held on the last stage", "bound 1");

    /* GPipe lists judged against the 1F1B bound */
    free_all(good, S);
    good = build_all(spec_k(PZ_SCHED_GPIPE, 0), S, m);
    c = clone_all(good, S, 0);
    for (int s = 0; s < S; s++) c[s].kind = PZ_SCHED_1F1B;
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "GPipe memory under the 1F1B bound", "activations held");
    free_all(good, S);
    good = build_all(spec_k(PZ_SCHED_1F1B, 0), S, m);

    /* REDUCE_TIED before the last backward */
    c = clone_all(good, S, 0);
    {
        pz_instr *ins = c[3].ins;
        int n = c[3].n;  /* ..., B7, SEND_GRAD7, REDUCE_TIED, OPTIM_STEP */
        CHECK(ins[n - 2].op == PZ_OP_REDUCE_TIED && ins[n - 4].op == PZ_OP_BACKWARD, "unexpected tail");
        pz_instr t = ins[n - 2];
        ins[n - 2] = ins[n - 3];
        ins[n - 3] = ins[n - 4];
        ins[n - 4] = t;
    }
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "REDUCE_TIED before the last backward", "before the last backward");

    /* REDUCE_TIED on a middle stage */
    c = clone_all(good, S, 0);
    c[1].ins[c[1].n - 1] = (pz_instr){PZ_OP_REDUCE_TIED, -1, 0};
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "REDUCE_TIED on a middle stage", "REDUCE_TIED");

    /* OPTIM_STEP not last */
    c = clone_all(good, S, 0);
    {
        int n = c[2].n;
        pz_instr t = c[2].ins[n - 1];
        c[2].ins[n - 1] = c[2].ins[n - 2];
        c[2].ins[n - 2] = t;
    }
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), S, m, "OPTIM_STEP before the last send", "OPTIM_STEP");

    free_all(good, S);

    /* a valid but unpipelined schedule (each micro-batch goes down and back up
     * before the next starts) passes every check except the bubble */
    c = calloc((size_t)S, sizeof *c);
    for (int s = 0; s < S; s++) {
        c[s] = (pz_schedule){.kind = PZ_SCHED_GPIPE, .stage = s, .nstages = S, .nmicro = m, .max_in_flight = 1};
        c[s].ins = malloc((size_t)(6 * m + 2) * sizeof *c[s].ins);
        for (int i = 0; i < m; i++) {
            if (s > 0) c[s].ins[c[s].n++] = (pz_instr){PZ_OP_RECV_ACT, i, 0};
            c[s].ins[c[s].n++] = (pz_instr){PZ_OP_FORWARD, i, 0};
            if (s < S - 1) c[s].ins[c[s].n++] = (pz_instr){PZ_OP_SEND_ACT, i, 0};
            if (s < S - 1) c[s].ins[c[s].n++] = (pz_instr){PZ_OP_RECV_GRAD, i, 0};
            c[s].ins[c[s].n++] = (pz_instr){PZ_OP_BACKWARD, i, 0};
            if (s > 0) c[s].ins[c[s].n++] = (pz_instr){PZ_OP_SEND_GRAD, i, 0};
        }
        if (s == 0 || s == S - 1) c[s].ins[c[s].n++] = (pz_instr){PZ_OP_REDUCE_TIED, -1, 0};
        c[s].ins[c[s].n++] = (pz_instr){PZ_OP_OPTIM_STEP, -1, 0};
    }
    {
        report r = {""};
        sim_result res;
        int rc = check_schedules_ex(c, spec_k(PZ_SCHED_GPIPE, 0), S, m, 1, 2, 0, &res, &r);
        CHECK(rc == 0, "unpipelined schedule: %s", r.msg);
        CHECK(rc != 0 || !bubble_exact(S, m, &res), "bubble check accepted an unpipelined schedule");
        if (rc == 0)
            printf("ok: bubble check rejects an unpipelined schedule: makespan %ld, bubble %.4f, want %.4f\n",
                   res.makespan, 1.0 - (double)res.busy / ((double)S * (double)res.makespan),
                   (double)(S - 1) / (m + S - 1));
        rc = check_schedules(c, spec_k(PZ_SCHED_GPIPE, 0), S, m, 1, 2, &res, &r);
        CHECK(rc != 0 && strstr(r.msg, "never reaches"), "memory-reach check: '%s'", r.msg);
    }
    for (int s = 0; s < S; s++) free(c[s].ins);
    free(c);

    /* a single-stage pipeline must not exchange the tied embedding */
    pz_schedule *one = build_all(spec_k(PZ_SCHED_1F1B, 0), 1, 3);
    c = clone_all(one, 1, 1);
    c[0].ins[c[0].n] = c[0].ins[c[0].n - 1];
    c[0].ins[c[0].n - 1] = (pz_instr){PZ_OP_REDUCE_TIED, -1, 0};
    c[0].n++;
    expect_reject(c, spec_k(PZ_SCHED_1F1B, 0), 1, 3, "REDUCE_TIED with one stage", "REDUCE_TIED");
    free_all(one, 1);
}

/* Warm-up counts of the reference table (pipeline.md, S = 4, m = 8) and the
 * exact shape of a few lists. */
static void test_shapes(void) {
    const pz_sched_spec f1b = spec_k(PZ_SCHED_1F1B, 0), gp = spec_k(PZ_SCHED_GPIPE, 0);
    const int W[4] = {3, 2, 1, 0}, R[4] = {5, 6, 7, 8}, peak[4] = {4, 3, 2, 1};
    for (int s = 0; s < 4; s++) {
        pz_schedule st;
        CHECK(pz_schedule_build(&st, &f1b, s, 4, 8) == PZ_OK, "build");
        CHECK(st.warmup == W[s] && st.steady == R[s] && st.cooldown == W[s] && st.max_in_flight == peak[s],
              "stage %d: warm-up %d steady %d cool-down %d peak %d", s, st.warmup, st.steady, st.cooldown,
              st.max_in_flight);
        pz_schedule_free(&st);
    }
    /* last stage of 1F1B strictly alternates F and B */
    pz_schedule st;
    CHECK(pz_schedule_build(&st, &f1b, 3, 4, 8) == PZ_OK, "build");
    int f = 0, b = 0, alternate = 1;
    for (int k = 0; k < st.n; k++) {
        if (st.ins[k].op == PZ_OP_FORWARD) { alternate &= f == b && st.ins[k].micro == f; f++; }
        if (st.ins[k].op == PZ_OP_BACKWARD) { alternate &= f == b + 1 && st.ins[k].micro == b; b++; }
    }
    CHECK(alternate && f == 8 && b == 8, "last stage does not alternate F and B");
    pz_schedule_free(&st);

    /* S = 2, m = 2, stage 0, exactly */
    const pz_instr want[] = {
        {PZ_OP_FORWARD, 0, 0},   {PZ_OP_SEND_ACT, 0, 0},    {PZ_OP_FORWARD, 1, 0},
        {PZ_OP_RECV_GRAD, 0, 0}, {PZ_OP_SEND_ACT, 1, 0},    {PZ_OP_BACKWARD, 0, 0},
        {PZ_OP_RECV_GRAD, 1, 0}, {PZ_OP_BACKWARD, 1, 0},    {PZ_OP_REDUCE_TIED, -1, 0},
        {PZ_OP_OPTIM_STEP, -1, 0},
    };
    CHECK(pz_schedule_build(&st, &f1b, 0, 2, 2) == PZ_OK, "build");
    int same = st.n == (int)(sizeof want / sizeof want[0]);
    for (int k = 0; same && k < st.n; k++) same = st.ins[k].op == want[k].op && st.ins[k].micro == want[k].micro;
    if (!same) pz_schedule_print_list(stderr, &st);
    CHECK(same, "1F1B S=2 m=2 stage 0 list differs");
    pz_schedule_free(&st);

    /* S = 1: forward, backward per micro-batch, then the step; nothing else */
    CHECK(pz_schedule_build(&st, &gp, 0, 1, 2) == PZ_OK, "build");
    CHECK(st.n == 5 && st.ins[0].op == PZ_OP_FORWARD && st.ins[1].op == PZ_OP_FORWARD &&
              st.ins[2].op == PZ_OP_BACKWARD && st.ins[3].op == PZ_OP_BACKWARD && st.ins[4].op == PZ_OP_OPTIM_STEP,
          "GPipe S=1 m=2 list");
    pz_schedule_free(&st);
    printf("ok: list shapes\n");
}

static void test_api(void) {
    pz_sched_spec k = spec_k(PZ_SCHED_GPIPE, 7);
    CHECK(pz_sched_parse("1f1b", &k) == PZ_OK && k.kind == PZ_SCHED_1F1B && k.warmup_extra == 0 && !k.warmup_auto,
          "parse 1f1b");
    CHECK(pz_sched_parse("gpipe", &k) == PZ_OK && k.kind == PZ_SCHED_GPIPE, "parse gpipe");
    CHECK(pz_sched_parse("1f1b:warmup=3", &k) == PZ_OK && k.kind == PZ_SCHED_1F1B && k.warmup_extra == 3 &&
              !k.warmup_auto, "parse 1f1b:warmup=3");
    CHECK(pz_sched_parse("1f1b:warmup=auto", &k) == PZ_OK && k.kind == PZ_SCHED_1F1B && k.warmup_auto,
          "parse 1f1b:warmup=auto");
    char name[64];
    pz_sched_spec_format(&k, name, sizeof name);
    CHECK(strcmp(name, "1f1b:warmup=auto") == 0 && k.warmup_auto == 1, "format '%s'", name);
    /* auto (train's default): 1f1b whose warm-up the runtime picks and reports */
    CHECK(pz_sched_parse("auto", &k) == PZ_OK && k.kind == PZ_SCHED_1F1B && k.warmup_auto == PZ_SCHED_NAMED_AUTO &&
              k.warmup_extra == 0, "parse auto");
    pz_sched_spec_format(&k, name, sizeof name);
    CHECK(strcmp(name, "auto") == 0, "format auto as '%s'", name);
    CHECK(pz_sched_parse("auto:warmup=2", &k) == PZ_ERR_ARG && strstr(pz_last_error(), "no options"),
          "auto with an option: %s", pz_last_error());
    CHECK(pz_sched_parse("autox", &k) == PZ_ERR_ARG && strstr(pz_last_error(), "known: auto"),
          "autox: %s", pz_last_error());
    k = spec_k(PZ_SCHED_1F1B, 2);
    pz_sched_spec_format(&k, name, sizeof name);
    CHECK(strcmp(name, "1f1b:warmup=2") == 0, "format '%s'", name);
    CHECK(pz_sched_parse("pipedream", &k) == PZ_ERR_ARG, "parse unknown");
    CHECK(strstr(pz_last_error(), "pipedream") && strstr(pz_last_error(), "1f1b") && strstr(pz_last_error(), "gpipe"),
          "message '%s'", pz_last_error());
    const struct { const char *text, *needle; } badparse[] = {
        {"", "unknown schedule"},
        {"gpipe:warmup=1", "takes no options"},
        {"1f1b:warm=1", "unknown option"},
        {"1f1b:warmup=", "warmup must be"},
        {"1f1b:warmup=-1", "warmup must be"},
        {"1f1b:warmup=+1", "warmup must be"},
        {"1f1b:warmup=1x", "warmup must be"},
        {"1f1b:warmup=4097", "warmup must be"},
        {"1f1b:warmup=99999999999999999999", "warmup must be"},
        {"1f1b:", "unknown option"},
    };
    for (size_t i = 0; i < sizeof badparse / sizeof badparse[0]; i++) {
        pz_sched_spec before = spec_k(PZ_SCHED_GPIPE, 5), got = before;
        CHECK(pz_sched_parse(badparse[i].text, &got) == PZ_ERR_ARG, "parse '%s' accepted", badparse[i].text);
        CHECK(strstr(pz_last_error(), badparse[i].needle), "parse '%s': '%s'", badparse[i].text, pz_last_error());
        CHECK(memcmp(&got, &before, sizeof got) == 0, "parse '%s' wrote its output", badparse[i].text);
    }
    CHECK(strcmp(pz_sched_name(PZ_SCHED_1F1B), "1f1b") == 0 && strcmp(pz_sched_name(PZ_SCHED_GPIPE), "gpipe") == 0,
          "names");

    const struct { pz_sched_kind kind; int stage, S, m; const char *needle; } badargs[] = {
        {PZ_SCHED_1F1B, 0, 0, 4, "stages"},
        {PZ_SCHED_1F1B, 0, -3, 4, "stages"},
        {PZ_SCHED_1F1B, 0, PZ_SCHED_MAX_STAGES + 1, 4, "stages"},
        {PZ_SCHED_1F1B, 4, 4, 8, "stage 4"},
        {PZ_SCHED_1F1B, -1, 4, 8, "stage -1"},
        {PZ_SCHED_GPIPE, 0, 4, 0, "micro-batches"},
        {PZ_SCHED_GPIPE, 0, 4, PZ_SCHED_MAX_MICRO + 1, "micro-batches"},
        {(pz_sched_kind)77, 0, 4, 8, "kind"},
        {PZ_SCHED_GPIPE, 0, 4, 8, "not for gpipe"},   /* with extra warm-up, below */
        {PZ_SCHED_1F1B, 0, 4, 8, "out of range"},     /* extra warm-up -1, below */
    };
    const size_t nbad = sizeof badargs / sizeof badargs[0];
    for (size_t i = 0; i < nbad; i++) {
        pz_schedule st;
        memset(&st, 0xab, sizeof st);
        pz_sched_spec sp = spec_k(badargs[i].kind, i == nbad - 2 ? 1 : i == nbad - 1 ? -1 : 0);
        pz_status rc = pz_schedule_build(&st, &sp, badargs[i].stage, badargs[i].S, badargs[i].m);
        CHECK(rc == PZ_ERR_ARG, "bad args #%zu accepted", i);
        CHECK(strstr(pz_last_error(), badargs[i].needle), "bad args #%zu: '%s'", i, pz_last_error());
        CHECK(st.ins == NULL && st.n == 0, "bad args #%zu: not zeroed", i);
        pz_schedule_free(&st);
    }
    const pz_sched_spec f1b = spec_k(PZ_SCHED_1F1B, 0), gp = spec_k(PZ_SCHED_GPIPE, 0), f1b2 = spec_k(PZ_SCHED_1F1B, 2);
    CHECK(pz_schedule_print_table(stdout, &f1b, 0, 4) == PZ_ERR_ARG, "table with 0 stages");
    CHECK(pz_schedule_in_flight_bound(&f1b, 0, 4, 2) == 2, "1f1b bound capped at m");
    CHECK(pz_schedule_in_flight_bound(&f1b, 1, 4, 8) == 3, "1f1b bound");
    CHECK(pz_schedule_in_flight_bound(&gp, 3, 4, 8) == 8, "gpipe bound");
    CHECK(pz_schedule_in_flight_bound(&f1b2, 1, 4, 16) == 7, "1f1b:warmup=2 bound (2 downstream x 3 + 1)");
    CHECK(pz_schedule_in_flight_bound(&f1b2, 3, 4, 16) == 1, "1f1b:warmup=2 bound on the last stage");
    CHECK(pz_schedule_in_flight_bound(&f1b2, 0, 4, 8) == 8, "1f1b:warmup=2 bound capped at m");

    CHECK(pz_op_peer(PZ_OP_RECV_ACT, 2, 4) == 1 && pz_op_peer(PZ_OP_SEND_ACT, 2, 4) == 3 &&
              pz_op_peer(PZ_OP_RECV_GRAD, 2, 4) == 3 && pz_op_peer(PZ_OP_SEND_GRAD, 2, 4) == 1 &&
              pz_op_peer(PZ_OP_REDUCE_TIED, 0, 4) == 3 && pz_op_peer(PZ_OP_REDUCE_TIED, 3, 4) == 0 &&
              pz_op_peer(PZ_OP_FORWARD, 2, 4) == -1 && pz_op_peer(PZ_OP_OPTIM_STEP, 0, 4) == -1,
          "peers");
    printf("ok: api and argument errors\n");
}

/* Parses the printed table: returns the number of slot rows; fills per-stage
 * counts from the summary rows and counts F/B cells per column. */
static int parse_table(const char *text, int S, int *warm, int *steady, int *cool, int *peak, int *cells) {
    int rows = 0, in_grid = 0, in_summary = 0, seen = 0;
    const char *line = text;
    while (*line) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[1024];
        if (len >= sizeof buf) len = sizeof buf - 1;
        memcpy(buf, line, len);
        buf[len] = 0;
        if (strncmp(buf, "slot", 4) == 0) in_grid = 1;
        else if (strncmp(buf, "stage  warm-up", 14) == 0) in_summary = 1, in_grid = 0;
        else if (len == 0) in_grid = 0, in_summary = 0;
        else if (in_grid) {
            rows++;
            char *save = NULL, *tok = strtok_r(buf, " ", &save);  /* slot number */
            for (int s = 0; s < S && tok; s++) {
                tok = strtok_r(NULL, " ", &save);
                if (tok && (tok[0] == 'F' || tok[0] == 'B' || tok[0] == 'W')) cells[s]++;
            }
        } else if (in_summary) {
            int s, w, r, c, p, n;
            if (sscanf(buf, "%d %d %d %d %d %d", &s, &w, &r, &c, &p, &n) == 6 && s >= 0 && s < S) {
                warm[s] = w, steady[s] = r, cool[s] = c, peak[s] = p;
                seen++;
            }
        }
        line += len + (nl ? 1 : 0);
        if (!nl) break;
    }
    return seen == S ? rows : -1;
}

static void test_table(void) {
    const pz_sched_spec f1b = spec_k(PZ_SCHED_1F1B, 0), gp = spec_k(PZ_SCHED_GPIPE, 0);
    FILE *f = tmpfile();
    CHECK(f != NULL, "tmpfile");
    if (!f) return;
    CHECK(pz_schedule_print_table(f, &f1b, 4, 8) == PZ_OK, "print 1f1b: %s", pz_last_error());
    char *text = slurp(f);
    int warm[4] = {-1, -1, -1, -1}, steady[4], cool[4], peak[4], cells[4] = {0};
    int rows = parse_table(text, 4, warm, steady, cool, peak, cells);
    CHECK(rows == 22, "1f1b table: %d slot rows, want 2(m+S-1) = 22", rows);
    const int W[4] = {3, 2, 1, 0}, P[4] = {4, 3, 2, 1};
    for (int s = 0; s < 4; s++) {
        CHECK(warm[s] == W[s] && steady[s] == 8 - W[s] && cool[s] == W[s] && peak[s] == P[s],
              "1f1b table stage %d: warm-up %d steady %d cool-down %d peak %d", s, warm[s], steady[s], cool[s],
              peak[s]);
        CHECK(cells[s] == 16, "1f1b table stage %d: %d F/B cells, want 16", s, cells[s]);
    }
    CHECK(strstr(text, "3/11") != NULL, "bubble 3/11 missing");
    CHECK(strstr(text, "   0 F0  .   .   .") != NULL, "first row");
    if (failures) fputs(text, stderr);
    free(text);
    fclose(f);

    f = tmpfile();
    if (!f) return;
    CHECK(pz_schedule_print_table(f, &gp, 4, 8) == PZ_OK, "print gpipe");
    text = slurp(f);
    memset(cells, 0, sizeof cells);
    rows = parse_table(text, 4, warm, steady, cool, peak, cells);
    CHECK(rows == 22, "gpipe table: %d slot rows", rows);
    for (int s = 0; s < 4; s++)
        CHECK(warm[s] == 8 && steady[s] == 0 && cool[s] == 8 && peak[s] == 8 && cells[s] == 16,
              "gpipe table stage %d: %d %d %d %d cells %d", s, warm[s], steady[s], cool[s], peak[s], cells[s]);
    free(text);
    fclose(f);

    /* zb-h1: three slots per micro-batch, 3m + S - 1 rows */
    const pz_sched_spec zb = spec_k(PZ_SCHED_ZBH1, 0);
    f = tmpfile();
    if (!f) return;
    CHECK(pz_schedule_print_table(f, &zb, 4, 8) == PZ_OK, "print zb-h1: %s", pz_last_error());
    text = slurp(f);
    memset(cells, 0, sizeof cells);
    rows = parse_table(text, 4, warm, steady, cool, peak, cells);
    CHECK(rows == 27, "zb-h1 table: %d slot rows, want 3m+S-1 = 27", rows);
    for (int s = 0; s < 4; s++)
        CHECK(peak[s] == 4 && cells[s] == 24, "zb-h1 table stage %d: peak %d, %d F/B/W cells", s, peak[s], cells[s]);
    CHECK(strstr(text, "1/9 = 0.1111") != NULL && strstr(text, " W7") != NULL, "zb-h1 bubble 1/9 or W cells missing");
    if (failures) fputs(text, stderr);
    free(text);
    fclose(f);
    printf("ok: printed tables (S=4, m=8)\n");
}

/* `pipezip schedule`: argument errors exit 1 (messages go to stderr). */
static void test_cmd(void) {
    char a0[] = "--stages", a1[] = "4", a2[] = "--micro-batches", a3[] = "8", a4[] = "--schedule", a5[] = "zb";
    char b1[] = "0", b3[] = "0", st[] = "--stage", s9[] = "9", bogus[] = "--bogus", help[] = "--help";
    char *no_micro[] = {a0, a1};
    char *zero_stages[] = {a0, b1, a2, a3};
    char *zero_micro[] = {a0, a1, a2, b3};
    char *bad_sched[] = {a0, a1, a2, a3, a4, a5};
    char *bad_stage[] = {a0, a1, a2, a3, st, s9};
    char *missing_value[] = {a2, a3, a0};
    char *unknown[] = {bogus};
    fprintf(stderr, "(expected errors follow)\n");
    CHECK(pz_cmd_schedule(0, NULL) == 1, "no flags");
    CHECK(pz_cmd_schedule(2, no_micro) == 1, "no --micro-batches");
    CHECK(pz_cmd_schedule(4, zero_stages) == 1, "--stages 0");
    CHECK(pz_cmd_schedule(4, zero_micro) == 1, "--micro-batches 0");
    CHECK(pz_cmd_schedule(6, bad_sched) == 1, "--schedule zb");
    CHECK(pz_cmd_schedule(6, bad_stage) == 1, "--stage 9 of 4");
    CHECK(pz_cmd_schedule(3, missing_value) == 1, "--stages without value");
    CHECK(pz_cmd_schedule(1, unknown) == 1, "unknown flag");
    char *h[] = {help};
    CHECK(pz_cmd_schedule(1, h) == 0, "--help");
    printf("ok: command-line errors\n");
}

/* auto's list on stage s of S, built from 1f1b:warmup=K's p: on stages
 * past the first (S > 1) each SEND_GRAD j >= 1 is followed by W j-1, and
 * W m-1 goes right before OPTIM_STEP (after REDUCE_TIED) on every stage;
 * returns the number of instructions written to out. */
static int auto_expected(const pz_schedule *p, int s, int S, int m, pz_instr *out) {
    int n = 0;
    for (int k = 0; k < p->n; k++) {
        const pz_instr *in = &p->ins[k];
        if (S > 1 && in->op == PZ_OP_OPTIM_STEP) out[n++] = (pz_instr){PZ_OP_BACKWARD_WEIGHT, m - 1, 0};
        out[n++] = *in;
        if (S > 1 && s > 0 && in->op == PZ_OP_SEND_GRAD && in->micro >= 1)
            out[n++] = (pz_instr){PZ_OP_BACKWARD_WEIGHT, in->micro - 1, 0};
    }
    return n;
}

/* Whether slot `micro % peak` (the executor's) never holds two live
 * micro-batches: live from FORWARD to W where the list has one, else to B. */
static int slots_disjoint(const pz_schedule *a, int m) {
    const int peak = a->max_in_flight;
    int *owner = malloc((size_t)peak * sizeof *owner), *split = calloc((size_t)m, sizeof *split), ok = peak > 0;
    for (int k = 0; k < peak; k++) owner[k] = -1;
    for (int k = 0; k < a->n; k++)
        if (a->ins[k].op == PZ_OP_BACKWARD_WEIGHT) split[a->ins[k].micro] = 1;
    for (int k = 0; ok && k < a->n; k++) {
        const pz_instr *in = &a->ins[k];
        if (in->micro < 0) continue; /* OPTIM_STEP, REDUCE_TIED: no micro-batch, no slot */
        if (in->op == PZ_OP_FORWARD) {
            ok = owner[in->micro % peak] < 0;
            owner[in->micro % peak] = in->micro;
        } else if (in->op == (split[in->micro] ? PZ_OP_BACKWARD_WEIGHT : PZ_OP_BACKWARD)) {
            ok = owner[in->micro % peak] == in->micro;
            owner[in->micro % peak] = -1;
        }
    }
    free(owner);
    free(split);
    return ok;
}

/* --schedule auto (any K the runtime picks), S > 1: every stage splits its
 * last micro-batch's backward (W m-1 right before OPTIM_STEP, after
 * SEND_GRAD m-1 and REDUCE_TIED), and every stage but the first also defers
 * each other W by one backward (pz_sched_defers): one more slot there,
 * which pz_schedule_in_flight_bound counts and the executor's micro % peak
 * slots keep apart; deadlock-free in both models. */
static void test_auto_split(void) {
    int runs = 0;
    for (int K = 0; K <= 2; K++)
        for (int S = 1; S <= 8; S++)
            for (int m = 1; m <= 16; m++) {
                pz_sched_spec au = spec_k(PZ_SCHED_1F1B, K), plain = spec_k(PZ_SCHED_1F1B, K);
                au.warmup_auto = PZ_SCHED_NAMED_AUTO;
                CHECK(pz_sched_splits_last(&au, S) == (S > 1) && !pz_sched_splits_last(&plain, S),
                      "splits_last S=%d", S);
                pz_schedule *a = build_all(au, S, m), *p = build_all(plain, S, m);
                for (int s = 0; s < S; s++) {
                    const int defers = pz_sched_defers(&au, s, S);
                    CHECK(defers == (S > 1 && s > 0) && pz_sched_defers(&plain, s, S) == 0, "defers S=%d s=%d: %d", S,
                          s, defers);
                    pz_instr *want = malloc(((size_t)2 * p[s].n + 1) * sizeof *want);
                    const int n = auto_expected(&p[s], s, S, m, want);
                    int same = a[s].n == n;
                    for (int k = 0; same && k < n; k++)
                        same = a[s].ins[k].op == want[k].op && a[s].ins[k].micro == want[k].micro;
                    free(want);
                    const int bound = p[s].max_in_flight + defers < m ? p[s].max_in_flight + defers : m;
                    CHECK(same && a[s].max_in_flight == bound &&
                              bound == pz_schedule_in_flight_bound(&au, s, S, m) && slots_disjoint(&a[s], m),
                          "auto K=%d S=%d m=%d stage %d: not 1f1b's list with the W's deferred (peak %d, want %d)", K,
                          S, m, s, a[s].max_in_flight, bound);
                }
                FILE *null = fopen("/dev/null", "w");   /* the table runs the lists under rendezvous */
                CHECK(null && pz_schedule_print_table(null, &au, S, m) == PZ_OK &&
                          simulate_eager(a, S, m, 1, 2, 0) > 0 && simulate_eager(a, S, m, 1, 2, 3) > 0,
                      "auto K=%d S=%d m=%d: deadlock", K, S, m);
                if (null) fclose(null);
                free_all(a, S);
                free_all(p, S);
                runs++;
            }
    printf("ok: auto splits the backwards: %d (K, S, m) lists are 1f1b's with the W's deferred by one past stage 0, "
           "W(m-1) last, deadlock-free, slots apart\n", runs);
}

/* auto's half micro-batches (pz_sched_halves): a decision from the flags
 * alone, only for "auto" past one stage, one replica, an even batch and 2m
 * within the message tags */
static void test_auto_halves(void) {
    pz_sched_spec au = spec_k(PZ_SCHED_1F1B, 0), k1 = spec_k(PZ_SCHED_1F1B, 0), wa = spec_k(PZ_SCHED_1F1B, 0);
    au.warmup_auto = PZ_SCHED_NAMED_AUTO;
    wa.warmup_auto = 1;   /* 1f1b:warmup=auto, as named: whole micro-batches */
    CHECK(pz_sched_halves(&au, 2, 1, 4, 8) && pz_sched_halves(&au, 8, 1, 2, 32768), "auto S=2 B=4 m=8: halves");
    CHECK(!pz_sched_halves(&au, 1, 1, 4, 8), "one stage: no halves");
    CHECK(!pz_sched_halves(&au, 2, 2, 4, 8), "replicas: no halves");
    CHECK(!pz_sched_halves(&au, 2, 1, 3, 8) && !pz_sched_halves(&au, 2, 1, 1, 8), "odd batch: no halves");
    CHECK(!pz_sched_halves(&au, 2, 1, 4, 32769), "2m past the tags: no halves");
    CHECK(!pz_sched_halves(&k1, 2, 1, 4, 8) && !pz_sched_halves(&wa, 2, 1, 4, 8), "named schedules: no halves");
    pz_sched_spec gp = pz_sched_plain(PZ_SCHED_GPIPE), zb = pz_sched_plain(PZ_SCHED_ZBH1);
    CHECK(!pz_sched_halves(&gp, 2, 1, 4, 8) && !pz_sched_halves(&zb, 2, 1, 4, 8), "gpipe, zb-h1: no halves");
    printf("ok: auto halves the micro-batches only for auto, S > 1, one replica, an even batch\n");
}

int main(void) {
    test_api();
    test_shapes();
    test_all_schedules();
    test_other_times();
    test_link_delay();
    test_link_rtt();
    test_zb_idle();
    test_auto_split();
    test_auto_halves();
    test_checker_catches_defects();
    test_table();
    test_cmd();
    return check_summary("test_schedule");
}
