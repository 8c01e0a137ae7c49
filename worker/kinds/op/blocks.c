/* A large elementwise op case in blocks of whole leading rows, so that its
 * memory stays bounded whatever its size: each block is generated (the inputs'
 * streams, core/numerics/inputs.h, in element order), run on the device in the
 * case's layout, referenced and compared (compare.h's parts), then merged in
 * block order into the case's result, which is the whole case's bit for bit
 * (compare.h: the merge replays the mean's sum in index order).
 *
 * Threads: blocks are claimed in order under the generator's lock (the streams
 * are sequential), processed concurrently on the case's thread and on helpers
 * with backend contexts of their own, and merged in block order by whichever
 * thread finishes the next one; at most `window` blocks are ahead of the merge.
 * So the result does not depend on the thread count. Helpers are the threads
 * the case pool leaves unused (the job's threads beyond its case count), shared
 * out among the cases.
 *
 * What differs from the whole case: the device sees tensors of a block's rows,
 * so a device whose elementwise results depend on the tensor's size (emu's
 * stochastic rounding is keyed by the output size) gives other bits; the error
 * of a block (a backend error, a bad output) is the case's error, from the
 * lowest such block. A failing case's artifact holds the whole inputs and the
 * device output assembled from a second pass over the blocks. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ref/refmath.h"
#include "core/ref/reference.h"
#include "binades.h"
#include "case_internal.h"
#include "worker/runner/determinism.h"

#define BLOCK_ELEMS_DEFAULT (INT64_C(1) << 16)
#define MAX_HELPERS 63
#define HELPER_MIN_BLOCKS 16 /* below 2^20 elements a helper's context costs more than it saves */

typedef struct slot {
    bool ready;
    nv_compare_part part;
    double *ue; /* a block's elements */
    double first_in[NV_COMPARE_FIRST][NV_JOB_MAX_TENSORS];
    bool fell_back, det;
    json_t *stop; /* the block ended the case: its verdict keys */
    nvw_binades *bd; /* a sweep or exhaustive unary case's, else NULL */
} slot;

typedef struct blk_run {
    case_state *cs;
    nv_tolerance tol;
    int64_t rows_per, inner, n_blocks, n_total;
    bool collect; /* the artifact pass: device outputs into cs->got, no comparison */
    pthread_mutex_t gen_lock; /* guards streams and next_block */
    nv_input_stream streams[NV_JOB_MAX_TENSORS];
    int64_t next_block;
    pthread_mutex_t lock; /* guards what follows */
    pthread_cond_t cond;
    int64_t merged; /* blocks merged so far */
    int window;
    slot *slots;
    nv_compare_part acc;
    double first_in[NV_COMPARE_FIRST][NV_JOB_MAX_TENSORS];
    bool fell_back, det, stopped, nomem;
    json_t *stop;
    nvw_binades *bd; /* merged binades, when the case gets them */
} blk_run;

static bool elementwise_kind(const nv_op_def *op)
{
    return op->kind == NV_OPK_UNARY || op->kind == NV_OPK_BINARY || op->kind == NV_OPK_TERNARY ||
           op->kind == NV_OPK_CAST;
}

int64_t nvw_op_block_elems(const nvw_op_job *job)
{
    const nvw_run_opts *o = job->b.opts;
    return o && o->op_block_elems != 0 ? o->op_block_elems : BLOCK_ELEMS_DEFAULT;
}

