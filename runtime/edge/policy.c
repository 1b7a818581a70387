/* policy.c: parsing the per-edge compression policy (grammar in policy.h). */
#include "runtime/edge/policy.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "compress/core/codec.h"
#include "runtime/edge/autospec.h"
#include "base/io/file.h"
#include "base/mem.h"
#include "base/parse.h"

void pz_policy_init(pz_policy *p, int stages) {
    int edges = stages > 1 ? stages - 1 : 0;
    p->stages = stages;
    p->spec = xcalloc((size_t)(2 * edges + 1), sizeof *p->spec);
    p->prio = xcalloc((size_t)(2 * edges + 1), sizeof *p->prio);
    p->mbps = xcalloc((size_t)(edges + 1), sizeof *p->mbps);
    p->mbps_prio = xcalloc((size_t)(edges + 1), sizeof *p->mbps_prio);
    p->latency_ms = xcalloc((size_t)(edges + 1), sizeof *p->latency_ms);
    p->latency_prio = xcalloc((size_t)(edges + 1), sizeof *p->latency_prio);
}

void pz_policy_free(pz_policy *p) {
    for (int k = 0; p->spec && k < 2 * (p->stages - 1); k++) free(p->spec[k]);
    PZ_FREE_ALL(p->spec, p->prio, p->mbps, p->mbps_prio, p->latency_ms, p->latency_prio);
    memset(p, 0, sizeof *p);
}

