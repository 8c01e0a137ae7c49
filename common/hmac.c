/* HMAC-SHA256, RFC 2104 §2: H((K ^ opad) || H((K ^ ipad) || text)) with a
 * 64-byte block; a key longer than the block is hashed first. */
#include "hmac.h"

#include <string.h>

#include "sha256.h"

void nv_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t n, uint8_t out[32])
{
    uint8_t k[64] = {0}, pad[64], inner[32];
    if (key_len > sizeof k)
        nv_sha256(key, key_len, k);
    else if (key_len)
        memcpy(k, key, key_len);
    nv_sha256_ctx c;
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    nv_sha256_init(&c);
    nv_sha256_update(&c, pad, sizeof pad);
    nv_sha256_update(&c, msg, n);
    nv_sha256_final(&c, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    nv_sha256_init(&c);
    nv_sha256_update(&c, pad, sizeof pad);
    nv_sha256_update(&c, inner, sizeof inner);
    nv_sha256_final(&c, out);
}

void nv_hmac_sha256_hex(const void *key, size_t key_len, const void *msg, size_t n, char out[65])
{
    uint8_t d[32];
    nv_hmac_sha256(key, key_len, msg, n, d);
    nv_sha256_to_hex(d, out);
}
