/* test_policy: the --compress grammar (runtime/edge/policy.c): edges, directions,
 * commas inside codec specs, precedence, --link-mbps, policy files, the
 * evaluation spec of wrappers, and errors that point at the right place. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/edge/policy.h"
#include "tests/check.h"

static const char *spec_or_none(const pz_policy *p, int e, int d) {
    const char *s = pz_policy_codec(p, e, d);
    return s ? s : "none";
}

/* parses text for S stages and checks "fwd0|bwd0;fwd1|bwd1;..." */
static void expect(int S, const char *text, const char *want) {
    pz_policy p;
    pz_policy_init(&p, S);
    pz_status st = pz_policy_parse(&p, text, "--compress");
    char got[1024] = "";
    for (int e = 0; e < S - 1; e++) {
        size_t n = strlen(got);
        snprintf(got + n, sizeof got - n, "%s%s|%s", e ? ";" : "", spec_or_none(&p, e, PZ_FWD), spec_or_none(&p, e, PZ_BWD));
    }
    CHECK(st == PZ_OK, "'%s' rejected: %s", text, pz_last_error());
    CHECK(st != PZ_OK || strcmp(got, want) == 0, "'%s': got %s, want %s", text, got, want);
    pz_policy_free(&p);
}

/* expects an error whose message contains `want` and whose caret sits under text[col] */
static void expect_err(int S, const char *text, const char *want, int col) {
    pz_policy p;
    pz_policy_init(&p, S);
    pz_status st = pz_policy_parse(&p, text, "--compress");
    const char *m = pz_last_error();
    CHECK(st != PZ_OK, "'%s' accepted", text);
    if (st != PZ_OK) {
        CHECK(strstr(m, want) != NULL, "'%s': message '%s' lacks '%s'", text, m, want);
        const char *caret = strrchr(m, '\n');
        int at = caret ? (int)strlen(caret + 1) - 1 - 2 : -1;   /* "  " + spaces + '^' */
        CHECK(at == col, "'%s': caret at %d, want %d (%s)", text, at, col, m);
    }
    pz_policy_free(&p);
}

/* policies that parse: stages, text, and "fwd0|bwd0;fwd1|bwd1;..." */
static const struct { int S; const char *text, *want; } parses[] = {
    {2, "fwd=aq(q4),bwd=q8", "aq(q4)|q8"}, {3, "fwd=q4", "q4|none;q4|none"}, {3, "both=fp16", "fp16|fp16;fp16|fp16"},
    {3, "0-1:fwd=topk:0.2;*:bwd=q8", "topk:0.2|q8;none|q8"},
    /* a comma inside a codec spec stays in it; one before a direction splits */
    {2, "fwd=q4:group=row,round=nearest,bwd=q8:round=nearest", "q4:group=row,round=nearest|q8:round=nearest"},
    {2, "fwd=aq(q4,warmup=fp16,mem=1G)", "aq(q4,warmup=fp16,mem=1G)|none"},
    /* an edge's own clause beats '*', in either order; otherwise later wins
     * (an edge named twice is refused below) */
    {3, "1-2:fwd=q2;*:fwd=q8", "q8|none;q2|none"}, {3, "*:fwd=q8;1-2:fwd=q2", "q8|none;q2|none"},
    {3, "fwd=q8;fwd=q4", "q4|none;q4|none"},
    {4, "1-2:both=sign ; 2-3:bwd=nuq4+zstd", "none|none;sign|sign;none|nuq4+zstd"},
    {3, "none", "none|none;none|none"}, {3, "none;1-2:fwd=q4", "none|none;q4|none"},
    /* auto (runtime/edge/autospec.h): its options' commas and candidates' commas stay in the value */
    {2, "fwd=auto,bwd=q8", "auto|q8"}, {3, "auto", "auto|auto;auto|auto"}, {2, "auto:every=4;bwd=q8", "auto:every=4|q8"},
    {3, "0-1:fwd=q4;auto", "q4|auto;auto|auto"}, {3, "0-1:fwd=auto:every=5;*:bwd=auto", "auto:every=5|auto;none|auto"},
    {2, "both=auto:candidates=none/q8:group=row,round=nearest/q4,every=3",
     "auto:candidates=none/q8:group=row,round=nearest/q4,every=3|auto:candidates=none/q8:group=row,round=nearest/q4,every=3"},
    {2, "fwd=auto:every=2,candidates=hadamard(q4,block=64)/q2+zstd,bwd=q4",
     "auto:every=2,candidates=hadamard(q4,block=64)/q2+zstd|q4"},
};

