/* SHA-256 (FIPS 180-4 §6.2): content ids for artifacts and token hashes. */
#ifndef NUMVAL_SHA256_H
#define NUMVAL_SHA256_H

#include <stddef.h>
#include <stdint.h>

typedef struct nv_sha256_ctx {
    uint32_t h[8];
    uint64_t nbytes; /* message length so far, in bytes */
    uint8_t buf[64]; /* pending partial block */
    size_t nbuf;
} nv_sha256_ctx;

/* Incremental use: init, any number of updates, final (which leaves ctx spent). */
void nv_sha256_init(nv_sha256_ctx *ctx);
void nv_sha256_update(nv_sha256_ctx *ctx, const void *data, size_t n);
void nv_sha256_final(nv_sha256_ctx *ctx, uint8_t out[32]);

/* One-shot digest of data[0..n). */
void nv_sha256(const void *data, size_t n, uint8_t out[32]);

/* One-shot digest as 64 lowercase hex digits plus NUL. */
void nv_sha256_hex(const void *data, size_t n, char out[65]);

/* Lowercase hex of a 32-byte digest into out[65]. */
void nv_sha256_to_hex(const uint8_t digest[32], char out[65]);

#endif
