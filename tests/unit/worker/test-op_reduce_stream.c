/* The op kind's streamed reductions (worker/kinds/op/reduce_stream.c) against
 * the whole case: the same job run whole (op_block_elems < 0: the input held
 * as doubles, the reference over them) and streamed with blocks of a few
 * thousand elements (the input generated into the device's view, the
 * reference reading lines back from it in pieces that cut the lines) gives the
 * same result JSON byte for byte: sum, mean, max, norm2 and var, every layout,
 * the leading and the last axis, specials (NaN and Inf lines), ranges that
 * need norm2's scaling, passing and failing cases (emu's fp16 accumulator),
 * bound tolerances; and a failing streamed case hands on_failure the whole
 * input and output. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/unit/tap.h"
#include "worker/kinds/kinds.h"
#include "op_run_fixture.h"

static const struct {
    const char *what, *spec, *backend;
} jobs[] = {
    {"sum, every layout, last and leading axis",
     "{\"kind\": \"op\", \"op\": \"sum\", \"dtypes\": [\"fp32\", \"bf16\"], \"shapes\": [[20011], "
     "[97, 211]], \"layouts\": [\"contiguous\", \"transposed\", \"strided\"], \"inputs\": "
     "[\"normal\", \"specials\", \"cancellation\", \"offset\", \"large\"], \"seed\": 5}",
     "emu"},
    {"sum along axis 0",
     "{\"kind\": \"op\", \"op\": \"sum\", \"attrs\": {\"axis\": 0}, \"dtypes\": [\"fp32\"], "
     "\"shapes\": [[211, 97], [5, 40, 31]], \"layouts\": [\"contiguous\", \"transposed\", "
     "\"strided\"], \"inputs\": [\"normal\", \"specials\"], \"seed\": 6}",
     "emu"},
    {"mean and max, fp16 accumulator (failing cases)",
     "{\"kind\": \"op\", \"op\": \"mean\", \"dtypes\": [\"fp32\", \"fp16\"], \"shapes\": [[20011], "
     "[40, 501]], \"layouts\": [\"contiguous\", \"strided\"], \"inputs\": [\"normal\", "
     "\"specials\", \"large\"], \"seed\": 7}",
     "emu:accum=fp16"},
    {"max",
     "{\"kind\": \"op\", \"op\": \"max\", \"dtypes\": [\"fp32\", \"bf16\"], \"shapes\": [[20011], "
     "[97, 211]], \"layouts\": [\"contiguous\", \"transposed\"], \"inputs\": [\"normal\", "
     "\"specials\", \"near_zero\"], \"seed\": 8}",
     "emu"},
    {"norm2 (scaled lines), bound tolerance",
     "{\"kind\": \"op\", \"op\": \"norm2\", \"dtypes\": [\"fp32\", \"bf16\"], \"shapes\": [[20011], "
     "[97, 211]], \"inputs\": [\"normal\", \"large\", \"near_zero\", \"specials\"], \"seed\": 9, "
     "\"tolerance\": {\"metric\": \"bound\", \"c\": 2, \"growth\": \"log2n\", "
     "\"reason_code\": \"reduction_length\", \"reason\": \"the bound's own test\"}}",
     "emu:reduce=pairwise"},
    {"var with correction 1",
     "{\"kind\": \"op\", \"op\": \"var\", \"attrs\": {\"correction\": 1}, \"dtypes\": [\"fp32\"], "
     "\"shapes\": [[20011], [97, 211]], \"layouts\": [\"contiguous\", \"transposed\"], "
     "\"inputs\": [\"normal\", \"offset\", \"specials\"], \"seed\": 10}",
     "emu"},
};

int main(void)
{
    for (size_t k = 0; k < sizeof jobs / sizeof jobs[0]; k++) {
        char *whole = run(jobs[k].spec, jobs[k].backend, 1, -1, NULL);
        char *s1 = run(jobs[k].spec, jobs[k].backend, 1, 3000, NULL);
        char *s2 = run(jobs[k].spec, jobs[k].backend, 2, 1024, NULL);
        tap_ok(whole && s1 && s2 && !strcmp(whole, s1) && !strcmp(whole, s2),
               "%s: streamed in pieces of 3000 (1 thread) and 1024 (2 threads) gives the whole "
               "case's result (%zu bytes)",
               jobs[k].what, whole ? strlen(whole) : 0);
        free(whole);
        free(s1);
        free(s2);
    }
    /* One failing case of 30001 elements: its artifact has the whole tensors. */
    const char *one = "{\"kind\": \"op\", \"op\": \"sum\", \"dtypes\": [\"fp32\"], \"shapes\": "
                      "[[30001]], \"inputs\": [\"normal\"], \"seed\": 6, \"tolerance\": "
                      "{\"metric\": \"ulp\", \"max_ulp\": 0.5, \"reason_code\": "
                      "\"approximation_error\", \"reason\": \"test\"}}";
    failures fw = {0}, fs = {0};
    char *w = run(one, "emu:accum=fp16", 1, -1, &fw);
    char *s = run(one, "emu:accum=fp16", 1, 1000, &fs);
    tap_ok(w && s && !strcmp(w, s) && fw.n == 1 && fs.n == 1 && fs.numel_sum == 30001 + 1 &&
               strstr(s, "\"artifact\""),
           "a failing streamed case: one artifact of the whole input and the output (%d, %lld "
           "elements), the result as whole",
           fs.n, (long long)fs.numel_sum);
    free(w);
    free(s);
    return tap_done();
}
