/* fuzz_policy.c: libFuzzer entry for the per-edge policy grammars
 * (runtime/edge/policy.c): --compress (with the codec specs it names),
 * --link-mbps and --link-latency-ms, which come from the command line or a
 * policy file that anyone may have written.
 *
 * Input: one byte (stages 1..16 in the low 4 bits, the grammar in bits 4-5),
 * then the text. Aborts on a broken promise: a parse that succeeds but
 * leaves an edge with an empty spec, a spec that does not evaluate, a rate
 * or delay that is negative or not finite.
 *
 * clang: built as fuzz_policy with -fsanitize=fuzzer (tests/meson.build).
 * With FUZZ_REPLAY_MAIN (any compiler) this file is also the replay program
 * fuzz_policy_replay (tests/fuzz/replay/fuzz_driver.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/edge/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    const int stages = 1 + (data[0] & 15), grammar = (data[0] >> 4) & 3;
    char *text = malloc(size);
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    pz_policy p;
    pz_policy_init(&p, stages);
    pz_status st = grammar == 1 ? pz_policy_parse_mbps(&p, text, "fuzz")
                 : grammar == 2 ? pz_policy_parse_latency(&p, text, "fuzz")
                                : pz_policy_parse(&p, text, "fuzz");
    if (st == PZ_OK) {
        for (int e = 0; e < stages - 1; e++) {
            if (!(p.mbps[e] >= 0 && isfinite(p.mbps[e])) || !(p.latency_ms[e] >= 0 && isfinite(p.latency_ms[e])))
                abort();
            for (int d = 0; d < 2; d++) {
                const char *c = pz_policy_codec(&p, e, d);
                char buf[1024];
                if (c && (!c[0] || pz_policy_eval_spec(c, buf, sizeof buf) != PZ_OK)) abort();
            }
        }
    }
    pz_policy_free(&p);
    free(text);
    return 0;
}

#ifdef FUZZ_REPLAY_MAIN
#include "base/mem.h"
#include "tests/fuzz/replay/fuzz_driver.h"

static fuzz_image seed(int stages, int grammar, const char *text) {
    size_t n = strlen(text);
    uint8_t *b = xmalloc(n + 1);
    b[0] = (uint8_t)((stages - 1) | grammar << 4);
    memcpy(b + 1, text, n);
    return (fuzz_image){b, n + 1};
}

static int make_seeds(fuzz_image *s) {
    int n = 0;
    s[n++] = seed(2, 0, "fwd=q4,bwd=q8");
    s[n++] = seed(4, 0, "*:fwd=aq(q4,warmup=fp16,mem=4K),bwd=ef(topk:0.1);1-2:both=none;0-1:fwd=q4:group=row,round=nearest");
    s[n++] = seed(3, 0, "none");
    s[n++] = seed(8, 0, "both=jointsq:2+zstd;2-3:bwd=ef21(sign)");
    s[n++] = seed(4, 1, "0-1=100;*=1000");
    s[n++] = seed(2, 1, "12.5");
    s[n++] = seed(4, 2, "0-1=25;*=5");
    s[n++] = seed(1, 0, "fwd=fp16");
    s[n++] = seed(3, 0, "0-1:fwd=auto:every=5,candidates=none/q8:group=row,round=nearest/hadamard(q4)/q2;*:bwd=auto");
    return n;
}

static const char *const words[] = {"fwd=", "bwd=", "both=", ";", ",", ":", "*", "0-1", "1-2", "3-4", "none", "q4",
                                    "aq(", ")", "ef(", "topk:0.1", "+zstd", "=", "1e308", "-1", "nan", "inf", "0x10",
                                    "auto", "auto:", "every=", "candidates=", "/"};

static void mutate(pz_rng *r, uint8_t *b, size_t *len, size_t cap) {
    if (*len > 1) {   /* the text only; sometimes the selector byte */
        size_t n = *len - 1;
        fuzz_mutate_words(r, b + 1, &n, cap - 1, words, (int)(sizeof words / sizeof words[0]));
        *len = n + 1;
    }
    if (pz_rng_below(r, 16) == 0) b[0] = (uint8_t)pz_rng_next(r);
}

int main(int argc, char **argv) {
    static const fuzz_target t = {"policy", ".pzpol", 100000, 20261125, make_seeds, mutate, NULL};
    return fuzz_main(&t, argc, argv);
}
#endif
