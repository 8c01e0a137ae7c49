/* `numval-worker repro` and `numval-worker minimize` (repro_cmd.h): the
 * options, the artifact read and decoded once, then the command of its kind
 * through the kind table (the kind of the job spec in its manifest; op for an
 * artifact whose kind has no reproducer, whose loader then says what is wrong). */
#include "repro_cmd.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "worker/kinds/kinds.h"
#include "worker/repro/artifact.h"

static int num_arg(const char *opt, const char *v, double lo, double hi, double *ret)
{
    char *end;
    double d = strtod(v, &end);
    if (*end || end == v || d < lo || d > hi) {
        fprintf(stderr, "numval-worker: %s '%s' is not a number in %g..%g\n", opt, v, lo, hi);
        return -EINVAL;
    }
    *ret = d;
    return 0;
}

static int parse(int argc, char **argv, nvw_cmd *o)
{
    memset(o, 0, sizeof *o);
    o->runs = 5;
    o->timeout_ms = 60000;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool val = !strcmp(a, "--backend") || !strcmp(a, "-o") || !strcmp(a, "--output") ||
                   !strcmp(a, "--runs") || !strcmp(a, "--budget") || !strcmp(a, "--deadline") ||
                   !strcmp(a, "--probe-timeout");
        if (val && i + 1 >= argc) {
            fprintf(stderr, "numval-worker: '%s' needs a value\n", a);
            return -EINVAL;
        }
        double d;
        if (!strcmp(a, "--backend")) {
            o->backend = argv[++i];
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            o->output = argv[++i];
        } else if (!strcmp(a, "--runs")) {
            if (num_arg(a, argv[++i], 1, 1000, &d) < 0)
                return -EINVAL;
            o->runs = (long)d;
        } else if (!strcmp(a, "--budget")) {
            if (num_arg(a, argv[++i], 1, 1e7, &d) < 0)
                return -EINVAL;
            o->budget = (long)d;
        } else if (!strcmp(a, "--deadline")) {
            if (num_arg(a, argv[++i], 0.001, 1e6, &o->deadline) < 0)
                return -EINVAL;
        } else if (!strcmp(a, "--probe-timeout")) {
            if (num_arg(a, argv[++i], 0.001, 3600, &d) < 0)
                return -EINVAL;
            o->timeout_ms = (long)(d * 1000);
        } else if (!strcmp(a, "--plain-ddmin")) {
            o->plain = true;
        } else if (!strcmp(a, "--quiet")) {
            o->quiet = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "numval-worker: unknown option '%s' (see --help)\n", a);
            return -EINVAL;
        } else if (!o->path) {
            o->path = a;
        } else {
            fprintf(stderr, "numval-worker: unexpected argument '%s'\n", a);
            return -EINVAL;
        }
    }
    if (!o->path) {
        fprintf(stderr, "numval-worker: needs ARTIFACT.nvart (see --help)\n");
        return -EINVAL;
    }
    return 0;
}

/* Parse the options, read and decode the artifact, run the kind's command. */
static int cmd_main(int argc, char **argv, bool minimize)
{
    nvw_cmd c;
    if (parse(argc, argv, &c) < 0)
        return NVW_EXIT_ERROR;
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = nvw_read_file(c.path, &buf, &len);
    if (r < 0) {
        fprintf(stderr, "numval-worker: cannot read '%s': %s\n", c.path, strerror(-r));
        return NVW_EXIT_ERROR;
    }
    nv_sha256_hex(buf, len, c.sha);
    nv_artifact *a = NULL;
    char *err = NULL;
    r = nv_artifact_decode(buf, len, &a, &err);
    free(buf);
    if (r < 0) {
        fprintf(stderr, "numval-worker: '%s' is not a valid artifact: %s\n", c.path,
                err ? err : strerror(-r));
        free(err);
        return NVW_EXIT_ERROR;
    }
    c.a = a;
    const nvw_kind *k = nvw_kind_of_artifact(a, NULL);
    const nvw_kind *op = nvw_kind_named(NULL, NULL); /* the kind of a spec without one */
    int (*fn)(const nvw_cmd *) = NULL;
    if (k)
        fn = minimize ? k->minimize_main : k->repro_main;
    if (!fn)
        fn = minimize ? op->minimize_main : op->repro_main;
    int status = fn(&c);
    nv_artifact_free(a);
    return status;
}

int nvw_repro_main(int argc, char **argv)
{
    return cmd_main(argc, argv, false);
}

int nvw_minimize_main(int argc, char **argv)
{
    return cmd_main(argc, argv, true);
}
