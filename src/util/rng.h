/* rng.h: the project's deterministic random numbers (splitmix64). Same seed, same stream on
 * every machine and thread count: used for weight init and data shuffling, never rand(). */
#ifndef MYRIAD_UTIL_RNG_H
#define MYRIAD_UTIL_RNG_H

#include <stdint.h>

typedef struct { uint64_t state; } Rng;

/* splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", 2014;
 * constants of Vigna's reference splitmix64.c) over a bare 64-bit state. */
static inline uint64_t splitmix64_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* uniform in (0, 1): 53 random bits, never exactly 0 */
static inline double splitmix64_uniform(uint64_t *state) {
    return ((splitmix64_next(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static inline uint64_t rng_next(Rng *r) { return splitmix64_next(&r->state); }
static inline double rng_uniform(Rng *r) { return splitmix64_uniform(&r->state); }
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