/* policies refused: stages, text, a part of the message, the caret's column */
static const struct { int S; const char *text, *want; int col; } refused[] = {
    {3, "0-2:fwd=q4", "edge 0-2 does not exist", 0}, {3, "2-3:fwd=q4", "edge 2-3 does not exist", 0},
    /* strtol saturates: i + 1 overflowed (undefined; found by fuzz_policy) */
    {3, "99999999999999999999-0:fwd=q4", "does not exist", 0},
    {2, "fwd=q4,bwd=q9", "bits must be 1..8", 12}, {2, "fwd=aq(q4:group=row,bad=1)", "unknown q option", 20},
    {2, "0-1:fwd=q4;;", "empty clause", 11}, {2, "fwd=", "empty codec spec", 4},
    {2, "grad=q4", "expected fwd=", 0}, {2, "0-1:grad=q4", "expected fwd=CODEC", 4},
    {2, "x1-2:fwd=q4", "expected an edge", 0}, {2, "0-1x:fwd=q4", "unexpected character in edge", 3},
    {2, "", "empty policy", 0},
    /* the same edge's direction twice: a contradiction, both values named */
    {3, "0-1:fwd=q8;0-1:fwd=none", "edge 0-1 fwd is given twice (q8, then none)", 15},
    /* auto: carets under the option or the candidate (and into a candidate's spec) */
    {2, "fwd=auto:every=0", "every= expects a whole number", 15}, {2, "fwd=auto:every=5x", "every=", 15},
    {2, "fwd=auto:", "expected every=N, candidates=", 9}, {2, "fwd=auto:often=2", "unknown option", 9},
    {2, "fwd=auto:candidates=fp16/q9", "candidate 2 'q9'", 26}, {2, "fwd=auto:candidates=fp16//q4", "empty candidate", 25},
    {2, "fwd=auto:candidates=q8/aq(q4)", "candidate 2 'aq(q4)' keeps state", 23},
    {2, "fwd=auto:candidates=ef(q4)", "keeps state", 20}, {2, "fwd=auto:candidates=q8/auto", "cannot be a candidate", 23},
    {2, "fwd=auto:every=2,every=3", "every= given twice", 17}, {2, "auto:every=0", "every= expects a whole number", 11}, {2, "fwd=autoq4", "unknown codec", 4},
};

/* --link-latency-ms against --peer-timeout (issue 24): pieces = ranks x V */
static pz_status latency(int ranks, int pieces, const char *lat, double timeout) {
    pz_policy p;
    pz_policy_init(&p, pieces);
    pz_status st = pz_policy_parse_latency(&p, lat, "--link-latency-ms");
    if (st == PZ_OK) st = pz_policy_check_latency(&p, ranks, timeout);
    pz_policy_free(&p);
    return st;
}

static void test_latency(void) {
    /* 1f1b: rank 0's first gradient, there and back */
    CHECK_STATUS(latency(2, 2, "35000", 60), PZ_ERR_ARG, "rank 0 waits 70000 ms on the delays alone for its first "
                 "gradient");
    CHECK_STATUS(latency(2, 2, "35000", 60), PZ_ERR_ARG, "--peer-timeout 60 s");
    CHECK_STATUS(latency(2, 2, "29000", 60), PZ_OK, NULL);
    CHECK_STATUS(latency(3, 3, "0-1=100;1-2=200", 0.5), PZ_ERR_ARG, "waits 600 ms");
    CHECK_STATUS(latency(3, 3, "0-1=100;1-2=140", 0.5), PZ_OK, NULL);
    /* interleaved (V = 2): once around the ring, the wrap link included,
     * each link the longest of its boundaries */
    CHECK_STATUS(latency(2, 4, "35000", 60), PZ_ERR_ARG, "70000 ms on the delays alone for the input of its second");
    CHECK_STATUS(latency(3, 6, "18000", 60), PZ_OK, NULL);   /* 54 s; without chunks 72 s */
    CHECK_STATUS(latency(3, 3, "18000", 60), PZ_ERR_ARG, "72000 ms");
    CHECK_STATUS(latency(3, 6, "*=1000;3-4=59000", 60), PZ_ERR_ARG, "61000 ms");   /* boundary 3: link 0 */
}

