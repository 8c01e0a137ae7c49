/* Error-free transformations (Knuth TwoSum; Dekker/Kahan TwoProduct through
 * fma, as in Ogita, Rump, Oishi, "Accurate sum and dot product", SIAM J. Sci.
 * Comput. 26(6), 2005, §2): the rounding error of one addition or product as a
 * double. Used by compare.c and by the exact sums of core/ref/ddsum.h. */
#ifndef NUMVAL_EFT_H
#define NUMVAL_EFT_H

#include <math.h>

/* s + e == a + b exactly, s = fl(a + b) (Knuth TwoSum; no branch, any order). */
static inline void nv_two_sum(double a, double b, double *s, double *e)
{
    double x = a + b;
    double z = x - a;
    *e = (a - (x - z)) + (b - z);
    *s = x;
}

/* p + e == a * b exactly, p = fl(a * b), barring underflow of e (TwoProduct via fma). */
static inline void nv_two_prod(double a, double b, double *p, double *e)
{
    double x = a * b;
    *e = fma(a, b, -x);
    *p = x;
}

#endif
