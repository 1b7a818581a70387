/* bootmsg.c: see bootmsg.h. The HMAC, the constant-time comparison and the
 * random bytes come from OpenSSL's libcrypto. */
#include "runtime/net/bootmsg.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "base/bytes.h"
#include "base/mem.h"

size_t pz_boot_max_payload(unsigned type, int world) {
    switch (type) {
    case PZ_F_HELLO: return PZ_BOOT_HELLO_FIXED + PZ_BOOT_MAX_BLOB;
    case PZ_F_TABLE: return 4 + (size_t)world * (4 + PZ_BOOT_MAX_BLOB);
    case PZ_F_REJECT: return PZ_BOOT_REJECT_MAX;
    case PZ_F_BYE: case PZ_F_ACK: return 4;
    case PZ_F_AUTH: return PZ_BOOT_AUTH_LEN;
    case PZ_F_CHALLENGE: return PZ_BOOT_CHALLENGE_LEN;
    case PZ_F_PROOF: case PZ_F_ACCEPT: return PZ_BOOT_MAC;
    }
    return 0;
}

void pz_boot_header_put(uint8_t *h, unsigned type, size_t len) {
    pz_put_u32(h, PZ_BOOT_MAGIC);
    pz_put_u16(h + 4, PZ_BOOT_VERSION);
    pz_put_u16(h + 6, (uint16_t)type);
    pz_put_u32(h + 8, (uint32_t)len);
}

pz_status pz_boot_header_get(const uint8_t *h, int world, unsigned *type, size_t *len, const char *who) {
    if (pz_get_u32(h) != PZ_BOOT_MAGIC)
        return pz_fail(PZ_ERR_PEER, "%s: not a pipezip bootstrap message (bad magic)", who);
    if (pz_get_u16(h + 4) != PZ_BOOT_VERSION)
        return pz_fail(PZ_ERR_PEER, "%s: bootstrap protocol version %u, expected %u (mixed pipezip builds?)",
                       who, pz_get_u16(h + 4), PZ_BOOT_VERSION);
    unsigned t = pz_get_u16(h + 6);
    size_t n = pz_get_u32(h + 8), mx = pz_boot_max_payload(t, world);
    if (mx == 0) return pz_fail(PZ_ERR_PEER, "%s: unknown bootstrap message type %u", who, t);
    if (n > mx)
        return pz_fail(PZ_ERR_PEER, "%s: bootstrap message type %u of %zu bytes, limit %zu", who, t, n, mx);
    *type = t;
    *len = n;
    return PZ_OK;
}

void pz_boot_auth_put(uint8_t *p, const pz_boot_auth *m) {
    pz_put_u32(p, m->rank);
    pz_put_u32(p + 4, m->world);
    pz_put_u32(p + 8, m->flags);
    memcpy(p + 12, m->nonce, PZ_BOOT_NONCE);
}

pz_status pz_boot_auth_get(const uint8_t *p, size_t n, pz_boot_auth *m) {
    if (n != PZ_BOOT_AUTH_LEN) return pz_fail(PZ_ERR_PEER, "AUTH message of %zu bytes, expected %u", n, PZ_BOOT_AUTH_LEN);
    m->rank = pz_get_u32(p);
    m->world = pz_get_u32(p + 4);
    m->flags = pz_get_u32(p + 8);
    memcpy(m->nonce, p + 12, PZ_BOOT_NONCE);
    if (m->flags & ~PZ_BOOT_FLAG_SECRET) return pz_fail(PZ_ERR_PEER, "AUTH message with unknown flags 0x%x", m->flags);
    return PZ_OK;
}

void pz_boot_challenge_put(uint8_t *p, const pz_boot_challenge *m) {
    pz_put_u32(p, m->world);
    pz_put_u32(p + 4, m->flags);
    memcpy(p + 8, m->nonce, PZ_BOOT_NONCE);
}

pz_status pz_boot_challenge_get(const uint8_t *p, size_t n, pz_boot_challenge *m) {
    if (n != PZ_BOOT_CHALLENGE_LEN)
        return pz_fail(PZ_ERR_PEER, "CHALLENGE message of %zu bytes, expected %u", n, PZ_BOOT_CHALLENGE_LEN);
    m->world = pz_get_u32(p);
    m->flags = pz_get_u32(p + 4);
    memcpy(m->nonce, p + 8, PZ_BOOT_NONCE);
    if (m->flags & ~PZ_BOOT_FLAG_SECRET)
        return pz_fail(PZ_ERR_PEER, "CHALLENGE message with unknown flags 0x%x", m->flags);
    return PZ_OK;
}

