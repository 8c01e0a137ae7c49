/* Cron expression parsing and next-fire computation (cron.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cron.h"

/* One field: comma-separated items of '*' | N | N-M, each optionally '/step'. */
static int field(const char *s, int lo, int hi, uint64_t *ret, bool *ret_star)
{
    uint64_t bits = 0;
    *ret_star = strcmp(s, "*") == 0;
    char buf[128];
    if (strlen(s) >= sizeof buf || !*s)
        return -1;
    strcpy(buf, s);
    char *save = NULL;
    for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        int a = lo, b = hi, step = 1;
        char *slash = strchr(it, '/');
        if (slash) {
            char *end;
            long v = strtol(slash + 1, &end, 10);
            if (end == slash + 1 || *end || v < 1 || v > hi - lo + 1)
                return -1;
            step = (int)v;
            *slash = 0;
        }
        if (strcmp(it, "*") != 0) {
            char *end;
            long v = strtol(it, &end, 10);
            if (end == it)
                return -1;
            a = b = (int)v;
            if (*end == '-') {
                char *e2;
                long w = strtol(end + 1, &e2, 10);
                if (e2 == end + 1 || *e2)
                    return -1;
                b = (int)w;
            } else if (*end)
                return -1;
            else if (slash)
                b = hi; /* "N/step": from N to the end of the range */
        }
        if (a < lo || b > hi || a > b)
            return -1;
        for (int v = a; v <= b; v += step)
            bits |= 1ull << v;
    }
    *ret = bits;
    return 0;
}

int nvd_cron_parse(const char *expr, nvd_cron *ret, char *err, size_t errlen)
{
    static const char *const names[5] = {"minute", "hour", "day-of-month", "month", "day-of-week"};
    static const int lo[5] = {0, 0, 1, 1, 0}, hi[5] = {59, 23, 31, 12, 7};
    char buf[256], *f[6] = {0};
    if (!expr || strlen(expr) >= sizeof buf) {
        snprintf(err, errlen, "cron expression is missing or too long");
        return -EINVAL;
    }
    strcpy(buf, expr);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, " \t", &save); t && n < 6; t = strtok_r(NULL, " \t", &save))
        f[n++] = t;
    if (n != 5) {
        snprintf(err, errlen,
                 "cron expression '%s' must have 5 fields (minute hour "
                 "day-of-month month day-of-week)",
                 expr);
        return -EINVAL;
    }
    uint64_t bits[5];
    bool star[5];
    for (int i = 0; i < 5; i++)
        if (field(f[i], lo[i], hi[i], &bits[i], &star[i]) < 0) {
            snprintf(err, errlen,
                     "cron %s field '%s' is not valid in '%s' (numbers %d-%d, '*', "
                     "lists, ranges, /steps)",
                     names[i], f[i], expr, lo[i], hi[i]);
            return -EINVAL;
        }
    nvd_cron c = {.minute = bits[0],
                  .hour = (uint32_t)bits[1],
                  .dom = (uint32_t)bits[2],
                  .month = (uint16_t)bits[3],
                  .dow = (uint8_t)((bits[4] | (bits[4] >> 7)) & 0x7f), /* 7 is Sunday */
                  .dom_star = star[2],
                  .dow_star = star[4]};
    *ret = c;
    return 0;
}

static bool day_matches(const nvd_cron *c, const struct tm *tm)
{
    if (!(c->month >> (tm->tm_mon + 1) & 1))
        return false;
    bool d = c->dom >> tm->tm_mday & 1, w = c->dow >> tm->tm_wday & 1;
    if (c->dom_star || c->dow_star)
        return d && w; /* a '*' field matches every day, so this is the other one */
    return d || w;
}

int64_t nvd_cron_next(const nvd_cron *c, int64_t t)
{
    int64_t start = (t / 60 + 1) * 60; /* the next whole minute after t */
    if (t < 0 && t % 60)
        start = (t / 60) * 60;
    int64_t day0 = start - ((start % 86400) + 86400) % 86400;
    for (int k = 0; k < 366 * 8 + 2; k++) {
        time_t d = (time_t)(day0 + (int64_t)k * 86400);
        struct tm tm;
        if (!gmtime_r(&d, &tm))
            return -1;
        if (!day_matches(c, &tm))
            continue;
        for (int h = 0; h < 24; h++) {
            if (!(c->hour >> h & 1))
                continue;
            for (int m = 0; m < 60; m++) {
                int64_t at = (int64_t)d + h * 3600 + m * 60;
                if (c->minute >> m & 1 && at >= start)
                    return at;
            }
        }
    }
    return -1;
}
