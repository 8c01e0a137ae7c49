/* Backend spec checks for configuration (check_backend.c). */
#ifndef NUMVAL_WORKER_CHECK_BACKEND_H
#define NUMVAL_WORKER_CHECK_BACKEND_H

#include <stddef.h>

/* 0 when spec can be used; else a negative errno and a message naming the
 * offending value in err. */
int nvw_check_backend(const char *spec, char *err, size_t errlen);
/* `numval-worker check-backend SPEC`: exit 0 usable, 2 not (message on stderr). */
int nvw_check_backend_main(int argc, char **argv);

#endif
