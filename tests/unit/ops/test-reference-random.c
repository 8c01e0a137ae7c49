/* Exact references against MPFR at high precision on random inputs: the MPFR
 * oracles here are written from the formulas, not from the product code. */
#include "ref_test.h"

/* run(), whose result every caller here reads: an op that does not run
 * ends the test (TAP "Bail out!"), its tensors are never read. */
static void must_run(const char *op, const char *attrs, int n, nv_tensor **in, nv_dtype out_dt,
                     res *r)
{
    int rc = run(op, attrs, n, in, out_dt, r);
    if (rc < 0) {
        printf("Bail out! %s did not run (%d)\n", op, rc);
        exit(1);
    }
}

static uint64_t rs = 88172645463325252ull;
static double urand(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (double)(rs >> 11) * 0x1p-53;
}

static double nrand(void)
{
    double u = urand() + 0x1p-60, v = urand();
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* fp32 values: normal, or cancelling pairs of wide magnitudes. */
static void fill(double *x, int n, int kind)
{
    for (int i = 0; i < n; i++) {
        if (kind == 0)
            x[i] = (float)nrand();
        else if (kind == 1)
            x[i] = (float)(ldexp(nrand(), (int)(urand() * 80) - 40));
        else
            x[i] = (i % 2) ? -x[i - 1] + (float)(nrand() * 1e-3) : (float)(1e6 * nrand());
        x[i] = (float)x[i];
    }
}

static void mp_sum(const double *x, int n, mpfr_ptr s)
{
    mpfr_set_zero(s, 1);
    for (int i = 0; i < n; i++)
        mpfr_add_d(s, s, x[i], MPFR_RNDN);
}

static void test_random_sums(void)
{
    enum { N = 1000 };
    double *x = malloc(sizeof(double) * N);
    mpfr_t s, m, t, v;
    mpfr_inits2(4000, s, m, t, v, (mpfr_ptr)0); /* exact for these sums */
    int ok_sum = 0, ok_var = 0, ok_norm = 0, ok_mean = 0, trials = 0;
    for (int kind = 0; kind < 3; kind++)
        for (int rep = 0; rep < 5; rep++, trials++) {
            fill(x, N, kind);
            nv_tensor *in[1] = {vec(NV_DT_FP32, N, x)};
            res r;
            must_run("sum", NULL, 1, in, NV_DT_FP32, &r);
            mp_sum(x, N, s);
            ok_sum += close_to(r.hi->data[0], r.lo->data[0], s, 104);
            res_free(&r);
            must_run("mean", NULL, 1, in, NV_DT_FP32, &r);
            mpfr_div_ui(m, s, N, MPFR_RNDN);
            ok_mean += close_to(r.hi->data[0], r.lo->data[0], m, 100);
            res_free(&r);
            /* two-pass in MPFR: sum (x - mean)^2 / (n - 1) */
            mpfr_set_zero(v, 1);
            for (int i = 0; i < N; i++) {
                mpfr_set_d(t, x[i], MPFR_RNDN);
                mpfr_sub(t, t, m, MPFR_RNDN);
                mpfr_sqr(t, t, MPFR_RNDN);
                mpfr_add(v, v, t, MPFR_RNDN);
            }
            mpfr_div_ui(t, v, N - 1, MPFR_RNDN);
            must_run("var", "{\"correction\": 1}", 1, in, NV_DT_FP32, &r);
            ok_var += close_to(r.hi->data[0], r.lo->data[0], t, 100);
            res_free(&r);
            mpfr_set_zero(v, 1);
            for (int i = 0; i < N; i++) {
                mpfr_set_d(t, x[i], MPFR_RNDN);
                mpfr_sqr(t, t, MPFR_RNDN);
                mpfr_add(v, v, t, MPFR_RNDN);
            }
            mpfr_sqrt(v, v, MPFR_RNDN);
            must_run("norm2", NULL, 1, in, NV_DT_FP32, &r);
            ok_norm += close_to(r.hi->data[0], r.lo->data[0], v, 98);
            res_free(&r);
            nv_tensor_free(in[0]);
        }
    tap_ok(ok_sum == trials, "sum vs MPFR exact sum to 2^-104 (normal, wide, cancelling) %d/%d",
           ok_sum, trials);
    tap_ok(ok_mean == trials, "mean vs MPFR to 2^-100 %d/%d", ok_mean, trials);
    tap_ok(ok_var == trials, "var vs MPFR two-pass to 2^-100 %d/%d", ok_var, trials);
    tap_ok(ok_norm == trials, "norm2 vs MPFR to 2^-98 %d/%d", ok_norm, trials);
    mpfr_clears(s, m, t, v, (mpfr_ptr)0);
    free(x);
}

/* The softmax family's exponentials come from a double-double exp accurate to
 * 2^-96 (ref_composed.c), hence 2^-94 for the composed results. */
static void test_random_softmax(void)
{
    enum { N = 300 };
    double x[N];
    mpfr_t s, t, e[N];
    mpfr_inits2(OP, s, t, (mpfr_ptr)0);
    for (int i = 0; i < N; i++)
        mpfr_init2(e[i], OP);
    int ok_sm = 0, ok_lsm = 0, ok_lse = 0, trials = 0;
    for (int rep = 0; rep < 6; rep++, trials++) {
        for (int i = 0; i < N; i++)
            x[i] = (float)(nrand() * (1 + 10 * rep));
        mpfr_set_zero(s, 1);
        for (int i = 0; i < N; i++) { /* no max shift: MPFR's range makes it unnecessary */
            mpfr_set_d(e[i], x[i], MPFR_RNDN);
            mpfr_exp(e[i], e[i], MPFR_RNDN);
            mpfr_add(s, s, e[i], MPFR_RNDN);
        }
        nv_tensor *in[1] = {vec(NV_DT_FP32, N, x)};
        res r;
        must_run("softmax", NULL, 1, in, NV_DT_BF16, &r);
        bool ok = true;
        for (int i = 0; i < N; i++) {
            mpfr_div(t, e[i], s, MPFR_RNDN);
            ok &= close_to(r.hi->data[i], r.lo->data[i], t, 94);
        }
        ok_sm += ok;
        res_free(&r);
        must_run("log_softmax", NULL, 1, in, NV_DT_FP32, &r);
        ok = true;
        mpfr_log(s, s, MPFR_RNDN);
        for (int i = 0; i < N; i++) {
            mpfr_set_d(t, x[i], MPFR_RNDN);
            mpfr_sub(t, t, s, MPFR_RNDN);
            ok &= close_to(r.hi->data[i], r.lo->data[i], t, 94);
        }
        ok_lsm += ok;
        res_free(&r);
        must_run("logsumexp", NULL, 1, in, NV_DT_FP32, &r);
        ok_lse += close_to(r.hi->data[0], r.lo->data[0], s, 94);
        res_free(&r);
        nv_tensor_free(in[0]);
    }
    tap_ok(ok_sm == trials, "softmax vs MPFR to 2^-94 %d/%d", ok_sm, trials);
    tap_ok(ok_lsm == trials, "log_softmax vs MPFR to 2^-94 %d/%d", ok_lsm, trials);
    tap_ok(ok_lse == trials, "logsumexp vs MPFR to 2^-94 %d/%d", ok_lse, trials);
    for (int i = 0; i < N; i++)
        mpfr_clear(e[i]);
    mpfr_clears(s, t, (mpfr_ptr)0);
}

/* softmax [0, d] = [1, e^d] / (1 + e^d) over the whole range of the double-double
 * exp (d from -745 to 0, fp64): 2^-94 relative down to 2^-960; below, where the
 * low part falls into fp64's subnormals (a double-double's relative precision ends
 * there), the high part must be the correctly rounded value. */
static void test_softmax_range(void)
{
    mpfr_t y, t;
    mpfr_inits2(OP, y, t, (mpfr_ptr)0);
    int ok = 0, n = 0;
    for (double d = -745; d <= 0; d += 1.37 + urand(), n++) {
        nv_tensor *in[1] = {vec(NV_DT_FP64, 2, (double[]){0, d})};
        res r;
        must_run("softmax", NULL, 1, in, NV_DT_FP64, &r);
        mpfr_set_d(y, d, MPFR_RNDN);
        mpfr_exp(y, y, MPFR_RNDN);
        mpfr_add_ui(t, y, 1, MPFR_RNDN);
        mpfr_div(y, y, t, MPFR_RNDN);
        double hi = r.hi->data[1];
        bool good;
        if (mpfr_get_d(y, MPFR_RNDN) < 0x1p-960) /* lo reaches fp64's subnormals */
            good = hi == mpfr_get_d(y, MPFR_RNDN);
        else
            good = close_to(hi, r.lo->data[1], y, 94);
        if (!good)
            tap_diag("d = %.17g: hi %a lo %a, MPFR %a", d, hi, r.lo->data[1],
                     mpfr_get_d(y, MPFR_RNDN));
        ok += good;
        res_free(&r);
        nv_tensor_free(in[0]);
    }
    tap_ok(ok == n, "softmax [0, d], d in [-745, 0]: %d/%d", ok, n);
    mpfr_clears(y, t, (mpfr_ptr)0);
}

static void test_random_matmul(void)
{
    enum { M = 5, K = 40, NN = 6 };
    double a[M * K], b[K * NN];
    fill(a, M * K, 1);
    fill(b, K * NN, 0);
    nv_tensor *in[2] = {mat(NV_DT_FP32, M, K, a), mat(NV_DT_FP32, K, NN, b)};
    res r;
    must_run("matmul", NULL, 2, in, NV_DT_FP32, &r);
    mpfr_t s, t;
    mpfr_inits2(4000, s, t, (mpfr_ptr)0);
    int ok = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < NN; j++) {
            mpfr_set_zero(s, 1);
            for (int k = 0; k < K; k++) {
                mpfr_set_d(t, a[i * K + k], MPFR_RNDN);
                mpfr_mul_d(t, t, b[k * NN + j], MPFR_RNDN);
                mpfr_add(s, s, t, MPFR_RNDN);
            }
            ok += close_to(r.hi->data[i * NN + j], r.lo->data[i * NN + j], s, 104);
        }
    tap_ok(ok == M * NN, "matmul vs MPFR exact dot products %d/%d", ok, M * NN);
    res_free(&r);
    nv_tensor_free(in[0]);
    nv_tensor_free(in[1]);
    mpfr_clears(s, t, (mpfr_ptr)0);
}

