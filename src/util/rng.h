/* rng.h: the project's deterministic random numbers (splitmix64). Same seed, same stream on
 * every machine and thread count: used for weight init and data shuffling, never rand(). */
#ifndef MYRIAD_UTIL_RNG_H
#define MYRIAD_UTIL_RNG_H

#include <stdint.h>

typedef struct { uint64_t state; } Rng;

static inline uint64_t rng_next(Rng *r) {
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in (0, 1): 53 random bits, never exactly 0 */
static inline double rng_uniform(Rng *r) { return ((rng_next(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
/* uniform integer in [0, n) (n > 0), by rejection so every value is equally likely */
static inline uint64_t rng_below(Rng *r, uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng_next(r); while (x >= limit);
    return x % n;
}
/* standard normal (Box-Muller; one value per call, the pair's second half discarded for simplicity) */
double rng_normal(Rng *r);

#endif
