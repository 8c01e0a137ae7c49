#include "util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

int64_t nvd_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void nvd_time_format(int64_t ms, char buf[32])
{
    time_t sec = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&sec, &tm);
    /* Years stay within 4 digits for any time numvald can meet; the bounds keep
     * the compiler's truncation analysis exact. */
    snprintf(buf, 32, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", (unsigned)(tm.tm_year + 1900) % 10000u,
             (unsigned)(tm.tm_mon + 1) % 100u, (unsigned)tm.tm_mday % 100u,
             (unsigned)tm.tm_hour % 100u, (unsigned)tm.tm_min % 100u, (unsigned)tm.tm_sec % 100u,
             (unsigned)(ms % 1000));
}

json_t *nvd_time_json(int64_t ms)
{
    if (ms <= 0)
        return json_null();
    char buf[32];
    nvd_time_format(ms, buf);
    return json_string(buf);
}

int nvd_random_hex(size_t nbytes, char *out)
{
    unsigned char raw[64];
    if (nbytes > sizeof(raw))
        return -EINVAL;
    size_t got = 0;
    while (got < nbytes) {
        ssize_t n = getrandom(raw + got, nbytes - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[2 * nbytes] = '\0';
    return 0;
}

int nvd_parse_i64(const char *s, int64_t *ret)
{
    if (!s || !*s)
        return -EINVAL;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return -EINVAL;
    *ret = v;
    return 0;
}

int nvd_json_id(const json_t *v, int64_t *ret)
{
    if (json_is_integer(v)) {
        *ret = json_integer_value(v);
        return 0;
    }
    if (json_is_string(v))
        return nvd_parse_i64(json_string_value(v), ret);
    return -EINVAL;
}
