#include <stdio.h>
/* policy.h: which codec compresses what crosses each pipeline edge.
 *
 * Edge e joins stage e and stage e+1. Each edge has two directions: fwd
 * (activations, stage e -> e+1) and bwd (gradients, e+1 -> e). A policy
 * gives every (edge, direction) a codec spec from compress/ or "none" (the
 * raw float32 tensor, no header: what an uncompressed pipeline sends).
 *
 * Grammar (the text of --compress, or one line of a policy file):
 *   policy  := clause (';' clause)*
 *   clause  := [edges ':'] assign (',' assign)* | 'none' | auto
 *              ('none' and 'auto[:...]' alone: both directions of every edge)
 *   edges   := '*' | I '-' J          (J = I + 1, an existing edge)
 *   assign  := ('fwd' | 'bwd' | 'both') '=' codec
 *   codec   := 'none' | a codec spec (compress/README.md)
 *            | 'auto' [':' options]  (runtime/edge/autospec.h: the sender picks
 *              among candidate codecs while training runs)
 * A codec spec may itself contain ',' (q4:group=row,round=nearest): a comma
 * starts a new assignment only when the text after it is fwd=, bwd= or both=.
 * A clause without edges means '*'. Clauses naming an edge beat '*' clauses
 * whatever their order; otherwise a later clause overrides an earlier one.
 * One text (a --compress, a whole policy file) naming the same edge's
 * direction twice is refused: a contradiction, not an override.
 * Unnamed (edge, direction) pairs stay "none".
 *
 * Link rates (--link-mbps): 'N' for every edge, or 'edges=N' items separated
 * by ';' (e.g. '0-1=100;*=1000'), the same precedence rule; an edge or '*'
 * given twice is refused. 0 = unlimited.
 * Link delays (--link-latency-ms): one-way milliseconds, the same grammar. */
#ifndef PZ_POLICY_H
#define PZ_POLICY_H

#include "base/status.h"
#include "compress/core/codec.h"

enum { PZ_FWD = 0, PZ_BWD = 1 };

/* What a direction's codec carries: activations forward, gradients
 * backward (pz_codec_create_for: q<b> rounds by it). */
static inline int pz_dir_use(int dir) { return dir == PZ_BWD ? PZ_USE_GRADIENT : PZ_USE_ACTIVATION; }

typedef struct {
    int stages;             /* edges = stages - 1 */
    char **spec;            /* [2*edge + dir]: codec spec as written, NULL = none */
    int *prio;              /* [2*edge + dir]: 0 unset, 1 set by '*', 2 by the edge */
    double *mbps;           /* [edge]: link rate, 0 = unlimited */
    int *mbps_prio;
    double *latency_ms;     /* [edge]: one-way delay, 0 = none */
    int *latency_prio;
} pz_policy;

void pz_policy_init(pz_policy *p, int stages);
void pz_policy_free(pz_policy *p);
/* Adds the clauses of text. origin names where the text came from in error
 * messages ("--compress" or "policy.txt:3"); errors point at the offending
 * character. Codec specs are checked by building the codec. */
pz_status pz_policy_parse(pz_policy *p, const char *text, const char *origin);
/* Adds every line of a file (blank lines and '#' comments skipped). */
pz_status pz_policy_parse_file(pz_policy *p, const char *path);
/* --link-mbps */
pz_status pz_policy_parse_mbps(pz_policy *p, const char *text, const char *origin);
/* --link-latency-ms */
pz_status pz_policy_parse_latency(pz_policy *p, const char *text, const char *origin);

/* Refuses simulated delays a rank cannot wait for. Ranks are joined in
 * order by their links (a boundary b of the policy crosses link b mod ranks,
 * as the executor maps chunk boundaries to ranks; link l, from rank l to
 * l + 1, or with V > 1 chunks per rank the wrap link back to rank 0, has
 * the longest delay of its boundaries). Counting the delays alone (no
 * compute), rank 0 blocks once for: its first gradient, after its activation
 * crossed every link to the last rank and the gradient every link back
 * (twice the sum of the delays: 1f1b, warm-up, gpipe, zb-h1), or with
 * V > 1 its second chunk's input of micro-batch 0, after it went once
 * around the ring. If that is not below --peer-timeout, rank 0 would give
 * its peer up as frozen: the error names --link-latency-ms and
 * --peer-timeout. (A rate's transfer time depends on the message, which
 * the ranks check per edge once their codecs are built.) */
pz_status pz_policy_check_latency(const pz_policy *p, int ranks, double peer_timeout_s);
/* Link l of `ranks` (as above): the slowest rate and the longest delay
 * among the boundaries it carries (b mod ranks == l); returns whether it
 * carries any. */
int pz_policy_link(const pz_policy *p, int ranks, int l, double *mbps, double *lat_ms);
/* What rank r's messages to rank `peer` are simulated on: a neighbour's
 * link (both, with 2 ranks and V > 1); a farther peer (the tied exchange,
 * the collectives with rank 0) the slowest rate and the summed delays of the
 * links between, since its bytes cross every one of them. */
void pz_policy_peer_link(const pz_policy *p, int ranks, int r, int peer, double *mbps, double *lat_ms);
/* A link so slow that one message of `bytes` across edge (what: "activation"
 * or "gradient") outlasts --peer-timeout would end in "peer frozen?" at the
 * receiver: refused, naming the rate, the edge and the flags. */
pz_status pz_policy_check_message(const pz_policy *p, int ranks, int edge, size_t bytes, const char *what,
                                  double peer_timeout_s);
/* Codec spec of (edge, dir), or NULL for none. */
const char *pz_policy_codec(const pz_policy *p, int edge, int dir);
/* Whether some (edge, direction) is auto (runtime/edge/autospec.h). */
int pz_policy_has_auto(const pz_policy *p);
/* Whether any edge in direction dir is compressed. */
int pz_policy_any(const pz_policy *p, int dir);
/* The spec used at evaluation: wrappers (ef, ef21, aq) carry training state
 * that evaluation samples must not touch, so their inner codec is used
 * ("aq(q4)+zstd" -> "q4+zstd"); hadamard() is stateless and stays around
 * its inner codec's eval spec ("hadamard(aq(q4))" -> "hadamard(q4)");
 * auto gives its first candidate.
 * Writes into buf. */
pz_status pz_policy_eval_spec(const char *spec, char *buf, size_t cap);
/* The codecs of every edge as one line, "0-1:fwd=q8,bwd=none;1-2:..." (cut at cap). */
void pz_policy_text(const pz_policy *p, char *buf, size_t cap);
/* Prints edge e's line: "edge 0-1: fwd aq(q4:...) | bwd q8:... | link 100 Mbit/s (simulated)". */
void pz_policy_print_edge(FILE *f, const pz_policy *p, int e);

#endif
