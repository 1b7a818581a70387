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
#include "tests/slurp.h"
#include "tests/schedules/report.h"

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
    int *last_f = malloc((size_t)V * sizeof *last_f), *last_b = malloc((size_t)V * sizeof *last_b);
    for (int c = 0; c < V; c++) last_f[c] = last_b[c] = -1;
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
        /* FIFO per chunk: the runtime's slot micro % bound relies on it */
        int *prev = in->op == PZ_OP_FORWARD ? &last_f[in->chunk] : in->op == PZ_OP_BACKWARD ? &last_b[in->chunk] : NULL;
        if (prev && in->micro <= *prev) {
            rc = bad(rep, "rank %d #%d: %s of chunk %d: micro %d after %d", r, k, pz_op_name(in->op), in->chunk,
                     in->micro, *prev);
            break;
        }
        if (prev) *prev = in->micro;
    }
    free(last_f);
    free(last_b);
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
                /* the library's own simulators (pipezip schedule) agree */
                FILE *devnull = fopen("/dev/null", "w");
                CHECK(devnull && pz_schedule_print_table(devnull, &st[0].spec, S, m) == PZ_OK,
                      "v=%d S=%d m=%d: print_table: %s", V, S, m, pz_last_error());
                if (devnull) fclose(devnull);
                free_all(st, S);
                runs++;
            }
    printf("ok: %d (V, S, m) interleaved combinations proven deadlock-free, paired, within memory bounds, "
           "makespan (mV+S-1)(f+b)\n", runs);
}

/* Receives placed early cost receive buffers: the most messages a rank has
 * received and not yet used (activations before their forward, gradients
 * before their backward). */
static int max_pending(const pz_schedule *st) {
    int pending = 0, peak = 0;
    const long V = st->nchunks;
    char *got = calloc((size_t)st->nmicro * (size_t)V * 2, 1);
    for (int k = 0; k < st->n; k++) {
        const pz_instr *in = &st->ins[k];
        const size_t key = ((size_t)in->micro * V + (size_t)in->chunk) * 2;
        if (in->op == PZ_OP_RECV_ACT || in->op == PZ_OP_RECV_GRAD) {
            got[key + (in->op == PZ_OP_RECV_GRAD)] = 1;
            if (++pending > peak) peak = pending;
        } else if ((in->op == PZ_OP_FORWARD && got[key]) || (in->op == PZ_OP_BACKWARD && got[key + 1])) {
            got[key + (in->op == PZ_OP_BACKWARD)] = 0;
            pending--;
        }
    }
    free(got);
    return peak;
}

/* What was measured (not proven): max(4, S/2) receive buffers suffice. */
static int pending_bound(int S) {
    return S / 2 > 4 ? S / 2 : 4;
}

/* Larger pipelines and the receive buffers the early receives need. */
static void test_larger(void) {
    const int sizes[][3] = {{16, 64, 2}, {8, 32, 8}, {12, 24, 3}, {5, 100, 4}, {2, 64, 16}};
    int most = 0;
    for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
        const int S = sizes[z][0], m = sizes[z][1], V = sizes[z][2];
        pz_schedule *st = build_all(ispec(V), S, m);
        report rep = {""};
        for (int r = 0; r < S; r++) {
            CHECK(!check_static(&st[r], r, S, m, V, &rep), "S=%d m=%d v=%d: %s", S, m, V, rep.msg);
            const int pend = max_pending(&st[r]);
            CHECK(pend <= pending_bound(S), "S=%d m=%d v=%d rank %d: %d received messages not yet used", S, m, V, r,
                  pend);
            if (pend > most) most = pend;
        }
        long ex = run(st, S, m, V, 0, 1, 2, &rep);
        CHECK(ex == ((long)m * V + S - 1) * 3, "S=%d m=%d v=%d: executor makespan %ld: %s", S, m, V, ex, rep.msg);
        long rz = run(st, S, m, V, 1, 1, 1, &rep);
        CHECK(rz == ((long)m * V + S - 1) * 2, "S=%d m=%d v=%d: rendezvous makespan %ld: %s", S, m, V, rz, rep.msg);
        CHECK(run(st, S, m, V, 1, 3, 1, &rep) > 0, "S=%d m=%d v=%d f=3 b=1: %s", S, m, V, rep.msg);
        free_all(st, S);
    }
    for (int V = 2; V <= 4; V++)
        for (int S = 1; S <= 8; S++)
            for (int m = S; m <= 16; m += S) {
                pz_schedule *st = build_all(ispec(V), S, m);
                for (int r = 0; r < S; r++) {
                    const int pend = max_pending(&st[r]);
                    CHECK(pend <= pending_bound(S), "S=%d m=%d v=%d rank %d: %d received messages not yet used", S,
                          m, V, r, pend);
                    if (pend > most) most = pend;
                }
                free_all(st, S);
            }
    printf("ok: larger pipelines; at most %d messages received ahead of their compute on a rank (<= max(4, S/2))\n",
           most);
}

