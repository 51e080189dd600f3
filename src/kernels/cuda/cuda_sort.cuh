/* cuda_sort.cuh: a stable sort of row indices by 32-bit keys (least-significant-digit radix
 * sort, 8 bits a pass), so that rows with the same key can be summed by one block in row order:
 * the deterministic replacement for atomic scatter-adds (embedding backward, MoE combine).
 * Stability comes from ranks, not atomics: inside a warp a row's rank among equal digits is the
 * count of equal lanes before it (__match_any_sync), across the block the counts of the warps
 * before it, across blocks an exclusive scan over (digit, block) counts. */
#ifndef MYRIAD_KERNELS_CUDA_SORT_CUH
#define MYRIAD_KERNELS_CUDA_SORT_CUH

#include "kernels/cuda/cuda_common.cuh"

typedef struct {
    const uint32_t *keys; /* sorted */
    const int32_t *rows;  /* rows[i]: the original position of sorted element i */
} SortedRows;

/* Device bytes the sort of n keys needs as work memory. */
size_t sort_work_bytes(int n);
/* Sorts keys[0, n) (not modified) using work (sort_work_bytes(n), 256-byte aligned); the result
 * points into work. */
SortedRows sort_rows_by_key(const uint32_t *keys, int n, void *work);

/* Segments of equal keys in a sorted array: position i starts one when i == 0 or its key differs
 * from the one before; the segment runs to the next start. */
__device__ __forceinline__ int segment_start(const uint32_t *keys, int i) { return i == 0 || keys[i] != keys[i - 1]; }
__device__ __forceinline__ int segment_end(const uint32_t *keys, int i, int n) {
    int j = i + 1;
    while (j < n && keys[j] == keys[i]) j++;
    return j;
}

#endif
