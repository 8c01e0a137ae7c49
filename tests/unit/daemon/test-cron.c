/* Cron parsing and next-fire times (daemon/cron.c) on hand-computed calendar
 * dates; timegm converts the expected dates, an independent path from the
 * day-by-day search under test. All times UTC (no DST). */
#include <string.h>
#include <time.h>

#include "daemon/cron.h"
#include "tests/unit/tap.h"

static int64_t at(int y, int mo, int d, int h, int mi, int s)
{
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d;
    tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = s;
    return (int64_t)timegm(&tm);
}

static void next_is(const char *expr, int64_t after, int64_t want, const char *what)
{
    nvd_cron c;
    char err[256] = "";
    int r = nvd_cron_parse(expr, &c, err, sizeof err);
    int64_t got = r == 0 ? nvd_cron_next(&c, after) : -2;
    tap_ok(got == want, "'%s' %s: got %lld want %lld %s", expr, what, (long long)got,
           (long long)want, err);
}

int main(void)
{
    /* 2026-11-29 is a Sunday. */
    int64_t now = at(2026, 11, 29, 12, 0, 0);
    next_is("0 2 * * *", now, at(2026, 11, 30, 2, 0, 0), "nightly: next day 02:00");
    next_is("0 2 * * *", at(2026, 11, 30, 1, 59, 59), at(2026, 11, 30, 2, 0, 0),
            "one second before the slot");
    next_is("0 2 * * *", at(2026, 11, 30, 2, 0, 0), at(2026, 12, 1, 2, 0, 0),
            "at the slot: strictly after");
    next_is("*/15 * * * *", at(2026, 11, 29, 12, 7, 30), at(2026, 11, 29, 12, 15, 0),
            "every 15 minutes");
    next_is("0 0 * * 0", now, at(2026, 12, 6, 0, 0, 0), "Sunday midnight, a week on");
    next_is("0 0 * * 7", now, at(2026, 12, 6, 0, 0, 0), "7 is Sunday too");
    next_is("30 4 1,15 * 5", now, at(2026, 12, 1, 4, 30, 0),
            "dom 1,15 OR Friday: Tuesday Dec 1 comes before Friday Dec 4");
    next_is("30 4 * * 5", now, at(2026, 12, 4, 4, 30, 0), "Fridays only");
    next_is("0 0 29 2 *", at(2025, 3, 1, 0, 0, 0), at(2028, 2, 29, 0, 0, 0),
            "leap day: next in 2028");
    next_is("59 23 31 12 *", at(2026, 12, 31, 23, 59, 0), at(2027, 12, 31, 23, 59, 0), "year end");
    next_is("0 9-17/4 * 1-6 1-5", now, at(2027, 1, 1, 9, 0, 0),
            "months 1-6, weekdays: Friday 2027-01-01 09:00");
    next_is("0 0 30 2 *", now, -1, "Feb 30 never fires");

    const char *bad[] = {"60 * * * *", "* * * *",    "1-0 * * * *", "*/0 * * * *", "* 24 * * *",
                         "* * 0 * *",  "* * * 13 *", "a * * * *",   "* * * * * *"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        nvd_cron c;
        char err[256] = "";
        tap_ok(nvd_cron_parse(bad[i], &c, err, sizeof err) < 0 && strstr(err, "'"),
               "refused '%s': %s", bad[i], err);
    }
    return tap_done();
}
