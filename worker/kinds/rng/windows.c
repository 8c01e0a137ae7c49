/* The window test of the RNG kind (windows.h): every window of w consecutive
 * values of every segment, sorted by a hash of its bits and then by the bits
 * themselves, so equal windows are adjacent and a hash collision never makes
 * two different windows equal. */
#include "windows.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct win {
    uint64_t h;
    uint32_t seg, pos;
} win;

typedef struct win_env {
    const float *const *segs;
    int w;
} win_env;

static uint64_t mix(uint64_t h, uint32_t v)
{
    h ^= v;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

/* By hash, then by the window's bits (so equal windows are adjacent even
 * when two distinct windows share a hash), then by segment and position. */
static int win_cmp(const void *pa, const void *pb, void *penv)
{
    const win *a = pa, *b = pb;
    const win_env *e = penv;
    if (a->h != b->h)
        return a->h < b->h ? -1 : 1;
    int m =
        memcmp(e->segs[a->seg] + a->pos, e->segs[b->seg] + b->pos, (size_t)e->w * sizeof(float));
    if (m)
        return m;
    if (a->seg != b->seg)
        return a->seg < b->seg ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

int rg_windows(const float *const *segs, int nseg, int64_t n, int w, rg_overlap *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->seg_a = ret->seg_b = -1;
    int64_t per = n - w + 1;
    if (per <= 0 || nseg < 2)
        return 0;
    size_t m = (size_t)nseg * (size_t)per;
    win *v = malloc(m * sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t k = 0;
    for (int s = 0; s < nseg; s++)
        for (int64_t i = 0; i < per; i++) {
            uint64_t h = 0x84222325CBF29CE4ull;
            for (int j = 0; j < w; j++) {
                uint32_t bits;
                memcpy(&bits, &segs[s][i + j], sizeof bits);
                h = mix(h, bits);
            }
            v[k++] = (win){h, (uint32_t)s, (uint32_t)i};
        }
    win_env env = {segs, w};
    qsort_r(v, m, sizeof *v, win_cmp, &env);
    for (size_t a = 0; a < m;) {
        size_t b = a + 1;
        while (b < m && v[b].h == v[a].h &&
               !memcmp(segs[v[a].seg] + v[a].pos, segs[v[b].seg] + v[b].pos,
                       (size_t)w * sizeof(float)))
            b++;
        /* sorted by segment inside the group: several segments iff the
         * first and last differ */
        if (v[b - 1].seg != v[a].seg) {
            ret->shared += (int64_t)(b - a);
            size_t o = a + 1;
            while (v[o].seg == v[a].seg)
                o++;
            bool earlier = ret->seg_a < 0 || v[a].seg < (uint32_t)ret->seg_a ||
                           (v[a].seg == (uint32_t)ret->seg_a && v[a].pos < ret->pos_a);
            if (earlier) {
                ret->seg_a = (int)v[a].seg, ret->pos_a = v[a].pos;
                ret->seg_b = (int)v[o].seg, ret->pos_b = v[o].pos;
            }
        }
        a = b;
    }
    free(v);
    return 0;
}

double rg_false_alarm(int nseg, int64_t n, int w, int bits)
{
    double m = (double)nseg * (double)(n - w + 1);
    return fmin(1.0, m * (m - 1) / 2 * ldexp(1.0, -bits * w));
}
