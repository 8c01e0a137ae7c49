/* libFuzzer target: the exec backend's reply reader (worker/backends/exec.c,
 * docs/EXEC_PROTOCOL.md): what numval-worker reads from a harness process's
 * stdout, a header line of JSON and the raw payloads it announces. A harness
 * is a foreign program (PyTorch, a lab's runtime) that may crash mid-reply or
 * talk nonsense; that must cost a case, never the worker.
 *
 * The input is the reply stream to request 1: the first line "N\n" (N = 1..4,
 * else 1) says how many output tensors the request expects, the rest is what
 * the harness sends. The bytes come from a memfd (one, refilled per input), read
 * with the backend's own poll/read loop (nvw_exec_read_reply), so EOF mid-frame
 * is the harness exiting. A custom mutator edits the header line as JSON and
 * keeps the payload's length in step with it.
 *
 * Checked besides ASan and UBSan: the status is one of the backend ABI's, a
 * failed read leaves no buffer behind, and an NV_OK reply hands out as many
 * tensors as expected, each with data of its dtype and shape. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/numerics/dtype.h"
#include "json_mutate.h"
#include "numval/backend.h"
#include "worker/backends/exec.h"

#define MAX_OUTS 4

static jm_state mutator;

/* The sum of the header's "nbytes" (what a well-formed payload holds), or -1. */
static long long payload_bytes(const char *header, size_t len)
{
    json_t *h = json_loadb(header, len, 0, NULL);
    const json_t *ts = json_object_get(h, "tensors");
    long long sum = json_is_array(ts) ? 0 : -1;
    size_t i;
    const json_t *t;
    json_array_foreach(ts, i, t)
    {
        json_int_t n = json_integer_value(json_object_get(t, "nbytes"));
        if (n > 0 && n < (1 << 20) - sum)
            sum += n;
    }
    json_decref(h);
    return sum;
}

/* Whether the header announces a tensor of more than 256 MiB. exec.c allocates
 * a tensor's announced size before reading its payload (up to 2^32 elements, 32
 * GiB; an allocation that fails is NV_E_NOMEM), which a sanitizer build cannot
 * do and which says nothing new about the reader: such inputs are skipped. */
static bool declares_huge(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    json_t *h = json_loadb((const char *)data, nl ? (size_t)(nl - data) : size, 0, NULL);
    const json_t *ts = json_object_get(h, "tensors");
    bool huge = false;
    size_t i;
    const json_t *t;
    json_array_foreach(ts, i, t)
    {
        if (json_integer_value(json_object_get(t, "nbytes")) > (256 << 20))
            huge = true;
    }
    json_decref(h);
    return huge;
}

/* Mutate the header line as JSON (json_mutate.h), then, half the time, give the
 * payload the length the new header announces: replies whose lengths agree are
 * what gets past the header checks to the payload reads. A quarter of the
 * calls mutate the bytes as they are (a torn or garbled stream). */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    mutator.rng = seed;
    size_t pre = size >= 2 && data[1] == '\n' ? 2 : 0;
    uint8_t *nl = memchr(data + pre, '\n', size - pre);
    if (!nl || jm_below(&mutator, 4) == 0)
        return LLVMFuzzerMutate(data, size, max_size);
    size_t hlen = (size_t)(nl - (data + pre));
    size_t plen = size - pre - hlen - 1;
    uint8_t *payload = malloc(plen + 1);
    uint8_t *header = malloc(max_size);
    if (!payload || !header) {
        free(payload);
        free(header);
        return LLVMFuzzerMutate(data, size, max_size);
    }
    memcpy(payload, nl + 1, plen);
    memcpy(header, data + pre, hlen);
    hlen = jm_mutate(&mutator, header, hlen, max_size / 2, seed);
    long long want = jm_below(&mutator, 2) ? payload_bytes((char *)header, hlen) : -1;
    size_t out = 0;
    if (jm_below(&mutator, 8) == 0) { /* the expected output count */
        data[0] = (uint8_t)('1' + jm_below(&mutator, MAX_OUTS));
        data[1] = '\n';
        pre = 2;
    }
    out = pre;
    hlen = hlen < max_size - pre - 1 ? hlen : max_size - pre - 1;
    memcpy(data + out, header, hlen);
    out += hlen;
    data[out++] = '\n';
    size_t room = max_size - out;
    size_t n = want >= 0 ? (size_t)want : plen;
    n = n < room ? n : room;
    for (size_t i = 0; i < n; i++)
        data[out + i] = i < plen ? payload[i] : (uint8_t)jm_rand(&mutator);
    out += n;
    free(payload);
    free(header);
    return out;
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz_exec: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int n_outs = 1;
    if (size >= 2 && data[1] == '\n' && data[0] >= '1' && data[0] <= '0' + MAX_OUTS) {
        n_outs = data[0] - '0';
        data += 2;
        size -= 2;
    }
    if (declares_huge(data, size))
        return -1; /* not fuzzed, and kept out of the corpus: see declares_huge */
    static int fd = -1;
    if (fd < 0 && (fd = memfd_create("fuzz-exec", MFD_CLOEXEC)) < 0)
        die("memfd_create");
    if (ftruncate(fd, 0) < 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
        die("write");
    lseek(fd, 0, SEEK_SET);
    nv_tensor_view outs[MAX_OUTS];
    memset(outs, 0, sizeof outs);
    char err[8192];
    err[0] = '\0';
    int r = nvw_exec_read_reply(fd, 1, outs, n_outs, 5000, err, sizeof err);
    if (r > 0 || r < NV_E_DEVICE)
        die("a status outside the backend ABI");
    /* No check that err is non-empty: an error reply's "message" is the harness's
     * text, and exec.c passes an empty one through as it is. */
    if (!memchr(err, '\0', sizeof err))
        die("the error message is not terminated");
    for (int i = 0; i < n_outs; i++) {
        if (r != NV_OK) {
            if (outs[i].data)
                die("an output buffer left after a failed reply");
            continue;
        }
        const nv_dtype_info *info = nv_dtype_get((nv_dtype)outs[i].dtype);
        if (!info || outs[i].ndim < 0 || outs[i].ndim > NV_BACKEND_MAX_DIMS || !outs[i].data)
            die("an accepted output without a dtype, rank or data");
        int64_t numel = 1;
        bool overflow = false, empty = false;
        for (int d = 0; d < outs[i].ndim; d++) {
            overflow |= __builtin_mul_overflow(numel, outs[i].shape[d], &numel);
            empty |= outs[i].shape[d] == 0;
        }
        if (empty)
            numel = 0;
        else if (overflow)
            die("an accepted output whose element count overflows");
        /* The payload was read into data: touch its last byte (ASan checks the size). */
        if (numel > 0)
            ((volatile uint8_t *)outs[i].data)[(size_t)numel * info->storage_bytes - 1] = 0;
        free(outs[i].data);
    }
    return 0;
}
