#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int nv_log_level = LOG_INFO;
static const char *program = "numval";

void nv_log_set_program(const char *name)
{
    program = name;
}

void nv_log_impl(int level, const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    /* One write per line so lines from several processes do not interleave. */
    fprintf(stderr, "<%d>%s: %s\n", level, program, buf);
}
