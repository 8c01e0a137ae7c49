/* The line cache of the row-wise references (backward.h nv_ref_cache): its
 * memory and key. What it holds is filled and checked in ref_backward_rows.c. */
#include <stdlib.h>
#include <string.h>

#include "backward_internal.h"
#include "numval/backend.h"

nv_ref_cache *nv_ref_cache_new(void)
{
    nv_ref_cache *c = calloc(1, sizeof *c);
    if (c)
        c->id = -1;
    return c;
}

void nv_ref_cache_clear(nv_ref_cache *c)
{
    if (!c)
        return;
    c->id = -1;
    if (c->have)
        memset(c->have, 0, c->cap_lines);
}

void nv_ref_cache_free(nv_ref_cache *c)
{
    if (!c)
        return;
    free(c->x);
    free(c->have);
    free(c->lse);
    free(c->mu);
    free(c->rstd);
    free(c->mab);
    free(c->p);
    free(c->arg);
    free(c->ex);
    free(c);
}

static int grow(double **a, size_t n)
{
    double *q = realloc(*a, sizeof(double) * n);
    if (!q)
        return NV_E_NOMEM;
    *a = q;
    return 0;
}

int nvb_cache_bind(nv_ref_cache *c, int id, const nv_op_attrs *a, const nvb_lines *L)
{
    uint64_t eps_bits;
    memcpy(&eps_bits, &a->eps, sizeof eps_bits);
    if (c->id == id && c->eps_bits == eps_bits && c->L.outer == L->outer && c->L.n == L->n &&
        c->L.inner == L->inner)
        return 0;
    size_t lines = (size_t)(L->outer * L->inner) + 1, el = lines * (size_t)L->n + 1;
    nv_ref_cache_clear(c);
    if (el > c->cap_el) {
        if (grow(&c->x, el) || grow(&c->p, el) || grow(&c->arg, el) || grow(&c->ex, el))
            return NV_E_NOMEM;
        c->cap_el = el;
    }
    if (lines > c->cap_lines) {
        if (grow(&c->lse, lines) || grow(&c->mu, lines) || grow(&c->rstd, lines) ||
            grow(&c->mab, lines))
            return NV_E_NOMEM;
        uint8_t *h = realloc(c->have, lines);
        if (!h)
            return NV_E_NOMEM;
        memset(h, 0, lines);
        c->have = h;
        c->cap_lines = lines;
    }
    c->id = id;
    c->eps_bits = eps_bits;
    c->L = *L;
    return 0;
}
