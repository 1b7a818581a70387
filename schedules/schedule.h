/* schedule.h: pipeline schedules as data.
 *
 * A schedule is, for stage s of S stages and m micro-batches, an ordered list
 * of instructions {op, micro, chunk}. The executor of stage s runs its list in
 * order; nothing else decides what a stage does or when.
 *
 * Ops and their peers (pz_op_peer):
 *   RECV_ACT   receive micro's input activation from stage s-1  (never on s = 0)
 *   FORWARD    forward of micro; its activations are now held
 *   SEND_ACT   send micro's output activation to stage s+1      (never on s = S-1)
 *   RECV_GRAD  receive micro's output gradient from stage s+1   (never on s = S-1)
 *   BACKWARD   backward of micro (accumulates parameter gradients); frees them
 *              (zb-h1: the input gradient only; the activations stay for W)
 *   BACKWARD_WEIGHT  zb-h1 and auto (pz_sched_defers, pz_sched_splits_last):
 *              micro's weight gradients (from the output gradients BACKWARD
 *              saved); frees its activations. Where a list has it for a
 *              micro, that micro's BACKWARD is the input half only
 *   SEND_GRAD  send micro's input gradient to stage s-1          (never on s = 0)
 * and, once per step, after the stage's last backward:
 *   REDUCE_TIED  first and last stage exchange and sum their copies of the tied
 *                embedding gradient (only on those two stages, only when S > 1;
 *                with S = 1 the two copies are one buffer)
 *   (auto: BACKWARD_WEIGHT of the last micro-batch, pz_sched_splits_last)
 *   OPTIM_STEP   the optimizer step; always the last instruction.
 * micro is -1 for the two end-of-step ops.
 *
 * Ordering contract. The list is deadlock-free by itself under the strictest
 * model: every send blocks until the peer has reached the matching receive
 * (rendezvous), every receive blocks until the matching send arrives, and each
 * stage executes strictly in list order (tests/schedules/test_schedule.c simulates all
 * stages together and proves this, with the message pairing and the memory
 * bound, for S = 1..8, m = 1..16). Each (kind, micro) message crosses an edge
 * exactly once per step, so a tag of (step, micro, direction) is unambiguous
 * (interleaved: (kind, micro, boundary), see pz_instr_peer).
 * An executor may relax the order and stays deadlock-free: sends non-blocking,
 * receives posted at their position or earlier (as soon as a buffer is free),
 * and a receive waited for no later than the FORWARD/BACKWARD that consumes it.
 * Such an executor should wait at the consumer, not at the RECV itself: in the
 * 1F1B steady state the list puts RECV_GRAD(j) before SEND_ACT(W+j) (one side
 * of each Megatron "combined" exchange has to receive first for the strict
 * model to be deadlock-free), and blocking there would hold that send back by
 * one transfer time.
 *
 * 1F1B (non-interleaved, PipeDream-flush, in Megatron's order). Stage s has
 * W = min(S-s-1, m) warm-up forwards, R = m - W steady steps and W cool-down
 * backwards:
 *   warm-up  i < W:  RECV_ACT i, FORWARD i, SEND_ACT i
 *   steady   j < R:  RECV_ACT W+j, FORWARD W+j, RECV_GRAD j, SEND_ACT W+j,
 *                    BACKWARD j, SEND_GRAD j
 *   cool-down j >= R: RECV_GRAD j, BACKWARD j, SEND_GRAD j
 * Backwards run in micro-batch order (FIFO). Peak activations held:
 * min(S-s, m). GPipe: all m forwards (RECV_ACT, FORWARD, SEND_ACT), then all m
 * backwards in micro-batch order; peak m. Both have the bubble
 * (S-1)/(m+S-1) of wall time with equal stage times and free communication.
 *
 * 1F1B with extra warm-up (1f1b:warmup=K). Stage s warms up with
 * W_s = min((S-s-1)(1+K), m) forwards and holds up to min(W_s+1, m)
 * activations. A gradient then has K more micro-batches of compute, per
 * downstream stage, to come back before the stage needs it: what a link with
 * a long round trip (slow or distant) needs. The list is the same shape; the
 * receive of gradient j sits right before SEND_ACT W_{s+1}+j+1 (where the
 * next stage, which warms up with W_{s+1}, sends it), so the strict model
 * stays deadlock-free. Under rendezvous the early receives cost slots; with
 * non-blocking sends (the executor) the bubble is (S-1)/(m+S-1) again with
 * free communication, and with a link delay d the smallest K of
 * pz_sched_auto_warmup brings the step back to the compute bound plus the
 * fill and drain over the links (both proven in test_schedule.c).
 *
 * ZB-H1 (zero-bubble H1, Qi et al., ICLR 2024). BACKWARD splits into B, the
 * input gradient (on the critical path: the upstream stage waits for it),
 * and W, the weight gradients (BACKWARD_WEIGHT), which nothing waits for.
 * The list is 1F1B's, B for BACKWARD, with stage s holding back up to s W's:
 * after each B, W's of the oldest micro-batches run until at most s are
 * pending, the rest after the last B. Every stage then holds at most
 * min(S, m) activations (1F1B's first stage: the later ones trade their
 * smaller 1F1B memory for the deferred W's), and with equal F, B and W the
 * makespan is m(F+B+W) + (S-1)(F+B-W) against 1F1B's (m+S-1)(F+B+W): the
 * bubble falls from (S-1)(F+B+W) to (S-1)(F+B-W) (proven in
 * test_schedule.c). The communication is 1F1B's, so it is deadlock-free
 * under rendezvous like 1F1B.
 *
 * Interleaved 1F1B (Megatron's, Narayanan et al. 2021; "interleaved:v=V").
 * The model is cut into S*V chunks; rank r holds the global chunks r, r+S,
 * r+2S, ..., i.e. its local chunk c is global chunk g = c*S + r, and the
 * activation of global chunk g goes to g+1: rank r+1's chunk c, or, from rank
 * S-1, rank 0's chunk c+1 (the pipeline is a ring; gradients go back the same
 * way). m must be a multiple of S when V > 1. A rank runs m*V "virtual"
 * micro-batches: groups of S micro-batches pass through its chunk 0, then its
 * chunk 1, ...; virtual forward k is micro (k / SV)*S + k % S of chunk
 * (k % SV) / S, virtual backward k the same micro of chunk V-1-(k % SV)/S.
 * Rank r warms up with W_r = min(2(S-r-1) + (V-1)S, mV) forwards (V = 1:
 * min(S-r-1, m), plain 1F1B), then alternates forward W_r+k and backward k,
 * then cools down with W_r backwards. Peak chunk activations held on rank r:
 * min(W_r + 1, mV), each 1/V of the rank's layers. Within one chunk,
 * forwards and backwards both run in micro-batch order (FIFO per chunk).
 * With per-chunk forward f and backward b (f = F/V, b = B/V of a whole
 * stage's F, B) and free communication, the executor's makespan is
 * (mV + S - 1)(f + b) = m(F+B) + (S-1)(F+B)/V: the bubble is 1/V of 1F1B's,
 * (S-1)/(mV) of the ideal time (tests/schedules/test_schedule_interleaved.c
 * proves it for S = 1..8, V = 1..4, m = S, 2S, ... <= 16 and f:b = 1:1, 1:2,
 * 2:1, 2:3, 1:3, and under rendezvous for f = b).
 * Communication order. The ring makes the neighbour rule of 1F1B unsafe
 * under rendezvous (in the warm-up all S ranks would send round the ring at
 * once), so a rank's list comes from a reference run of all ranks' computes
 * in the order above (one time unit per chunk compute, each starting once
 * its input exists, free communication): every message is placed, in both
 * its sender's and its receiver's list, at the instant its sender made it
 * (right after the producing compute; a receive may so come well before
 * the forward or backward that uses it, never after), and the messages of one
 * instant in one order common to all ranks (boundary, direction, micro). The
 * reference run is then itself an execution of the lists in which each
 * send meets its receive at once, so they are deadlock-free under
 * rendezvous for any compute times (and with non-blocking sends); building
 * one rank's list costs O(S m V), limited to PZ_SCHED_MAX_INTERLEAVED. V = 1
 * is built as plain 1F1B (the same lists). With S = 1 there are no sends:
 * chunk c+1 takes chunk c's output (and chunk c its gradient) in memory.
 * REDUCE_TIED and OPTIM_STEP stay once per step: the tied embedding lives in
 * rank 0's chunk 0 and rank S-1's chunk V-1. The peer rank and chunk of every
 * communication instruction, and the model boundary its message crosses, come
 * from pz_instr_peer; a tag of (step, micro, boundary, direction) is then
 * unambiguous (each crosses exactly once per step).
 *
 * Extending. pz_sched_kind is an open enum; zero-bubble schedules split
 * BACKWARD into an input-gradient op (what BACKWARD is here) and a deferred
 * weight-gradient op appended to pz_op. Code
 * that switches on pz_op or pz_sched_kind must keep a default branch. */
