/* mckp.h: multiple-choice knapsack by the convex-hull (Lagrangian) greedy
 * (private to compress/; used by jointsq.c, tested against brute force).
 *
 * Problem. n items; item i has PZ_MCKP_OPTS options o = 0..3 with an integer
 * cost c[o] (bits) and an error e[o] >= 0 (e = INFINITY: option not
 * allowed). Costs ascend strictly with o and option 0 is always allowed.
 * Choose one option per item so that sum of costs <= capacity and the sum of
 * errors is minimal.
 *
 * Method (Sinha-Zoltners LP greedy).
 *  1. Per item, the lower convex hull of its points (c[o], e[o]) from option 0
 *     on: dominated points (no lower error than a cheaper one) and points
 *     above the hull are dropped, as are collinear middle points, so the
 *     hull's upgrades (step from one hull point to the next) have strictly
 *     decreasing efficiency  eff = (e[a] - e[b]) / (c[b] - c[a]) > 0.
 *  2. All items start at option 0. Upgrades are taken in the order
 *     (eff descending, item index ascending); because efficiencies fall along
 *     each hull this order always takes a prefix of each item's hull. The
 *     first upgrade in this order that does not fit the remaining capacity
 *     is the critical one; the LP relaxation would take a fraction of it.
 *     The order is found by an exact radix selection on the float bits of eff
 *     weighted by cost (O(n), no sort), so ties are broken by item index.
 *  3. Fill: one pass over the items in index order takes, while it fits, the
 *     next hull upgrade of each item (after the critical one was skipped,
 *     smaller upgrades may still fit). This only lowers the error.
 *
 * Gap. The LP optimum is a lower bound of the integer optimum, and the
 * greedy's error before the fill exceeds the LP optimum by less than the
 * critical upgrade's error drop. So
 *     err(greedy) - err(optimal) < gap = e[a] - e[b] of the critical upgrade
 * (0 when every upgrade fits: then the greedy is optimal), and gap is at most
 * one item's e[0] - min_o e[o]. info->gap reports it. */
#ifndef PZ_MCKP_H
#define PZ_MCKP_H

#include <stddef.h>
#include <stdint.h>

#define PZ_MCKP_OPTS 4

typedef struct {
    uint32_t cost[PZ_MCKP_OPTS];   /* strictly ascending */
    float err[PZ_MCKP_OPTS];       /* >= 0, INFINITY = not allowed; err[0] finite */
} pz_mckp_item;

typedef struct {
    uint64_t cost;      /* sum of chosen costs (<= capacity when base_fits) */
    double err;         /* sum of chosen errors */
    double gap;         /* bound on err - optimal err (see above) */
    int base_fits;      /* 0 when even all-option-0 exceeds the capacity */
    size_t upgrades;    /* hull upgrades taken */
} pz_mckp_info;

/* Solves the problem; choice[i] receives the option index of item i. When the
 * options 0 alone exceed the capacity, all items get option 0 and
 * info->base_fits = 0. Allocates O(n) scratch (aborts on out of memory). */
void pz_mckp_solve(const pz_mckp_item *items, size_t n, uint64_t capacity,
                   uint8_t *choice, pz_mckp_info *info);

/* Exhaustive search (tests only): optimal sum of errors over all 4^n
 * assignments within the capacity, n <= 12; writes the best choice. */
double pz_mckp_brute(const pz_mckp_item *items, size_t n, uint64_t capacity, uint8_t *choice);

#endif