bool nvw_op_blocked(const case_state *cs)
{
    const nv_op_def *op = cs->s->op;
    const nv_tensor *m0 = &cs->meta[0];
    int64_t be = nvw_op_block_elems(cs->job);
    if (be < 0 || !elementwise_kind(op) || cs->n_in < 1 || cs->n_in != op->n_inputs ||
        m0->ndim < 1 || m0->numel <= be || m0->shape[0] < 1 || m0->numel / m0->shape[0] > be)
        return false;
    for (int i = 0; i < cs->n_in; i++) {
        const nv_tensor *m = &cs->meta[i];
        if (op->inputs[i].is_index || m->ndim != m0->ndim ||
            memcmp(m->shape, m0->shape, sizeof(int64_t) * (size_t)m0->ndim) != 0)
            return false;
    }
    /* The whole case reports tolerance errors (none, or a bound without a
     * reduction) in its own order of steps. */
    nv_tolerance tol;
    return nvw_case_tolerance(cs->job, cs->c.dtype, cs->out_dt, &tol) == 0 &&
           tol.metric != NV_TOL_BOUND;
}

/* Meta of rows [r0, r0 + rows) of case tensor m: contiguous row-major. */
static void block_meta(const nv_tensor *m, int64_t rows, nv_tensor *ret)
{
    *ret = *m;
    ret->shape[0] = rows;
    int64_t st = 1;
    for (int d = m->ndim - 1; d >= 0; d--) {
        ret->strides[d] = st;
        st *= ret->shape[d];
    }
    ret->numel = st;
    ret->offset = 0;
    ret->data = NULL;
}

/* What a block leaves behind: the device's output and the views, never reused.
 * The tensors (inputs, device values, reference) stay for the next block of
 * the same shape: every element of them is written again, so that the next
 * block neither allocates nor zeroes them (calloc's memset and the fresh pages
 * were a tenth of a block's time). */
static void block_release(case_state *w)
{
    if (w->have_out)
        nvw_op_release(w, &w->out);
    w->have_out = false;
    for (int k = 0; k < w->n_views; k++)
        nvw_view_free(&w->views[k]);
    w->n_views = 0;
}

static void block_free(case_state *w)
{
    block_release(w);
    for (int k = 0; k < w->n_in; k++) {
        nv_tensor_free(w->in[k]);
        w->in[k] = NULL;
    }
    nv_tensor *t[] = {w->got, w->hi, w->lo, w->abs, w->abs_exp, w->peak};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        nv_tensor_free(t[k]);
    w->got = w->hi = w->lo = w->abs = w->abs_exp = w->peak = NULL;
}

static bool same_shape(const nv_tensor *t, nv_dtype dt, int nd, const int64_t *shape)
{
    return t && t->dtype == dt && t->ndim == nd &&
           memcmp(t->shape, shape, sizeof(int64_t) * (size_t)nd) == 0;
}

/* *t if it has this dtype and shape (its values are stale), else a new one. */
static nv_tensor *kept(nv_tensor **t, nv_dtype dt, int nd, const int64_t *shape)
{
    if (!same_shape(*t, dt, nd, shape)) {
        nv_tensor_free(*t);
        *t = nv_tensor_new(dt, nd, shape);
    }
    return *t;
}

/* The block's reference into w->hi and w->lo (nvw_op_reference's, without
 * abs_sum, abs_exp and peak: blocked cases are elementwise and never judged
 * by the bound metric, the only reader of the first two, and pass no peak to
 * the comparison). Dense inputs go to the reference as they are (the copy
 * nvw_op_reference makes is of the same values in the same order). */
static int block_reference(case_state *w, char *err)
{
    nv_tensor *cin[NV_JOB_MAX_TENSORS] = {0};
    bool own[NV_JOB_MAX_TENSORS] = {0};
    int r = -ENOMEM;
    if (!kept(&w->hi, w->out_dt, w->out_ndim, w->out_shape) ||
        !kept(&w->lo, w->out_dt, w->out_ndim, w->out_shape))
        goto out;
    for (int i = 0; i < w->n_in; i++) {
        own[i] = !nv_tensor_dense(w->in[i]);
        if (!(cin[i] = own[i] ? nv_tensor_contiguous(w->in[i]) : w->in[i]))
            goto out;
    }
    nv_ref_out ro = {.hi = w->hi, .lo = w->lo};
    r = nv_op_reference_ex(w->s->op, &w->s->attrs, w->n_in, (const nv_tensor *const *)cin, &ro);
    if (r < 0)
        snprintf(err, ERRLEN, "the reference of '%s' failed (%s)", w->s->op->name,
                 nvw_op_code_name(r));
out:
    for (int i = 0; i < w->n_in; i++)
        if (own[i])
            nv_tensor_free(cin[i]);
    return r;
}