#ifndef PZ_SCHEDULE_H
#define PZ_SCHEDULE_H

#include <stddef.h>
#include <stdio.h>

#include "base/status.h"

typedef enum {
    PZ_SCHED_1F1B,   /* non-interleaved 1F1B / PipeDream-flush */
    PZ_SCHED_GPIPE,  /* fill-drain: all forwards, then all backwards */
    PZ_SCHED_ZBH1,   /* zero-bubble H1: 1F1B with the weight gradients deferred */
    PZ_SCHED_INTERLEAVED, /* interleaved 1F1B: V model chunks per rank */
} pz_sched_kind;

typedef enum {
    PZ_OP_RECV_ACT,
    PZ_OP_FORWARD,
    PZ_OP_SEND_ACT,
    PZ_OP_RECV_GRAD,
    PZ_OP_BACKWARD,
    PZ_OP_SEND_GRAD,
    PZ_OP_REDUCE_TIED,
    PZ_OP_OPTIM_STEP,
    PZ_OP_BACKWARD_WEIGHT, /* zero-bubble W: micro's weight gradients; frees its activations */
} pz_op;

/* A schedule as the user names it: "1f1b", "1f1b:warmup=K", "1f1b:warmup=auto",
 * "zb-h1", "gpipe", "interleaved:v=V" or "interleaved" (V given apart, e.g.
 * by `pipezip schedule --virtual-stages V`, which sets virtual_stages). warmup=K adds K extra warm-up forwards per downstream stage:
 * stage s warms up with W_s = min(m, (S-s-1)(1+K)) forwards instead of
 * min(m, S-s-1), so W_s+1 micro-batches are in flight and a gradient may take
 * K more micro-batches' compute to come back (a slow or distant link; the
 * Eager-1F1B idea, Zhuang et al. 2023, with a tunable depth). K = 0 is plain
 * 1F1B. warmup=auto is resolved by the runtime, which measures the compute
 * per micro-batch and the link's time per message during the first step and
 * then sets K (pz_sched_auto_warmup); built as is, auto means K = 0. */