/* the simulated link of each pair of ranks (the executor's set-up): a
 * neighbour the link between (the slowest rate, the longest delay of its
 * boundaries), a farther peer every link between, delays summed */
static void test_peer_links(void) {
    pz_policy p;
    double rate, lat;
    pz_policy_init(&p, 4);   /* 4 ranks, V = 1 */
    CHECK(pz_policy_parse_mbps(&p, "0-1=100;1-2=50;2-3=200", "--link-mbps") == PZ_OK &&
          pz_policy_parse_latency(&p, "0-1=1;1-2=2;2-3=3", "--link-latency-ms") == PZ_OK, "%s", pz_last_error());
    pz_policy_peer_link(&p, 4, 0, 1, &rate, &lat);
    CHECK(rate == 100 && lat == 1, "rank 0 -> 1: %g Mbit/s %g ms, want 100 and 1", rate, lat);
    pz_policy_peer_link(&p, 4, 2, 1, &rate, &lat);
    CHECK(rate == 50 && lat == 2, "rank 2 -> 1: %g Mbit/s %g ms, want 50 and 2", rate, lat);
    pz_policy_peer_link(&p, 4, 3, 0, &rate, &lat);
    CHECK(rate == 50 && lat == 6, "rank 3 -> 0 (the tied exchange): %g Mbit/s %g ms, want 50 and 6", rate, lat);
    CHECK(pz_policy_link(&p, 4, 3, &rate, &lat) == 0, "V = 1: link 3 (the wrap) carries nothing");
    CHECK_STATUS(pz_policy_check_message(&p, 4, 1, 1000000, "activation", 0.1), PZ_ERR_ARG,
                 "--link-mbps 50 on the link carrying edge 1-2: one activation message of up to 1000000 bytes takes "
                 "0.162 s");
    CHECK_STATUS(pz_policy_check_message(&p, 4, 2, 1000000, "gradient", 0.1), PZ_OK, NULL);
    pz_policy_free(&p);
    pz_policy_init(&p, 4);   /* 2 ranks, V = 2: link 0 carries boundaries 0 and 2, link 1 (the wrap) 1 */
    CHECK(pz_policy_parse_mbps(&p, "0-1=100;1-2=300;2-3=40", "--link-mbps") == PZ_OK &&
          pz_policy_parse_latency(&p, "0-1=1;1-2=7;2-3=4", "--link-latency-ms") == PZ_OK, "%s", pz_last_error());
    CHECK(pz_policy_link(&p, 2, 0, &rate, &lat) && rate == 40 && lat == 4, "link 0: %g %g, want 40 and 4", rate, lat);
    pz_policy_peer_link(&p, 2, 1, 0, &rate, &lat);   /* both links join them */
    CHECK(rate == 40 && lat == 7, "rank 1 -> 0 with V = 2: %g Mbit/s %g ms, want 40 and 7", rate, lat);
    pz_policy_free(&p);
}

