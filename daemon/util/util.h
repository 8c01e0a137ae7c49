/* Small daemon-wide helpers: clock, RFC 3339 times, random tokens, JSON errors. */
#ifndef NUMVAL_DAEMON_UTIL_H
#define NUMVAL_DAEMON_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Wall clock in milliseconds since the Unix epoch (UTC). */
int64_t nvd_now_ms(void);

/* "2026-11-29T11:00:48.123Z" into buf (at least 32 bytes). */
void nvd_time_format(int64_t ms, char buf[32]);

/* A JSON string of nvd_time_format(ms), or JSON null when ms <= 0. New reference. */
json_t *nvd_time_json(int64_t ms);

/* nbytes random bytes as lowercase hex into out (2*nbytes+1 bytes). 0 or -errno. */
int nvd_random_hex(size_t nbytes, char *out);

/* Parse a decimal int64 that is the whole string. 0 or -EINVAL. */
int nvd_parse_i64(const char *s, int64_t *ret);

/* A JSON id given as integer or decimal string. 0 or -EINVAL. */
int nvd_json_id(const json_t *v, int64_t *ret);

#endif
