/* HMAC-SHA256 (RFC 2104 over FIPS 180-4 SHA-256): the signature numvald puts on
 * a webhook body (docs/API.md "Webhooks"). */
#ifndef NUMVAL_HMAC_H
#define NUMVAL_HMAC_H

#include <stddef.h>
#include <stdint.h>

/* The HMAC-SHA256 of msg[0..n) under key[0..key_len) into out. */
void nv_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t n, uint8_t out[32]);

/* The same as 64 lowercase hex digits plus NUL. */
void nv_hmac_sha256_hex(const void *key, size_t key_len, const void *msg, size_t n,
                        char out[65]);

#endif
