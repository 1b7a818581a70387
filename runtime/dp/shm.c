/* shm.c: see shm.h. */
#include "runtime/dp/shm_priv.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include "base/bytes.h"
#include "base/clock.h"
#include "base/mem.h"
#include "runtime/net/bootmsg.h"

#define SHM_MAGIC 0x31686d737a70ull   /* "pzshm1" */
#define NAME_LEN PZ_DP_SHM_NAME_LEN
#define HDR_BYTES PZ_DP_SHM_HDR_BYTES
#define MEMBER_BYTES PZ_DP_SHM_MEMBER_BYTES
#define OFFER_BYTES (NAME_LEN + 8 + 8 + 4 + 16 + 1)

typedef struct {
    uint64_t magic, total, slot_bytes;
    uint32_t D, pad;
    uint8_t nonce[16];
} shm_hdr;

typedef pz_dp_shm_member shm_member;

static shm_member *member(const struct pz_dp_shm *S, int i) { return pz_dp_shm_member_at(S, i); }
static float *slot(const struct pz_dp_shm *S, int D, uint32_t k, int i) {
    return (float *)(S->base + S->data_off + ((size_t)(k & 1) * (size_t)D + (size_t)i) * S->slot_bytes);
}
static size_t data_off(int D) {
    size_t o = HDR_BYTES + (size_t)D * MEMBER_BYTES;
    return (o + 4095) & ~(size_t)4095;
}
static size_t seg_total(int D, size_t slot_bytes) { return data_off(D) + 2 * (size_t)D * slot_bytes; }

/* ---- set-up ------------------------------------------------------------------ */

pz_status pz_dp_shm_msg(pz_dp_group *g, int send, int peer, uint32_t k, void *buf, size_t bytes) {
    pz_request *r = NULL;
    pz_status st = pz_dp_post(g, send, peer, PZ_DP_KIND_SHM, k, buf, bytes, &r);
    if (st != PZ_OK) return st;
    size_t got = 0;
    st = send ? pz_dp_wait(g, r, NULL) : pz_dp_wait_recv(g, r, &got);
    if (st == PZ_OK && !send && got != bytes)
        return pz_fail(PZ_ERR_PEER, "rank %d: dp shared memory set-up: rank %d sent %zu bytes, expected %zu",
                       g->ranks[g->me], g->ranks[peer], got, bytes);
    return st;
}

static void unmap(struct pz_dp_shm *S) {
    if (S->base) munmap(S->base, S->total);
    S->base = NULL;
}