/* "origin: message\n  text\n  ^" with the caret under text[pos] */
static pz_status fail_at(const char *origin, const char *text, size_t pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static pz_status fail_at(const char *origin, const char *text, size_t pos, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char head[768];
    snprintf(head, sizeof head, "%s: %s\n", origin, msg);
    return pz_fail_caret(PZ_ERR_ARG, head, "  ", text, pos);
}

static int word_at(const char *s, const char *w) {
    size_t n = strlen(w);
    return strncmp(s, w, n) == 0 && s[n] == '=';
}

static int is_dir_start(const char *s) {
    return word_at(s, "fwd") || word_at(s, "bwd") || word_at(s, "both");
}

/* Parses "*" or "I-J" at text+pos up to `end`. *edge = -1 for '*'. */
static pz_status parse_edges(const pz_policy *p, const char *origin, const char *text, size_t pos,
                             size_t end, int *edge) {
    const char *s = text + pos;
    size_t n = end - pos;
    if (n == 1 && s[0] == '*') { *edge = -1; return PZ_OK; }
    char buf[32];
    if (n == 0 || n >= sizeof buf) return fail_at(origin, text, pos, "expected an edge such as 0-1, or *");
    memcpy(buf, s, n);
    buf[n] = 0;
    char *e1, *e2;
    if (!isdigit((unsigned char)buf[0])) return fail_at(origin, text, pos, "expected an edge such as 0-1, or *");
    long i = strtol(buf, &e1, 10);
    if (*e1 != '-' || !isdigit((unsigned char)e1[1]))
        return fail_at(origin, text, pos + (size_t)(e1 - buf), "expected an edge such as 0-1, or *");
    long j = strtol(e1 + 1, &e2, 10);
    if (*e2) return fail_at(origin, text, pos + (size_t)(e2 - buf), "unexpected character in edge");
    if (i < 0 || i >= p->stages || j != i + 1 || j >= p->stages)   /* i bounded before i + 1: strtol saturates */
        return fail_at(origin, text, pos,
                       "edge %ld-%ld does not exist: with %d stages the edges are 0-1 .. %d-%d (consecutive stages)",
                       i, j, p->stages, p->stages - 2, p->stages - 1);
    *edge = (int)i;
    return PZ_OK;
}

/* An edge named twice for the same direction in one text (one --compress, one
 * policy file) is a contradiction, not an override: the user would not know
 * which value ran. named[2*edge + dir] remembers the spec named first
 * ("none" for NULL: a text naming "none" then q4 is as contradictory). */
static pz_status check_named(char **named, const char *origin, const char *text, size_t pos, int edge, int dir,
                             const char *spec) {
    int k = 2 * edge + dir;
    if (!named[k]) { named[k] = xstrdup(spec); return PZ_OK; }
    return fail_at(origin, text, pos, "edge %d-%d %s is given twice (%s, then %s): name each edge's direction once",
                   edge, edge + 1, dir == PZ_FWD ? "fwd" : "bwd", named[k], spec);
}

static void set_spec(pz_policy *p, int edge, int dir, const char *spec, int prio) {
    int e0 = edge < 0 ? 0 : edge, e1 = edge < 0 ? p->stages - 2 : edge;
    for (int e = e0; e <= e1; e++) {
        int k = 2 * e + dir;
        if (p->prio[k] > prio) continue;   /* an edge's own clause beats '*' */
        free(p->spec[k]);
        p->spec[k] = strcmp(spec, "none") == 0 ? NULL : xstrdup(spec);
        p->prio[k] = prio;
    }
}

/* Validates a codec spec by building it; on failure points into text. */
static pz_status check_codec(const char *origin, const char *text, size_t pos, const char *spec,
                             const char *what) {
    if (!*spec) return fail_at(origin, text, pos, "%s: empty codec spec (use none for uncompressed)", what);
    if (strcmp(spec, "none") == 0) return PZ_OK;
    if (pz_auto_is(spec)) {   /* auto[:every=N,candidates=A/B/...] (runtime/edge/autospec.h) */
        pz_auto_spec a;
        pz_status st = pz_auto_parse(spec, &a);
        pz_auto_spec_free(&a);
        if (st == PZ_OK) return PZ_OK;
    } else {
        pz_codec *c = NULL;
        if (pz_codec_create(spec, &c) == PZ_OK) { pz_codec_free(c); return PZ_OK; }
    }
    /* keep the codec's reason (first line) and move its caret into our text */
    char reason[512];
    size_t off = pz_last_error_split(reason, sizeof reason);
    return fail_at(origin, text, pos + off, "%s: %s", what, reason);
}

static char **named_new(const pz_policy *p) {
    return xcalloc((size_t)(2 * (p->stages > 1 ? p->stages - 1 : 0) + 1), sizeof(char *));
}

static void named_free(const pz_policy *p, char **named) {
    for (int k = 0; k < 2 * (p->stages - 1); k++) free(named[k]);
    free(named);
}

static pz_status parse_text(pz_policy *p, const char *text, const char *origin, char **named) {
    if (p->stages < 2) return pz_fail(PZ_ERR_ARG, "%s: a compression policy needs --stages 2 or more", origin);
    size_t len = strlen(text), pos = 0;
    if (len == 0) return fail_at(origin, text, 0, "empty policy");
    while (pos <= len) {
        size_t cend = pos;
        while (cend < len && text[cend] != ';') cend++;
        while (pos < cend && text[pos] == ' ') pos++;
        if (pos == cend) return fail_at(origin, text, pos, "empty clause");
        /* optional "edges:" prefix: only when the clause does not start with a direction */
        int edge = -1, prio = 1;
        size_t tail = cend;
        while (tail > pos && (text[tail - 1] == ' ' || text[tail - 1] == '\t')) tail--;
        if (tail - pos == 4 && strncmp(text + pos, "none", 4) == 0) {   /* "none": every edge uncompressed */
            set_spec(p, -1, PZ_FWD, "none", 1);
            set_spec(p, -1, PZ_BWD, "none", 1);
            pos = cend + 1;
            if (cend == len) break;
            continue;
        }
        if (tail - pos >= 4 && strncmp(text + pos, "auto", 4) == 0 && (tail - pos == 4 || text[pos + 4] == ':')) {
            /* "auto[:...]" alone: both directions of every edge (--compress auto) */
            char *spec = xmalloc(tail - pos + 1);
            memcpy(spec, text + pos, tail - pos);
            spec[tail - pos] = 0;
            pz_status st = check_codec(origin, text, pos, spec, "every edge");
            if (st == PZ_OK) {
                set_spec(p, -1, PZ_FWD, spec, 1);
                set_spec(p, -1, PZ_BWD, spec, 1);
            }
            free(spec);
            if (st != PZ_OK) return st;
            pos = cend + 1;
            if (cend == len) break;
            continue;
        }
        if (!is_dir_start(text + pos)) {
            size_t colon = pos;
            while (colon < cend && text[colon] != ':' && text[colon] != '=') colon++;
            if (colon == cend || text[colon] != ':')
                return fail_at(origin, text, pos, "expected fwd=, bwd=, both= or an edge prefix such as 0-1: or *:");
            pz_status st = parse_edges(p, origin, text, pos, colon, &edge);
            if (st != PZ_OK) return st;
            prio = edge < 0 ? 1 : 2;
            pos = colon + 1;
        }
        /* assignments: a ',' followed by a direction starts the next one */
        for (;;) {
            if (!is_dir_start(text + pos))
                return fail_at(origin, text, pos, "expected fwd=CODEC, bwd=CODEC or both=CODEC");
            int dir0 = text[pos] == 'f' ? PZ_FWD : PZ_BWD, both = text[pos] == 'b' && text[pos + 1] == 'o';
            size_t vstart = pos + (both ? 5 : 4), vend = vstart;
            while (vend < cend && !(text[vend] == ',' && is_dir_start(text + vend + 1))) vend++;
            size_t vlast = vend;   /* spaces before ';' or the end are not part of the spec */
            while (vlast > vstart && (text[vlast - 1] == ' ' || text[vlast - 1] == '\t')) vlast--;
            char *spec = xmalloc(vlast - vstart + 1);
            memcpy(spec, text + vstart, vlast - vstart);
            spec[vlast - vstart] = 0;
            char what[48];
            snprintf(what, sizeof what, "%s codec", both ? "both" : dir0 == PZ_FWD ? "fwd" : "bwd");
            pz_status st = check_codec(origin, text, vstart, spec, what);
            for (int d = 0; d < 2 && st == PZ_OK && edge >= 0; d++)
                if (both || dir0 == d) st = check_named(named, origin, text, pos, edge, d, spec);
            if (st == PZ_OK) {
                if (both || dir0 == PZ_FWD) set_spec(p, edge, PZ_FWD, spec, prio);
                if (both || dir0 == PZ_BWD) set_spec(p, edge, PZ_BWD, spec, prio);
            }
            free(spec);
            if (st != PZ_OK) return st;
            if (vend >= cend) break;
            pos = vend + 1;
        }
        pos = cend + 1;
        if (cend == len) break;
    }
    return PZ_OK;
}

pz_status pz_policy_parse(pz_policy *p, const char *text, const char *origin) {
    char **named = named_new(p);
    pz_status st = parse_text(p, text, origin, named);
    named_free(p, named);
    return st;
}

pz_status pz_policy_parse_file(pz_policy *p, const char *path) {
    uint8_t *buf;
    size_t len;
    pz_status st = pz_read_file_max(path, (size_t)1 << 20, &buf, &len);
    if (st != PZ_OK) return st;
    if (memchr(buf, 0, len)) {
        free(buf);
        return pz_fail(PZ_ERR_FORMAT, "%s: not a text file (contains a NUL byte)", path);
    }
    char *text = xmalloc(len + 1);
    memcpy(text, buf, len);
    text[len] = 0;
    free(buf);
    int lineno = 0, clauses = 0;
    char **named = named_new(p);   /* the whole file is one text: an edge named on two lines is refused */
    for (char *line = text; line && st == PZ_OK;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = 0;
        size_t n = strlen(line);
        while (n && isspace((unsigned char)line[n - 1])) line[--n] = 0;
        while (*line == ' ' || *line == '\t') line++;
        if (*line) {
            char origin[4200];
            snprintf(origin, sizeof origin, "%s:%d", path, lineno);
            st = parse_text(p, line, origin, named);
            clauses++;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    named_free(p, named);
    if (st == PZ_OK && clauses == 0) st = pz_fail(PZ_ERR_FORMAT, "%s: no policy clause in the file", path);
    return st;
}

/* One number per edge: 'N' for every edge, or 'edges=N' items separated by
 * ';' with the precedence of the codec clauses. what/unit name the value in
 * messages; values outside [0, max] are refused. */
static pz_status parse_edge_values(pz_policy *p, const char *text, const char *origin, double *vals, int *prios,
                                   double max, const char *what, double *given) {
    size_t len = strlen(text), pos = 0;
    if (len == 0) return fail_at(origin, text, 0, "empty value");
    while (pos <= len) {
        size_t end = pos;
        while (end < len && text[end] != ';') end++;
        size_t eq = pos;
        while (eq < end && text[eq] != '=') eq++;
        int edge = -1, prio = 1;
        size_t vpos = pos;
        if (eq < end) {
            if (p->stages < 2) return fail_at(origin, text, pos, "per-edge values need --stages 2 or more");
            pz_status st = parse_edges(p, origin, text, pos, eq, &edge);
            if (st != PZ_OK) return st;
            prio = edge < 0 ? 1 : 2;
            vpos = eq + 1;
        }
        char num[64];
        size_t n = end - vpos;
        if (n == 0 || n >= sizeof num) return fail_at(origin, text, vpos, "expected %s, 0 .. %g", what, max);
        memcpy(num, text + vpos, n);
        num[n] = 0;
        char *e;
        double v = strtod(num, &e);
        if (e == num || *e || !(v >= 0.0) || v > max)
            return fail_at(origin, text, vpos + (size_t)(e - num), "expected %s, 0 .. %g", what, max);
        /* the same edge (or '*') twice is a contradiction, not an override:
         * the user would not know which value ran */
        double *first = &given[edge + 1];   /* [0]: '*' or a bare N; NAN: not given yet */
        if (!isnan(*first)) {
            char name[48];
            snprintf(name, sizeof name, edge < 0 ? "every edge ('*' or a bare N)" : "edge %d-%d", edge, edge + 1);
            return fail_at(origin, text, pos, "%s is given twice (%g, then %g): give each edge once", name, *first, v);
        }
        *first = v;
        int e0 = edge < 0 ? 0 : edge, e1 = edge < 0 ? p->stages - 2 : edge;
        for (int k = e0; k <= e1; k++)
            if (prios[k] <= prio) { vals[k] = v; prios[k] = prio; }
        if (end == len) break;
        pos = end + 1;
    }
    return PZ_OK;
}

/* parse_edge_values with its record of what the text gave (a '*' slot, then
 * one per edge) */
static pz_status parse_values(pz_policy *p, const char *text, const char *origin, double *vals, int *prios,
                              double max, const char *what) {
    int slots = (p->stages > 1 ? p->stages - 1 : 0) + 1;
    double *given = xmalloc((size_t)slots * sizeof *given);
    for (int k = 0; k < slots; k++) given[k] = NAN;
    pz_status st = parse_edge_values(p, text, origin, vals, prios, max, what, given);
    free(given);
    return st;
}

pz_status pz_policy_parse_mbps(pz_policy *p, const char *text, const char *origin) {
    return parse_values(p, text, origin, p->mbps, p->mbps_prio, 1e7, "a rate in Mbit/s (0 = unlimited)");
}

pz_status pz_policy_parse_latency(pz_policy *p, const char *text, const char *origin) {
    return parse_values(p, text, origin, p->latency_ms, p->latency_prio, 60000, "a one-way delay in milliseconds");
}

const char *pz_policy_codec(const pz_policy *p, int edge, int dir) {
    if (edge < 0 || edge >= p->stages - 1) return NULL;
    return p->spec[2 * edge + dir];
}

int pz_policy_has_auto(const pz_policy *p) {
    for (int k = 0; k < 2 * (p->stages - 1); k++)
        if (pz_auto_is(p->spec[k])) return 1;
    return 0;
}

int pz_policy_any(const pz_policy *p, int dir) {
    for (int e = 0; e < p->stages - 1; e++)
        if (p->spec[2 * e + dir]) return 1;
    return 0;
}

pz_status pz_policy_eval_spec(const char *spec, char *buf, size_t cap) {
    /* auto: evaluation has no link to fit, and every rank must agree without
     * asking the senders: the first (most precise) candidate */
    if (pz_auto_is(spec)) {
        pz_auto_spec a;
        pz_status st = pz_auto_parse(spec, &a);
        if (st == PZ_OK) st = pz_policy_eval_spec(a.cand[0], buf, cap);
        pz_auto_spec_free(&a);
        return st;
    }
    /* hadamard(C[,block=N]) keeps no state: it stays, around C's eval spec */
    if (strncmp(spec, "hadamard(", 9) == 0) {
        int depth = 1;
        size_t k = 9, opts = 0;
        for (; spec[k] && depth; k++) {
            depth += spec[k] == '(' ? 1 : spec[k] == ')' ? -1 : 0;
            if (!opts && depth == 1 && spec[k] == ',' && strncmp(spec + k + 1, "block=", 6) == 0) opts = k;
        }
        if (depth) return pz_fail(PZ_ERR_ARG, "codec spec '%s': unbalanced parentheses", spec);
        size_t close = k - 1, iend = opts ? opts : close;
        char *inner = xmalloc(iend - 9 + 1), *ev = xmalloc(cap);
        memcpy(inner, spec + 9, iend - 9);
        inner[iend - 9] = 0;
        pz_status st = pz_policy_eval_spec(inner, ev, cap);
        int n = st ? 0 : snprintf(buf, cap, "hadamard(%s%.*s)%s", ev, (int)(close - iend), spec + iend, spec + k);
        free(inner);
        free(ev);
        if (st) return st;
        if (n < 0 || (size_t)n >= cap) return pz_fail(PZ_ERR_ARG, "codec spec '%s' too long", spec);
        return PZ_OK;
    }
    static const char *const wrappers[] = {"ef21(", "ef(", "aq("};
    const char *inner = spec, *tail = "";
    size_t ilen = strlen(spec);
    for (size_t w = 0; w < sizeof wrappers / sizeof wrappers[0]; w++) {
        size_t wl = strlen(wrappers[w]);
        if (strncmp(spec, wrappers[w], wl) != 0) continue;
        /* the inner spec ends at the matching ')'; what follows (e.g. +zstd) is kept */
        int depth = 1;
        size_t k = wl;
        for (; spec[k] && depth; k++) depth += spec[k] == '(' ? 1 : spec[k] == ')' ? -1 : 0;
        if (depth) return pz_fail(PZ_ERR_ARG, "codec spec '%s': unbalanced parentheses", spec);
        inner = spec + wl;
        ilen = k - 1 - wl;
        tail = spec + k;
        /* aq's own options (aq(q4,warmup=fp16,mem=1G)) are not part of the inner codec */
        for (size_t q = 0; q < ilen; q++)
            if (inner[q] == ',' && (strncmp(inner + q + 1, "warmup=", 7) == 0 ||
                                    strncmp(inner + q + 1, "mem=", 4) == 0 ||
                                    strncmp(inner + q + 1, "spill=", 6) == 0)) {
                ilen = q;
                break;
            }
        break;
    }
    int n = snprintf(buf, cap, "%.*s%s", (int)ilen, inner, tail);
    if (n < 0 || (size_t)n >= cap) return pz_fail(PZ_ERR_ARG, "codec spec '%s' too long", spec);
    return PZ_OK;
}

void pz_policy_print_edge(FILE *f, const pz_policy *p, int e) {
    const char *fs = p->spec[2 * e], *bs = p->spec[2 * e + 1];
    char fc[512] = "none", bc[512] = "none";
    /* canonical specs spell every parameter out */
    for (int d = 0; d < 2; d++) {
        const char *s = d ? bs : fs;
        char *out = d ? bc : fc;
        pz_codec *c;
        pz_auto_spec a;
        int use = pz_dir_use(d);
        if (pz_auto_is(s)) {
            if (pz_auto_parse_for(s, use, &a) == PZ_OK) pz_auto_describe(&a, out, sizeof fc);
            pz_auto_spec_free(&a);
        } else if (s && pz_codec_create_for(s, use, &c) == PZ_OK) {
            snprintf(out, sizeof fc, "%s", pz_codec_spec(c));
            pz_codec_free(c);
        }
    }
    fprintf(f, "edge %d-%d: fwd %s | bwd %s", e, e + 1, fc, bc);
    if (p->mbps[e] > 0 && p->latency_ms[e] > 0)
        fprintf(f, " | link %g Mbit/s, %g ms one way (simulated)", p->mbps[e], p->latency_ms[e]);
    else if (p->mbps[e] > 0)
        fprintf(f, " | link %g Mbit/s (simulated)", p->mbps[e]);
    else if (p->latency_ms[e] > 0)
        fprintf(f, " | link %g ms one way (simulated)", p->latency_ms[e]);
    fputc('\n', f);
}

int pz_policy_link(const pz_policy *p, int ranks, int l, double *mbps, double *lat_ms) {
    *mbps = 0.0, *lat_ms = 0.0;
    for (int b = l; b < p->stages - 1; b += ranks) {
        if (p->mbps[b] > 0 && (*mbps == 0.0 || p->mbps[b] < *mbps)) *mbps = p->mbps[b];
        if (p->latency_ms[b] > *lat_ms) *lat_ms = p->latency_ms[b];
    }
    return l < p->stages - 1;
}

void pz_policy_peer_link(const pz_policy *p, int ranks, int r, int peer, double *mbps, double *lat_ms) {
    double lr, ll;
    int near = 0;
    *mbps = 0.0, *lat_ms = 0.0;
    for (int k = 0; k < 2; k++) {   /* the link r -> peer, then peer -> r */
        int l = k == 0 ? r : peer, to = k == 0 ? peer : r;
        if (to != (l + 1) % ranks || !pz_policy_link(p, ranks, l, &lr, &ll)) continue;
        near = 1;
        if (lr > 0 && (*mbps == 0.0 || lr < *mbps)) *mbps = lr;
        if (ll > *lat_ms) *lat_ms = ll;
    }
    for (int l = peer < r ? peer : r; !near && l < (peer < r ? r : peer); l++) {
        pz_policy_link(p, ranks, l, &lr, &ll);
        if (lr > 0 && (*mbps == 0.0 || lr < *mbps)) *mbps = lr;
        *lat_ms += ll;
    }
}

pz_status pz_policy_check_message(const pz_policy *p, int ranks, int edge, size_t bytes, const char *what,
                                  double peer_timeout_s) {
    double rate, lat;
    pz_policy_link(p, ranks, edge % ranks, &rate, &lat);
    double secs = (double)bytes * 8.0 / (rate * 1e6) + lat * 1e-3;
    if (rate <= 0 || secs <= peer_timeout_s) return PZ_OK;
    return pz_fail(PZ_ERR_ARG, "--link-mbps %g on the link carrying edge %d-%d: one %s message of up to %zu bytes "
                   "takes %.3g s on it, longer than --peer-timeout %g s, after which the receiving rank would give "
                   "its peer up: raise the rate or --peer-timeout", rate, edge, edge + 1, what, bytes, secs,
                   peer_timeout_s);
}

pz_status pz_policy_check_latency(const pz_policy *p, int ranks, double peer_timeout_s) {
    const int chunks = ranks > 0 ? p->stages / ranks : 1;   /* V: interleaved's chunks per rank */
    double sum_ms = 0.0, rate, lat;
    for (int l = 0; l < (chunks > 1 ? ranks : ranks - 1); l++)   /* V > 1: the wrap link too */
        pz_policy_link(p, ranks, l, &rate, &lat), sum_ms += lat;
    const double wait_ms = chunks > 1 ? sum_ms : 2.0 * sum_ms;
    if (wait_ms * 1e-3 < peer_timeout_s) return PZ_OK;
    if (chunks > 1)
        return pz_fail(PZ_ERR_ARG, "--link-latency-ms: rank 0 waits %g ms on the delays alone for the input of its "
                       "second chunk (micro-batch 0 crosses the %d simulated links around the ring of ranks), not "
                       "less than --peer-timeout %g s, after which it would give its peer up: lower "
                       "--link-latency-ms or raise --peer-timeout", wait_ms, ranks, peer_timeout_s);
    return pz_fail(PZ_ERR_ARG, "--link-latency-ms: rank 0 waits %g ms on the delays alone for its first gradient (its "
                   "activation crosses %d simulated link%s to rank %d and the gradient comes back, %g ms each way), "
                   "not less than --peer-timeout %g s, after which it would give its peer up: lower "
                   "--link-latency-ms or raise --peer-timeout", wait_ms, ranks - 1, ranks > 2 ? "s" : "", ranks - 1,
                   sum_ms, peer_timeout_s);
}

void pz_policy_text(const pz_policy *p, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int e = 0; e < p->stages - 1 && n < cap; e++) {
        const char *f = pz_policy_codec(p, e, PZ_FWD), *b = pz_policy_codec(p, e, PZ_BWD);
        int k = snprintf(buf + n, cap - n, "%s%d-%d:fwd=%s,bwd=%s", e ? ";" : "", e, e + 1, f ? f : "none",
                         b ? b : "none");
        if (k < 0) break;
        n += (size_t)k;
    }
}
