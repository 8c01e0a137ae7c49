/* The band of a graph's nodes (band.h; docs/MODEL.md "The band"). */
#include "band.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "core/ref/reference.h"

double nvw_band_rel_err(const nv_tensor *x, const nv_tensor *r)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < r->numel; i++) {
        double a = x->data[nv_tensor_offset_linear(x, i)];
        double b = r->data[nv_tensor_offset_linear(r, i)];
        if (isfinite(a) != isfinite(b) || isnan(a) != isnan(b))
            return INFINITY;
        if (!isfinite(b))
            continue; /* same infinity or both NaN: no error */
        num += (a - b) * (a - b);
        den += b * b;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

int nvw_band_reference(const nv_graph *g, nv_tensor *const *in, nv_tensor **out, bool round_all,
                       char *err, size_t errlen)
{
    for (int k = 0; k < g->n_nodes; k++) {
        const nv_graph_node *n = &g->nodes[k];
        nv_tensor *hi = NULL, *abs = NULL;
        int r = nv_graph_node_reference(g, k, (const nv_tensor *const *)in, out, &hi, &abs, err,
                                        errlen);
        nv_tensor_free(abs);
        if (r < 0)
            return r;
        bool cast = n->op->kind == NV_OPK_CAST;
        nv_dtype dt = cast ? n->attrs.cast_to : n->dtype;
        if (round_all || cast)
            for (int64_t q = 0; q < hi->numel; q++)
                hi->data[q] = nv_dtype_round(dt, hi->data[q], &NV_ROUND_DEFAULT, 0);
        hi->dtype = round_all || cast ? n->dtype : NV_DT_FP64;
        out[k] = hi;
    }
    return 0;
}

void nvw_band_accumulator(const json_t *describe, nv_dtype dt, const char **ret_name,
                          double *ret_u)
{
    const json_t *contract = json_object_get(describe, "contract");
    const json_t *entry = json_object_get(contract, nv_dtype_name(dt));
    const json_t *acc = json_object_get(json_object_get(entry, "accumulator"), "dtype");
    nv_dtype a = NV_DT_FP32;
    if (!json_is_string(acc) || nv_dtype_from_name(json_string_value(acc), &a) < 0 ||
        !nv_dtype_get(a)->is_float || a == NV_DT_E8M0)
        a = dt == NV_DT_FP64 ? NV_DT_FP64 : NV_DT_FP32;
    *ret_name = nv_dtype_name(a);
    *ret_u = ldexp(1.0, -(nv_dtype_get(a)->mant_bits + 1));
}

void nvw_band_finish(const nv_graph *g, double factor, double u_acc, nvw_band *b)
{
    for (int k = 0; k < g->n_nodes; k++) {
        const nv_graph_node *n = &g->nodes[k];
        nvw_band *m = &b[k];
        m->k_red = nv_graph_reduction_len(g, k);
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i] >= 0 && b[n->in[i]].k_red > m->k_red)
                m->k_red = b[n->in[i]].k_red;
        double u = ldexp(1.0, -(nv_dtype_get(n->dtype)->mant_bits + 1));
        m->band = factor * (m->e_dt + (double)m->k_red * u_acc) + u;
        m->in_band = m->e_dev <= m->band; /* NaN is outside */
    }
}

int nvw_band_judge(const nv_graph *g, nv_tensor *const *in, const nv_tensor *const *dev,
                   double factor, double u_acc, nvw_band *b, char *err, size_t errlen)
{
    size_t n = (size_t)g->n_nodes;
    nv_tensor **r64 = calloc(n, sizeof *r64), **rdt = calloc(n, sizeof *rdt);
    int r = r64 && rdt ? nvw_band_reference(g, in, r64, false, err, errlen) : -ENOMEM;
    if (r == 0)
        r = nvw_band_reference(g, in, rdt, true, err, errlen);
    for (int k = 0; r == 0 && k < g->n_nodes; k++) {
        b[k].e_dt = nvw_band_rel_err(rdt[k], r64[k]);
        b[k].e_dev = dev[k] ? nvw_band_rel_err(dev[k], r64[k]) : NAN;
    }
    if (r == 0)
        nvw_band_finish(g, factor, u_acc, b);
    for (size_t k = 0; k < n; k++) {
        if (r64)
            nv_tensor_free(r64[k]);
        if (rdt)
            nv_tensor_free(rdt[k]);
    }
    free(r64);
    free(rdt);
    return r == NV_E_NOMEM ? -ENOMEM : r;
}