/* Maps fd's total bytes and checks the header against the offer's. */
static const char *map_check(struct pz_dp_shm *S, int fd, int D, const uint8_t nonce[16]) {
    struct stat sb;
    if (fstat(fd, &sb) != 0 || (uint64_t)sb.st_size != S->total) return "its size is not the offer's";
    if (sb.st_uid != geteuid() || (sb.st_mode & 077)) return "it belongs to another user or others may open it";
    void *p = mmap(NULL, S->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return "mmap failed";
    S->base = p;
    const shm_hdr *h = p;
    if (h->magic != SHM_MAGIC || h->total != S->total || h->slot_bytes != S->slot_bytes || h->D != (uint32_t)D ||
        memcmp(h->nonce, nonce, 16) != 0)
        return "its header is not the offer's";
    return NULL;
}

/* The names of this user's segments whose maker is gone: a member 0 killed
 * (SIGKILL) between making one and unlinking it (one round trip) left it. */
static void sweep_stale(void) {
    DIR *d = opendir("/dev/shm");
    if (!d) return;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char *end, path[300];
        if (strncmp(e->d_name, "pz-dp-", 6) != 0) continue;
        long pid = strtol(e->d_name + 6, &end, 10);
        if (end == e->d_name + 6 || *end != '-' || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* alive, or not ours to judge */
        struct stat sb;
        snprintf(path, sizeof path, "/dev/shm/%s", e->d_name);
        if (stat(path, &sb) == 0 && sb.st_uid == geteuid()) unlink(path);
    }
    closedir(d);
}

/* member 0: makes and maps the segment; 0 when it cannot (then the network) */
static int create(pz_dp_group *g, struct pz_dp_shm *S, char name[NAME_LEN], uint8_t nonce[16]) {
    uint8_t rnd[16];
    sweep_stale();
    pz_boot_random(rnd, sizeof rnd);
    pz_boot_random(nonce, 16);
    int pos = snprintf(name, NAME_LEN, "/pz-dp-%d-", (int)getpid());
    for (int i = 0; i < 16; i++) pos += snprintf(name + pos, (size_t)(NAME_LEN - pos), "%02x", rnd[i]);
    int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return 0;
    int ok = ftruncate(fd, (off_t)S->total) == 0;
    void *p = ok ? mmap(NULL, S->total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(name);
        return 0;
    }
    S->base = p;
    shm_hdr *h = p;
    h->magic = SHM_MAGIC;
    h->total = S->total;
    h->slot_bytes = S->slot_bytes;
    h->D = (uint32_t)g->n;
    memcpy(h->nonce, nonce, 16);
    memcpy(S->nonce, nonce, 16);
    return 1;
}

/* "/pz-dp-PID-" and 32 hex digits */
static int name_ok(const uint8_t *b) {
    if (memcmp(b, "/pz-dp-", 7) != 0 || b[NAME_LEN - 1] != 0) return 0;
    int i = 7;
    while (i < 17 && b[i] >= '0' && b[i] <= '9') i++;
    if (i == 7 || b[i++] != '-') return 0;
    for (int j = 0; j < 32; j++, i++)
        if (!((b[i] >= '0' && b[i] <= '9') || (b[i] >= 'a' && b[i] <= 'f'))) return 0;
    return b[i] == 0;
}

/* member i > 0: the offer; answer 1 mapped, 0 cannot open (another host), 2 bad offer */
static pz_status join(pz_dp_group *g, struct pz_dp_shm *S, uint8_t *answer) {
    uint8_t off[OFFER_BYTES];
    pz_status st = pz_dp_shm_msg(g, 0, 0, 0, off, sizeof off);
    if (st != PZ_OK) return st;
    *answer = 0;
    if (!off[OFFER_BYTES - 1]) return PZ_OK;   /* member 0 could not make one */
    uint64_t total = pz_get_u64(off + NAME_LEN), slot_bytes = pz_get_u64(off + NAME_LEN + 8);
    uint32_t D = pz_get_u32(off + NAME_LEN + 16);
    const char *why = NULL;
    if (!name_ok(off)) why = "a malformed name";
    else if (D != (uint32_t)g->n) why = "another number of members";
    else if (slot_bytes != S->slot_bytes) why = "another slot size";
    else if (total != seg_total(g->n, slot_bytes)) why = "a size that does not fit its slots";
    if (why) {
        *answer = 2;
        return pz_fail(PZ_ERR_PEER, "rank %d: dp shared memory set-up: rank %d offered %s", g->ranks[g->me],
                       g->ranks[0], why);
    }
    int fd = shm_open((const char *)off, O_RDWR, 0);
    if (fd < 0) return PZ_OK;   /* not visible here: another host */
    why = map_check(S, fd, g->n, off + NAME_LEN + 20);
    close(fd);
    if (why) {
        unmap(S);
        *answer = 2;
        return pz_fail(PZ_ERR_PEER, "rank %d: dp shared memory set-up: the segment rank %d offered fails its check: %s",
                       g->ranks[g->me], g->ranks[0], why);
    }
    memcpy(S->nonce, off + NAME_LEN + 20, 16);
    *answer = 1;
    return PZ_OK;
}

/* member 0: offers, collects the answers, unlinks, sends the verdict */
static pz_status lead(pz_dp_group *g, struct pz_dp_shm *S, uint8_t *verdict) {
    uint8_t off[OFFER_BYTES] = {0}, nonce[16] = {0};
    char name[NAME_LEN] = {0};
    int made = create(g, S, name, nonce);
    memcpy(off, name, NAME_LEN);
    pz_put_u64(off + NAME_LEN, S->total);
    pz_put_u64(off + NAME_LEN + 8, S->slot_bytes);
    pz_put_u32(off + NAME_LEN + 16, (uint32_t)g->n);
    memcpy(off + NAME_LEN + 20, nonce, 16);
    off[OFFER_BYTES - 1] = (uint8_t)made;
    pz_status st = PZ_OK;
    for (int i = 1; i < g->n && st == PZ_OK; i++) st = pz_dp_shm_msg(g, 1, i, 0, off, sizeof off);
    uint8_t v = made ? 1 : 0;
    int bad = -1;
    for (int i = 1; i < g->n && st == PZ_OK; i++) {
        uint8_t a = 0;
        st = pz_dp_shm_msg(g, 0, i, 1, &a, 1);
        if (st == PZ_OK && a != 1 && v != 2) v = a == 0 ? 0 : 2;
        if (st == PZ_OK && a > 2) v = 2;
        if (st == PZ_OK && v == 2 && bad < 0) bad = i;
    }
    if (made) shm_unlink(name);   /* every member mapped it or never will */
    for (int i = 1; i < g->n && st == PZ_OK; i++) st = pz_dp_shm_msg(g, 1, i, 2, &v, 1);
    *verdict = v;
    if (st == PZ_OK && v == 2)
        st = pz_fail(PZ_ERR_PEER, "rank %d: dp shared memory set-up: rank %d refused the segment", g->ranks[g->me],
                     g->ranks[bad]);
    return st;
}

static pz_status setup(pz_dp_group *g) {
    struct pz_dp_shm *S = g->shm;
    S->slot_bytes = g->shm_slot_bytes ? (g->shm_slot_bytes + 63) & ~(size_t)63 : PZ_DP_SHM_SLOT_BYTES;
    S->data_off = data_off(g->n);
    S->total = seg_total(g->n, S->slot_bytes);
    uint8_t v = 0;
    pz_status st;
    if (g->me == 0) {
        st = lead(g, S, &v);
    } else {
        uint8_t a = 0;
        st = join(g, S, &a);
        pz_status sa = pz_dp_shm_msg(g, 1, 0, 1, &a, 1);
        if (st == PZ_OK) st = sa;
        if (st == PZ_OK) st = pz_dp_shm_msg(g, 0, 0, 2, &v, 1);
        if (st == PZ_OK && v == 2)
            st = pz_fail(PZ_ERR_PEER, "rank %d: dp shared memory set-up: rank %d reports a member refused the segment",
                         g->ranks[g->me], g->ranks[0]);
        if (st == PZ_OK && v > 2) st = pz_fail(PZ_ERR_PEER, "rank %d: dp shared memory set-up: rank %d sent verdict %u",
                                               g->ranks[g->me], g->ranks[0], v);
    }
    g->seq++;
    if (st != PZ_OK || v != 1) {
        unmap(S);
        S->state = st != PZ_OK ? 3 : 2;
        if (st != PZ_OK) snprintf(S->err, sizeof S->err, "%s", pz_last_error());
        return st;
    }
    shm_member *m = member(S, g->me);
    m->pid = (int32_t)getpid();
    st = pz_dp_shm_cma_setup(g, S);
    if (st != PZ_OK) {
        unmap(S);
        S->state = 3;
        snprintf(S->err, sizeof S->err, "%s", pz_last_error());
        return st;
    }
    S->state = 1;
    return PZ_OK;
}

pz_status pz_dp_shm_pick(pz_dp_group *g, size_t n, pz_dp_algo algo, int *use) {
    *use = 0;
    if (g->net_only || g->n < 2 || n == 0) return PZ_OK;
    if (algo == PZ_DP_AUTO) algo = n * sizeof(float) <= g->small_bytes ? PZ_DP_RDOUBLING : PZ_DP_RING;
    /* recursive doubling sums in another order unless D = 2 */
    if (algo != PZ_DP_RING && g->n != 2) return PZ_OK;
    if (!g->shm) g->shm = xcalloc(1, sizeof *g->shm);
    if (g->shm->state == 0) {
        pz_status st = setup(g);
        if (st != PZ_OK) return st;
    }
    if (g->shm->state == 3)
        return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce: the shared-memory path failed before: %s",
                       g->ranks[g->me], g->shm->err);
    *use = g->shm->state == 1;
    return PZ_OK;
}

