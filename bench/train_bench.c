/* Long-run training speed (bench/RESULTS.md "Long-run training"): steps per
 * second of the MLP trained by the fp64 host reference and by the emu device
 * (fp32, and bf16 under the shipped AMP policy), same sizes and batch as
 * bench/train_peer.py trains with torch on the CPU. Process CPU time (the machine is shared), best
 * of 3. Usage: train_bench [IN HIDDEN CLASSES BATCH STEPS [MODES]]; MODES a comma list of host,
 * fp32, bf16 (default all); prints one JSON line per mode. */
#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker/backends/loader.h"
#include "worker/kinds/longrun/train/train.h"

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int bench(const char *mode, const char *backend, const char *amp_dtype, int in, int hid,
                 int cls, int batch, int steps)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"kind\":\"longrun\",\"sizes\":{\"in\":%d,\"hidden\":%d,\"classes\":%d},"
             "\"batch\":%d,\"steps\":%d,\"log_every\":%d,\"n_seeds\":3%s%s%s}",
             in, hid, cls, batch, steps, steps, amp_dtype ? ",\"amp\":{\"dtype\":\"" : "",
             amp_dtype ? amp_dtype : "", amp_dtype ? "\"}" : "");
    json_t *j = json_loads(text, 0, NULL);
    nv_longrun_spec *s = NULL;
    char *ptr = NULL, *msg = NULL;
    if (!j || nv_longrun_parse(j, &s, &ptr, &msg) < 0) {
        fprintf(stderr, "bad spec: %s %s\n", ptr ? ptr : "", msg ? msg : "");
        return 1;
    }
    s->eval_examples = 8; /* eval every `steps`: keep its cost out of the step rate */
    nvw_data d;
    nvw_data_init(&d, s);
    nvw_exec ex;
    memset(&ex, 0, sizeof ex);
    nvw_backend *b = NULL;
    json_t *desc = NULL; /* describe(): ex.saved points into it */
    char err[512];
    if (!backend)
        ex.host = true;
    else {
        if (nvw_backend_load(backend, &b, err, sizeof err) < 0)
            return 1;
        ex.table = nvw_backend_table(b);
        if (ex.table->open(nvw_backend_options(b), &ex.ctx, err, sizeof err) != 0)
            return 1;
        desc = json_loads(ex.table->describe(ex.ctx), 0, NULL);
        ex.saved = json_object_get(desc, "saved");
        if (amp_dtype) {
            json_t *pol = json_loads(nvw_amp_default_json(), 0, NULL);
            char *m2 = NULL;
            nvw_amp_parse(pol, s->amp_dtype, &ex.amp, &m2);
            json_decref(pol);
        }
    }
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        nvw_run run;
        double t0 = cpu_now();
        int r = nvw_train_run(s, &d, &ex, 1, &run);
        double dt = cpu_now() - t0;
        nvw_run_done(&run);
        if (r < 0) {
            fprintf(stderr, "%s: %s\n", mode, run.err);
            return 1;
        }
        best = dt < best ? dt : best;
    }
    printf("{\"impl\": \"numval\", \"mode\": \"%s\", \"in\": %d, \"hidden\": %d, \"classes\": %d, "
           "\"batch\": %d, \"steps\": %d, \"cpu_s\": %.4f, \"steps_per_s\": %.1f}\n",
           mode, in, hid, cls, batch, steps, best, steps / best);
    if (ex.ctx)
        ex.table->close(ex.ctx);
    nvw_backend_free(b);
    json_decref(desc);
    nvw_data_done(&d);
    nv_longrun_free(s);
    json_decref(j);
    return 0;
}

int main(int argc, char **argv)
{
    int in = 16, hid = 32, cls = 4, batch = 64, steps = 200;
    /* As numval-worker's main() does: keep freed memory for the next step rather
     * than fault fresh pages in for every tensor (worker/main.c). */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    const char *modes = "host,fp32,bf16";
    if (argc >= 6)
        in = atoi(argv[1]), hid = atoi(argv[2]), cls = atoi(argv[3]), batch = atoi(argv[4]),
        steps = atoi(argv[5]);
    if (argc >= 7)
        modes = argv[6];
    int r = 0;
    if (strstr(modes, "host"))
        r |= bench("reference-fp64-host", NULL, NULL, in, hid, cls, batch, steps);
    if (strstr(modes, "fp32"))
        r |= bench("emu-fp32", "emu", NULL, in, hid, cls, batch, steps);
    if (strstr(modes, "bf16"))
        r |= bench("emu-bf16-amp", "emu", "bf16", in, hid, cls, batch, steps);
    return r;
}
