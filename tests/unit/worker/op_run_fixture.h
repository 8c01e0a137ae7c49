/* One op job run in process for the op kind's block tests (test-op_blocks.c,
 * test-op_reduce_stream.c): the result JSON as compact text, and the failures
 * handed to on_failure counted with their tensors' elements. */
#ifndef NV_TEST_OP_RUN_FIXTURE_H
#define NV_TEST_OP_RUN_FIXTURE_H

#include <stdint.h>

typedef struct failures {
    int n;
    int64_t numel_sum;
} failures;

/* spec's result on backend with threads and op_block_elems = block (fs, when
 * not NULL, counts the failures); malloc'd text, NULL when the run failed. */
char *run(const char *spec, const char *backend, int threads, int64_t block, failures *fs);

#endif
