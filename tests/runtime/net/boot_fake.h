/* boot_fake.h: a hand-driven peer of the bootstrap (runtime/net/bootmsg.h has
 * the wire format) for the tests: impostors, garbage, replays, a fake rank 0. */
#ifndef PZ_TESTS_BOOT_FAKE_H
#define PZ_TESTS_BOOT_FAKE_H

#include <stddef.h>
#include <stdint.h>

/* a connection to 127.0.0.1:port, retried for up to 10 s; -1 if none */
int fake_connect(int port);
/* a socket listening on 127.0.0.1:port */
int fake_listen(int port);
/* one frame: a 12-byte header (version 2) and the payload; 0 on a write error */
int fake_send(int fd, unsigned type, const void *payload, size_t n);
/* one frame within timeout_s: 1 with *type and len bytes in buf (at most cap;
 * longer frames fail), 0 on EOF, timeout or a bad header */
int fake_recv(int fd, double timeout_s, unsigned *type, uint8_t *buf, size_t cap, size_t *len);

typedef struct {
    int rank, world;
    const uint8_t *secret;   /* for the proof (NULL: a zero proof) */
    size_t secret_len;
    int claim_secret;        /* the flag in AUTH */
    const uint8_t *nonce;    /* NULL: a fresh one; else this one (a replay) */
    const uint8_t *mac;      /* NULL: computed; else this proof (a replay or a guess) */
    uint8_t mac_sent[32];    /* out: the proof it sent */
    uint8_t nonce_sent[32];  /* out: its nonce */
    char reason[600];        /* out: the REJECT's text */
} fake_join;

/* AUTH, CHALLENGE, PROOF, then ACCEPT or REJECT: 1 = accepted (the socket
 * is ready for HELLO), 0 = refused with a REJECT (j->reason), -1 = the
 * connection ended otherwise (j->reason says how). */
int fake_handshake(int fd, fake_join *j);

#endif
