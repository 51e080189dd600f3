/* loader.h: which tokens make up training batch k.
 * The data (N tokens) is cut into W = floor((N - 1) / (B*T)) windows of B*T + 1 tokens that
 * overlap by one token (the last target). Window w covers tokens [w*B*T, w*B*T + B*T + 1);
 * row r of a window is tokens [w*B*T + r*T, ... + T + 1): x = its first T, y = its last T.
 *   no shuffle: batch k uses window k mod W (so batch k reads [k*B*T, k*B*T + B*T + 1) until
 *               the data runs out, then wraps around);
 *   shuffle:    epoch e = k / W uses a permutation P_e of the W windows (Fisher-Yates driven by
 *               splitmix64, keyed by seed and e; docs/FORMATS.md) and batch k uses P_e[k mod W].
 * Both orders depend only on (N, B, T, seed): identical across runs, ranks and machines. */
#ifndef MYRIAD_DATA_LOADER_H
#define MYRIAD_DATA_LOADER_H

#include <stdint.h>

#include "data/shards.h"

typedef struct {
    const TokenData *d;
    int B, T;
    int shuffle;
    uint64_t seed;
    uint64_t windows;    /* W */
    uint64_t *perm;      /* permutation of the current epoch (shuffle only) */
    uint64_t perm_epoch; /* epoch perm belongs to; UINT64_MAX = none yet */
} BatchLoader;

/* -1 + myr_error if B or T is not positive or the data has fewer than B*T + 1 tokens. */
int loader_init(BatchLoader *l, const TokenData *d, int B, int T, int shuffle, uint64_t seed);
/* Rows [row0, row0 + rows) of global batch k into x and y (rows*T int32 each). */
int loader_batch(BatchLoader *l, uint64_t k, int row0, int rows, int32_t *x, int32_t *y);
/* Index of the window global batch k reads. */
uint64_t loader_window(BatchLoader *l, uint64_t k);
void loader_free(BatchLoader *l);

/* The permutation of n windows for (seed, epoch), written to perm[0, n). Exposed for tests. */
void loader_permutation(uint64_t seed, uint64_t epoch, uint64_t n, uint64_t *perm);

#endif