/* ---- waiting ----------------------------------------------------------------- */

static void post(struct pz_dp_shm *S, int me, uint32_t v) {
    shm_member *m = member(S, me);
    atomic_store_explicit(&m->ctr, v, memory_order_seq_cst);
#ifdef __linux__
    if (atomic_load_explicit(&m->waiters, memory_order_seq_cst))
        syscall(SYS_futex, (uint32_t *)&m->ctr, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
#endif
}

static int reached(shm_member *m, uint32_t target) {
    return (int32_t)(atomic_load_explicit(&m->ctr, memory_order_acquire) - target) >= 0;
}

static void sleep_on(shm_member *m) {
    uint32_t seen = atomic_load_explicit(&m->ctr, memory_order_seq_cst);
#ifdef __linux__
    struct timespec ts = {0, 1000000};
    atomic_fetch_add_explicit(&m->waiters, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&m->ctr, memory_order_seq_cst) == seen)
        syscall(SYS_futex, (uint32_t *)&m->ctr, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub_explicit(&m->waiters, 1, memory_order_seq_cst);
#else
    (void)seen;
    usleep(1000);
#endif
}

/* Waits until member i posted target (block = 0: one look). */
static pz_status wait_member(pz_dp_shm_op *op, int i, uint32_t target, int block, int *ok) {
    pz_dp_group *g = op->g;
    shm_member *m = member(g->shm, i);
    *ok = reached(m, target);
    if (*ok || !block) return PZ_OK;
    double t0 = pz_now(), timeout = pz_transport_peer_timeout(g->t), next_check = t0 + 0.05;
    for (;;) {
        if ((*ok = reached(m, target))) return PZ_OK;
        double now = pz_now();
        if (now - t0 < 20e-6) continue;
        /* not sched_yield: on a loaded machine a yield gives the core to
         * every other runnable task first, where a futex wake lets the
         * waiter run as soon as the post comes (wall time per call down
         * 2-10x at 1-16 MiB, load 40, docs/results.md) */
        sleep_on(m);
        if (now < next_check) continue;
        next_check = now + 0.05;
        pz_transport_progress(g->t);   /* the caller's other messages move meanwhile */
        if (m->pid > 0 && kill(m->pid, 0) != 0 && errno == ESRCH)
            return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce #%u over shared memory: rank %d (pid %d) is gone",
                           g->ranks[g->me], op->seq, g->ranks[i], (int)m->pid);
        if (now - t0 > timeout)
            return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce #%u over shared memory: no answer from rank %d within "
                           "--peer-timeout %g s (peer frozen?)", g->ranks[g->me], op->seq, g->ranks[i], timeout);
    }
}

