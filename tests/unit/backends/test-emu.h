/* Shared helpers of the emu tests (test-emu.c, test-emu-ops.c). */
#ifndef NUMVAL_TEST_EMU_H
#define NUMVAL_TEST_EMU_H

#include <stdbool.h>
#include <stdint.h>

#include "worker/backends/emu/emu.h"
#include "core/numerics/tensor.h"

#define ERRLEN 512

typedef struct emu_t {
    const nv_backend *tb;
    void *ctx;
} emu_t;

/* Open an emu context with the mode text; false (and the message) when refused. */
bool emu_start(emu_t *e, const char *mode, char *err);
void emu_stop(emu_t *e);

/* A contiguous tensor of dtype dt holding v[] rounded to dt (RNE). */
nv_tensor *mk(nv_dtype dt, int ndim, const int64_t *shape, const double *v);
/* A 1-D tensor. */
nv_tensor *mk1(nv_dtype dt, int64_t n, const double *v);

/* Run op on inputs; returns the decoded output (NULL on error, *ret_rc the code). */
nv_tensor *run(emu_t *e, const char *op, const char *attrs, nv_dtype out_dt, int n,
               const nv_tensor *const *in, int *ret_rc, char *err);
nv_tensor *run1(emu_t *e, const char *op, const char *attrs, nv_dtype out_dt, const nv_tensor *x);

/* |got - exact| / ulp_fp32(exact). */
double ulp_err32(double got, double exact);

#endif
