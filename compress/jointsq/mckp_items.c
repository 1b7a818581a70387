/* mckp_items.c: the knapsack on an array of items (pz_mckp_solve, over
 * pz_mckp_solve_soa) and the exhaustive reference (pz_mckp_brute), see
 * mckp.h. Only tests call them: they are built once, not per ISA level
 * like mckp.c. */
#include "compress/jointsq/mckp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"

void pz_mckp_solve(const pz_mckp_item *items, size_t n, uint64_t capacity,
                   uint8_t *choice, pz_mckp_info *info) {
    pz_mckp_soa s;
    s.ucost = NULL;
    uint8_t *blk = xmalloc(n * 32 + 64);
    for (int o = 0; o < PZ_MCKP_OPTS; o++) {
        s.err[o] = (float *)(void *)(blk + (size_t)o * n * 4);
        s.cost[o] = (uint32_t *)(void *)(blk + (size_t)(4 + o) * n * 4);
    }
    for (size_t i = 0; i < n; i++)
        for (int o = 0; o < PZ_MCKP_OPTS; o++) {
            s.err[o][i] = items[i].err[o];
            s.cost[o][i] = items[i].cost[o];
        }
    pz_mckp_solve_soa(&s, n, capacity, 0.0f, INFINITY, 1, choice, info, NULL);
    free(blk);
}

static void brute_rec(const pz_mckp_item *items, size_t n, size_t i, uint64_t cost,
                      uint64_t capacity, double err, uint8_t *cur, uint8_t *best,
                      double *best_err) {
    if (i == n) {
        if (err < *best_err) {
            *best_err = err;
            memcpy(best, cur, n);
        }
        return;
    }
    for (int o = 0; o < PZ_MCKP_OPTS; o++) {
        if (isinf(items[i].err[o])) continue;
        uint64_t c = cost + items[i].cost[o];
        if (c > capacity) continue;
        cur[i] = (uint8_t)o;
        brute_rec(items, n, i + 1, c, capacity, err + items[i].err[o], cur, best, best_err);
    }
}

double pz_mckp_brute(const pz_mckp_item *items, size_t n, uint64_t capacity, uint8_t *choice) {
    uint8_t cur[12];
    double best = INFINITY;
    if (n > 12) return NAN;
    brute_rec(items, n, 0, 0, capacity, 0.0, cur, choice, &best);
    return best;
}