/* V = 1 is plain 1F1B, list for list. */
static void test_v1_is_1f1b(void) {
    const pz_sched_spec f1b = {PZ_SCHED_1F1B, 0, 0, 0}, one = ispec(1);
    for (int S = 1; S <= 8; S++)
        for (int m = 1; m <= 16; m++)
            for (int r = 0; r < S; r++) {
                pz_schedule a, b;
                CHECK(pz_schedule_build(&a, &f1b, r, S, m) == PZ_OK && pz_schedule_build(&b, &one, r, S, m) == PZ_OK,
                      "build S=%d m=%d: %s", S, m, pz_last_error());
                CHECK(a.n == b.n && memcmp(a.ins, b.ins, (size_t)a.n * sizeof *a.ins) == 0 &&
                          a.max_in_flight == b.max_in_flight && b.nchunks == 1 && a.warmup == b.warmup,
                      "S=%d m=%d rank %d: interleaved:v=1 differs from 1f1b", S, m, r);
                pz_schedule_free(&a);
                pz_schedule_free(&b);
            }
    printf("ok: interleaved:v=1 is 1f1b, list for list (S = 1..8, m = 1..16)\n");
}

/* Per-chunk slots: micro % pz_schedule_chunk_peak never collides. */
static void test_chunk_slots(void) {
    int checked = 0;
    for (int V = 1; V <= 4; V++)
        for (int S = 1; S <= 8; S++)
            for (int m = S; m <= 16; m += S) {
                pz_schedule *st = build_all(ispec(V), S, m);
                for (int r = 0; r < S; r++) {
                    int sum = 0;
                    for (int c = 0; c < V; c++) {
                        const int peak = pz_schedule_chunk_peak(&st[r], c);
                        CHECK(peak >= 1 && peak <= m, "v=%d S=%d m=%d rank %d chunk %d: peak %d", V, S, m, r, c, peak);
                        if (peak < 1) continue;
                        sum += peak;
                        int *slot = malloc((size_t)peak * sizeof *slot);   /* live micro per slot, -1 free */
                        for (int q = 0; q < peak; q++) slot[q] = -1;
                        for (int k = 0; k < st[r].n; k++) {
                            const pz_instr *in = &st[r].ins[k];
                            if (in->chunk != c || in->micro < 0) continue;
                            int *cell = &slot[in->micro % peak];
                            if (in->op == PZ_OP_FORWARD) {
                                CHECK(*cell < 0, "v=%d S=%d m=%d rank %d chunk %d: micro %d's slot holds micro %d", V,
                                      S, m, r, c, in->micro, *cell);
                                *cell = in->micro;
                            } else if (in->op == PZ_OP_BACKWARD) {
                                CHECK(*cell == in->micro, "chunk slot lost micro %d", in->micro);
                                *cell = -1;
                            }
                        }
                        free(slot);
                        checked++;
                    }
                    CHECK(sum >= st[r].max_in_flight, "v=%d S=%d m=%d rank %d: chunk peaks sum to %d < %d", V, S, m, r,
                          sum, st[r].max_in_flight);
                    CHECK(pz_schedule_chunk_peak(&st[r], V) == 0 && pz_schedule_chunk_peak(&st[r], -1) == 0,
                          "chunk out of range");
                }
                free_all(st, S);
            }
    printf("ok: %d (rank, chunk) slot rings of micro %% pz_schedule_chunk_peak never collide\n", checked);
}