pz_status pz_boot_hello_get(const uint8_t *p, size_t n, uint32_t *rank, uint32_t *world, const uint8_t **blob,
                            size_t *blen) {
    if (n < PZ_BOOT_HELLO_FIXED) return pz_fail(PZ_ERR_PEER, "HELLO message of %zu bytes is too short", n);
    uint32_t b = pz_get_u32(p + 8);
    *rank = pz_get_u32(p);
    *world = pz_get_u32(p + 4);
    if (b == 0 || b > PZ_BOOT_MAX_BLOB || (size_t)b != n - PZ_BOOT_HELLO_FIXED)
        return pz_fail(PZ_ERR_PEER, "malformed HELLO (address of %u bytes in %zu)", b, n);
    *blob = p + PZ_BOOT_HELLO_FIXED;
    *blen = b;
    return PZ_OK;
}

pz_status pz_boot_table_get(const uint8_t *p, size_t n, int world, uint8_t **blobs, size_t *lens) {
    if (n < 4 || pz_get_u32(p) != (uint32_t)world)
        return pz_fail(PZ_ERR_PEER, "address table for another world size (%zu bytes)", n);
    size_t off = 4;
    for (int r = 0; r < world; r++) {
        uint32_t k = n - off >= 4 ? pz_get_u32(p + off) : 0;
        if (n - off < 4 || k == 0 || k > PZ_BOOT_MAX_BLOB || n - off - 4 < k) {
            for (int q = 0; q < r; q++) { free(blobs[q]); blobs[q] = NULL; lens[q] = 0; }
            return pz_fail(PZ_ERR_PEER, "malformed address table (entry %d)", r);
        }
        blobs[r] = xmalloc(k);
        lens[r] = k;
        memcpy(blobs[r], p + off + 4, k);
        off += 4 + k;
    }
    if (off != n) {
        for (int q = 0; q < world; q++) { free(blobs[q]); blobs[q] = NULL; lens[q] = 0; }
        return pz_fail(PZ_ERR_PEER, "address table with %zu trailing bytes", n - off);
    }
    return PZ_OK;
}

void pz_boot_reason(const uint8_t *p, size_t n, char *out, size_t cap) {
    if (n > cap - 1) n = cap - 1;
    for (size_t i = 0; i < n; i++) out[i] = p[i] < 32 || p[i] > 126 ? '?' : (char)p[i];
    out[n] = 0;
}

void pz_boot_mac(const uint8_t *key, size_t key_len, int role, const uint8_t *nonce_joining,
                 const uint8_t *nonce_rank0, uint32_t rank, uint32_t world_joining, uint32_t world_rank0,
                 uint8_t mac[PZ_BOOT_MAC]) {
    static const char label_joining[] = "pipezip bootstrap v2: joining rank";
    static const char label_rank0[] = "pipezip bootstrap v2: rank 0";
    const char *label = role == PZ_BOOT_ROLE_RANK0 ? label_rank0 : label_joining;
    size_t ll = strlen(label) + 1; /* the NUL ends the label: no label is a prefix of the other's input */
    uint8_t msg[64 + 2 * PZ_BOOT_NONCE + 12];
    memcpy(msg, label, ll);
    memcpy(msg + ll, nonce_joining, PZ_BOOT_NONCE);
    memcpy(msg + ll + PZ_BOOT_NONCE, nonce_rank0, PZ_BOOT_NONCE);
    pz_put_u32(msg + ll + 2 * PZ_BOOT_NONCE, rank);
    pz_put_u32(msg + ll + 2 * PZ_BOOT_NONCE + 4, world_joining);
    pz_put_u32(msg + ll + 2 * PZ_BOOT_NONCE + 8, world_rank0);
    unsigned int out_len = 0;
    if (key_len > (size_t)(1 << 20) ||
        !HMAC(EVP_sha256(), key, (int)key_len, msg, ll + 2 * PZ_BOOT_NONCE + 12, mac, &out_len) ||
        out_len != PZ_BOOT_MAC)
        pz_die("HMAC-SHA256 failed (libcrypto)");
    OPENSSL_cleanse(msg, sizeof msg);
}

int pz_boot_mac_equal(const uint8_t *a, const uint8_t *b) { return CRYPTO_memcmp(a, b, PZ_BOOT_MAC) == 0; }

void pz_boot_random(uint8_t *out, size_t n) {
    if (n > (size_t)(1 << 20) || RAND_bytes(out, (int)n) != 1) pz_die("no random bytes from libcrypto's RNG");
}