static pz_status wait_all(pz_dp_shm_op *op, uint32_t target, int block, int *ok) {
    for (int i = 0; i < op->g->n; i++) {
        if (i == op->g->me) continue;
        pz_status st = wait_member(op, i, target, block, ok);
        if (st != PZ_OK || !*ok) return st;
    }
    *ok = 1;
    return PZ_OK;
}

/* ---- the reduction --------------------------------------------------------------- */

/* the ring chunk of element i of n over D (pz_dp_chunk's inverse) */
static int chunk_of(size_t i, size_t n, int D) {
    size_t q = n / (size_t)D, r = n % (size_t)D;
    return i < r * (q + 1) ? (int)(i / (q + 1)) : (int)(r + (i - r * (q + 1)) / q);
}

/* dst[0..e-i) = the sum of src[*][i..e), all in ring chunk c: the ring's
 * order, from member c on (float addition commutes: a + b is b + a) */
static void sum_chunk(float *dst, float *const *src, int c, size_t i, size_t e, int D, int mean) {
    size_t len = e - i;
    const float *p = src[c] + i, *q = src[(c + 1) % D] + i;
    const float d = (float)D;
    if (D == 2 && mean) {
        for (size_t j = 0; j < len; j++) dst[j] = (p[j] + q[j]) / d;
        return;
    }
    for (size_t j = 0; j < len; j++) dst[j] = p[j] + q[j];
    for (int k = 2; k < D; k++) {
        const float *s = src[(c + k) % D] + i;
        if (k == D - 1 && mean)
            for (size_t j = 0; j < len; j++) dst[j] = (dst[j] + s[j]) / d;
        else
            for (size_t j = 0; j < len; j++) dst[j] += s[j];
    }
}