/* pz_instr_peer against the checker's own placement. */
static void test_peers(void) {
    for (int V = 1; V <= 4; V++)
        for (int S = 1; S <= 6; S++) {
            const int m = 2 * S;
            pz_schedule *st = build_all(ispec(V), S, m);
            for (int r = 0; r < S; r++)
                for (int k = 0; k < st[r].n; k++) {
                    const pz_instr *in = &st[r].ins[k];
                    const pz_peer p = pz_instr_peer(&st[r], in);
                    const long g = (long)in->chunk * S + r;
                    if (is_comm(in->op)) {
                        const long og = other_end(in->op, g);
                        const long b = in->op == PZ_OP_SEND_ACT || in->op == PZ_OP_RECV_GRAD ? g : g - 1;
                        CHECK(p.rank == og % S && p.chunk == og / S && p.boundary == b,
                              "v=%d S=%d rank %d #%d %s chunk %d: peer rank %d chunk %d boundary %d, want %ld %ld %ld",
                              V, S, r, k, pz_op_name(in->op), in->chunk, p.rank, p.chunk, p.boundary, og % S, og / S,
                              b);
                        if (V == 1) CHECK(p.rank == pz_op_peer(in->op, r, S), "v=1: pz_op_peer differs");
                    } else if (in->op == PZ_OP_REDUCE_TIED) {
                        CHECK(p.rank == (r == 0 ? S - 1 : 0) && p.chunk == (r == 0 ? V - 1 : 0) && p.boundary == -1,
                              "v=%d S=%d rank %d: REDUCE_TIED peer %d chunk %d", V, S, r, p.rank, p.chunk);
                    } else {
                        CHECK(p.rank == -1 && p.chunk == -1 && p.boundary == -1, "%s has a peer",
                              pz_op_name(in->op));
                    }
                }
            free_all(st, S);
        }
    /* the non-interleaved kinds: the same peers as pz_op_peer, chunk 0 */
    const pz_sched_spec gp = {PZ_SCHED_GPIPE, 0, 0, 0};
    pz_schedule s;
    CHECK(pz_schedule_build(&s, &gp, 1, 3, 2) == PZ_OK, "build gpipe");
    for (int k = 0; k < s.n; k++) {
        const pz_peer p = pz_instr_peer(&s, &s.ins[k]);
        CHECK(p.rank == pz_op_peer(s.ins[k].op, 1, 3) && (p.rank < 0 || p.chunk == 0), "gpipe #%d peer %d", k, p.rank);
    }
    pz_schedule_free(&s);
    printf("ok: pz_instr_peer: peer rank, chunk and boundary of every instruction\n");
}

