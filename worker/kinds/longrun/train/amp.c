/* AMP policy: the op categories of PyTorch's autocast (torch.amp, "Autocast Op
 * Reference": ops that autocast to the lower precision, ops that autocast to
 * float32, ops that promote to the widest input type). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tape.h"

/* Kept equal to suites/amp_policy_default.json (tests/integration/test_longrun.py
 * compares them). */
static const char default_policy[] =
    "{\"name\": \"default\", \"low_precision\": [\"matmul\", \"bmm\", \"conv2d\"], "
    "\"fp32\": [\"softmax\", \"log_softmax\", \"layer_norm\", \"rms_norm\", \"cross_entropy\", "
    "\"exp\", \"log\", \"sum\", \"mean\", \"var\", \"norm2\", \"logsumexp\"], "
    "\"promote\": [\"add\", \"sub\", \"mul\", \"div\", \"maximum\", \"minimum\"], "
    "\"master_weights\": \"fp32\"}";

const char *nvw_amp_default_json(void)
{
    return default_policy;
}

static int take_list(const json_t *policy, const char *key, char (*ops)[24], int *ret_n,
                     char **ret_msg)
{
    const json_t *l = json_object_get(policy, key);
    size_t i;
    const json_t *v;
    *ret_n = 0;
    json_array_foreach(l, i, v)
    {
        const char *s = json_string_value(v);
        if (!s || !nv_op_find(s) || i >= NVW_AMP_MAX_OPS) {
            if (asprintf(ret_msg, "AMP policy list '%s': '%s' is not a catalog op", key,
                         s ? s : "(not a string)") < 0)
                *ret_msg = NULL;
            return -EINVAL;
        }
        snprintf(ops[i], 24, "%s", s);
        *ret_n = (int)i + 1;
    }
    return 0;
}

int nvw_amp_parse(const json_t *policy, nv_dtype low, nvw_amp *ret, char **ret_msg)
{
    nvw_amp a;
    memset(&a, 0, sizeof a);
    a.enabled = true;
    a.low = low;
    int r = take_list(policy, "low_precision", a.low_ops, &a.n_low, ret_msg);
    r = r ? r : take_list(policy, "fp32", a.fp32_ops, &a.n_fp32, ret_msg);
    r = r ? r : take_list(policy, "promote", a.promote_ops, &a.n_promote, ret_msg);
    /* fp32 masters are what PyTorch AMP keeps; bf16 and fp16 masters accumulate
     * every update into the low-precision weight, where an update below half
     * an ulp of the weight is lost (round to nearest, IEEE 754-2019 4.3.1). */
    const json_t *mw = json_object_get(policy, "master_weights");
    const char *mws = mw ? json_string_value(mw) : "fp32";
    bool known = mws && (!strcmp(mws, "fp32") || !strcmp(mws, "bf16") || !strcmp(mws, "fp16"));
    if (known)
        nv_dtype_from_name(mws, &a.master);
    if (r == 0 && !known) {
        if (asprintf(ret_msg, "AMP policy 'master_weights': '%s' is not fp32, bf16 or fp16",
                     mws ? mws : "(not a string)") < 0)
            *ret_msg = NULL;
        r = -EINVAL;
    }
    if (r == 0)
        *ret = a;
    return r;
}

static bool in(char (*ops)[24], int n, const char *op)
{
    for (int i = 0; i < n; i++)
        if (strcmp(ops[i], op) == 0)
            return true;
    return false;
}

nvw_amp_cat nvw_amp_category(const nvw_amp *a, const char *op)
{
    if (in((char(*)[24])a->low_ops, a->n_low, op))
        return NVW_AMP_LOW;
    if (in((char(*)[24])a->fp32_ops, a->n_fp32, op))
        return NVW_AMP_FP32;
    return NVW_AMP_PROMOTE;
}
