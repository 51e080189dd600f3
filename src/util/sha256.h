/* sha256.h: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), written for the launcher's
 * authenticated heartbeat channel. Small and dependency-free; not constant-time beyond the
 * digest comparison helper, which is all the channel needs. */
#ifndef MYRIAD_UTIL_SHA256_H
#define MYRIAD_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint32_t h[8];
    uint64_t bytes;     /* message length so far */
    uint8_t block[64];  /* pending partial block */
    size_t used;        /* bytes in block */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t len);
void sha256_final(Sha256 *s, uint8_t out[32]);
void sha256(const void *data, size_t len, uint8_t out[32]);

/* HMAC-SHA256 of msg under key (any key length; keys over 64 bytes are hashed first). */
void hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen, uint8_t out[32]);
/* HMAC over the concatenation of two pieces (saves a copy when a nonce prefixes a message). */
void hmac_sha256_2(const void *key, size_t keylen, const void *a, size_t alen, const void *b, size_t blen,
                   uint8_t out[32]);

/* A key's HMAC pads absorbed once (two compressions saved per MAC when one key signs many
 * messages, as the heartbeat channel's job secret does). */
typedef struct {
    Sha256 inner, outer;
} HmacKey;
void hmac_sha256_key(HmacKey *k, const void *key, size_t keylen);
/* HMAC-SHA256 under a prepared key of the concatenation a || b. */
void hmac_sha256_keyed(const HmacKey *k, const void *a, size_t alen, const void *b, size_t blen, uint8_t out[32]);

/* Lowercase hex of n bytes into out (2n+1 chars with the NUL). */
void hex_encode(const uint8_t *in, size_t n, char *out);
/* Parse exactly 2n hex chars into n bytes; 0 or -1 on a bad character or length. */
int hex_decode(const char *hex, uint8_t *out, size_t n);
/* Compare n bytes without an early exit (no timing hint of where a forged MAC first differs). */
int equal_const_time(const uint8_t *a, const uint8_t *b, size_t n);

#endif