static void test_api(void) {
    pz_sched_spec sp;
    char name[64];
    CHECK(pz_sched_parse("interleaved:v=3", &sp) == PZ_OK && sp.kind == PZ_SCHED_INTERLEAVED &&
              sp.virtual_stages == 3 && sp.warmup_extra == 0 && !sp.warmup_auto, "parse interleaved:v=3");
    pz_sched_spec_format(&sp, name, sizeof name);
    CHECK(strcmp(name, "interleaved:v=3") == 0, "format '%s'", name);
    CHECK(pz_sched_parse("interleaved", &sp) == PZ_OK && sp.kind == PZ_SCHED_INTERLEAVED && sp.virtual_stages == 0,
          "parse interleaved");
    CHECK(strcmp(pz_sched_name(PZ_SCHED_INTERLEAVED), "interleaved") == 0, "name");
    const struct { const char *text, *needle; } badparse[] = {
        {"interleaved:v=0", "v must be"},  {"interleaved:v=65", "v must be"}, {"interleaved:v=", "v must be"},
        {"interleaved:v=2x", "v must be"}, {"interleaved:v=+2", "v must be"}, {"interleaved:w=2", "unknown option"},
        {"interleaved:", "unknown option"}, {"1f1b:v=2", "unknown option"},  {"interleave", "unknown schedule"},
    };
    for (size_t i = 0; i < sizeof badparse / sizeof badparse[0]; i++) {
        pz_sched_spec before = ispec(7), got = before;
        CHECK(pz_sched_parse(badparse[i].text, &got) == PZ_ERR_ARG, "parse '%s' accepted", badparse[i].text);
        CHECK(strstr(pz_last_error(), badparse[i].needle), "parse '%s': '%s'", badparse[i].text, pz_last_error());
        CHECK(memcmp(&got, &before, sizeof got) == 0, "parse '%s' wrote its output", badparse[i].text);
    }
    const struct { pz_sched_spec sp; int S, m; const char *needle; } badargs[] = {
        {{PZ_SCHED_INTERLEAVED, 0, 0, 0}, 4, 8, "needs the model chunks"},
        {{PZ_SCHED_INTERLEAVED, 0, 0, 2}, 4, 6, "multiple of the stages"},
        {{PZ_SCHED_INTERLEAVED, 0, 0, PZ_SCHED_MAX_VIRTUAL + 1}, 4, 8, "out of range"},
        {{PZ_SCHED_INTERLEAVED, 0, 0, -1}, 4, 8, "out of range"},
        {{PZ_SCHED_INTERLEAVED, 0, 0, 64}, 4, PZ_SCHED_MAX_MICRO / 32, "more than"},
        {{PZ_SCHED_INTERLEAVED, 0, 0, 2}, 4096, 4096, "more than"},
        {{PZ_SCHED_INTERLEAVED, 1, 0, 2}, 4, 8, "not for interleaved"},
        {{PZ_SCHED_1F1B, 0, 0, 2}, 4, 8, "need the interleaved schedule"},
        {{PZ_SCHED_ZBH1, 0, 0, 3}, 4, 8, "need the interleaved schedule"},
    };
    for (size_t i = 0; i < sizeof badargs / sizeof badargs[0]; i++) {
        pz_schedule st;
        memset(&st, 0xab, sizeof st);
        CHECK(pz_schedule_build(&st, &badargs[i].sp, 0, badargs[i].S, badargs[i].m) == PZ_ERR_ARG,
              "bad args #%zu accepted", i);
        CHECK(strstr(pz_last_error(), badargs[i].needle), "bad args #%zu: '%s'", i, pz_last_error());
        CHECK(st.ins == NULL && st.n == 0, "bad args #%zu: not zeroed", i);
        pz_schedule_free(&st);
    }
    /* V = 1 needs no multiple; the bound in chunk activations */
    pz_schedule st;
    const pz_sched_spec v1 = ispec(1), v2 = ispec(2), v0 = ispec(0);
    CHECK(pz_schedule_build(&st, &v1, 0, 4, 6) == PZ_OK, "v=1 with m = 6, S = 4: %s", pz_last_error());
    pz_schedule_free(&st);
    CHECK(pz_schedule_in_flight_bound(&v2, 0, 4, 8) == 11 && pz_schedule_in_flight_bound(&v2, 3, 4, 8) == 5 &&
              pz_schedule_in_flight_bound(&v2, 0, 4, 4) == 8 && pz_schedule_in_flight_bound(&v0, 0, 4, 8) == 0,
          "interleaved bounds");
    printf("ok: interleaved parse, format and argument errors\n");
}

/* Copies the lists so that a test may corrupt them. */
static pz_schedule *clone_all(const pz_schedule *st, int S) {
    pz_schedule *c = calloc((size_t)S, sizeof *c);
    for (int s = 0; s < S; s++) {
        c[s] = st[s];
        c[s].ins = malloc((size_t)st[s].n * sizeof *c[s].ins);
        memcpy(c[s].ins, st[s].ins, (size_t)st[s].n * sizeof *c[s].ins);
    }
    return c;
}

