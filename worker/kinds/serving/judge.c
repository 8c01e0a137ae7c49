/* What the serving checks share (serving_internal.h): verdicts, norm-wise
 * errors, argmax margins, the band of docs/MODEL.md and seeded token ids. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serving_internal.h"
#include "worker/runner/params.h"

/* The model kind's band factor F (docs/MODEL.md "The band"): two devices of
 * the same precision make rounding errors of the same size that are not the
 * same errors; chosen before measuring, not a fit. */
#define SV_BAND_FACTOR 4.0

int sv_verdict(scase *c, const char *v, const char *cls, const char *fmt, ...)
{
    if (json_object_set_new(c->cj, "verdict", json_string(v)))
        return -ENOMEM;
    if (cls && json_object_set_new(c->cj, "failure_class", json_string(cls)))
        return -ENOMEM;
    if (!fmt)
        return 0;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return json_object_set_new(c->cj, "error", json_string(msg)) ? -ENOMEM : 0;
}

int sv_exec_verdict(scase *c, const sv_exec *x, const char *where)
{
    if (x->rc == -ENOMEM || x->rc == NV_E_NOMEM)
        return -ENOMEM;
    if (x->side != SV_DEV)
        return sv_verdict(c, "error", "reference", "%s (reference): %s", where, x->err);
    if (x->rc == 1)
        return sv_verdict(c, x->err[0] && strstr(x->err, "differs") ? "failed" : "error",
                          strstr(x->err, "differs") ? "bad_output" : "backend_error", "%s: %s",
                          where, x->err);
    return sv_verdict(c, "error", "inputs", "%s: %s", where, x->err);
}

double sv_rel_err(const double *x, const double *r, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(x[i]) != isfinite(r[i]) || isnan(x[i]) != isnan(r[i]))
            return INFINITY;
        if (!isfinite(r[i]))
            continue;
        num += (x[i] - r[i]) * (x[i] - r[i]);
        den += r[i] * r[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

double sv_dist(const double *a, const double *b, const double *r, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(a[i]) != isfinite(b[i]) || isnan(a[i]) != isnan(b[i]))
            return INFINITY;
        if (isfinite(a[i]) && isfinite(b[i]))
            num += (a[i] - b[i]) * (a[i] - b[i]);
        if (isfinite(r[i]))
            den += r[i] * r[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int64_t sv_argmax(const double *x, int64_t n, double *ret_margin, double *ret_norm)
{
    int64_t b = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[b] || (isnan(x[i]) && !isnan(x[b])))
            b = i;
    double second = -INFINITY, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i != b && x[i] > second)
            second = x[i];
        sq += x[i] * x[i];
    }
    if (ret_margin)
        *ret_margin = x[b] - second;
    if (ret_norm)
        *ret_norm = sqrt(sq);
    return b;
}

int sv_greedy(sv_exec *x, const double *row, int64_t n, int64_t *ret)
{
    if (x->side != SV_DEV || x->argmax < 0) {
        *ret = sv_argmax(row, n, NULL, NULL);
        return 0;
    }
    int64_t shape[2] = {1, n};
    nv_tensor *t = nv_tensor_new(x->dt, 2, shape), *out = NULL;
    if (!t) {
        x->rc = -ENOMEM;
        return -1;
    }
    memcpy(t->data, row, (size_t)n * sizeof(double));
    const nv_tensor *in[1] = {t};
    int r = sv_op(x, "argmax", NULL, 1, in, &out);
    nv_tensor_free(t);
    if (r < 0 && x->rc == 1 && x->status == NV_E_UNSUPPORTED && x->argmax == 0) {
        x->argmax = -1; /* not offered: the kind's, from here on */
        x->rc = 0;
        x->err[0] = 0;
        *ret = sv_argmax(row, n, NULL, NULL);
        return 0;
    }
    if (r < 0)
        return -1;
    x->argmax = 1;
    double k = out->data[0];
    nv_tensor_free(out);
    if (!(k >= 0 && k < (double)n)) {
        x->rc = 1;
        snprintf(x->err, sizeof x->err,
                 "op 'argmax': the device's index %g lies outside the vocabulary [0, %lld) (the "
                 "output differs from the model's)",
                 k, (long long)n);
        return -1;
    }
    *ret = (int64_t)k;
    return 0;
}

int sv_note_argmax(scase *c, const sv_exec *x)
{
    if (!x->argmax)
        return 0;
    return json_object_set_new(c->cj, "argmax", json_string(x->argmax > 0 ? "device" : "kind"))
               ? -ENOMEM
               : 0;
}

double sv_band(const scase *c, double e_dt, int64_t k_red)
{
    double u = ldexp(1.0, -(nv_dtype_get(c->dt)->mant_bits + 1));
    return SV_BAND_FACTOR * (e_dt + (double)k_red * c->u_acc) + u;
}

double sv_band_at(const scase *c, double e_dt, int64_t pos)
{
    const nv_servingspec *s = c->j->s;
    int64_t k = s->width > s->ffn ? s->width : s->ffn;
    return sv_band(c, e_dt, pos + 1 > k ? pos + 1 : k);
}

int sv_tokens(const scase *c, const char *name, int64_t n, int64_t *out)
{
    return sv_draw(c, name, n, c->j->s->vocab, out);
}

int sv_draw(const scase *c, const char *name, int64_t n, int64_t bound, int64_t *out)
{
    int64_t shape[1] = {n};
    nv_tensor *t = nv_tensor_new(NV_DT_INT32, 1, shape);
    nv_model_input rule = {.init = NV_MINIT_TOKENS, .a = (double)bound};
    if (!t)
        return -ENOMEM;
    nvw_param_fill(t, &rule, name, c->j->s->seed, c->sample);
    for (int64_t i = 0; i < n; i++)
        out[i] = (int64_t)t->data[i];
    nv_tensor_free(t);
    return 0;
}

int sv_set_num(json_t *o, const char *k, double v)
{
    return json_object_set_new(o, k, nvw_json_num(v)) ? -ENOMEM : 0;
}
