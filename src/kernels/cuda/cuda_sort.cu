/* cuda_sort.cu: the stable radix sort of cuda_sort.cuh. Four passes of three kernels each:
 * per-tile digit counts, one exclusive scan over the (digit, tile) counts, and a stable scatter. */
#include "kernels/cuda/cuda_sort.cuh"

enum { TILE = 256, DIGITS = 256, WARPS = TILE / 32, PASSES = 4 };

static size_t align256(size_t b) { return (b + 255) / 256 * 256; }

size_t sort_work_bytes(int n) {
    size_t tiles = (n + TILE - 1) / TILE;
    return 4 * align256((size_t)n * 4) + align256(tiles * DIGITS * 4);
}

__device__ __forceinline__ unsigned digit_of(uint32_t key, int shift) { return (key >> shift) & (DIGITS - 1); }

/* counts[d * tiles + tile] = rows of the tile whose digit is d */
__global__ void sort_count_kernel(int *counts, const uint32_t *keys, int n, int shift, int tiles) {
    MYR_SHARED(int[DIGITS], hist);
    for (int d = threadIdx.x; d < DIGITS; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    int i = blockIdx.x * TILE + threadIdx.x;
    if (i < n) atomicAdd(&hist[digit_of(keys[i], shift)], 1); /* integer counts: order-free */
    __syncthreads();
    for (int d = threadIdx.x; d < DIGITS; d += blockDim.x) counts[(size_t)d * tiles + blockIdx.x] = hist[d];
}

/* In-place exclusive scan of counts[0, total) by one block of 1024 threads: each thread scans a
 * contiguous chunk, the chunk totals are scanned in order by thread 0. */
__global__ void sort_scan_kernel(int *counts, int total) {
    MYR_SHARED(int[1024], chunk_base);
    int per = (total + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per;
    int hi = lo + per < total ? lo + per : total, s = 0;
    for (int i = lo; i < hi; i++) s += counts[i];
    chunk_base[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        int run = 0;
        for (int t = 0; t < (int)blockDim.x; t++) {
            int c = chunk_base[t];
            chunk_base[t] = run;
            run += c;
        }
    }
    __syncthreads();
    int run = chunk_base[threadIdx.x];
    for (int i = lo; i < hi; i++) {
        int c = counts[i];
        counts[i] = run;
        run += c;
    }
}

__global__ void sort_scatter_kernel(uint32_t *keys_out, int32_t *rows_out, const uint32_t *keys_in,
                                    const int32_t *rows_in, const int *offsets, int n, int shift, int tiles) {
    MYR_SHARED(int[WARPS][DIGITS], warp_count);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int d = lane; d < DIGITS; d += 32) warp_count[warp][d] = 0;
    int i = blockIdx.x * TILE + threadIdx.x;
    int valid = i < n;
    uint32_t key = valid ? keys_in[i] : 0;
    unsigned d = valid ? digit_of(key, shift) : DIGITS; /* past the end: a digit no row has */
    unsigned peers = __match_any_sync(0xffffffffu, d);
    unsigned below = peers & ((1u << lane) - 1u);
    int rank = __popc(below);
    __syncwarp();
    if (valid && below == 0) warp_count[warp][d] = __popc(peers); /* the lowest lane of each digit group */
    __syncthreads();
    if (valid) {
        int pos = offsets[(size_t)d * tiles + blockIdx.x] + rank;
        for (int w = 0; w < warp; w++) pos += warp_count[w][d];
        keys_out[pos] = key;
        rows_out[pos] = rows_in ? rows_in[i] : i;
    }
}

SortedRows sort_rows_by_key(const uint32_t *keys, int n, void *work) {
    int tiles = (n + TILE - 1) / TILE;
    char *w = (char *)work;
    uint32_t *kbuf[2] = {(uint32_t *)w, (uint32_t *)(w + align256((size_t)n * 4))};
    int32_t *rbuf[2] = {(int32_t *)(w + 2 * align256((size_t)n * 4)), (int32_t *)(w + 3 * align256((size_t)n * 4))};
    int *counts = (int *)(w + 4 * align256((size_t)n * 4));
    const uint32_t *kin = keys;
    const int32_t *rin = NULL;
    for (int p = 0; p < PASSES && n > 0; p++) {
        int shift = 8 * p;
        MYR_LAUNCH(sort_count_kernel, tiles, TILE, 0, counts, kin, n, shift, tiles);
        MYR_LAUNCH(sort_scan_kernel, 1, 1024, 0, counts, tiles * DIGITS);
        MYR_LAUNCH(sort_scatter_kernel, tiles, TILE, 0, kbuf[p & 1], rbuf[p & 1], kin, rin, counts, n, shift, tiles);
        kin = kbuf[p & 1];
        rin = rbuf[p & 1];
    }
    SortedRows s = {kin, rin};
    return s;
}
