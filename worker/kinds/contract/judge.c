/* The measured contract per dtype (ct_summary) and its judgement against the
 * declared one (ct_judge): each field that both sides state and that differ is
 * a contract_mismatch naming the field, both values and the evidence. A
 * measured "indistinguishable" is never judged (docs/CONTRACT.md "Limits"). */
#include <stdio.h>
#include <string.h>

#include "contract_internal.h"

/* s, or "" for NULL. */
static const char *str(const char *s)
{
    return s ? s : "";
}

/* The conversion into dt that speaks for dt's rounding and overflow: from the
 * widest source (fp64, then fp32, then the others) whose rounding is known. */
static const json_t *conversion_into(const json_t *measured, const char *dt)
{
    static const char *const order[] = {"fp64", "fp32", "bf16", "fp16", "tf32"};
    const json_t *conv = json_object_get(measured, "conversions");
    const json_t *best = NULL;
    int best_rank = 99;
    size_t i;
    const json_t *c;
    json_array_foreach(conv, i, c)
    {
        if (strcmp(str(json_string_value(json_object_get(c, "to"))), dt))
            continue;
        const char *from = json_string_value(json_object_get(c, "from"));
        int rank = 98;
        for (int k = 0; k < 5; k++)
            if (from && !strcmp(from, order[k]))
                rank = k;
        const char *r = json_string_value(json_object_get(c, "rounding"));
        if (!r || !strcmp(r, "indistinguishable"))
            rank += 50;
        if (rank < best_rank) {
            best_rank = rank;
            best = c;
        }
    }
    return best;
}

static json_t *copy_or_null(const json_t *v)
{
    return v ? json_deep_copy(v) : json_null();
}

json_t *ct_summary(const json_t *measured, const bool *dtypes)
{
    json_t *out = json_object();
    for (int d = 0; out && d < NV_DT_COUNT; d++) {
        if (!dtypes[d])
            continue;
        const char *dt = nv_dtype_name((nv_dtype)d);
        json_t *e = json_object();
        const json_t *cv = conversion_into(measured, dt);
        if (cv) {
            json_object_set_new(e, "conversion_rounding",
                                copy_or_null(json_object_get(cv, "rounding")));
            json_object_set_new(e, "saturation", copy_or_null(json_object_get(cv, "saturation")));
            json_object_set_new(e, "conversion_measured_from",
                                copy_or_null(json_object_get(cv, "from")));
        }
        const json_t *ar = json_object_get(json_object_get(measured, "arithmetic"), dt);
        if (ar && !json_object_get(ar, "error")) {
            json_object_set_new(e, "ftz", copy_or_null(json_object_get(ar, "ftz")));
            json_object_set_new(e, "daz", copy_or_null(json_object_get(ar, "daz")));
            json_object_set_new(e, "fma", copy_or_null(json_object_get(ar, "fma")));
        }
        const json_t *ac = json_object_get(json_object_get(measured, "accumulation"), dt);
        if (ac && !json_object_get(ac, "error")) {
            json_object_set_new(e, "accumulation",
                                copy_or_null(json_object_get(ac, "accumulator")));
            json_object_set_new(e, "accumulator_bits",
                                copy_or_null(json_object_get(ac, "effective_bits")));
            json_object_set_new(
                e, "reduction_order",
                copy_or_null(json_object_get(json_object_get(ac, "reduction"), "order")));
            json_object_set_new(e, "deterministic",
                                copy_or_null(json_object_get(ac, "deterministic")));
            json_object_set_new(e, "block_width", copy_or_null(json_object_get(ac, "block_width")));
            json_object_set_new(e, "alignment", copy_or_null(json_object_get(ac, "alignment")));
            json_object_set_new(
                e, "reduction_tree",
                copy_or_null(json_object_get(json_object_get(ac, "tree"), "tree")));
        }
        const json_t *mm = json_object_get(json_object_get(measured, "matmul"), dt);
        if (mm && !json_object_get(mm, "error")) {
            json_object_set_new(e, "matmul_accumulation",
                                copy_or_null(json_object_get(mm, "accumulator")));
            json_object_set_new(e, "matmul_accumulator_bits",
                                copy_or_null(json_object_get(mm, "effective_bits")));
            json_object_set_new(
                e, "matmul_reduction_order",
                copy_or_null(json_object_get(json_object_get(mm, "reduction"), "order")));
            json_object_set_new(e, "matmul_deterministic",
                                copy_or_null(json_object_get(mm, "deterministic")));
            json_object_set_new(e, "matmul_products",
                                copy_or_null(json_object_get(mm, "products")));
            json_object_set_new(e, "matmul_block_width",
                                copy_or_null(json_object_get(mm, "block_width")));
            json_object_set_new(e, "matmul_alignment",
                                copy_or_null(json_object_get(mm, "alignment")));
            json_object_set_new(
                e, "matmul_reduction_tree",
                copy_or_null(json_object_get(json_object_get(mm, "tree"), "tree")));
        }
        const json_t *tr = json_object_get(json_object_get(measured, "transcendental"), dt);
        const char *kind = json_string_value(json_object_get(tr, "kind"));
        if (kind) {
            json_object_set_new(
                e, "transcendental_error",
                json_pack("{s:s, s:O}", "kind", kind, "max_ulp", json_object_get(tr, "max_ulp")));
        }
        /* Fast math as describe() means it: approximate functions (neither
         * correctly rounded nor the host C library's), FTZ or DAZ. */
        json_t *ftz = json_object_get(e, "ftz"), *daz = json_object_get(e, "daz");
        if (kind && strcmp(kind, "indistinguishable") && strcmp(kind, "not_probed") && ar)
            json_object_set_new(e, "fast_math",
                                json_boolean(!strcmp(kind, "approximation") || json_is_true(ftz) ||
                                             json_is_true(daz)));
        json_object_set_new(out, dt, e);
    }
    return out;
}