typedef struct {
    pz_sched_kind kind;
    int warmup_extra;   /* K >= 0; 1F1B only */
    int warmup_auto;    /* warmup=auto: the runtime chooses warmup_extra; 2 for
                           "auto" (train's default), whose choice the runtime
                           reports (plain 1f1b when K = 0): PZ_SCHED_NAMED_AUTO */
    int virtual_stages; /* V, model chunks per rank: interleaved only, 1..PZ_SCHED_MAX_VIRTUAL
                           (0 = not given yet: building fails until it is); other
                           kinds: 0 or 1 */
} pz_sched_spec;
#define PZ_SCHED_NAMED_AUTO 2
#define PZ_SCHED_MAX_WARMUP_EXTRA 4096
#define PZ_SCHED_MAX_VIRTUAL 64
#define PZ_SCHED_MAX_INTERLEAVED (1L << 22)   /* S x m x V, interleaved with V > 1 */

typedef struct {
    pz_op op;
    int micro;  /* micro-batch index in [0, m); -1 for REDUCE_TIED, OPTIM_STEP */
    int chunk;  /* model chunk on this rank, 0..V-1 (global chunk chunk*S + stage);
                   0 for the non-interleaved kinds and the two end-of-step ops */
} pz_instr;

typedef struct {
    pz_sched_kind kind;
    pz_sched_spec spec;   /* what it was built from */
    int stage, nstages, nmicro;
    int n;                /* number of instructions */
    pz_instr *ins;        /* n instructions, in execution order */
    int max_in_flight;    /* peak count of micro-batches forwarded but not yet
                             backwarded while running the list; equals
                             pz_schedule_in_flight_bound() */
    int warmup, steady, cooldown; /* 1F1B: W, m-W, W; GPipe: m, 0, m;
                                     interleaved: W_r, mV-W_r, W_r (chunk computes) */
    int nchunks;          /* V: model chunks on this rank (1 unless interleaved) */
} pz_schedule;

