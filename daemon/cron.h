/* Cron expressions for numvald's schedules: the five fields of
 * crontab(5) (minute hour day-of-month month day-of-week) with '*', lists,
 * ranges and steps, day-of-week 0-7 (0 and 7 are Sunday), names not accepted.
 * When both day fields are restricted a day matches either (crontab(5), Vixie
 * cron). Times are UTC: no daylight-saving gaps or repeats. */
#ifndef NUMVAL_DAEMON_CRON_H
#define NUMVAL_DAEMON_CRON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nvd_cron {
    uint64_t minute; /* bit m set: minute m matches (0-59) */
    uint32_t hour;   /* 0-23 */
    uint32_t dom;    /* bits 1-31 */
    uint16_t month;  /* bits 1-12 */
    uint8_t dow;     /* bits 0-6, Sunday = 0 */
    bool dom_star, dow_star;
} nvd_cron;

/* Parse expr. On error returns -EINVAL and writes a message naming the field
 * and its value in quotes into err. */
int nvd_cron_parse(const char *expr, nvd_cron *ret, char *err, size_t errlen);

/* The first matching minute strictly after t (Unix seconds, UTC), in seconds;
 * -1 when none within 8 years (e.g. "0 0 30 2 *"). */
int64_t nvd_cron_next(const nvd_cron *c, int64_t t);

#endif