/* add, sub, mul exact (hi + lo == exact, checked at 4000 bits); fma and div to
 * 2^-104 (a double-double's resolution). Exponents span 2^-400..2^400 for fp64
 * and 2^-60..2^60 for fp32, so that results stay in range: TwoProduct's low part
 * is exact only above 2^-969, and results beyond the output range become the
 * overflow value (tested in test_overflow). */
static void test_random_elementwise(void)
{
    enum { N = 2000 };
    static const char *const ops[] = {"add", "sub", "mul", "div", "fma"};
    static const nv_dtype dts[] = {NV_DT_FP64, NV_DT_FP32};
    double v[3][N];
    mpfr_t ex, t;
    mpfr_inits2(4000, ex, t, (mpfr_ptr)0);
    for (size_t d = 0; d < 2; d++) {
        int span = dts[d] == NV_DT_FP64 ? 800 : 120;
        for (int k = 0; k < 3; k++)
            for (int i = 0; i < N; i++) {
                double x = ldexp(nrand(), (int)(urand() * span) - span / 2);
                v[k][i] = dts[d] == NV_DT_FP32 ? (double)(float)x : x;
            }
        for (size_t o = 0; o < 5; o++) {
            int n_in = o == 4 ? 3 : 2;
            nv_tensor *in[3];
            for (int k = 0; k < n_in; k++)
                in[k] = vec(dts[d], N, v[k]);
            res r;
            run(ops[o], NULL, n_in, in, dts[d], &r);
            int ok = 0;
            for (int i = 0; i < N; i++) {
                mpfr_set_d(ex, v[0][i], MPFR_RNDN);
                mpfr_set_d(t, v[1][i], MPFR_RNDN);
                switch (o) {
                case 0:
                    mpfr_add(ex, ex, t, MPFR_RNDN);
                    break;
                case 1:
                    mpfr_sub(ex, ex, t, MPFR_RNDN);
                    break;
                case 2:
                    mpfr_mul(ex, ex, t, MPFR_RNDN);
                    break;
                case 3:
                    mpfr_div(ex, ex, t, MPFR_RNDN);
                    break;
                default:
                    mpfr_mul(ex, ex, t, MPFR_RNDN);
                    mpfr_add_d(ex, ex, v[2][i], MPFR_RNDN);
                }
                double hi = r.hi->data[i], lo = r.lo->data[i];
                if (o < 3) {
                    mpfr_set_d(t, hi, MPFR_RNDN);
                    mpfr_add_d(t, t, lo, MPFR_RNDN);
                    ok += mpfr_equal_p(t, ex) || !isfinite(hi);
                } else
                    ok += close_to(hi, lo, ex, 104);
            }
            tap_ok(ok == N, "%s %s: %s vs MPFR on %d random operands (%d ok)", ops[o],
                   nv_dtype_name(dts[d]), o < 3 ? "exact" : "2^-104", N, ok);
            res_free(&r);
            for (int k = 0; k < n_in; k++)
                nv_tensor_free(in[k]);
        }
    }
    mpfr_clears(ex, t, (mpfr_ptr)0);
}