/* The block's verdict keys (w->cj holds nothing else) end the case. */
static int stop_with(case_state *w, slot *sl)
{
    sl->stop = w->cj;
    w->cj = json_object();
    return w->cj ? 0 : -ENOMEM;
}

/* Block b of rows on worker w, its inputs in vals: device, reference, compare
 * into sl (or, collecting, the device output into the case's got). */
static int run_block(blk_run *br, case_state *w, double *const *vals, int64_t b, slot *sl)
{
    case_state *cs = br->cs;
    int64_t r0 = b * br->rows_per;
    int64_t rows = cs->meta[0].shape[0] - r0 < br->rows_per ? cs->meta[0].shape[0] - r0
                                                            : br->rows_per;
    int64_t base = r0 * br->inner, len = rows * br->inner;
    const nv_op_def *op = cs->s->op;
    char err[ERRLEN] = "";
    for (int i = 0; i < cs->n_in; i++) {
        block_meta(&cs->meta[i], rows, &w->meta[i]);
        bool plain = !op->inputs[i].is_index;
        if (!same_shape(w->in[i], w->meta[i].dtype, w->meta[i].ndim, w->meta[i].shape)) {
            nv_tensor_free(w->in[i]); /* a layout's gaps keep their poison: never written */
            w->in[i] =
                nvw_op_make_layout(&w->meta[i], plain ? cs->c.layout : NV_LAYOUT_CONTIGUOUS);
        }
        if (!w->in[i])
            return -ENOMEM;
        nvw_op_scatter(w->in[i], vals[i]);
        if (nvw_view_from_tensor(w->in[i], &w->views[i]) < 0)
            return -ENOMEM;
        w->n_views = i + 1;
    }
    w->out_ndim = w->meta[0].ndim;
    memcpy(w->out_shape, w->meta[0].shape, sizeof w->out_shape);
    int32_t n_out, fb;
    int r = nvw_op_forward(w, &w->out, &n_out, &fb, err);
    w->have_out = true;
    sl->fell_back = fb != 0;
    if (r != NV_OK) {
        r = nvw_op_verdict(w, "error", "backend_error", "the backend returned %s: '%s'",
                           nvw_op_code_name(r), err);
        return r < 0 ? r : stop_with(w, sl);
    }
    r = nvw_op_check_output(w, n_out);
    if (r <= 0)
        return r < 0 ? r : stop_with(w, sl);
    if (same_shape(w->got, (nv_dtype)w->out.dtype, w->out.ndim, w->out.shape)) {
        if (nvw_view_decode(&w->out, false, w->got->data) < 0) {
            nv_tensor_free(w->got);
            w->got = NULL;
        }
    } else {
        nv_tensor_free(w->got);
        w->got = nvw_tensor_from_view(&w->out, false);
    }
    if (!w->got) {
        r = nvw_op_verdict(w, "failed", "bad_output", "the output view could not be decoded");
        return r < 0 ? r : stop_with(w, sl);
    }
    if (br->collect) {
        memcpy(cs->got->data + base, w->got->data, (size_t)len * sizeof(double));
        return 0;
    }
    sl->det = cs->s->repeat > 1 ? nvw_op_repeat_runs(w) == 1 : true;
    r = block_reference(w, err);
    if (r == -ENOMEM || r == NV_E_NOMEM)
        return -ENOMEM;
    if (r < 0) {
        r = nvw_op_verdict(w, "error", "reference", "%s", err);
        return r < 0 ? r : stop_with(w, sl);
    }
    nv_compare_input ci = {
        .dtype = cs->out_dt,
        .n = len,
        .got = w->got->data,
        .exact = w->hi->data,
        .exact_lo = w->lo->data,
        .reduction_len = 1, /* nv_op_reduction_len of every elementwise op */
        .zero_sign = nv_op_zero_sign_judged(op),
    };
    nv_compare_part_init(&sl->part, sl->ue);
    if (nv_compare_part_run(&ci, base, br->n_total, &br->tol, &sl->part) < 0) {
        r = nvw_op_bad_tolerance(w, &br->tol);
        return r < 0 ? r : stop_with(w, sl);
    }
    for (int k = 0; k < sl->part.r.n_first; k++)
        for (int i = 0; i < cs->n_in; i++)
            sl->first_in[k][i] = vals[i][sl->part.r.first[k].index - base];
    if (sl->bd) {
        nvw_binades_init(sl->bd, cs->meta[0].dtype);
        if (nvw_binades_add(sl->bd, &ci, &br->tol, vals[0], base) < 0)
            return -EINVAL; /* nv_compare_part_run took this tolerance */
    }
    return 0;
}

