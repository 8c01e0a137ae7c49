/* The per-step record of a long-run job: one JSON line per run and logged step
 * (loss, training loss, global and per-layer gradient norms, scale, non-finite
 * count, skipped flag), zstd-compressed and base64-encoded into the result, and
 * downsampled curves for the web UI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "longrun_internal.h"
#include "worker/runner/job.h"

static char *base64(const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc((n + 2) / 3 * 4 + 1), *q = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        *q++ = tab[v >> 18 & 63];
        *q++ = tab[v >> 12 & 63];
        *q++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *q++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *q = 0;
    return o;
}

static int run_lines(const nvw_run *r, const char *side, FILE *f)
{
    for (int k = 0; k < r->n_pts; k++) {
        const nvw_point *p = &r->pts[k];
        json_t *ln = json_object();
        for (int l = 0; l < r->n_layers; l++)
            json_object_set_new(ln, r->layers[l], nvw_json_num(p->layer_norms[l]));
        json_t *o =
            json_pack("{s:s, s:I, s:I, s:o, s:o, s:o, s:o, s:o, s:I, s:b, s:o}", "run", side,
                      "seed", (json_int_t)r->seed, "step", (json_int_t)p->step, "loss",
                      nvw_json_num(p->loss), "train_loss", nvw_json_num(p->train_loss), "grad_norm",
                      nvw_json_num(p->grad_norm), "layer_grad_norms", ln, "scale",
                      nvw_json_num(p->scale), "nonfinite", (json_int_t)p->nonfinite, "skipped",
                      p->skipped, "lowp_zero_fraction", nvw_json_num(p->lowp_zero_frac));
        if (!o)
            return -1;
        char *s = json_dumps(o, JSON_COMPACT);
        json_decref(o);
        if (!s)
            return -1;
        fprintf(f, "%s\n", s);
        free(s);
    }
    return 0;
}

json_t *nvw_lr_series(const nvw_lr_job *j)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int r = 0;
    for (int i = 0; i < j->s->n_seeds && r == 0; i++) {
        r = run_lines(&j->ref[i], "reference", f);
        r = r ? r : run_lines(&j->dev[i], "device", f);
    }
    fclose(f);
    json_t *out = NULL;
    size_t cap = ZSTD_compressBound(len);
    unsigned char *z = malloc(cap);
    if (r == 0 && z) {
        size_t zn = ZSTD_compress(z, cap, buf, len, 19);
        char *b64 = ZSTD_isError(zn) ? NULL : base64(z, zn);
        if (b64)
            out = json_pack("{s:s, s:s, s:I, s:I, s:s}", "encoding", "zstd+base64", "format",
                            "jsonl: one line per run and logged step", "raw_bytes", (json_int_t)len,
                            "compressed_bytes", (json_int_t)zn, "data", b64);
        free(b64);
    }
    free(z);
    free(buf);
    return out;
}

static json_t *curve(const nvw_run *r, int max_points)
{
    json_t *a = json_array();
    int stride = r->n_pts > max_points ? (r->n_pts + max_points - 1) / max_points : 1;
    for (int k = 0; k < r->n_pts; k++)
        if (k % stride == 0 || k == r->n_pts - 1)
            json_array_append_new(
                a, json_pack("[I, o]", (json_int_t)r->pts[k].step, nvw_json_num(r->pts[k].loss)));
    return json_pack("{s:I, s:o}", "seed", (json_int_t)r->seed, "points", a);
}

json_t *nvw_lr_curves(const nvw_lr_job *j, int max_points)
{
    json_t *ref = json_array(), *dev = json_array();
    for (int i = 0; i < j->s->n_seeds; i++) {
        json_array_append_new(ref, curve(&j->ref[i], max_points));
        json_array_append_new(dev, curve(&j->dev[i], max_points));
    }
    return json_pack("{s:o, s:o}", "reference", ref, "device", dev);
}