/* "auto" (1f1b:warmup=auto, warmup_auto = PZ_SCHED_NAMED_AUTO), "1f1b", "1f1b:warmup=K"
 * (0 <= K <= PZ_SCHED_MAX_WARMUP_EXTRA), "1f1b:warmup=auto", "zb-h1", "gpipe", "interleaved" or "interleaved:v=V"
 * (1 <= V <= PZ_SCHED_MAX_VIRTUAL) (case-sensitive). Unknown names or options
 * fail with PZ_ERR_ARG and a message listing the known ones. */
pz_status pz_sched_parse(const char *text, pz_sched_spec *out);
/* The spec as text ("1f1b:warmup=2"; warmup=auto shows as "1f1b:warmup=auto",
 * "auto" as "auto"). */
void pz_sched_spec_format(const pz_sched_spec *sp, char *buf, size_t cap);
/* A spec of `kind` with no options. */
pz_sched_spec pz_sched_plain(pz_sched_kind kind);
/* "1f1b", "gpipe", "zb-h1", "interleaved"; "?" for a value outside the enum. */
const char *pz_sched_name(pz_sched_kind kind);
/* "RECV_ACT", "FORWARD", ...; "?" outside the enum. */
const char *pz_op_name(pz_op op);

/* Builds stage `stage`'s list. Fails with PZ_ERR_ARG (and a message) unless
 * 1 <= nstages <= PZ_SCHED_MAX_STAGES, 0 <= stage < nstages,
 * 1 <= nmicro <= PZ_SCHED_MAX_MICRO and kind is known; interleaved also
 * needs 1 <= V <= PZ_SCHED_MAX_VIRTUAL, nmicro * V <= PZ_SCHED_MAX_MICRO and,
 * when V > 1, nmicro a multiple of nstages and nstages * nmicro * V <=
 * PZ_SCHED_MAX_INTERLEAVED. On failure *s is zeroed, so
 * pz_schedule_free(s) is always safe. */
#define PZ_SCHED_MAX_STAGES 4096
#define PZ_SCHED_MAX_MICRO (1 << 20)
pz_status pz_schedule_build(pz_schedule *s, const pz_sched_spec *sp, int stage, int nstages, int nmicro);
void pz_schedule_free(pz_schedule *s);

/* Whether the list splits the backward of the step's last micro-batch m-1
 * (1 for "auto" with S > 1): BACKWARD m-1 is then the input half only (as
 * zb-h1's B: d(input), the head's and the embedding's gradients), and
 * BACKWARD_WEIGHT m-1, the blocks' weight gradients, follows SEND_GRAD m-1
 * and REDUCE_TIED, right before OPTIM_STEP. Over a slow link the step's
 * drain is a chain: the last stage's last backward, its gradient on the
 * link, the first stage's last backward, the tied gradient on the link;
 * the split takes each stage's weight half out of that chain (the upstream
 * stage and the tied peer get their message a weight half earlier) and
 * changes no sum (stage.h: the halves add what the whole backward adds).
 * Only micro-batch m-1's activation slot keeps the matmuls' output
 * gradients the weight half needs. */