int main(void) {
    test_latency();
    test_peer_links();
    for (size_t i = 0; i < sizeof parses / sizeof parses[0]; i++) expect(parses[i].S, parses[i].text, parses[i].want);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        expect_err(refused[i].S, refused[i].text, refused[i].want, refused[i].col);
    {
        pz_policy p;
        pz_policy_init(&p, 1);
        CHECK(pz_policy_parse(&p, "fwd=q4", "--compress") != PZ_OK, "a 1-stage policy was accepted");
        pz_policy_free(&p);
    }

    /* what a run prints for an edge: q rounds activations to nearest and
     * gradients stochastically, auto's bwd candidates too */
    {
        pz_policy p;
        pz_policy_init(&p, 3);
        CHECK(pz_policy_parse(&p, "0-1:fwd=q4,bwd=q4;1-2:fwd=auto:candidates=q8/q2:round=nearest,bwd=auto:candidates=q8/q2",
                              "--compress") == PZ_OK, "%s", pz_last_error());
        char buf[4096] = "";
        FILE *f = tmpfile();
        CHECK(f != NULL, "tmpfile");
        if (f) {
            pz_policy_print_edge(f, &p, 0);
            pz_policy_print_edge(f, &p, 1);
            rewind(f);
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            buf[n] = 0;
            fclose(f);
        }
        const char *want[] = {("edge 0-1: fwd q4:scale=absmax,group=channel,round=nearest,sdtype=fp32,grid=midtread | "
                               "bwd q4:scale=absmax,group=channel,round=stochastic,sdtype=fp32,grid=midtread\n"),
                              "q8:scale=absmax,group=channel,round=nearest,", "q2:scale=absmax,group=channel,round=nearest,",
                              "| bwd auto(", "q8:scale=absmax,group=channel,round=stochastic,",
                              "q2:scale=absmax,group=channel,round=stochastic,"};
        for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
            CHECK(strstr(buf, want[i]) != NULL, "the printed policy lacks '%s':\n%s", want[i], buf);
        pz_policy_free(&p);
    }

    /* link rates */
    {
        pz_policy p;
        pz_policy_init(&p, 4);
        CHECK(pz_policy_parse_mbps(&p, "100", "--link-mbps") == PZ_OK, "%s", pz_last_error());
        CHECK(p.mbps[0] == 100 && p.mbps[2] == 100, "global rate");
        CHECK(pz_policy_parse_mbps(&p, "1-2=10;*=1000", "--link-mbps") == PZ_OK, "%s", pz_last_error());
        CHECK(p.mbps[0] == 1000 && p.mbps[1] == 10 && p.mbps[2] == 1000, "per-edge rates %g %g %g", p.mbps[0],
              p.mbps[1], p.mbps[2]);
        CHECK(pz_policy_parse_mbps(&p, "0-1=-3", "--link-mbps") != PZ_OK, "negative rate accepted");
        CHECK(pz_policy_parse_mbps(&p, "0-3=5", "--link-mbps") != PZ_OK, "non-edge accepted");
        CHECK(pz_policy_parse_mbps(&p, "5x", "--link-mbps") != PZ_OK, "junk accepted");
        /* one-way delays: the same grammar, their own array */
        CHECK(pz_policy_parse_latency(&p, "0-1=25;*=5", "--link-latency-ms") == PZ_OK, "%s", pz_last_error());
        CHECK(p.latency_ms[0] == 25 && p.latency_ms[1] == 5 && p.latency_ms[2] == 5 && p.mbps[0] == 1000,
              "per-edge delays %g %g %g (rate %g)", p.latency_ms[0], p.latency_ms[1], p.latency_ms[2], p.mbps[0]);
        CHECK(pz_policy_parse_latency(&p, "-1", "--link-latency-ms") != PZ_OK &&
                  strstr(pz_last_error(), "one-way delay in milliseconds"),
              "negative delay: '%s'", pz_last_error());
        CHECK(pz_policy_parse_latency(&p, "60001", "--link-latency-ms") != PZ_OK, "a minute of delay accepted");
        CHECK(pz_policy_parse_latency(&p, "nan", "--link-latency-ms") != PZ_OK, "NaN delay accepted");
        CHECK(p.latency_ms[0] == 25 && p.latency_ms[1] == 5, "a refused value changed the delays");
        /* an edge (or '*') given twice in one text: refused, naming both values */
        CHECK(pz_policy_parse_mbps(&p, "0-1=5;0-1=6", "--link-mbps") != PZ_OK &&
                  strstr(pz_last_error(), "edge 0-1 is given twice (5, then 6)"),
              "a repeated edge rate: '%s'", pz_last_error());
        CHECK(pz_policy_parse_latency(&p, "*=1;1-2=3;2", "--link-latency-ms") != PZ_OK &&
                  strstr(pz_last_error(), "every edge ('*' or a bare N) is given twice (1, then 2)"),
              "a repeated '*' delay: '%s'", pz_last_error());
        CHECK(pz_policy_parse_mbps(&p, "0-1=5;1-2=6;*=7", "--link-mbps") == PZ_OK, "%s", pz_last_error());
        pz_policy_free(&p);
    }

    /* codecs: an edge's direction named twice in one text is refused; other
     * directions, '*' clauses and --compress over a policy file are not repeats */
    {
        pz_policy p;
        pz_policy_init(&p, 3);
        CHECK(pz_policy_parse(&p, "0-1:fwd=q8;1-2:fwd=q4;0-1:both=q2", "--compress") != PZ_OK &&
                  strstr(pz_last_error(), "edge 0-1 fwd is given twice (q8, then q2)"),
              "a repeated edge codec: '%s'", pz_last_error());
        pz_policy_free(&p);
        pz_policy_init(&p, 3);
        CHECK(pz_policy_parse(&p, "0-1:fwd=q8;0-1:bwd=q4;fwd=q2;fwd=q4", "--compress") == PZ_OK, "%s", pz_last_error());
        CHECK(pz_policy_parse(&p, "0-1:fwd=q2", "--compress") == PZ_OK, "%s", pz_last_error());
        CHECK(strcmp(spec_or_none(&p, 0, PZ_FWD), "q2") == 0, "a later text's edge did not override");
        pz_policy_free(&p);
    }

    /* evaluation specs: wrappers give way to their inner codec */
    {
        const char *cases[][2] = {{"aq(q4)", "q4"}, {"ef(topk:0.1)+zstd", "topk:0.1+zstd"},
                                  {"aq(q4:group=row,round=nearest,warmup=fp16,mem=1G)", "q4:group=row,round=nearest"},
                                  {"ef21(sign)", "sign"}, {"q8", "q8"}, {"jointsq:1.5", "jointsq:1.5"},
                                  {"hadamard(q4)", "hadamard(q4)"}, {"hadamard(aq(q4),block=64)+zstd", "hadamard(q4,block=64)+zstd"},
                                  {"aq(hadamard(q4,block=8))", "hadamard(q4,block=8)"},
                                  /* auto: its first candidate (what every rank knows without asking) */
                                  {"auto", "fp16"}, {"auto:candidates=hadamard(q8)/q2", "hadamard(q8)"}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            char buf[256];
            CHECK(pz_policy_eval_spec(cases[i][0], buf, sizeof buf) == PZ_OK && strcmp(buf, cases[i][1]) == 0,
                  "eval spec of %s: %s, want %s", cases[i][0], buf, cases[i][1]);
        }
    }

    /* policy files: comments, blank lines, errors named by line */
    {
        char path[] = "/tmp/pz_policy_XXXXXX";
        int fd = mkstemp(path);
        CHECK(fd >= 0, "mkstemp");
        FILE *f = fdopen(fd, "w");
        fputs("# per-edge policy\n\n0-1:fwd=q8   # activations\n*:bwd=q4\n", f);
        fclose(f);
        pz_policy p;
        pz_policy_init(&p, 3);
        CHECK(pz_policy_parse_file(&p, path) == PZ_OK, "%s", pz_last_error());
        CHECK(strcmp(spec_or_none(&p, 0, PZ_FWD), "q8") == 0 && strcmp(spec_or_none(&p, 1, PZ_BWD), "q4") == 0 &&
              pz_policy_codec(&p, 1, PZ_FWD) == NULL, "file policy");
        pz_policy_free(&p);
        f = fopen(path, "w");
        fputs("fwd=q8\n\n  0-1:fwd=topk:2\n", f);
        fclose(f);
        pz_policy_init(&p, 3);
        CHECK(pz_policy_parse_file(&p, path) != PZ_OK && strstr(pz_last_error(), ":3: fwd codec"),
              "bad line not named: %s", pz_last_error());
        pz_policy_free(&p);
        f = fopen(path, "w");
        fputs("0-1:fwd=q8\n1-2:fwd=q8\n0-1:fwd=q4\n", f);   /* the file is one text: a repeat on another line */
        fclose(f);
        pz_policy_init(&p, 3);
        CHECK(pz_policy_parse_file(&p, path) != PZ_OK && strstr(pz_last_error(), ":3: edge 0-1 fwd is given twice"),
              "a repeat across lines: %s", pz_last_error());
        pz_policy_free(&p);
        remove(path);
    }
    return check_summary("test_policy");
}
