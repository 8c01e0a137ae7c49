/* libFuzzer target: job-spec validation (core/spec nv_jobspec_validate), what
 * numvald runs on every submitted body. The input is JSON text; a structure-aware
 * mutator (json_mutate.h) edits the tree with the catalog's names in its
 * vocabulary.
 *
 * Besides ASan and UBSan (signed overflow aborts: -fno-sanitize-recover), each
 * input is checked against what a caller relies on:
 * - the contract of spec.h: 0 with no error written, or -EINVAL with a JSON
 *   pointer ("" or "/...") and a non-empty message, or -ENOMEM;
 * - determinism: a second validation of a copy gives the same answer;
 * - the element limit, computed here independently (128-bit products): an
 *   accepted op or gradient spec has no tensor of more than 2^27 elements;
 * - bounded work: scripts/fuzz.sh runs this target with -malloc_limit_mb=64 and
 *   a timeout, so validation that allocates or loops in proportion to a
 *   tensor's size is reported as a crash. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/numerics/dtype.h"
#include "core/numerics/inputs.h"
#include "core/ops/catalog.h"
#include "core/spec/jobspec.h"
#include "core/spec/spec.h"
#include "json_mutate.h"

static jm_state mutator;

/* Names the specs are made of, for the mutator. */
static void add_vocabulary(void)
{
    static bool done;
    if (done)
        return;
    done = true;
    size_t n_ops;
    const nv_op_def *ops = nv_op_all(&n_ops);
    for (size_t i = 0; i < n_ops; i++)
        jm_add_fixed_word(&mutator, ops[i].name);
    for (int d = 0; d < NV_DT_COUNT; d++)
        jm_add_fixed_word(&mutator, nv_dtype_name((nv_dtype)d));
    for (int c = 0; c < NV_IN_COUNT; c++)
        jm_add_fixed_word(&mutator, nv_input_class_name((nv_input_class)c));
    static const char *const words[] = {
        "op",        "gradient", "fused",        "longrun",   "suite",      "kind",
        "shapes",    "dtypes",   "layouts",      "inputs",    "attrs",      "samples",
        "mode",      "full",     "fast",         "order",     "graph",      "nodes",
        "outputs",   "shape",    "expect_error", "case",      "contiguous", "transposed",
        "strided",   "axis",     "reduction",    "mean",      "none",       "scale",
        "block",     "tensor",   "channel",      "tile",      "steps",      "batch",
        "seeds",     "n_seeds",  "amp",          "policy",    "sizes",      "model",
        "optimizer", "schedule", "acceptance",   "out_dtype", "tolerance",  "node_tolerances"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        jm_add_fixed_word(&mutator, words[i]);
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    add_vocabulary();
    return jm_mutate(&mutator, data, size, max_size, seed);
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_spec: %s: %s\n", what, detail ? detail : "");
    abort();
}

#define LIMIT ((unsigned __int128)NV_JOB_MAX_ELEMENTS)

/* Product of the integer extents of arr[from..to), saturating far above the limit;
 * 0 when an extent is not a positive integer (validation must refuse those). */
static unsigned __int128 product(const json_t *arr, size_t from, size_t to)
{
    unsigned __int128 p = 1;
    for (size_t i = from; i < to; i++) {
        const json_t *x = json_array_get(arr, i);
        if (!json_is_integer(x) || json_integer_value(x) <= 0)
            return 0;
        p *= (unsigned __int128)json_integer_value(x);
        if (p > ((unsigned __int128)1 << 64))
            p = (unsigned __int128)1 << 64;
    }
    return p;
}

/* The element limit of an accepted op or gradient spec, from the JSON alone:
 * every explicit shape, the single form's input 0, and for matmul's single
 * form [..batch, M, K, N] the operands and the output. */
static void check_limit(const json_t *spec)
{
    const nv_op_def *op = nv_op_find(json_string_value(json_object_get(spec, "op")));
    const json_t *shapes = json_object_get(spec, "shapes");
    size_t i;
    const json_t *sh;
    json_array_foreach(shapes, i, sh)
    {
        char *text = json_dumps(sh, JSON_COMPACT);
        size_t nd = json_array_size(sh);
        if (nd > 0 && json_is_array(json_array_get(sh, 0))) {
            size_t k;
            const json_t *t;
            json_array_foreach(sh, k, t)
            {
                if (product(t, 0, json_array_size(t)) > LIMIT)
                    die("accepted an input over 2^27 elements", text);
            }
        } else if (op && op->kind == NV_OPK_MATMUL && nd >= 3) {
            unsigned __int128 batch = product(sh, 0, nd - 3);
            unsigned __int128 m = product(sh, nd - 3, nd - 2), k = product(sh, nd - 2, nd - 1),
                              n = product(sh, nd - 1, nd);
            if (batch * m * k > LIMIT || batch * k * n > LIMIT || batch * m * n > LIMIT)
                die("accepted a matmul operand or output over 2^27 elements", text);
        } else if (product(sh, 0, nd) > LIMIT) {
            die("accepted a tensor over 2^27 elements", text);
        }
        free(text);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *spec = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!spec)
        return 0;
    char *ptr = NULL, *msg = NULL;
    int r = nv_jobspec_validate(spec, &ptr, &msg);
    if (r == 0 && (ptr || msg))
        die("an accepted spec has an error written", msg);
    if (r == -EINVAL && (!ptr || !msg || !msg[0] || (ptr[0] && ptr[0] != '/')))
        die("a refusal without a JSON pointer or message", ptr);
    if (r != 0 && r != -EINVAL && r != -ENOMEM)
        die("an undocumented status", NULL);

    json_t *copy = json_deep_copy(spec);
    char *ptr2 = NULL, *msg2 = NULL;
    int r2 = nv_jobspec_validate(copy, &ptr2, &msg2);
    if (r2 != r || (r == -EINVAL && (strcmp(ptr, ptr2) != 0 || strcmp(msg, msg2) != 0)))
        die("two validations of one spec differ", msg);

    const char *kind = json_string_value(json_object_get(spec, "kind"));
    if (r == 0 && kind && (strcmp(kind, "op") == 0 || strcmp(kind, "gradient") == 0))
        check_limit(spec);

    free(ptr);
    free(msg);
    free(ptr2);
    free(msg2);
    json_decref(copy);
    json_decref(spec);
    return 0;
}