/* layer_norm in MPFR from the definition (two-pass mean and variance). */
static void test_random_layer_norm(void)
{
    enum { N = 200 };
    double x[N], w[N], b[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(100 + nrand()); /* large mean: centring matters */
        w[i] = (float)nrand();
        b[i] = (float)nrand();
    }
    nv_tensor *in[3] = {vec(NV_DT_FP32, N, x), vec(NV_DT_FP32, N, w), vec(NV_DT_FP32, N, b)};
    res r;
    must_run("layer_norm", NULL, 3, in, NV_DT_FP32, &r);
    mpfr_t m, v, t;
    mpfr_inits2(OP, m, v, t, (mpfr_ptr)0);
    mp_sum(x, N, m);
    mpfr_div_ui(m, m, N, MPFR_RNDN);
    mpfr_set_zero(v, 1);
    for (int i = 0; i < N; i++) {
        mpfr_set_d(t, x[i], MPFR_RNDN);
        mpfr_sub(t, t, m, MPFR_RNDN);
        mpfr_sqr(t, t, MPFR_RNDN);
        mpfr_add(v, v, t, MPFR_RNDN);
    }
    mpfr_div_ui(v, v, N, MPFR_RNDN);
    mpfr_add_d(v, v, 1e-5, MPFR_RNDN);
    mpfr_rec_sqrt(v, v, MPFR_RNDN);
    int ok = 0;
    for (int i = 0; i < N; i++) {
        mpfr_set_d(t, x[i], MPFR_RNDN);
        mpfr_sub(t, t, m, MPFR_RNDN);
        mpfr_mul(t, t, v, MPFR_RNDN);
        mpfr_mul_d(t, t, w[i], MPFR_RNDN);
        mpfr_add_d(t, t, b[i], MPFR_RNDN);
        ok += close_to(r.hi->data[i], r.lo->data[i], t, 90);
    }
    tap_ok(ok == N, "layer_norm vs MPFR two-pass definition to 2^-90 %d/%d", ok, N);
    res_free(&r);
    for (int i = 0; i < 3; i++)
        nv_tensor_free(in[i]);
    mpfr_clears(m, v, t, (mpfr_ptr)0);
}

int main(void)
{
    test_random_sums();
    test_random_softmax();
    test_softmax_range();
    test_random_matmul();
    test_random_layer_norm();
    test_random_elementwise();
    return tap_done();
}
