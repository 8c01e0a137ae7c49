/* Job specs of every kind (spec.h): the dispatch by "kind" to each kind's
 * parser. The parsers share the field checkers of jobspec_util.c; the gradient
 * parser reuses the op parser (jobspec.c); nothing calls back into this file. */
#include "spec.h"

#include "contractspec.h"
#include "fusedspec.h"
#include "gradspec.h"
#include "jobspec.h"
#include "longrunspec.h"
#include "modelspec.h"
#include "rngspec.h"
#include "servingspec.h"
#include "spec_internal.h"

int nv_jobspec_validate(const json_t *spec, char **ret_pointer, char **ret_msg)
{
    switch (nv_spec_kind_of(spec)) {
    case NV_SPEC_KIND_GRADIENT:
        return nv_gradspec_validate(spec, ret_pointer, ret_msg);
    case NV_SPEC_KIND_FUSED:
        return nv_fusedspec_validate(spec, ret_pointer, ret_msg);
    case NV_SPEC_KIND_LONGRUN:
        return nv_longrun_validate(spec, ret_pointer, ret_msg);
    case NV_SPEC_KIND_CONTRACT:
        return nv_contract_validate(spec, ret_pointer, ret_msg);
    case NV_SPEC_KIND_MODEL:
        return nv_modelspec_validate(spec, ret_pointer, ret_msg);
    case NV_SPEC_KIND_SERVING:
        return nv_servingspec_validate(spec, ret_pointer, ret_msg);
    case NV_SPEC_KIND_RNG:
        return nv_rngspec_validate(spec, ret_pointer, ret_msg);
    default: {
        /* op, and the refusal of everything else (not an object, no or an
         * unknown "kind", suite) worded by the op parser */
        nv_jobspec *s = NULL;
        int r = nv_jobspec_parse(spec, &s, ret_pointer, ret_msg);
        nv_jobspec_free(s);
        return r;
    }
    }
}
