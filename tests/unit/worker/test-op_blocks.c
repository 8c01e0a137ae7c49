/* The op kind's blocked cases (worker/kinds/op/blocks.c) against the whole
 * case: the same job run whole (op_block_elems < 0) and in blocks of a few
 * thousand elements on 1 and 3 threads gives the same result JSON byte for byte
 * (every metric, the histograms, the first mismatches with their inputs), for
 * unary, binary and ternary ops, every layout, the classes whose values depend
 * on the element index, 2-d shapes whose rows split into blocks, passing and
 * failing cases (emu's fast transcendentals), repeated runs; and a failing
 * blocked case hands on_failure the whole inputs and output. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tests/unit/tap.h"
#include "worker/kinds/kinds.h"
#include "op_run_fixture.h"

static const struct {
    const char *what, *spec, *backend;
} jobs[] = {
    {"exp, every layout and index-dependent class, exact",
     "{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\", \"bf16\"], \"shapes\": [[20011], "
     "[97, 211]], \"layouts\": [\"contiguous\", \"transposed\", \"strided\"], \"inputs\": "
     "[\"normal\", \"specials\", \"midpoints\", \"domain_edges\", \"sweep\", \"cancellation\", "
     "\"offset\", \"near_zero\"], \"seed\": 5}",
     "emu"},
    {"exp failing under fast transcendentals (first mismatches and their inputs)",
     "{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": [[30001]], \"inputs\": "
     "[\"normal\", \"large\", \"specials\"], \"seed\": 6, \"repeat\": 2}",
     "emu:transcendental=fast"},
    {"add (tie partners, ordered special pairs) and fma",
     "{\"kind\": \"op\", \"op\": \"add\", \"dtypes\": [\"fp32\", \"fp16\"], \"shapes\": [[25000], "
     "[50, 401]], \"layouts\": [\"contiguous\", \"transposed\"], \"inputs\": [\"midpoints\", "
     "\"specials\", \"sweep\"], \"seed\": 7}",
     "emu:rounding=rtz"},
    {"one case, so that 3 threads share its blocks",
     "{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": [[40000]], \"inputs\": "
     "[\"normal\"], \"seed\": 9}",
     "emu:transcendental=fast"},
    {"fma, specials triples",
     "{\"kind\": \"op\", \"op\": \"fma\", \"dtypes\": [\"fp32\"], \"shapes\": [[12345]], \"inputs\": "
     "[\"normal\", \"specials\"], \"seed\": 8}",
     "emu:fma=off"},
};

int main(void)
{
    for (size_t k = 0; k < sizeof jobs / sizeof jobs[0]; k++) {
        char *whole = run(jobs[k].spec, jobs[k].backend, 1, -1, NULL);
        char *b1 = run(jobs[k].spec, jobs[k].backend, 1, 3000, NULL);
        char *b3 = run(jobs[k].spec, jobs[k].backend, 3, 1024, NULL);
        tap_ok(whole && b1 && b3 && !strcmp(whole, b1) && !strcmp(whole, b3),
               "%s: blocks of 3000 on 1 thread and of 1024 on 3 threads give the whole case's "
               "result (%zu bytes)",
               jobs[k].what, whole ? strlen(whole) : 0);
        free(whole);
        free(b1);
        free(b3);
    }
    /* One failing case of 30001 elements: its artifact has the whole tensors. */
    const char *one = "{\"kind\": \"op\", \"op\": \"exp\", \"dtypes\": [\"fp32\"], \"shapes\": "
                      "[[30001]], \"inputs\": [\"normal\"], \"seed\": 6}";
    failures fw = {0}, fb = {0};
    char *w = run(one, "emu:transcendental=fast", 1, -1, &fw);
    char *b = run(one, "emu:transcendental=fast", 2, 1000, &fb);
    tap_ok(w && b && !strcmp(w, b) && fw.n == 1 && fb.n == 1 && fb.numel_sum == 2 * 30001 &&
               strstr(b, "\"artifact\""),
           "a failing blocked case: one artifact of the whole input and output (%d, %lld "
           "elements), the result as whole",
           fb.n, (long long)fb.numel_sum);
    free(w);
    free(b);
    return tap_done();
}
