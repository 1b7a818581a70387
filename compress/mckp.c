/* mckp.c: multiple-choice knapsack, convex-hull greedy (see mckp.h). */
#include "compress/mckp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/util.h"

static uint32_t f2u_(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Lower convex hull of an item's allowed points from option 0 on; writes the
 * hull's option indices to h and returns their count (>= 1). */
static int item_hull_(const pz_mckp_item *it, uint8_t h[PZ_MCKP_OPTS]) {
    int m = 0;
    h[m++] = 0;
    for (int o = 1; o < PZ_MCKP_OPTS; o++) {
        double e = it->err[o];
        if (!(e < (double)it->err[h[m - 1]])) continue;   /* dominated or not allowed */
        while (m >= 2) {
            int a = h[m - 2], b = h[m - 1];
            double eff1 = ((double)it->err[a] - it->err[b]) / ((double)it->cost[b] - it->cost[a]);
            double eff2 = ((double)it->err[b] - e) / ((double)it->cost[o] - it->cost[b]);
            if (eff2 < eff1) break;
            m--;                                            /* b is not strictly convex */
        }
        h[m++] = (uint8_t)o;
    }
    return m;
}

/* Weighted radix selection: over the upgrades listed in idx[0..m) (all
 * upgrades when idx is NULL), find the key T of the first upgrade, in the
 * order (key descending, index ascending), at which the running cost exceeds
 * *room. On return *room is reduced by the cost of all upgrades with key > T.
 * Precondition: the total cost of the listed upgrades exceeds *room. */
static uint32_t weighted_select_(const uint32_t *key, const uint32_t *cost, size_t nup,
                                 uint64_t *room, uint32_t *scratch) {
    static const int shift[3] = {21, 10, 0};
    static const uint32_t width[3] = {11, 11, 10};
    uint64_t *hist = xmalloc(sizeof(uint64_t) << 11);
    uint32_t prefix = 0;           /* key bits decided so far */
    uint32_t pmask = 0;            /* which bits prefix covers */
    size_t m = 0;                  /* candidates in scratch (after level 0) */
    for (int lv = 0; lv < 3; lv++) {
        uint32_t nb = 1u << width[lv], dm = nb - 1;
        memset(hist, 0, sizeof(uint64_t) * nb);
        if (lv == 0) {
            for (size_t u = 0; u < nup; u++) hist[key[u] >> shift[0]] += cost[u];
        } else {
            for (size_t j = 0; j < m; j++) {
                uint32_t u = scratch[j];
                hist[(key[u] >> shift[lv]) & dm] += cost[u];
            }
        }
        uint64_t acc = 0;
        uint32_t b = nb;
        while (b > 0) {
            b--;
            if (acc + hist[b] > *room) break;
            acc += hist[b];
        }
        *room -= acc;
        prefix |= b << shift[lv];
        pmask |= dm << shift[lv];
        if (lv == 2) break;
        /* keep the candidates whose key matches the prefix */
        size_t k = 0;
        if (lv == 0) {
            for (size_t u = 0; u < nup; u++) {
                scratch[k] = (uint32_t)u;
                k += (key[u] & pmask) == prefix;
            }
        } else {
            for (size_t j = 0; j < m; j++) {
                uint32_t u = scratch[j];
                scratch[k] = u;
                k += (key[u] & pmask) == prefix;
            }
        }
        m = k;
    }
    free(hist);
    return prefix;
}

void pz_mckp_solve(const pz_mckp_item *items, size_t n, uint64_t capacity,
                   uint8_t *choice, pz_mckp_info *info) {
    memset(info, 0, sizeof *info);
    uint64_t base = 0;
    for (size_t i = 0; i < n; i++) base += items[i].cost[0];
    memset(choice, 0, n);
    double err0 = 0;
    for (size_t i = 0; i < n; i++) err0 += items[i].err[0];
    info->cost = base;
    info->err = err0;
    if (base > capacity) return;
    info->base_fits = 1;
    if (n == 0) return;

    /* hulls and upgrades, in item order */
    uint8_t (*hull)[PZ_MCKP_OPTS] = xmalloc(n * sizeof *hull);
    uint8_t *hcnt = xmalloc(n);
    uint8_t *taken = xcalloc(n, 1);
    size_t cap_up = 3 * n;
    uint32_t *key = xmalloc(cap_up * sizeof *key);
    uint32_t *ucost = xmalloc(cap_up * sizeof *ucost);
    uint32_t *uitem = xmalloc(cap_up * sizeof *uitem);
    size_t nup = 0;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const pz_mckp_item *it = &items[i];
        int m = item_hull_(it, hull[i]);
        int used = 1;
        for (int j = 1; j < m; j++) {
            int a = hull[i][j - 1], b = hull[i][j];
            float eff = (float)(((double)it->err[a] - it->err[b]) /
                                ((double)it->cost[b] - it->cost[a]));
            if (!(eff > 0.0f) || !isfinite(eff)) break;     /* rounds to no gain */
            key[nup] = f2u_(eff);
            ucost[nup] = it->cost[b] - it->cost[a];
            uitem[nup] = (uint32_t)i;
            total += ucost[nup];
            nup++;
            used++;
        }
        hcnt[i] = (uint8_t)used;
    }

    uint64_t room = capacity - base;
    if (total <= room) {
        for (size_t i = 0; i < n; i++) taken[i] = (uint8_t)(hcnt[i] - 1);
        room -= total;
        info->upgrades = nup;
    } else {
        uint32_t *scratch = xmalloc(nup * sizeof *scratch);
        uint64_t r = room;
        uint32_t T = weighted_select_(key, ucost, nup, &r, scratch);
        free(scratch);
        /* r = room left after every upgrade with key > T */
        int crit_seen = 0;
        for (size_t u = 0; u < nup; u++) {
            if (key[u] > T) {
                taken[uitem[u]]++;
                info->upgrades++;
            } else if (key[u] == T && !crit_seen) {
                if (ucost[u] <= r) {
                    r -= ucost[u];
                    taken[uitem[u]]++;
                    info->upgrades++;
                } else {
                    const pz_mckp_item *it = &items[uitem[u]];
                    int j = taken[uitem[u]];
                    int a = hull[uitem[u]][j], b = hull[uitem[u]][j + 1];
                    info->gap = (double)it->err[a] - it->err[b];
                    crit_seen = 1;
                }
            }
        }
        room = r;
        /* fill in index order */
        for (size_t i = 0; i < n && room > 0; i++) {
            const pz_mckp_item *it = &items[i];
            while (taken[i] + 1 < hcnt[i]) {
                uint32_t c = it->cost[hull[i][taken[i] + 1]] - it->cost[hull[i][taken[i]]];
                if (c > room) break;
                room -= c;
                taken[i]++;
                info->upgrades++;
            }
        }
    }
    double err = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t o = hull[i][taken[i]];
        choice[i] = o;
        err += items[i].err[o];
    }
    info->err = err;
    info->cost = capacity - room;
    free(hull);
    free(hcnt);
    free(taken);
    free(key);
    free(ucost);
    free(uitem);
}

static void brute_rec_(const pz_mckp_item *items, size_t n, size_t i, uint64_t cost,
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
        brute_rec_(items, n, i + 1, c, capacity, err + items[i].err[o], cur, best, best_err);
    }
}

double pz_mckp_brute(const pz_mckp_item *items, size_t n, uint64_t capacity, uint8_t *choice) {
    uint8_t cur[12];
    double best = INFINITY;
    if (n > 12) return NAN;
    brute_rec_(items, n, 0, 0, capacity, 0.0, cur, choice, &best);
    return best;
}
