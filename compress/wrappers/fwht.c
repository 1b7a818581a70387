/* fwht.c: the fast Walsh-Hadamard transform of the hadamard() wrapper
 * (compress/wrappers/hadamard.h), compiled once per ISA level like the codecs
 * (tools/isa_rename.py); compress/wrappers/hadamard.c picks the level.
 *
 * Row by row (a row of C floats stays in L1 or L2 through every pass):
 * the butterfly stages of compress/wrappers/hadamard_elem.h, the first three (h =
 * 1, 2, 4, within octets of contiguous floats) in one pass that also
 * applies the signs, then two at a time (radix 4), then one; the forward's
 * last pass scales and looks for inf and NaN. (A radix-8 pass for h >= 8
 * did not vectorize with gcc 12; radix 4 does.) Fusing stages only keeps values in registers
 * between the same adds and subtracts, in the same order, so the results
 * are bitwise those of one stage at a time (and of the GPU). Plain loops
 * over contiguous lanes that gcc and clang vectorize. */
#include <string.h>

#include "compress/wrappers/hadamard.h"
#include "compress/wrappers/hadamard_elem.h"

/* The three stages of eight values: in(k) gives value k, out(k, v)
 * stores the result k (macros, so that each loop body stays a list of
 * scalar statements the vectorizer can widen): stage 1 pairs (0,1) (2,3)
 * (4,5) (6,7), stage 2 (0,2) (1,3) (4,6) (5,7), stage 3 (0,4) (1,5) (2,6)
 * (3,7). */
#define PZ_FWHT8(in, out)                                                                          \
    do {                                                                                           \
        float a0 = in(0), a1 = in(1), a2 = in(2), a3 = in(3);                                      \
        float a4 = in(4), a5 = in(5), a6 = in(6), a7 = in(7);                                      \
        float b0 = a0 + a1, b1 = a0 - a1, b2 = a2 + a3, b3 = a2 - a3;                              \
        float b4 = a4 + a5, b5 = a4 - a5, b6 = a6 + a7, b7 = a6 - a7;                              \
        float c0 = b0 + b2, c2 = b0 - b2, c1 = b1 + b3, c3 = b1 - b3;                              \
        float c4 = b4 + b6, c6 = b4 - b6, c5 = b5 + b7, c7 = b5 - b7;                              \
        out(0, c0 + c4);                                                                           \
        out(1, c1 + c5);                                                                           \
        out(2, c2 + c6);                                                                           \
        out(3, c3 + c7);                                                                           \
        out(4, c0 - c4);                                                                           \
        out(5, c1 - c5);                                                                           \
        out(6, c2 - c6);                                                                           \
        out(7, c3 - c7);                                                                           \
    } while (0)

/* The first three stages (h = 1, 2, 4: octets of contiguous floats, an
 * interleaved group that the vectorizer turns into shuffles): out = those
 * stages of x * s; in place (x == out) without signs. */
static void octets_signed(float *restrict out, const float *restrict x, const float *restrict s, size_t C) {
    for (size_t i = 0; i < C; i += 8) {
#define IN(k) (x[i + (k)] * s[i + (k)])
#define OUT(k, y) out[i + (k)] = (y)
        PZ_FWHT8(IN, OUT);
#undef IN
#undef OUT
    }
}

static void octets(float *v, size_t C) {
    for (size_t i = 0; i < C; i += 8) {
#define IN(k) v[i + (k)]
#define OUT(k, y) v[i + (k)] = (y)
        PZ_FWHT8(IN, OUT);
#undef IN
#undef OUT
    }
}

/* Stages h and 2h (radix 4), or stage h alone (radix 2), in place. */
static void radix4(float *restrict v, size_t C, size_t h) {
    for (size_t b = 0; b < C; b += 4 * h) {
        float *restrict p0 = v + b, *restrict p1 = p0 + h, *restrict p2 = p1 + h, *restrict p3 = p2 + h;
        for (size_t r = 0; r < h; r++) {
            float a = p0[r], b1 = p1[r], c = p2[r], d = p3[r];
            float t0 = a + b1, t1 = a - b1, t2 = c + d, t3 = c - d;
            p0[r] = t0 + t2;
            p1[r] = t1 + t3;
            p2[r] = t0 - t2;
            p3[r] = t1 - t3;
        }
    }
}

static void radix2(float *restrict v, size_t C, size_t h) {
    for (size_t b = 0; b < C; b += 2 * h) {
        float *restrict p = v + b, *restrict q = p + h;
        for (size_t r = 0; r < h; r++) {
            float a = p[r], c = q[r];
            p[r] = a + c;
            q[r] = a - c;
        }
    }
}

/* The first stages of a block on one row: out = the first up-to-three
 * stages of x * s (s NULL: of x, and then out must be x); returns the
 * stages done. */
static int first_pass(float *out, const float *x, const float *s, size_t C, int logn) {
    if (logn >= 3) {
        if (s) octets_signed(out, x, s, C);
        else octets(out, C);
        return 3;
    }
    if (s)
        for (size_t c = 0; c < C; c++) out[c] = x[c] * s[c];
    if (logn == 2) radix4(out, C, 1);
    if (logn == 1) radix2(out, C, 1);
    return logn;
}

/* the remaining stages, from 2^l on */
static void later_passes(float *v, size_t C, int l, int logn) {
    while (l < logn) {
        size_t h = (size_t)1 << l;
        int left = logn - l;
        if (left >= 2) {
            radix4(v, C, h);
            l += 2;
        } else {
            radix2(v, C, h);
            l += 1;
        }
    }
}

/* largest |bits| of v: at least 0x7f800000 when v holds inf or NaN */
static uint32_t worst_bits(const float *v, size_t n) {
    uint32_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, v + i, 4);
        u &= 0x7fffffffu;
        worst = u > worst ? u : worst;
    }
    return worst;
}

int pz_hadamard_forward(const float *x, float *y, size_t rows, size_t C, int logn, const float *signs) {
    float sc = pz_hd_scale(logn);
    uint32_t worst = 0;
    for (size_t r = 0; r < rows; r++) {
        const float *xr = x + r * C;
        float *yr = y + r * C;
        int l = first_pass(yr, xr, signs, C, logn);
        later_passes(yr, C, l, logn);
        /* the scale, and the largest |bits| on the way */
        for (size_t c = 0; c < C; c++) {
            float t = yr[c] * sc;
            uint32_t u;
            memcpy(&u, &t, 4);
            u &= 0x7fffffffu;
            worst = u > worst ? u : worst;
            yr[c] = t;
        }
    }
    return worst < 0x7f800000u;
}

void pz_hadamard_inverse(float *v, size_t rows, size_t C, int logn, const float *signs) {
    float sc = pz_hd_scale(logn);
    for (size_t r = 0; r < rows; r++) {
        float *vr = v + r * C;
        int l = first_pass(vr, vr, NULL, C, logn);
        later_passes(vr, C, l, logn);
        for (size_t c = 0; c < C; c++) vr[c] *= sc * signs[c];
    }
}

int pz_hadamard_all_finite(const float *v, size_t n) { return worst_bits(v, n) < 0x7f800000u; }