/* Under br->lock: merge the ready blocks in order. */
static void merge_ready(blk_run *br)
{
    for (;;) {
        slot *sl = &br->slots[br->merged % br->window];
        if (!sl->ready)
            break;
        if (!br->stopped) {
            br->fell_back |= sl->fell_back;
            if (sl->stop) {
                br->stop = sl->stop;
                sl->stop = NULL;
                br->stopped = true;
            } else if (!br->collect) {
                br->det &= sl->det;
                int n0 = br->acc.r.n_first;
                nv_compare_part_merge(&br->acc, &sl->part);
                for (int k = 0; k < br->acc.r.n_first - n0; k++)
                    memcpy(br->first_in[n0 + k], sl->first_in[k], sizeof br->first_in[0]);
                if (br->bd && sl->bd)
                    nvw_binades_merge(br->bd, sl->bd);
            }
        }
        json_decref(sl->stop);
        sl->stop = NULL;
        sl->ready = false;
        br->merged++;
    }
    pthread_cond_broadcast(&br->cond);
}

/* One thread's loop on backend context ctx: claim, generate, run, merge. */
static void work(blk_run *br, void *ctx)
{
    case_state *cs = br->cs;
    case_state w = {.job = cs->job, .s = cs->s, .c = cs->c, .ctx = ctx, .n_in = cs->n_in,
                    .out_dt = cs->out_dt, .cj = json_object()};
    double *vals[NV_JOB_MAX_TENSORS] = {0};
    bool nomem = !w.cj;
    for (int i = 0; i < cs->n_in; i++)
        nomem |= !(vals[i] = malloc((size_t)(br->rows_per * br->inner) * sizeof(double)));
    while (!nomem) {
        pthread_mutex_lock(&br->gen_lock);
        int64_t b = br->next_block;
        pthread_mutex_lock(&br->lock);
        while (!br->stopped && !br->nomem && b >= br->merged + br->window)
            pthread_cond_wait(&br->cond, &br->lock);
        bool done = br->stopped || br->nomem || b >= br->n_blocks;
        pthread_mutex_unlock(&br->lock);
        int r = 0;
        if (!done) {
            int64_t r0 = b * br->rows_per, rows = cs->meta[0].shape[0] - r0;
            int64_t len = (rows < br->rows_per ? rows : br->rows_per) * br->inner;
            for (int i = 0; r == 0 && i < cs->n_in; i++)
                r = nv_inputs_stream_next(&br->streams[i], vals[i], len);
            br->next_block++;
        }
        pthread_mutex_unlock(&br->gen_lock);
        if (done)
            break;
        slot *sl = &br->slots[b % br->window];
        if (r == 0)
            r = run_block(br, &w, vals, b, sl);
        else if ((r = nvw_op_verdict(&w, "error", "inputs",
                                     "could not make the inputs of this case (%d)", r)) == 0)
            r = stop_with(&w, sl);
        block_release(&w);
        pthread_mutex_lock(&br->lock);
        if (r < 0) {
            br->nomem = true;
            pthread_cond_broadcast(&br->cond);
        } else {
            sl->ready = true;
            merge_ready(br);
        }
        pthread_mutex_unlock(&br->lock);
        nomem = r < 0;
    }
    if (nomem) {
        pthread_mutex_lock(&br->lock);
        br->nomem = true;
        pthread_cond_broadcast(&br->cond);
        pthread_mutex_unlock(&br->lock);
    }
    block_free(&w);
    json_decref(w.cj);
    for (int i = 0; i < cs->n_in; i++)
        free(vals[i]);
}