/* ---- the judgement ---- */

static int add(json_t *list, const char *dt, const char *field, json_t *declared, json_t *measured,
               json_t *evidence)
{
    char name[96];
    snprintf(name, sizeof name, "contract.%s.%s", dt, field);
    return json_array_append_new(list, json_pack("{s:s, s:s, s:o, s:o, s:o}", "class",
                                                 "contract_mismatch", "field", name, "declared",
                                                 declared, "measured", measured, "evidence",
                                                 evidence ? evidence : json_array()));
}

/* A judged field, passed or not: {"field", "declared", "measured"} into the
 * result's "judged" list, so that a passing field is named too (JUnit gives
 * each its test case); the field names are those of add(). */
static void note(json_t *judged_list, const char *dt, const char *field, json_t *declared,
                 const json_t *measured)
{
    char name[96];
    snprintf(name, sizeof name, "contract.%s.%s", dt, field);
    json_array_append_new(judged_list, json_pack("{s:s, s:o, s:O}", "field", name, "declared",
                                                 declared ? declared : json_null(), "measured",
                                                 measured ? measured : json_null()));
}

static bool judged(const json_t *m)
{
    const char *s = json_string_value(m);
    return m && !json_is_null(m) &&
           !(s && (!strcmp(s, "indistinguishable") || !strcmp(s, "not_probed") ||
                   !strcmp(s, "not_offered")));
}

/* The evidence entries of a probe section about one property (NULL: all). */
static json_t *evidence_of(const json_t *section, const char *property)
{
    json_t *out = json_array();
    size_t i;
    const json_t *e;
    json_array_foreach(json_object_get(section, "evidence"), i, e)
    {
        const char *p = json_string_value(json_object_get(e, "property"));
        if (!property || (p && !strcmp(p, property)))
            json_array_append_new(out, json_deep_copy(e));
    }
    return out;
}

static json_t *conversion_evidence(const json_t *measured, const char *dt)
{
    const json_t *cv = conversion_into(measured, dt);
    if (!cv)
        return json_array();
    json_t *ev = evidence_of(cv, NULL);
    json_array_append_new(ev, json_pack("{s:O, s:O, s:O, s:O}", "from", json_object_get(cv, "from"),
                                        "to", json_object_get(cv, "to"), "inputs",
                                        json_object_get(cv, "inputs"), "surviving_models",
                                        json_object_get(cv, "models")));
    return ev;
}

/* Declared subnormal handling from describe()'s text ("kept (gradual
 * underflow)", "results flushed to zero (ftz)", ...): -1 when it says nothing. */
static int declared_flag(const char *text, const char *flag)
{
    if (!text || strstr(text, "none in this format"))
        return -1;
    return strstr(text, flag) != NULL;
}