/* piece p0 + [a, b) of the vector: this member's part */
static void reduce_part(pz_dp_shm_op *op, uint32_t k, size_t p0, size_t a, size_t b) {
    pz_dp_group *g = op->g;
    int D = g->n;
    float *src[PZ_DP_MAX];
    for (int r = 0; r < D; r++) src[r] = r == g->me ? op->buf : slot(g->shm, D, k, r) - p0;
    float *out = slot(g->shm, D, k, g->me) - p0;   /* indexed by the vector's element */
    for (size_t i = p0 + a; i < p0 + b;) {
        int c = chunk_of(i, op->n, D);
        size_t lo, hi;
        pz_dp_chunk(op->n, D, c, &lo, &hi);
        size_t e = hi < p0 + b ? hi : p0 + b;
        sum_chunk(out + i, src, c, i, e, D, op->mean);
        i = e;
    }
    memcpy(op->buf + p0 + a, out + p0 + a, (b - a) * sizeof(float));
}

static void piece(const pz_dp_shm_op *op, size_t *p0, size_t *len) {
    *p0 = (size_t)op->r * op->piece;
    *len = op->n - *p0 < op->piece ? op->n - *p0 : op->piece;
}

static pz_status check_peers(pz_dp_shm_op *op) {
    pz_dp_group *g = op->g;
    for (int i = 0; i < g->n; i++) {
        shm_member *m = member(g->shm, i);
        if (m->seq != op->seq || m->n != op->n)
            return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce #%u over shared memory: rank %d is in all-reduce #%u "
                           "of %llu floats, this rank of %zu (mismatched calls?)", g->ranks[g->me], op->seq,
                           g->ranks[i], m->seq, (unsigned long long)m->n, op->n);
    }
    return PZ_OK;
}

/* one op's rounds, from where it stopped */
static pz_status run(pz_dp_shm_op *op, int block) {
    pz_dp_group *g = op->g;
    struct pz_dp_shm *S = g->shm;
    int D = g->n, me = g->me, ok = 0;
    while (op->r < op->rounds) {
        uint32_t k = op->k0 + op->r;
        size_t p0, len, lo, hi;
        piece(op, &p0, &len);
        pz_dp_chunk(len, D, me, &lo, &hi);
        float *mine = slot(S, D, k, me);
        pz_status st = PZ_OK;
        if (op->phase == 0) {
            shm_member *m = member(S, me);
            m->seq = op->seq;
            m->n = op->n;
            m->buf = (uint64_t)(uintptr_t)op->buf;   /* single copy: where the peer reads and writes */
            if (!S->cma) {
                memcpy(mine, op->buf + p0, lo * sizeof(float));
                memcpy(mine + hi, op->buf + p0 + hi, (len - hi) * sizeof(float));
            }
            post(S, me, 2 * k + 1);
            op->phase = 1;
        }
        if (op->phase == 1) {
            if ((st = wait_all(op, 2 * k + 1, block, &ok)) != PZ_OK || !ok) return st;
            if ((st = check_peers(op)) != PZ_OK) return st;
            if (!S->cma) reduce_part(op, k, p0, lo, hi);
            else if ((st = pz_dp_shm_cma_reduce(op, member(S, 1 - me)->buf)) != PZ_OK) return st;
            post(S, me, 2 * k + 2);
            op->phase = 2;
        }
        if ((st = wait_all(op, 2 * k + 2, block, &ok)) != PZ_OK || !ok) return st;
        for (int r = 0; r < D && !S->cma; r++) {   /* single copy: the peer wrote its sums here */
            if (r == me) continue;
            size_t a, b;
            pz_dp_chunk(len, D, r, &a, &b);
            memcpy(op->buf + p0 + a, slot(S, D, k, r) + a, (b - a) * sizeof(float));
        }
        /* what the others read of what it wrote (its copy of their parts, its
         * part's sum D - 1 times), and it of theirs: the ring's 2(D-1)/D */
        g->bytes_sent += (len - (hi - lo) + (size_t)(D - 1) * (hi - lo)) * sizeof(float);
        g->bytes_recv += ((size_t)(D - 1) * (hi - lo) + len - (hi - lo)) * sizeof(float);
        op->r++;
        op->phase = 0;
    }
    return PZ_OK;
}

