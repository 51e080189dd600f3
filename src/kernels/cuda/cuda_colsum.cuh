/* cuda_colsum.cuh: deterministic column sums over many rows, the pattern behind every
 * parameter gradient that sums over tokens (bias, LayerNorm/RMSNorm weight and bias, position
 * embedding). Rows are cut into fixed chunks of COLSUM_ROWS; a block of 32 x 8 threads sums 32
 * columns of one chunk (each of the 8 row lanes in row order, then the 8 lane sums in order)
 * into a partial; a second kernel adds each column's partials in chunk order to the fp32
 * destination. No atomics: the order depends only on the shape. */
#ifndef MYRIAD_KERNELS_CUDA_COLSUM_CUH
#define MYRIAD_KERNELS_CUDA_COLSUM_CUH

#include "kernels/cuda/cuda_common.cuh"

enum { COLSUM_ROWS = 256, COLSUM_LANES = 8 };

/* value(n, c) gives the term of row n, column c; partial is [chunks, C]. */
template <int NV, typename F> __global__ void colsum_partial_kernel(float *partial, int N, int C, F value) {
    MYR_SHARED(float[NV][COLSUM_LANES][33], sh);
    int c = blockIdx.x * 32 + threadIdx.x, chunk = blockIdx.y, lane = threadIdx.y;
    int r0 = chunk * COLSUM_ROWS, r1 = r0 + COLSUM_ROWS < N ? r0 + COLSUM_ROWS : N;
    float s[NV];
    for (int v = 0; v < NV; v++) s[v] = 0;
    if (c < C)
        for (int n = r0 + lane; n < r1; n += COLSUM_LANES) value(n, c, s);
    for (int v = 0; v < NV; v++) sh[v][lane][threadIdx.x] = s[v];
    __syncthreads();
    if (lane == 0 && c < C)
        for (int v = 0; v < NV; v++) {
            float t = 0;
            for (int l = 0; l < COLSUM_LANES; l++) t += sh[v][l][threadIdx.x];
            partial[((size_t)v * gridDim.y + chunk) * C + c] = t;
        }
}

/* dst_v[c] += sum over chunks of partial[v][chunk][c], for the NV outputs */
template <int NV> __global__ void colsum_finish_kernel(float *d0, float *d1, const float *partial, int chunks, int C) {
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
        for (int v = 0; v < NV; v++) {
            float *dst = v == 0 ? d0 : d1;
            if (!dst) continue;
            float t = 0;
            for (int ch = 0; ch < chunks; ch++) t += partial[((size_t)v * chunks + ch) * C + c];
            dst[c] += t;
        }
    }
}

/* Runs both kernels: d0 (and d1 when NV is 2) += column sums of value over N rows. */
template <int NV, typename F> static void colsum_run(float *d0, float *d1, int N, int C, F value) {
    if (N <= 0 || C <= 0) return;
    int chunks = (N + COLSUM_ROWS - 1) / COLSUM_ROWS;
    float *partial = (float *)cuda_scratch((size_t)NV * chunks * C * sizeof(float));
    dim3 grid((C + 31) / 32, chunks), block(32, COLSUM_LANES);
    MYR_LAUNCH((colsum_partial_kernel<NV, F>), grid, block, 0, partial, N, C, value);
    MYR_LAUNCH((colsum_finish_kernel<NV>), ceil_div_u(C, 256), 256, 0, d0, d1, partial, chunks, C);
}

#endif