/* The accumulator, order and determinism of sum (mm false) or matmul. */
static void judge_accum(json_t *list, json_t *jl, const json_t *desc, const char *dt,
                        const json_t *decl, const json_t *m, const json_t *measured, bool mm)
{
    const char *op = mm ? "matmul" : "sum";
    const json_t *ac =
        json_object_get(json_object_get(measured, mm ? "matmul" : "accumulation"), dt);
    /* describe() names the matmul accumulator apart when it has one of its own */
    const char *da = mm ? NULL : json_string_value(json_object_get(decl, "accumulation"));
    if (!da)
        da = json_string_value(json_object_get(
            json_object_get(decl, mm ? "matmul_accumulator" : "accumulator"), "dtype"));
    const json_t *mv = json_object_get(m, mm ? "matmul_accumulation" : "accumulation");
    if (da && judged(mv))
        note(jl, dt, mm ? "matmul_accumulator" : "accumulation", json_string(da), mv);
    if (da && judged(mv) && strcmp(da, str(json_string_value(mv))))
        add(list, dt, mm ? "matmul_accumulator" : "accumulation", json_string(da),
            json_deep_copy(mv), evidence_of(ac, "effective_bits"));
    const char *dor = json_string_value(json_object_get(decl, "reduction_order"));
    mv = json_object_get(m, mm ? "matmul_reduction_order" : "reduction_order");
    /* A random order that happened to repeat is one no model reproduces:
     * "unrecognized" does not contradict a declared "random"; nor does it
     * contradict an order outside the fitted families (the tree is judged). */
    static const char *const fams[] = {"sequential", "pairwise", "tree:", "splitk:", "random"};
    bool family = false;
    for (int f = 0; dor && f < 5; f++)
        family |= !strncmp(dor, fams[f], strlen(fams[f]));
    bool random_ok = dor && (!strcmp(dor, "random") || !family) &&
                     !strcmp(str(json_string_value(mv)), "unrecognized");
    if (dor && judged(mv))
        note(jl, dt, mm ? "reduction_order(matmul)" : "reduction_order", json_string(dor), mv);
    if (dor && judged(mv) && !random_ok && strcmp(dor, str(json_string_value(mv)))) {
        json_t *ev = json_array();
        json_array_append_new(ev, json_deep_copy(json_object_get(ac, "reduction")));
        add(list, dt, mm ? "reduction_order(matmul)" : "reduction_order", json_string(dor),
            json_deep_copy(mv), ev);
    }
    /* the tree, where describe() states one at the probe's length */
    const json_t *dt_tree = json_object_get(decl, "reduction_tree");
    const json_t *mtree = json_object_get(ac, "tree");
    const char *dtt = json_string_value(json_object_get(dt_tree, "tree"));
    mv = json_object_get(mtree, "tree");
    if (dtt && judged(mv) &&
        json_integer_value(json_object_get(dt_tree, "n")) ==
            json_integer_value(json_object_get(mtree, "n"))) {
        const char *f = mm ? "reduction_tree(matmul)" : "reduction_tree";
        note(jl, dt, f, json_string(dtt), mv);
        if (strcmp(dtt, str(json_string_value(mv)))) {
            json_t *ev = json_array();
            json_array_append_new(ev, json_deep_copy(mtree));
            add(list, dt, f, json_string(dtt), json_deep_copy(mv), ev);
        }
    }
    /* the adder: terms per rounding and alignment (describe()'s "block_width",
     * "alignment"; one adder for sum and matmul) */
    const json_t *dw = json_object_get(decl, "block_width");
    mv = json_object_get(m, mm ? "matmul_block_width" : "block_width");
    if (json_is_integer(dw) && json_is_integer(mv)) {
        note(jl, dt, mm ? "block_width(matmul)" : "block_width", json_deep_copy(dw), mv);
        if (json_integer_value(dw) != json_integer_value(mv)) {
            json_t *ev = json_array();
            json_array_append_new(ev, json_deep_copy(json_object_get(ac, "tree")));
            add(list, dt, mm ? "block_width(matmul)" : "block_width", json_deep_copy(dw),
                json_deep_copy(mv), ev);
        }
    }
    const char *dal = json_string_value(json_object_get(decl, "alignment"));
    mv = json_object_get(m, mm ? "matmul_alignment" : "alignment");
    if (dal && judged(mv)) {
        note(jl, dt, mm ? "alignment(matmul)" : "alignment", json_string(dal), mv);
        if (strcmp(dal, str(json_string_value(mv))))
            add(list, dt, mm ? "alignment(matmul)" : "alignment", json_string(dal),
                json_deep_copy(mv), evidence_of(ac, "alignment"));
    }
    /* determinism: describe() lists the ops that are not deterministic. Only a
     * difference between repeats is proof; a listed op that repeated is within
     * its declaration (non-determinism is allowed, not promised), so only
     * "declared deterministic, seen to differ" is a mismatch. */
    const json_t *nd = json_object_get(desc, "nondeterministic_ops");
    mv = json_object_get(m, mm ? "matmul_deterministic" : "deterministic");
    if (json_is_array(nd) && json_is_boolean(mv)) {
        bool decl_det = true;
        size_t i;
        const json_t *v;
        json_array_foreach(nd, i, v) decl_det &= strcmp(str(json_string_value(v)), op) != 0;
        char f[32];
        snprintf(f, sizeof f, "deterministic(%s)", op);
        note(jl, dt, f, json_boolean(decl_det), mv);
        if (decl_det && !json_is_true(mv)) {
            add(list, dt, f, json_boolean(decl_det), json_deep_copy(mv),
                evidence_of(ac, "deterministic"));
        }
    }
}