int pz_sched_splits_last(const pz_sched_spec *sp, int nstages);

/* How many weight halves stage `stage`'s list keeps pending: after each
 * BACKWARD (the input half) and its SEND_GRAD, the oldest BACKWARD_WEIGHTs
 * run until at most this many wait. zb-h1: the stage index. auto (S > 1):
 * 1 on every stage but the first, so that each stage's gradient leaves
 * without the weight half of its own backward and that half runs after the
 * next backward (the last one's at the step's end, after REDUCE_TIED). Over
 * a slow link the first gradient of a step opens the gradient direction,
 * which then stays busy to the step's end (issue 26: 10 Mbit/s, demo): it
 * leaves a weight half earlier, and the deferred halves run where the stage
 * would wait for the link or the next step. Costs one activation slot that
 * keeps the matmuls' output gradients (pz_schedule_in_flight_bound counts
 * it) and changes no sum: each accumulator still adds the micro-batches in
 * order. 0 otherwise. */
int pz_sched_defers(const pz_sched_spec *sp, int stage, int nstages);

/* Whether "auto" runs each micro-batch as two of half the batch: 1 for
 * "auto" with S > 1, one replica, an even batch B and m <= 32768 (the
 * message tags hold 2m). A decision from flags alone (not from the links:
 * --link-mbps only slows a run down, it changes no sum), so a resumed run
 * makes the same one. The runtime then walks the lists of 2m micro-batches
 * of B/2: micro-batch 2i and 2i+1 are the first and the second half of the
 * loader's batch i (it still reads B samples at a time). Over a slow link a
 * step is the busier direction's messages plus the time it stands idle at
 * the step boundary: the first stage's forward 0, the first activation on
 * the link, the last stage's forward and input half 0 before the first
 * gradient leaves, and the last gradient at the end; each of them halves
 * (issue 26: ~260 of 1.6 s at 10 Mbit/s, demo). Without a link 1f1b's fill
 * and drain halve the same way, for a few % more per-token compute in the
 * smaller matmuls (demo: +0.4-1% CPU time). What is computed changes only
 * in the order of float sums: each micro-batch's loss is the mean over
 * B/2 x T tokens and the step's the mean of 2m of them (the gradient scale
 * 1/(B T m) is the same), and the parameter gradients add two halves where
 * they added one micro-batch; the run equals `--schedule 1f1b --batch B/2
 * --micro-batches 2m` bit for bit where B divides the epoch. */
int pz_sched_halves(const pz_sched_spec *sp, int nstages, int replicas, int batch, int nmicro);

/* Rank that a communication op of `stage` talks to, for the kinds with one
 * chunk per rank (interleaved: use pz_instr_peer): RECV_ACT/SEND_GRAD ->
 * stage-1, SEND_ACT/RECV_GRAD -> stage+1, REDUCE_TIED -> the other end of the
 * pipeline (0 <-> nstages-1); -1 for compute and OPTIM_STEP. */
int pz_op_peer(pz_op op, int stage, int nstages);

/* The peer of one instruction of s, for every kind (interleaved included):
 * rank and local chunk on the other side, and the model boundary b the
 * message crosses (between global chunks b and b+1, 0 <= b < S*V-1; an
 * activation and its gradient cross the same b). RECV_ACT/SEND_GRAD of local
 * chunk c (global g = c*S + stage) talk to global chunk g-1, SEND_ACT/
 * RECV_GRAD to g+1: the rank g'%S, its chunk g'/S. REDUCE_TIED: the other end
 * of the pipeline, chunk V-1 on rank S-1 or chunk 0 on rank 0, boundary -1.
 * Compute ops, OPTIM_STEP and (S = 1) in-memory hand-overs: rank, chunk and
 * boundary -1. Tags: (step, micro, boundary, direction). */