typedef struct helper {
    blk_run *br;
    void *ctx;
    pthread_t th;
} helper;

static void *helper_main(void *arg)
{
    helper *h = arg;
    work(h->br, h->ctx);
    nv_ref_thread_done(); /* MPFR caches this thread filled */
    return NULL;
}

/* The pool's threads beyond the job's cases, shared out by case index. */
static int helpers_for(const blk_run *br)
{
    const nvw_op_job *job = br->cs->job;
    long t = job->b.opts && job->b.opts->threads > 0 ? job->b.opts->threads
                                                    : sysconf(_SC_NPROCESSORS_ONLN);
    int64_t n = job->b.n_cases > 0 ? job->b.n_cases : 1;
    if (t < 1 || br->n_blocks < HELPER_MIN_BLOCKS || t <= n)
        return 0;
    int64_t spare = t - n, i = br->cs->c.index;
    int64_t h = spare / n + (i < spare % n ? 1 : 0);
    if (h > br->n_blocks - 1)
        h = br->n_blocks - 1;
    return h > MAX_HELPERS ? MAX_HELPERS : (int)h;
}

/* All blocks of the case on this thread and the helpers. */
static int run_all(blk_run *br)
{
    case_state *cs = br->cs;
    for (int i = 0; i < cs->n_in; i++) {
        nv_input_request rq;
        nvw_op_input_request(cs, i, &rq);
        if (nv_inputs_stream_init(&br->streams[i], &rq, cs->meta[i].numel) < 0)
            return nvw_op_verdict(cs, "error", "inputs",
                                  "could not make the inputs of this case (%d)", -EINVAL);
    }
    helper hs[MAX_HELPERS];
    int nh = br->collect ? 0 : helpers_for(br), started = 0;
    br->window = 2 * (nh + 1);
    br->slots = calloc((size_t)br->window, sizeof *br->slots);
    if (!br->slots)
        return -ENOMEM;
    int r = 0;
    for (int k = 0; k < br->window && r == 0; k++)
        if (!(br->slots[k].ue = malloc((size_t)(br->rows_per * br->inner) * sizeof(double))) ||
            (br->bd && !(br->slots[k].bd = malloc(sizeof *br->slots[k].bd))))
            r = -ENOMEM;
    pthread_mutex_init(&br->gen_lock, NULL);
    pthread_mutex_init(&br->lock, NULL);
    pthread_cond_init(&br->cond, NULL);
    const nvw_job_base *b = &cs->job->b;
    for (; r == 0 && started < nh; started++) {
        char err[512];
        hs[started] = (helper){.br = br};
        if (b->table->open(b->options, &hs[started].ctx, err, sizeof err) != NV_OK)
            break; /* fewer helpers: the result is the same */
        /* A helper context gets the job's demanded determinism like the pool's;
         * one that does not honour it is not used. */
        if (b->det_demanded && b->det_answer == NVW_DET_HONOURED &&
            nvw_det_configure(b->table, hs[started].ctx, err, sizeof err) != NVW_DET_HONOURED) {
            b->table->close(hs[started].ctx);
            break;
        }
        if (pthread_create(&hs[started].th, NULL, helper_main, &hs[started]) != 0) {
            b->table->close(hs[started].ctx);
            break;
        }
    }
    if (r == 0)
        work(br, cs->ctx);
    for (int k = 0; k < started; k++) {
        pthread_join(hs[k].th, NULL);
        b->table->close(hs[k].ctx);
    }
    pthread_cond_destroy(&br->cond);
    pthread_mutex_destroy(&br->lock);
    pthread_mutex_destroy(&br->gen_lock);
    for (int k = 0; k < br->window; k++) {
        free(br->slots[k].ue);
        free(br->slots[k].bd);
        json_decref(br->slots[k].stop);
    }
    free(br->slots);
    br->slots = NULL;
    return r < 0 || br->nomem ? -ENOMEM : 0;
}