static void free_clone(pz_schedule *c, int S) {
    for (int s = 0; s < S; s++) free(c[s].ins);
    free(c);
}

/* Each kind of defect makes the checker fail, and the neighbour rule that
 * is safe for 1F1B (receive right before the forward) deadlocks the ring. */
static void test_checker_catches_defects(void) {
    const int S = 4, m = 8, V = 2;
    pz_schedule *good = build_all(ispec(V), S, m);
    report rep = {""};

    /* every rank receives each activation right before the forward that uses
     * it: fine without rendezvous, but the ring's sends then wait for each other */
    pz_schedule *c = clone_all(good, S);
    for (int r = 0; r < S; r++) {
        pz_instr *in = c[r].ins;
        for (int k = 0; k < c[r].n; k++) {
            if (in[k].op != PZ_OP_FORWARD) continue;
            int j = k - 1;
            while (j >= 0 && !(in[j].op == PZ_OP_RECV_ACT && in[j].micro == in[k].micro && in[j].chunk == in[k].chunk)) j--;
            if (j < 0) continue;
            pz_instr t = in[j];
            memmove(&in[j], &in[j + 1], (size_t)(k - 1 - j) * sizeof *in);
            in[k - 1] = t;
        }
    }
    CHECK(run(c, S, m, V, 0, 1, 2, &rep) > 0, "lazy receives, executor: %s", rep.msg);
    long rz = run(c, S, m, V, 1, 1, 1, &rep);
    CHECK(rz < 0 && strstr(rep.msg, "deadlock"), "lazy receives under rendezvous: %ld '%s'", rz, rep.msg);
    if (rz < 0) printf("ok: receives right before their forward deadlock the ring: %s\n", rep.msg);
    free_clone(c, S);

    /* a receive naming the wrong chunk: never meets its send */
    c = clone_all(good, S);
    for (int k = 0; k < c[2].n; k++)
        if (c[2].ins[k].op == PZ_OP_RECV_ACT && c[2].ins[k].chunk == 1) {
            c[2].ins[k].chunk = 0;
            break;
        }
    CHECK(check_static(&c[2], 2, S, m, V, &rep) != 0, "a receive of the wrong chunk passed the static checks");
    CHECK(run(c, S, m, V, 1, 1, 1, &rep) < 0, "a receive of the wrong chunk passed rendezvous");
    free_clone(c, S);

    /* two forwards swapped on one rank: the lists still pair, the data order does not */
    c = clone_all(good, S);
    {
        int a = -1, b = -1;
        for (int k = 0; k < c[1].n; k++)
            if (c[1].ins[k].op == PZ_OP_FORWARD && c[1].ins[k].micro == 0) *(a < 0 ? &a : &b) = k;
        /* forward of chunk 0 and of chunk 1 of micro 0 exchange places */
        pz_instr t = c[1].ins[a];
        c[1].ins[a] = c[1].ins[b];
        c[1].ins[b] = t;
    }
    CHECK(check_static(&c[1], 1, S, m, V, &rep) != 0 || run(c, S, m, V, 1, 1, 1, &rep) < 0,
          "chunks forwarded out of order passed");
    free_clone(c, S);

    /* one more warm-up forward than the bound allows */
    c = clone_all(good, S);
    {
        pz_instr *in = c[3].ins;
        int kb = -1, kf = -1;
        for (int k = 0; k < c[3].n && kf < 0; k++) {
            if (in[k].op == PZ_OP_BACKWARD && kb < 0) kb = k;
            if (in[k].op == PZ_OP_FORWARD && kb >= 0) kf = k;
        }
        pz_instr f = in[kf];   /* the first forward after the first backward moves before it */
        memmove(&in[kb + 1], &in[kb], (size_t)(kf - kb) * sizeof *in);
        in[kb] = f;
    }
    CHECK(check_static(&c[3], 3, S, m, V, &rep) != 0 && strstr(rep.msg, "peak"), "extra activation: '%s'", rep.msg);
    free_clone(c, S);

    /* REDUCE_TIED on a middle rank */
    c = clone_all(good, S);
    c[1].ins[c[1].n - 1].op = PZ_OP_REDUCE_TIED;
    CHECK(check_static(&c[1], 1, S, m, V, &rep) != 0 && strstr(rep.msg, "REDUCE_TIED"), "REDUCE_TIED on rank 1");
    free_clone(c, S);
    free_all(good, S);
    printf("ok: the checker rejects wrong chunks, out-of-order chunks, extra activations, misplaced REDUCE_TIED\n");
}

