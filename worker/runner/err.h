/* The worker's one error-message helper: every fallible function of the worker
 * that hands a message back does it through a malloc'd char **ret_err
 * (STYLE.md "Errors"), and sets it with nvw_set_err. */
#ifndef NUMVAL_WORKER_RUNNER_ERR_H
#define NUMVAL_WORKER_RUNNER_ERR_H

/* Replace *ret_err (when ret_err is not NULL; the old message is freed) with the
 * formatted message (malloc'd; NULL if out of memory) and return r, so that
 * `return nvw_set_err(ret_err, -EINVAL, "...", ...)` fails with a message. */
int nvw_set_err(char **ret_err, int r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