/* The artifact of a failing case: the whole inputs as the whole case makes
 * them, and the device's output from a second pass over the blocks. */
static int report(case_state *cs, const blk_run *first)
{
    const nvw_op_job *job = cs->job;
    if (!job->b.opts || !job->b.opts->on_failure)
        return 0;
    int r = nvw_op_make_inputs(cs);
    if (r < 0)
        return r == -ENOMEM ? r : 0;
    if (!(cs->got = nv_tensor_new(cs->out_dt, cs->out_ndim, cs->out_shape)))
        return -ENOMEM;
    blk_run br = {.cs = cs,
                  .tol = first->tol,
                  .rows_per = first->rows_per,
                  .inner = first->inner,
                  .n_blocks = first->n_blocks,
                  .n_total = first->n_total,
                  .collect = true};
    r = run_all(&br);
    bool stopped = br.stopped;
    json_decref(br.stop);
    if (r < 0)
        return r;
    return stopped ? 0 : nvw_op_report_failure(cs); /* the device changed its mind: no artifact */
}

int nvw_op_run_blocked(case_state *cs)
{
    const nv_tensor *m0 = &cs->meta[0];
    blk_run br = {.cs = cs, .det = true, .n_total = m0->numel};
    br.inner = m0->numel / m0->shape[0];
    br.rows_per = nvw_op_block_elems(cs->job) / br.inner;
    br.n_blocks = (m0->shape[0] + br.rows_per - 1) / br.rows_per;
    if (nvw_case_tolerance(cs->job, cs->c.dtype, cs->out_dt, &br.tol) < 0)
        return -EINVAL; /* nvw_op_blocked checked it */
    nv_compare_part_init(&br.acc, NULL);
    nvw_binades bd;
    if (nvw_binades_wanted(cs->s->op->kind, cs->n_in, cs->c.cls, m0->dtype)) {
        nvw_binades_init(&bd, m0->dtype);
        br.bd = &bd;
    }
    int r = run_all(&br);
    if (r == 0 && br.fell_back && json_object_set_new(cs->cj, "fell_back", json_true()))
        r = -ENOMEM;
    if (r == 0 && br.stop) {
        r = json_object_update(cs->cj, br.stop) ? -ENOMEM : 0;
    } else if (r == 0) {
        nv_compare_result cmp;
        nv_compare_part_finish(&br.acc, br.n_total, &br.tol, &cmp);
        nvw_accumulator acc;
        nvw_case_accumulator(json_object_get(cs->job->b.describe, "contract"), cs->s, cs->c.dtype,
                             cs->out_dt, &acc);
        r = nvw_op_judge(cs, &br.tol, &cmp, &acc, br.det,
                         (const double(*)[NV_JOB_MAX_TENSORS])br.first_in);
        if (r == 0 && br.bd)
            r = nvw_binades_json(br.bd, cs->cj);
        const char *v = json_string_value(json_object_get(cs->cj, "verdict"));
        if (r == 0 && v && strcmp(v, "failed") == 0)
            r = report(cs, &br);
    }
    json_decref(br.stop);
    return r;
}
