/* What `numval-worker repro` and `numval-worker minimize` hand the kind of an
 * artifact (worker/repro_cmd.c reads and decodes the file once, then the kind
 * table picks the kind by the job spec in its manifest), and the helpers every
 * kind's command shares. Exit codes: repro 1 when the case still fails with its
 * stored signature, 0 when it no longer does; minimize 1 with a verified
 * minimized reproducer, 0 when flaky or not re-verified; 2 bad input or an
 * infrastructure error. */
#ifndef NUMVAL_WORKER_REPRO_CMD_H
#define NUMVAL_WORKER_REPRO_CMD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/artifact.h"
#include "worker/backends/loader.h"

#define NVW_EXIT_PASSES 0
#define NVW_EXIT_FAILS 1
#define NVW_EXIT_ERROR 2

/* One command on one artifact. Everything is borrowed for the command. */
typedef struct nvw_cmd {
    const char *path;     /* ARTIFACT.nvart as given ("-": stdin), named in messages */
    const nv_artifact *a; /* the decoded artifact */
    char sha[65];         /* content id of its bytes */
    const char *backend;  /* --backend SPEC; NULL: the manifest's own */
    const char *output;   /* -o OUT (minimize); may be NULL */
    long runs;            /* --runs (gate and re-verification) */
    long budget;          /* --budget: most probes (0: the kind's default) */
    long timeout_ms;      /* --probe-timeout, per probe */
    double deadline;      /* --deadline S (0: the kind's default) */
    bool plain;           /* --plain-ddmin */
    bool quiet;           /* --quiet: no progress on stderr */
} nvw_cmd;

/* The backend a command runs on: --backend, else the manifest's "backend".
 * Prints what is wrong ("numval-worker: ...") and returns a negative errno when
 * there is none or it does not load; *ret_spec is the spec used. */
int nvw_cmd_backend(const nvw_cmd *c, const json_t *manifest, nvw_backend **ret_b,
                    const char **ret_spec);

/* Print j (stolen; NULL prints nothing) on stdout, indented, 17 digits. */
void nvw_cmd_print_json(json_t *j);

/* Write len bytes to path; prints the failure and returns -EIO. */
int nvw_cmd_write_file(const char *path, const uint8_t *buf, size_t len);

#endif
