/* numvalctl commands (cmd_repro.c): repro, compare, suite. */
#ifndef NUMVAL_CLIENT_CMD_REPRO_H
#define NUMVAL_CLIENT_CMD_REPRO_H

#include "client.h"

/* repro CASE_ID [--backend SPEC] [--minimized] [--runs N] [--worker PATH] [--keep FILE]:
 * download the case's artifact (hash-verified) and run `numval-worker repro`
 * on it; exits with the worker's status (1 still fails, 0 no longer fails). */
int nvc_cmd_repro(nvc_conn *c, int argc, char **argv);
/* compare BASE HEAD: newly failing, newly passing, drift; exit 1 when newly failing. */
int nvc_cmd_compare(nvc_conn *c, int argc, char **argv);
/* suite list [--state S] | suite show ID | suite retire ID --reason TEXT */
int nvc_cmd_suite(nvc_conn *c, int argc, char **argv);

#endif
