/* cuda_moe.cu: the mixture-of-experts kernels: router softmax + top-k and its backward (one
 * thread per token: E is small; double sums as the CPU backend), token-row gathers and scatters,
 * the weighted combine (a scatter-add made deterministic by the stable sort of cuda_sort.cuh:
 * each output row is summed by one block in row order), and the per-row dot product. */
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_sort.cuh"

#define MOE_ELEM float
#define MOE_ROW_FN static __device__ inline
#include "kernels/moe_router_row.h"

__global__ void router_topk_kernel(float *probs, int32_t *topk, float *gates, int N, int E, int k) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x)
        moe_router_topk_row(probs + (size_t)n * E, topk + (size_t)n * k, gates + (size_t)n * k, E, k);
}

__global__ void router_backward_kernel(float *dlogits, const float *probs, const int32_t *topk, const float *gates,
                                       const float *dgates, const float *daux, int N, int T, int E, int k) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x) {
        float *d = dlogits + (size_t)n * E;
        for (int e = 0; e < E; e++) d[e] = daux[(size_t)(n / T) * E + e];
        moe_router_backward_row(d, probs + (size_t)n * E, topk + (size_t)n * k, gates + (size_t)n * k,
                                dgates + (size_t)n * k, E, k);
    }
}

extern "C" void cuda_moe_router_topk(float *probs, int32_t *topk, float *gates, int N, int E, int k) {
    if (N > 0) MYR_LAUNCH(router_topk_kernel, ceil_div_u(N, 128), 128, 0, probs, topk, gates, N, E, k);
}

extern "C" void cuda_moe_router_backward(float *dlogits, const float *probs, const int32_t *topk, const float *gates,
                                         const float *dgates, const float *daux, int N, int T, int E, int k) {
    if (N > 0)
        MYR_LAUNCH(router_backward_kernel, ceil_div_u(N, 128), 128, 0, dlogits, probs, topk, gates, dgates, daux, N, T,
                   E, k);
}

template <typename T> __global__ void gather_rows_kernel(T *out, const T *x, const int32_t *idx, const float *scale, int R, int C) {
    size_t total = (size_t)R * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / C), c = (int)(i % C);
        T v = x[(size_t)idx[r] * C + c];
        out[i] = scale ? from_f32<T>(scale[r] * to_f32(v)) : v;
    }
}

template <typename T> __global__ void scatter_rows_kernel(T *out, const T *x, const int32_t *idx, int R, int C) {
    size_t total = (size_t)R * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int r = (int)(i / C), c = (int)(i % C);
        out[(size_t)idx[r] * C + c] = x[i];
    }
}

extern "C" void cuda_moe_gather_rows(void *out, const void *x, const int32_t *idx, const float *scale, int R, int C,
                                     int dt) {
    size_t n = (size_t)R * C;
    if (n)
        DT_SWITCH(dt, T,
                  MYR_LAUNCH(gather_rows_kernel<T>, grid_for(n, 256), 256, 0, (T *)out, (const T *)x, idx, scale, R, C));
}

extern "C" void cuda_moe_scatter_rows(void *out, const void *x, const int32_t *idx, int R, int C, int dt) {
    size_t n = (size_t)R * C;
    if (n) DT_SWITCH(dt, T, MYR_LAUNCH(scatter_rows_kernel<T>, grid_for(n, 256), 256, 0, (T *)out, (const T *)x, idx, R, C));
}

__global__ void index_keys_kernel(uint32_t *keys, const int32_t *idx, int R) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < R; i += gridDim.x * blockDim.x) keys[i] = (uint32_t)idx[i];
}

/* the block at the start of each segment of equal destination rows adds them in row order */
template <typename TO, typename TX>
__global__ void combine_kernel(TO *out, const TX *x, const float *w, SortedRows s, int R, int C) {
    int i = blockIdx.x;
    if (!segment_start(s.keys, i)) return;
    int end = segment_end(s.keys, i, R);
    TO *dst = out + (size_t)s.keys[i] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = to_f32(dst[c]);
        for (int j = i; j < end; j++) {
            int r = s.rows[j];
            float v = to_f32(x[(size_t)r * C + c]);
            acc += w ? w[r] * v : v;
        }
        dst[c] = from_f32<TO>(acc);
    }
}

extern "C" void cuda_moe_combine(void *out, int out_dt, const void *x, int x_dt, const int32_t *idx, const float *w,
                                 int R, int C) {
    if (R <= 0 || C <= 0) return;
    size_t key_bytes = ((size_t)R * 4 + 255) / 256 * 256;
    char *work = (char *)cuda_scratch(key_bytes + sort_work_bytes(R));
    uint32_t *keys = (uint32_t *)work;
    MYR_LAUNCH(index_keys_kernel, grid_for(R, 256), 256, 0, keys, idx, R);
    SortedRows s = sort_rows_by_key(keys, R, work + key_bytes);
    DT_SWITCH2(out_dt, TO, x_dt, TX,
               MYR_LAUNCH((combine_kernel<TO, TX>), R, 128, 0, (TO *)out, (const TX *)x, w, s, R, C));
}

template <typename T> __global__ void row_dot_kernel(float *out, const T *a, const int32_t *idx, const T *b, int R, int C) {
    int r = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (r >= R) return;
    const T *u = a + (size_t)idx[r] * C, *v = b + (size_t)r * C;
    double s = 0;
    for (int c = lane; c < C; c += 32) s += (double)to_f32(u[c]) * to_f32(v[c]);
    s = warp_sum_d(s);
    if (lane == 0) out[r] = (float)s;
}

extern "C" void cuda_moe_row_dot(float *out, const void *a, const int32_t *idx, const void *b, int R, int C, int dt) {
    if (R > 0)
        DT_SWITCH(dt, T, MYR_LAUNCH(row_dot_kernel<T>, ceil_div_u(R, 8), 256, 0, out, (const T *)a, idx, (const T *)b, R, C));
}

__global__ void scatter_scalars_kernel(float *dst, const float *src, const int32_t *slot, int A) {
    for (int a = blockIdx.x * blockDim.x + threadIdx.x; a < A; a += gridDim.x * blockDim.x) dst[slot[a]] = src[a];
}

extern "C" void cuda_moe_scatter_scalars(float *dst, const float *src, const int32_t *slot, int A) {
    if (A > 0) MYR_LAUNCH(scatter_scalars_kernel, grid_for(A, 256), 256, 0, dst, src, slot, A);
}