static void test_table(void) {
    const pz_sched_spec sp = ispec(2);
    FILE *f = tmpfile();
    CHECK(f != NULL, "tmpfile");
    if (!f) return;
    CHECK(pz_schedule_print_table(f, &sp, 4, 8) == PZ_OK, "print: %s", pz_last_error());
    char *text = slurp(f);
    int rows = 0, cells = 0, in_grid = 0;
    for (const char *line = text; *line;) {
        const char *nl = strchr(line, '\n');
        const size_t len = nl ? (size_t)(nl - line) : strlen(line);
        if (strncmp(line, "slot", 4) == 0) in_grid = 1;
        else if (len == 0) in_grid = 0;
        else if (in_grid) {
            rows++;
            for (size_t i = 1; i < len; i++)
                if ((line[i] == 'F' || line[i] == 'B') && line[i - 1] == ' ') cells++;
        }
        line += len + (nl ? 1 : 0);
    }
    CHECK(rows == 2 * (8 * 2 + 3), "table: %d slot rows, want 2(mV+S-1) = 38", rows);
    CHECK(cells == 4 * 2 * 8 * 2, "table: %d F/B cells, want 2mVS = 128", cells);
    CHECK(strstr(text, "3/19 = 0.1579 of stage time simulated; (S-1)/(mV+S-1) = 3/19") != NULL, "bubble line");
    CHECK(strstr(text, "   0 F0.0 .    .    .") != NULL && strstr(text, "B7.0") != NULL, "cells");
    if (failures) fputs(text, stderr);
    free(text);
    fclose(f);

    /* `pipezip schedule` flags */
    char a0[] = "--stages", a1[] = "4", a2[] = "--micro-batches", a3[] = "8", a4[] = "--schedule",
         a5[] = "interleaved", a6[] = "--virtual-stages", a7[] = "2", a8[] = "3", st[] = "--stage", s1[] = "1",
         f1b[] = "1f1b", v3[] = "interleaved:v=3", six[] = "6";
    char *list[] = {a0, a1, a2, a3, a4, a5, a6, a7, st, s1};
    char *no_v[] = {a0, a1, a2, a3, a4, a5};
    char *clash[] = {a0, a1, a2, a3, a4, v3, a6, a7};
    char *same[] = {a0, a1, a2, a3, a4, v3, a6, a8, st, s1};
    char *not_il[] = {a0, a1, a2, a3, a4, f1b, a6, a7};
    char *not_mult[] = {a0, a1, a2, six, a4, a5, a6, a7};
    fprintf(stderr, "(expected errors follow)\n");
    CHECK(pz_cmd_schedule(10, list) == 0, "interleaved --virtual-stages 2 --stage 1");
    CHECK(pz_cmd_schedule(10, same) == 0, "interleaved:v=3 --virtual-stages 3");
    CHECK(pz_cmd_schedule(6, no_v) == 1, "interleaved without V");
    CHECK(pz_cmd_schedule(8, clash) == 1, "v=3 and --virtual-stages 2");
    CHECK(pz_cmd_schedule(8, not_il) == 1, "--virtual-stages with 1f1b");
    CHECK(pz_cmd_schedule(8, not_mult) == 1, "m = 6 with S = 4");
    printf("ok: printed table (S=4, m=8, v=2) and pipezip schedule's flags\n");
}

int main(void) {
    test_api();
    test_v1_is_1f1b();
    test_peers();
    test_chunk_slots();
    test_all();
    test_larger();
    test_checker_catches_defects();
    test_table();
    return check_summary("test_schedule_interleaved");
}