typedef struct {
    int rank, chunk, boundary;
} pz_peer;
pz_peer pz_instr_peer(const pz_schedule *s, const pz_instr *in);

/* The bound on activations held at once by `stage`: min(W_s + 1 + D, m) for 1F1B
 * (D = pz_sched_defers: auto's pending weight half; min(S - s, m) without
 * extra warm-up and split), min(S, m) for ZB-H1, m for GPipe,
 * min(W_r + 1, mV) chunk activations for interleaved (0 for an unknown kind
 * or an interleaved spec without V). */
int pz_schedule_in_flight_bound(const pz_sched_spec *sp, int stage, int nstages, int nmicro);

/* Peak activations of local chunk `chunk` held at once while s runs (for
 * the kinds with one chunk per rank: max_in_flight). Forwards and backwards
 * of one chunk run in micro-batch order, so `micro % peak` never gives two
 * live activations of a chunk the same slot. 0 for a chunk out of range. */
int pz_schedule_chunk_peak(const pz_schedule *s, int chunk);

/* warmup=auto: the smallest K such that every stage s keeps enough
 * micro-batches in flight to cover its round trip, with one to spare when
 * the trip crosses links, i.e. (S-s-1)(1+K)+1 >= ceil(rtt_s / period) + 1,
 * where rtt_s = sum over stages q >= s of c[q] (compute per micro-batch,
 * forward + backward) + sum over edges e >= s of link_rtt[e] (the time a
 * message takes down edge e and its answer back up, latency included), and
 * period = the largest of c[q] and link_period[e] (an edge's time per
 * message in its busier direction: the pipeline's throughput bound per
 * micro-batch; 0 where unknown). K stops growing once stage 0 holds all m. */
int pz_sched_auto_warmup(int nstages, int nmicro, const double *c, const double *link_rtt,
                         const double *link_period);

/* warmup=auto's link_rtt from micro-batch 0's timestamps in the first step
 * (every link and stage idle): rtt[s], stage s's time from its activation's
 * send to its gradient's arrival; hold[s], stage s's time from that
 * activation's arrival to its gradient's send (the compute, codecs and the
 * round trip further down that micro-batch really took). Edge e's round
 * trip is rtt[e] - hold[e + 1], at least 0. Each rank times its own part of
 * the same micro-batch, so a busy CPU that slows its compute does not move
 * the link's figure (an average compute per micro-batch subtracted instead
 * erred by its spread: a 100 ms round trip read 1-17 ms on a loaded host). */
void pz_sched_link_rtt(int nstages, const double *rtt, const double *hold, double *link_rtt);

/* Prints the schedule of all stages as a table: one column per stage, one row
 * per time slot (every FORWARD and BACKWARD takes one slot, communication is
 * free, sends are rendezvous), cells "F3" / "B2" / "." (idle); then per stage
 * the warm-up / steady / cool-down counts and peak in-flight, and the bubble
 * fraction, both simulated and from (S-1)/(m+S-1). Interleaved: one slot per
 * chunk compute, cells "F3.1" (micro 3, local chunk 1), bubble (S-1)/(mV+S-1).
 * Returns PZ_ERR_ARG on bad arguments (as pz_schedule_build, and at most
 * PZ_SCHED_MAX_TABLE cells: nstages x 2(nmicro V + nstages - 1), 3(m+S-1)
 * for zb-h1) and PZ_ERR_SHAPE if the lists deadlock (which would be a bug),
 * with nothing printed. */
#define PZ_SCHED_MAX_TABLE (1L << 22)
pz_status pz_schedule_print_table(FILE *f, const pz_sched_spec *sp, int nstages, int nmicro);

/* Prints one stage's instruction list, one instruction per line with its peer:
 * "  12  SEND_ACT    micro 3  -> stage 2"; interleaved: "  12  SEND_ACT
 * micro 3 chunk 1  -> stage 0 chunk 2 (boundary 7)". */
void pz_schedule_print_list(FILE *f, const pz_schedule *s);

#endif
