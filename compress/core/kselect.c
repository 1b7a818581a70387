/* kselect.c: exact k-th largest magnitude by radix selection (see kselect.h). */
#include "compress/core/kselect.h"

/* Finds, in hist[0..top], the bucket that holds rank *krem counted from the
 * top; adds the counts of the buckets above it to *above. */
static uint32_t find_bucket(const uint32_t *hist, uint32_t top, size_t *krem, size_t *above) {
    size_t acc = 0;
    uint32_t b = top;
    for (;;) {
        if (acc + hist[b] >= *krem || b == 0) break;
        acc += hist[b];
        b--;
    }
    *krem -= acc;
    *above += acc;
    return b;
}

uint32_t pz_kth_largest_abs(const float *x, size_t n, size_t k, uint32_t *scratch, size_t *above) {
    static const int shift_long[3] = {20, 10, 0}, width_long[3] = {11, 10, 10};
    static const int shift_short[4] = {23, 15, 7, 0}, width_short[4] = {8, 8, 8, 7};
    int longin = n >= 8192;
    const int *shift = longin ? shift_long : shift_short;
    const int *width = longin ? width_long : width_short;
    int levels = longin ? 3 : 4;
    uint32_t hist[2048];
    size_t krem = k;
    *above = 0;

    /* level 0 over the floats */
    uint32_t nb = 1u << width[0];
    memset(hist, 0, nb * sizeof hist[0]);
    uint32_t kmax = 0;
    const int s0 = shift[0];
    for (size_t i = 0; i < n; i++) {
        uint32_t key = pz_abs_key(x[i]);
        hist[key >> s0]++;
        kmax = key > kmax ? key : kmax;
    }
    uint32_t b = find_bucket(hist, kmax >> s0, &krem, above);
    uint32_t prefix = b << s0;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t key = pz_abs_key(x[i]);
        scratch[m] = key;
        m += (key >> s0) == b;
    }
    for (int lv = 1; lv < levels; lv++) {
        int s = shift[lv];
        uint32_t dm = (1u << width[lv]) - 1;
        memset(hist, 0, (dm + 1) * sizeof hist[0]);
        uint32_t top = 0;
        for (size_t j = 0; j < m; j++) {
            uint32_t d = (scratch[j] >> s) & dm;
            hist[d]++;
            top = d > top ? d : top;
        }
        b = find_bucket(hist, top, &krem, above);
        prefix |= b << s;
        if (lv == levels - 1) break;
        size_t mm = 0;
        for (size_t j = 0; j < m; j++) {
            uint32_t key = scratch[j];
            scratch[mm] = key;
            mm += ((key >> s) & dm) == b;
        }
        m = mm;
    }
    return prefix;
}

uint32_t pz_kth_largest_key(uint32_t *key, size_t m, size_t k, size_t *above) {
    uint32_t hist[256];
    *above = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t j = 0; j < m; j++) {
        lo = key[j] < lo ? key[j] : lo;
        hi = key[j] > hi ? key[j] : hi;
    }
    for (;;) {
        if (lo == hi) return lo;                     /* the rest are equal */
        if (m <= 16) {                               /* descending insertion sort */
            for (size_t j = 1; j < m; j++) {
                uint32_t v = key[j];
                size_t i = j;
                while (i > 0 && key[i - 1] < v) {
                    key[i] = key[i - 1];
                    i--;
                }
                key[i] = v;
            }
            uint32_t T = key[k - 1];
            size_t a = 0;
            while (key[a] > T) a++;
            *above += a;
            return T;
        }
        uint32_t range = hi - lo;
        int bl = 32 - __builtin_clz(range);
        int s = bl > 8 ? bl - 8 : 0;
        uint32_t nb = (range >> s) + 1;
        memset(hist, 0, nb * sizeof hist[0]);
        for (size_t j = 0; j < m; j++) hist[(key[j] - lo) >> s]++;
        uint32_t b = nb - 1;
        size_t acc = 0;
        while (acc + hist[b] < k) acc += hist[b--];
        *above += acc;
        k -= acc;
        size_t mm = 0;
        uint32_t nlo = UINT32_MAX, nhi = 0;
        for (size_t j = 0; j < m; j++) {
            uint32_t v = key[j];
            int in = ((v - lo) >> s) == b;
            key[mm] = v;
            mm += (size_t)in;
            uint32_t vl = in ? v : UINT32_MAX, vh = in ? v : 0;
            nlo = vl < nlo ? vl : nlo;
            nhi = vh > nhi ? vh : nhi;
        }
        m = mm;
        lo = nlo;
        hi = nhi;
    }
}