static void judge_dtype(json_t *list, json_t *jl, const json_t *desc, const char *dt,
                        const json_t *decl, const json_t *m, const json_t *measured)
{
    const json_t *mv;
    /* conversions */
    const char *dr = json_string_value(json_object_get(decl, "conversion_rounding"));
    mv = json_object_get(m, "conversion_rounding");
    if (dr && judged(mv))
        note(jl, dt, "conversion_rounding", json_string(dr), mv);
    if (dr && judged(mv) && strcmp(dr, str(json_string_value(mv))))
        add(list, dt, "conversion_rounding", json_string(dr), json_deep_copy(mv),
            conversion_evidence(measured, dt));
    const char *ds = json_string_value(json_object_get(decl, "saturation"));
    mv = json_object_get(m, "saturation");
    if (ds && judged(mv)) {
        note(jl, dt, "saturation", json_string(ds), mv);
        const char *d = !strncmp(ds, "saturate", 8) ? "saturate" : "overflow";
        if (strcmp(d, str(json_string_value(mv))))
            add(list, dt, "saturation", json_string(ds), json_deep_copy(mv),
                conversion_evidence(measured, dt));
    }
    /* subnormals */
    const char *dsub = json_string_value(json_object_get(decl, "subnormals"));
    const json_t *ar = json_object_get(json_object_get(measured, "arithmetic"), dt);
    static const char *const flags[] = {"ftz", "daz"};
    for (int f = 0; f < 2; f++) {
        int want = declared_flag(dsub, flags[f]);
        mv = json_object_get(m, flags[f]);
        if (want >= 0 && json_is_boolean(mv))
            note(jl, dt, flags[f], json_string(dsub), mv);
        if (want >= 0 && json_is_boolean(mv) && want != json_is_true(mv))
            add(list, dt, flags[f], json_string(dsub), json_deep_copy(mv),
                evidence_of(ar, flags[f]));
    }
    /* accumulation of sum, and of matmul */
    judge_accum(list, jl, desc, dt, decl, m, measured, false);
    judge_accum(list, jl, desc, dt, decl, m, measured, true);
    /* transcendentals */
    const char *dk =
        json_string_value(json_object_get(json_object_get(decl, "transcendental_error"), "kind"));
    const char *mk =
        json_string_value(json_object_get(json_object_get(m, "transcendental_error"), "kind"));
    if (dk && mk && strcmp(mk, "indistinguishable") && strcmp(mk, "not_probed")) {
        json_t *mkj = json_string(mk);
        note(jl, dt, "transcendental_error.kind", json_string(dk), mkj);
        json_decref(mkj);
        const char *d = !strcmp(dk, "fast_approximation") ? "approximation" : dk;
        if (strcmp(d, mk)) {
            json_t *ev = json_array();
            const json_t *fnsj = json_object_get(
                json_object_get(json_object_get(measured, "transcendental"), dt), "functions");
            const char *name;
            const json_t *fe;
            json_object_foreach((json_t *)fnsj, name, fe)
            {
                const json_t *w = json_object_get(fe, "host_libm_differs");
                if (!w || !strcmp(d, "correctly_rounded"))
                    w = json_object_get(fe, "worst");
                if (w && json_array_size(ev) < 4)
                    json_array_append_new(ev,
                                          json_pack("{s:s, s:O, s:O}", "function", name, "max_ulp",
                                                    json_object_get(fe, "max_ulp"), "point", w));
            }
            add(list, dt, "transcendental_error.kind", json_string(dk), json_string(mk), ev);
        }
    }
    const json_t *df = json_object_get(decl, "fast_math");
    mv = json_object_get(m, "fast_math");
    if (json_is_boolean(df) && json_is_boolean(mv))
        note(jl, dt, "fast_math", json_deep_copy(df), mv);
    if (json_is_boolean(df) && json_is_boolean(mv) && json_is_true(df) != json_is_true(mv))
        add(list, dt, "fast_math", json_deep_copy(df), json_deep_copy(mv),
            json_pack("{s:O?, s:O?, s:O?}", "transcendental_error",
                      json_object_get(m, "transcendental_error"), "ftz", json_object_get(m, "ftz"),
                      "daz", json_object_get(m, "daz")));
}

json_t *ct_judge(const json_t *desc, const json_t *measured, json_t *judged_list)
{
    json_t *list = json_array();
    const json_t *contract = json_object_get(desc, "contract");
    const char *dt;
    const json_t *m;
    json_object_foreach((json_t *)json_object_get(measured, "contract"), dt, m)
    {
        const json_t *decl = json_object_get(contract, dt);
        if (json_is_object(decl))
            judge_dtype(list, judged_list, desc, dt, decl, m, measured);
    }
    return list;
}
