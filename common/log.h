/* One logging module for the programs (STYLE.md "Logging"): syslog levels,
 * checked before formatting, to stderr with <N> prefixes journald understands.
 * The numerics core never logs. */
#ifndef NUMVAL_LOG_H
#define NUMVAL_LOG_H

#include <syslog.h>

extern int nv_log_level; /* messages above this level are dropped; default LOG_INFO */

void nv_log_set_program(const char *name);
void nv_log_impl(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define nv_log(level, ...)                                                                        \
    do {                                                                                           \
        if ((level) <= nv_log_level)                                                               \
            nv_log_impl((level), __VA_ARGS__);                                                     \
    } while (0)
#define nv_log_err(...) nv_log(LOG_ERR, __VA_ARGS__)
#define nv_log_warn(...) nv_log(LOG_WARNING, __VA_ARGS__)
#define nv_log_info(...) nv_log(LOG_INFO, __VA_ARGS__)
#define nv_log_debug(...) nv_log(LOG_DEBUG, __VA_ARGS__)

#endif
