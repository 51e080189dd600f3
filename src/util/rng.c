/* rng.c: normal deviates for the splitmix64 stream. */
#include "util/rng.h"

#include <math.h>

double rng_normal(Rng *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
