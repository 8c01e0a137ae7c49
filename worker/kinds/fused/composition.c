/* The composition criterion of a fused job (docs/JOBS.md "Fused jobs",
 * "composition"): the graph outputs of one execution judged by the model's
 * band (worker/runner/band.h) on the case's inputs. It is what a model failure
 * whose every op is within its own tolerance reduces to (docs/MODEL.md
 * "Localization"): errors each within an op's tolerance that compound, a bias
 * in one direction (round toward zero) or an accumulator narrower than
 * declared across many small reductions, so the subgraph's output leaves the
 * band the correctly rounded execution of the same subgraph defines. The
 * per-node judgement cannot see it: each node is judged on its own inputs. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "fused_internal.h"
#include "worker/runner/band.h"

static json_t *num(double x)
{
    return isfinite(x) ? json_real(x) : json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf");
}

static const char *const reason =
    "the model's band (docs/MODEL.md \"The band\") on the subgraph fed the case's inputs: a "
    "device of the case dtype makes rounding errors of the size the correctly rounded "
    "execution of the same subgraph makes (factor F: not the same errors), plus what "
    "accumulating K terms in the declared accumulator adds to first order (Higham 2002, "
    "sec. 4.2, eq. 4.4), plus one rounding (u). Rounding errors that each stay within an op's "
    "tolerance but share a sign add up linearly through composed linear ops, unbiased ones "
    "like a random walk (Higham 2002, Lemma 3.1 and sec. 2.8): the band separates the two";

int fused_composition(fcase *c, int *ret_out)
{
    const nv_graph *g = &c->g;
    *ret_out = -1;
    const nv_fusedspec *s = c->j->s;
    bool fused = s->composition_fused;
    nvw_band *b = calloc((size_t)g->n_nodes, sizeof *b);
    const nv_tensor **dev = calloc((size_t)g->n_nodes, sizeof *dev);
    if (!b || !dev) {
        free(b);
        free(dev);
        return -ENOMEM;
    }
    for (int o = 0; o < g->n_outputs; o++) {
        int k = g->outputs[o];
        dev[k] = fused ? c->fout[k] : c->unf[k];
    }
    const char *acc;
    double u_acc;
    nvw_band_accumulator(c->j->b.describe, c->dt, &acc, &u_acc);
    char err[FUSED_ERRLEN] = "";
    int r = nvw_band_judge(g, c->in, dev, s->band_factor, u_acc, b, err, sizeof err);
    json_t *outs = json_array();
    json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:s}", "criterion",
                          "e_dev <= F (e_dtype_ref + K u_acc) + u at every graph output",
                          "reason", reason, "execution", fused ? "fused" : "unfused",
                          "band_factor", json_real(s->band_factor), "accumulator", acc);
    if (!outs || !o || json_object_set_new(c->cj, "composition", o)) {
        json_decref(outs);
        free(b);
        free(dev);
        return -ENOMEM;
    }
    if (r < 0) {
        free(b);
        free(dev);
        json_decref(outs);
        if (r == -ENOMEM)
            return r;
        r = fused_verdict(c, "error", "reference", "composition: %s", err);
        return r < 0 ? r : 1;
    }
    for (int q = 0; q < g->n_outputs; q++) {
        int k = g->outputs[q];
        const nvw_band *m = &b[k];
        if (!m->in_band && *ret_out < 0)
            *ret_out = k;
        json_t *oj = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:b}", "node",
                               g->nodes[k].name, "op", g->nodes[k].op->name, "dtype",
                               nv_dtype_name(g->nodes[k].dtype), "e_dev", num(m->e_dev),
                               "e_dtype_ref", num(m->e_dt), "band", num(m->band),
                               "reduction_len", (json_int_t)m->k_red, "in_band", m->in_band);
        if (!oj || json_array_append_new(outs, oj)) {
            json_decref(outs);
            free(b);
            free(dev);
            return -ENOMEM;
        }
    }
    free(b);
    free(dev);
    if (json_object_set_new(o, "outputs", outs) ||
        json_object_set_new(o, "passed", json_boolean(*ret_out < 0)))
        return -ENOMEM;
    return 0;
}
