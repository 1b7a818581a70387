/* bootmsg.h: the bootstrap's wire messages (runtime/net/bootstrap.c) and the
 * proofs of the job secret that they carry. Pure functions on byte buffers,
 * so that a fuzzer can reach every parser (tests/fuzz/fuzz_bootmsg.c).
 *
 * Every frame is a 12-byte header, all integers little-endian:
 *   u32 magic "PZBS", u16 version (2), u16 type, u32 payload length
 * followed by the payload. The length is bounded per type before anything
 * is allocated; every byte from a peer is untrusted.
 *
 * The handshake of a joining rank r with rank 0 (r speaks first):
 *   r -> 0  AUTH       u32 rank, u32 world, u32 flags, nonce_r[32]     (44 B)
 *   0 -> r  CHALLENGE  u32 world, u32 flags, nonce_0[32]               (40 B)
 *   r -> 0  PROOF      mac_r[32]                                       (32 B)
 *   0 -> r  ACCEPT     mac_0[32]                                       (32 B)
 *   r -> 0  HELLO      u32 rank, u32 world, u32 n, UCX address[n]
 *   0 -> r  TABLE      u32 world, then per rank: u32 n, address[n]
 * REJECT (a reason, text) may replace any answer, in either direction.
 * flags bit 0: the sender holds a job secret. With a secret,
 *   mac_X = HMAC-SHA256(secret, label_X || nonce_r || nonce_0 ||
 *                       u32 r || u32 world of r || u32 world of rank 0)
 * where label_X names the role ("joining rank" or "rank 0"), so neither
 * side's proof can be reflected as the other's; both nonces are fresh per
 * connection, so a recorded exchange cannot be replayed. Rank 0 answers a
 * PROOF only after checking it, so a stranger learns no MAC from rank 0; a
 * joining rank sends its address only after checking ACCEPT. Without a
 * secret on both sides the MACs are zero and not checked (anyone may join). */
#ifndef PZ_BOOTMSG_H
#define PZ_BOOTMSG_H

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#define PZ_BOOT_MAGIC 0x53425a50u /* "PZBS" as little-endian bytes */
#define PZ_BOOT_VERSION 2u
#define PZ_BOOT_HDR 12u
#define PZ_BOOT_MAX_WORLD 256     /* the tag has 8 bits for the source rank */
#define PZ_BOOT_MAX_BLOB 4096     /* a full UCX worker address is ~200 B */
#define PZ_BOOT_REJECT_MAX 512u
#define PZ_BOOT_NONCE 32u
#define PZ_BOOT_MAC 32u
#define PZ_BOOT_AUTH_LEN (12u + PZ_BOOT_NONCE)
#define PZ_BOOT_CHALLENGE_LEN (8u + PZ_BOOT_NONCE)
#define PZ_BOOT_HELLO_FIXED 12u   /* rank, world, address length */
#define PZ_BOOT_FLAG_SECRET 1u

enum { PZ_F_HELLO = 1, PZ_F_TABLE = 2, PZ_F_REJECT = 3, PZ_F_BYE = 4, PZ_F_ACK = 5,
       PZ_F_AUTH = 6, PZ_F_CHALLENGE = 7, PZ_F_PROOF = 8, PZ_F_ACCEPT = 9 };

/* the roles a MAC is bound to */
enum { PZ_BOOT_ROLE_JOINING = 1, PZ_BOOT_ROLE_RANK0 = 2 };

typedef struct {
    uint32_t rank, world, flags;
    uint8_t nonce[PZ_BOOT_NONCE];
} pz_boot_auth;

typedef struct {
    uint32_t world, flags;
    uint8_t nonce[PZ_BOOT_NONCE];
} pz_boot_challenge;

/* The largest payload a frame of `type` may carry in a world of `world`
 * ranks; 0 for an unknown type. */
size_t pz_boot_max_payload(unsigned type, int world);
void pz_boot_header_put(uint8_t *h, unsigned type, size_t len);
/* Checks a header: magic, version, known type, length within its bound.
 * `who` starts the message. On success *type and *len are set. */
pz_status pz_boot_header_get(const uint8_t *h, int world, unsigned *type, size_t *len, const char *who);

void pz_boot_auth_put(uint8_t *p, const pz_boot_auth *m);
pz_status pz_boot_auth_get(const uint8_t *p, size_t n, pz_boot_auth *m);
void pz_boot_challenge_put(uint8_t *p, const pz_boot_challenge *m);
pz_status pz_boot_challenge_get(const uint8_t *p, size_t n, pz_boot_challenge *m);
/* HELLO: *blob points into p (not copied). */
pz_status pz_boot_hello_get(const uint8_t *p, size_t n, uint32_t *rank, uint32_t *world, const uint8_t **blob,
                            size_t *blen);
/* TABLE: fills blobs[0..world) (xmalloc'ed) and lens; on failure nothing is
 * left allocated. */
pz_status pz_boot_table_get(const uint8_t *p, size_t n, int world, uint8_t **blobs, size_t *lens);
/* A REJECT reason as a printable C string in out (cap >= 2). */
void pz_boot_reason(const uint8_t *p, size_t n, char *out, size_t cap);

/* The proof of `role` over the handshake (see above). */
void pz_boot_mac(const uint8_t *key, size_t key_len, int role, const uint8_t *nonce_joining,
                 const uint8_t *nonce_rank0, uint32_t rank, uint32_t world_joining, uint32_t world_rank0,
                 uint8_t mac[PZ_BOOT_MAC]);
/* Constant-time comparison of two MACs: 1 when equal. */
int pz_boot_mac_equal(const uint8_t *a, const uint8_t *b);
/* n bytes from the system's cryptographic RNG; aborts if it fails. */
void pz_boot_random(uint8_t *out, size_t n);

#endif
