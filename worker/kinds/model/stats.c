/* Confidence bounds for the classifier's accuracy (docs/MODEL.md "Classifier
 * accuracy"): the Wilson score interval of a binomial proportion (E. B.
 * Wilson, "Probable inference, the law of succession, and statistical
 * inference", JASA 22, 1927; recommended over the Wald interval by Brown, Cai
 * and DasGupta, Statistical Science 16, 2001) and the normal quantile it
 * needs. */
#include <math.h>

#include "model_internal.h"

void model_wilson(int64_t x, int64_t n, double z, double *lo, double *hi)
{
    if (n <= 0) {
        *lo = 0;
        *hi = 1;
        return;
    }
    double p = (double)x / (double)n, nn = (double)n, z2 = z * z;
    double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
    double half = z / (1 + z2 / nn) * sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
    *lo = fmax(0, centre - half);
    *hi = fmin(1, centre + half);
}

/* Bisection on P(Z > z) = erfc(z / sqrt 2) / 2, which is decreasing in z: 200
 * halvings of [-40, 40] reach the double nearest the quantile. */
double model_z_upper(double p)
{
    double a = -40, b = 40;
    for (int i = 0; i < 200; i++) {
        double m = 0.5 * (a + b);
        if (0.5 * erfc(m / sqrt(2.0)) > p)
            a = m;
        else
            b = m;
    }
    return 0.5 * (a + b);
}