static void dequeue(struct pz_dp_shm *S, pz_dp_shm_op *op) {
    pz_dp_shm_op **p = &S->head, *prev = NULL;
    while (*p && *p != op) prev = *p, p = &(*p)->next;
    if (!*p) return;
    *p = op->next;
    if (S->tail == op) S->tail = prev;
    op->next = NULL;
}

pz_status pz_dp_shm_advance(pz_dp_shm_op *op, int block, int *done) {
    *done = op->done;
    struct pz_dp_shm *S = op->g->shm;
    while (!op->done) {
        if (S->state == 3)
            return pz_fail(PZ_ERR_PEER, "rank %d: dp all-reduce: the shared-memory path failed before: %s",
                           op->g->ranks[op->g->me], S->err);
        pz_dp_shm_op *h = S->head;   /* rounds go in start order */
        pz_status st = run(h, block);
        if (st != PZ_OK) {
            S->state = 3;
            snprintf(S->err, sizeof S->err, "%s", pz_last_error());
            return st;
        }
        if (h->r < h->rounds) return PZ_OK;   /* not yet (block = 0) */
        h->done = 1;
        dequeue(S, h);
    }
    *done = 1;
    return PZ_OK;
}

pz_status pz_dp_shm_start(pz_dp_group *g, float *buf, size_t n, int mean, pz_dp_shm_op **out) {
    struct pz_dp_shm *S = g->shm;
    pz_dp_shm_op *op = xmalloc(sizeof *op);
    size_t piece = S->cma ? (n ? n : 1) : S->slot_bytes / sizeof(float);   /* single copy: one round */
    *op = (pz_dp_shm_op){.g = g, .buf = buf, .n = n, .piece = piece, .mean = mean, .seq = g->seq++,
                         .k0 = S->next_round, .rounds = (uint32_t)((n + piece - 1) / piece)};
    S->next_round += op->rounds;
    if (S->tail) S->tail->next = op;
    else S->head = op;
    S->tail = op;
    *out = op;
    int done = 0;
    return S->head == op ? pz_dp_shm_advance(op, 0, &done) : PZ_OK;   /* its copy-in, at least */
}

void pz_dp_shm_op_free(pz_dp_shm_op *op) {
    if (!op) return;
    if (op->g->shm) dequeue(op->g->shm, op);
    free(op);
}

int pz_dp_shm_active(const pz_dp_group *g) { return g->shm && g->shm->state == 1; }

const char *pz_dp_shm_mode(const pz_dp_group *g) {
    return pz_dp_shm_active(g) ? g->shm->mode : "not in use";
}

void pz_dp_shm_free(pz_dp_group *g) {
    if (!g->shm) return;
    unmap(g->shm);
    free(g->shm->cma_scr);
    free(g->shm);
    g->shm = NULL;
}
