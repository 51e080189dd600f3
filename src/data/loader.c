/* loader.c: batch order over token windows (see loader.h). */
#include "data/loader.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"


/* Uniform integer in [0, bound) without modulo bias: reject the top sliver of 2^64. */
static uint64_t uniform_below(uint64_t *state, uint64_t bound) {
    uint64_t threshold = (0 - bound) % bound; /* = 2^64 mod bound */
    for (;;) {
        uint64_t r = splitmix64_next(state);
        if (r >= threshold) return r % bound;
    }
}

void loader_permutation(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm) {
    /* Key the stream by hashing seed and epoch separately, so neighbouring epochs (or seeds)
     * do not get shifted copies of one splitmix64 sequence. */
    uint64_t a = seed, b = epoch ^ 0x6D79726961640001ULL; /* "myriad" tag */
    uint64_t state = splitmix64_next(&a) ^ splitmix64_next(&b);
    for (uint64_t i = 0; i < n; i++) perm[i] = i;
    for (uint64_t i = n; i > 1; i--) { /* Fisher-Yates: swap slot i-1 with a uniform j <= i-1 */
        uint64_t j = uniform_below(&state, i);
        uint64_t t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

int loader_init(BatchLoader *l, const TokenData *d, int B, int T, int shuffle, uint64_t seed) {
    memset(l, 0, sizeof *l);
    if (B <= 0 || T <= 0) return myr_error("batch (%d) and sequence length (%d) must be positive", B, T);
    uint64_t bt = (uint64_t)B * (uint64_t)T, n = tokens_count(d);
    if (n < bt + 1)
        return myr_error("the data has %" PRIu64 " tokens but one batch of %d x %d needs %" PRIu64 " (B*T+1); use "
                         "more data or a smaller --batch/--seq", n, B, T, bt + 1);
    l->d = d;
    l->B = B;
    l->T = T;
    l->shuffle = shuffle;
    l->seed = seed;
    l->windows = (n - 1) / bt;
    l->perm_epoch = UINT64_MAX;
    if (shuffle) {
        l->perm = malloc(l->windows * sizeof *l->perm);
        if (!l->perm) return myr_error("out of memory for a permutation of %" PRIu64 " windows", l->windows);
    }
    return 0;
}

uint64_t loader_window(BatchLoader *l, uint64_t k) {
    if (!l->shuffle) return k % l->windows;
    uint64_t epoch = k / l->windows;
    if (epoch != l->perm_epoch) {
        loader_permutation(l->seed, epoch, l->windows, l->perm);
        l->perm_epoch = epoch;
    }
    return l->perm[k % l->windows];
}

int loader_batch(BatchLoader *l, uint64_t k, int row0, int rows, int32_t *x, int32_t *y) {
    if (row0 < 0 || rows < 0 || row0 > l->B - rows)
        return myr_error("batch rows [%d, %d) are outside the batch of %d rows", row0, row0 + rows, l->B);
    if (rows == 0) return 0;
    uint64_t T = (uint64_t)l->T, n = (uint64_t)rows * T;
    uint64_t first = loader_window(l, k) * (uint64_t)l->B * T + (uint64_t)row0 * T;
    /* the rows are contiguous: read them once into x, then y is x shifted by one plus one more token */
    if (tokens_read(l->d, first, n, x)) return -1;
    memcpy(y, x + 1, (n - 1) * sizeof *y);
    return tokens_read(l->d, first + n, 1, y + n - 1);
}

void loader_free(BatchLoader *l) {
    free(l->perm);
    l->perm = NULL;
}
