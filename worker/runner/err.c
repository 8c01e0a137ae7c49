/* The error-message helper (err.h). */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int nvw_set_err(char **ret_err, int r, const char *fmt, ...)
{
    if (ret_err) {
        va_list ap;
        va_start(ap, fmt);
        char *s = NULL;
        if (vasprintf(&s, fmt, ap) < 0)
            s = NULL;
        va_end(ap);
        free(*ret_err);
        *ret_err = s;
    }
    return r;
}
