/* HMAC-SHA256 against the published test vectors of RFC 4231 §4 (cases 1, 2, 3,
 * 6 and 7: short key, "Jefe", 0xdd data, and the 131-byte keys longer than the
 * block, which are hashed first). */
#include <string.h>

#include "common/hmac.h"
#include "tests/unit/tap.h"

int main(void)
{
    char hex[65];
    unsigned char key[131], data[50];

    memset(key, 0x0b, 20);
    nv_hmac_sha256_hex(key, 20, "Hi There", 8, hex);
    tap_ok(!strcmp(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
           "RFC 4231 case 1 -> %s", hex);

    const char *m2 = "what do ya want for nothing?";
    nv_hmac_sha256_hex("Jefe", 4, m2, strlen(m2), hex);
    tap_ok(!strcmp(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
           "RFC 4231 case 2 -> %s", hex);

    memset(key, 0xaa, 20);
    memset(data, 0xdd, 50);
    nv_hmac_sha256_hex(key, 20, data, 50, hex);
    tap_ok(!strcmp(hex, "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
           "RFC 4231 case 3 -> %s", hex);

    memset(key, 0xaa, 131);
    const char *m6 = "Test Using Larger Than Block-Size Key - Hash Key First";
    nv_hmac_sha256_hex(key, 131, m6, strlen(m6), hex);
    tap_ok(!strcmp(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
           "RFC 4231 case 6 -> %s", hex);

    const char *m7 = "This is a test using a larger than block-size key and a larger than "
                     "block-size data. The key needs to be hashed before being used by the "
                     "HMAC algorithm.";
    nv_hmac_sha256_hex(key, 131, m7, strlen(m7), hex);
    tap_ok(!strcmp(hex, "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
           "RFC 4231 case 7 -> %s", hex);
    return tap_done();
}
