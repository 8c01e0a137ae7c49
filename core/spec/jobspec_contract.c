/* Contract job spec validation (docs/JOBS.md "Contract jobs"). Every error names
 * the JSON pointer and the offending value (spec_internal.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contractspec.h"
#include "spec_internal.h"

static const char *const probe_names[NV_CPROBE_COUNT] = {
    [NV_CPROBE_CONVERSION] = "conversion",
    [NV_CPROBE_ARITHMETIC] = "arithmetic",
    [NV_CPROBE_ACCUMULATION] = "accumulation",
    [NV_CPROBE_TRANSCENDENTAL] = "transcendental",
};

const char *nv_contract_probe_name(nv_contract_probe p)
{
    return p < NV_CPROBE_COUNT ? probe_names[p] : "?";
}

static const char *const top_keys[] = {"kind",  "name",   "description", "device",  "priority",
                                       "build", "dtypes", "probes",      "repeats", "fp32_sweep",
                                       "seed",  "judge",  NULL};

static bool probeable(nv_dtype dt)
{
    const nv_dtype_info *i = nv_dtype_get(dt);
    return i && i->is_float && dt != NV_DT_E8M0;
}

static int parse_dtypes(nv_spec_err *e, const json_t *spec, nv_contract_spec *s)
{
    const json_t *a = json_object_get(spec, "dtypes");
    if (!a) {
        for (int d = 0; d < NV_DT_COUNT; d++)
            s->dtype[d] = probeable((nv_dtype)d);
        return 0;
    }
    if (!json_is_array(a) || json_array_size(a) == 0)
        return nv_spec_fail_value(e, "/dtypes", a, "must be a non-empty array of float dtypes");
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v)
    {
        char ptr[32];
        snprintf(ptr, sizeof ptr, "/dtypes/%zu", i);
        nv_dtype dt;
        if (!json_is_string(v) || nv_dtype_from_name(json_string_value(v), &dt) < 0)
            return nv_spec_fail_value(e, ptr, v, "is not a dtype (fp32, bf16, fp8_e4m3, ...)");
        if (!probeable(dt))
            return nv_spec_fail_value(e, ptr, v,
                                      "has no float contract to probe (integers and e8m0 scales)");
        if (s->dtype[dt])
            return nv_spec_fail(e, ptr, "duplicate dtype '%s'", json_string_value(v));
        s->dtype[dt] = true;
    }
    return 0;
}

static int parse_all(const json_t *spec, void *ret, nv_spec_err *e)
{
    nv_contract_spec *s = ret;
    if (nv_spec_kind_of(spec) != NV_SPEC_KIND_CONTRACT)
        return nv_spec_fail(e, "/kind", "a contract spec has \"kind\": \"contract\"");
    int64_t sweep, seed;
    int r = nv_spec_no_unknown(e, spec, top_keys, "", false, "in a contract spec");
    r = r ? r : parse_dtypes(e, spec, s);
    r = r ? r : nv_spec_names(e, spec, "probes", probe_names, NV_CPROBE_COUNT, "probe", s->probe);
    /* 2 repetitions are the least that can show a difference; 64 keeps one
     * job's probing under its time budget. */
    r = r ? r : nv_spec_int32(e, spec, "", "repeats", 4, 2, 64, &s->repeats);
    /* 2^20 points per function: the sweep stays seconds, not hours. */
    r = r ? r : nv_spec_int(e, spec, "", "fp32_sweep", 4096, 0, 1 << 20, &sweep);
    r = r ? r : nv_spec_int(e, spec, "", "seed", 1, 0, INT64_MAX, &seed);
    r = r ? r : nv_spec_bool(e, spec, "", "judge", true, &s->judge);
    if (r)
        return r;
    s->fp32_sweep = sweep;
    s->seed = (uint64_t)seed;
    return 0;
}

int nv_contract_parse(const json_t *spec, nv_contract_spec **ret, char **ret_pointer,
                      char **ret_msg)
{
    void *s = NULL;
    int r = nv_spec_parse_new(spec, sizeof(nv_contract_spec), parse_all, &s, ret_pointer, ret_msg);
    if (r == 0)
        *ret = s;
    return r;
}

void nv_contract_free(nv_contract_spec *s)
{
    free(s);
}

int nv_contract_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    nv_contract_spec *s = NULL;
    int r = nv_contract_parse(spec, &s, ret_pointer, ret_msg);
    nv_contract_free(s);
    return r;
}
