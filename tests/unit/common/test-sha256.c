/* SHA-256 against the published vectors of FIPS 180-2 Appendix B (also NIST's
 * "SHA256.pdf" examples) and the empty-message digest. */
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "tests/unit/tap.h"

int main(void)
{
    char hex[65];

    /* FIPS 180-2 B.1: one-block message "abc". */
    nv_sha256_hex("abc", 3, hex);
    tap_ok(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0,
           "\"abc\" -> %s", hex);

    /* FIPS 180-2 B.2: the 448-bit two-block message. */
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    nv_sha256_hex(m448, strlen(m448), hex);
    tap_ok(strcmp(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1") == 0,
           "448-bit message -> %s", hex);

    /* FIPS 180-2 B.3: one million 'a', fed in uneven chunks through the
     * incremental interface so the buffering path is exercised. */
    const char *want_million = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    char *million = malloc(1000000);
    if (!million)
        return 1;
    memset(million, 'a', 1000000);
    nv_sha256_hex(million, 1000000, hex);
    tap_ok(strcmp(hex, want_million) == 0, "one million 'a' one-shot -> %s", hex);
    nv_sha256_ctx ctx;
    nv_sha256_init(&ctx);
    size_t off = 0, step = 1;
    while (off < 1000000) {
        size_t n = step < 1000000 - off ? step : 1000000 - off;
        nv_sha256_update(&ctx, million + off, n);
        off += n;
        step = step % 131 + 7; /* chunk sizes straddle the 64-byte block edge */
    }
    uint8_t d[32];
    nv_sha256_final(&ctx, d);
    nv_sha256_to_hex(d, hex);
    tap_ok(strcmp(hex, want_million) == 0, "one million 'a' incremental -> %s", hex);

    /* The empty message (FIPS 180-4 padding with nbuf == 0). */
    nv_sha256_hex("", 0, hex);
    tap_ok(strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0,
           "empty message -> %s", hex);

    /* 55 bytes: the longest message whose padding fits in one block (the
     * 56-byte case is B.2 above). Expected value from an independent
     * implementation, Python's hashlib.sha256(b'a' * 55). */
    nv_sha256_hex(million, 55, hex);
    tap_ok(strcmp(hex, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318") == 0,
           "55 x 'a' -> %s", hex);
    free(million);
    return tap_done();
}
