/* cuda_reduce.cu: the sum of squares (the global gradient norm) and the fused AdamW update.
 * Sum of squares: fixed chunks of 16384 elements (as the CPU backend), each summed by one block
 * in double with a fixed tree, then the chunk sums in chunk order by one block: the same bits
 * every run. AdamW: one pass over the flat parameter range reading p, g, m, v and writing p, m, v
 * (and the bf16 copy of p), with the CPU backend's operation order and rounding points. */
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"

enum { SQ_CHUNK = 1 << 14, SQ_THREADS = 256 };

__global__ void sum_squares_chunk_kernel(double *partial, const float *x, size_t n) {
    MYR_SHARED(double[32], sh);
    size_t lo = (size_t)blockIdx.x * SQ_CHUNK, hi = lo + SQ_CHUNK < n ? lo + SQ_CHUNK : n;
    double s = 0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) s += (double)x[i] * x[i];
    s = block_sum_with(s, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

/* *acc (= or += when accumulate) weight * sum of partial[0, chunks) */
__global__ void sum_partials_kernel(double *acc, const double *partial, size_t chunks, double weight, int accumulate) {
    MYR_SHARED(double[32], sh);
    size_t per = (chunks + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per;
    size_t hi = lo + per < chunks ? lo + per : chunks;
    double s = 0;
    for (size_t i = lo; i < hi; i++) s += partial[i];
    s = block_sum_with(s, sh);
    if (threadIdx.x == 0) *acc = accumulate ? *acc + weight * s : weight * s;
}

static void sum_squares_into(double *acc, const float *x, size_t n, double weight, int accumulate) {
    size_t chunks = (n + SQ_CHUNK - 1) / SQ_CHUNK;
    if (chunks == 0) chunks = 1;
    double *partial = (double *)cuda_scratch(chunks * sizeof(double));
    if (n == 0) cuda_zero(partial, sizeof(double));
    else MYR_LAUNCH(sum_squares_chunk_kernel, (unsigned)chunks, SQ_THREADS, 0, partial, x, n);
    MYR_LAUNCH(sum_partials_kernel, 1, 1024, 0, acc, partial, chunks, weight, accumulate);
}

extern "C" void cuda_sum_squares_accumulate(double *acc_dev, const float *x, size_t n, double weight) {
    sum_squares_into(acc_dev, x, n, weight, 1);
}

extern "C" double cuda_sum_squares(const float *x, size_t n) {
    cuda_require_init("cuda_sum_squares");
    /* the result lands after the partials in scratch-independent memory: a small buffer of our own */
    static double *result;
    if (!result) result = (double *)cuda_alloc(sizeof(double));
    sum_squares_into(result, x, n, 1.0, 0);
    double h = 0;
    cuda_copy_to_host(&h, result, sizeof h);
    return h;
}

/* ---- AdamW: one range with the host's scalars (the kernels.h op), and the whole flat range in
 * one launch over its tensor segments (cuda_adamw) ---- */
__global__ void adamw_update_kernel(float *p, const float *g, float *m, float *v, size_t n, CudaAdamWStep s) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float pi = s.apply_decay ? p[i] * s.decay : p[i];
        float mi = m[i] * s.beta1 + gi * s.one_minus_beta1;
        float vi = v[i] * s.beta2 + (gi * gi) * s.one_minus_beta2;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + s.neg_step * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
    }
}

extern "C" void cuda_adamw_update(float *p, const float *g, float *m, float *v, size_t n, CudaAdamWStep s) {
    if (n) MYR_LAUNCH(adamw_update_kernel, grid_for(n, 256), 256, 0, p, g, m, v, n, s);
}

typedef struct {
    float decay, b1, b2, one_b1, one_b2, bc2_sqrt, eps, neg_step, grad_scale;
} CudaAdamWScalars;

enum { ADAMW_THREADS = 256, ADAMW_CHUNK = ADAMW_THREADS * 8 };

/* Block b updates elements [b * ADAMW_CHUNK, +ADAMW_CHUNK) of p[0, n): it finds the first segment
 * reaching its range by binary search, then each thread walks the segments forward with its
 * elements (segments are sorted and disjoint; elements between them are padding, left alone). */
template <int WITH_COPY>
__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, const CudaAdamWSegment *segs,
                             int nsegs, CudaAdamWScalars s, bf16 *copy) {
    MYR_SHARED(int, first);
    size_t c0 = (size_t)blockIdx.x * ADAMW_CHUNK;
    if (threadIdx.x == 0) {
        int lo = 0, hi = nsegs; /* the first segment with hi > c0 */
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (segs[mid].hi <= c0) lo = mid + 1;
            else hi = mid;
        }
        first = lo;
    }
    __syncthreads();
    int j = first;
    for (int k = 0; k < ADAMW_CHUNK / ADAMW_THREADS; k++) {
        size_t i = c0 + (size_t)k * ADAMW_THREADS + threadIdx.x;
        if (i >= n) break;
        while (j < nsegs && segs[j].hi <= i) j++;
        if (j >= nsegs) break;
        if (i < segs[j].lo) continue;
        float gi = g[i];
        if (s.grad_scale != 1.0f) gi *= s.grad_scale;
        float pi = segs[j].decay ? p[i] * s.decay : p[i];
        float mi = m[i] * s.b1 + gi * s.one_b1;
        float vi = v[i] * s.b2 + (gi * gi) * s.one_b2;
        m[i] = mi;
        v[i] = vi;
        pi = pi + s.neg_step * (mi / (sqrtf(vi) / s.bc2_sqrt + s.eps));
        p[i] = pi;
        if (WITH_COPY) copy[i] = __float2bfloat16_rn(pi);
    }
}

extern "C" void cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, const CudaAdamWSegment *segs,
                           int nsegs, float grad_scale, double lr, double beta1, double beta2, double eps,
                           double weight_decay, long step, void *p_bf16) {
    if (nsegs <= 0 || n == 0) return;
    double bc1 = 1 - pow(beta1, (double)step), bc2 = 1 - pow(beta2, (double)step);
    CudaAdamWScalars s;
    s.decay = (float)(1 - lr * weight_decay);
    s.b1 = (float)beta1;
    s.b2 = (float)beta2;
    s.one_b1 = (float)(1 - beta1);
    s.one_b2 = (float)(1 - beta2);
    s.bc2_sqrt = (float)sqrt(bc2);
    s.eps = (float)eps;
    s.neg_step = (float)(-(lr / bc1));
    s.grad_scale = grad_scale;
    if (weight_decay == 0) s.decay = 1.0f; /* the CPU skips the multiply; *1 is exact */
    unsigned blocks = ceil_div_u(n, ADAMW_CHUNK);
    if (p_bf16) MYR_LAUNCH(adamw_kernel<1>, blocks, ADAMW_THREADS, 0, p, g, m, v, n, segs, nsegs, s, (bf16 *)p_bf16);
    else MYR_LAUNCH(adamw_kernel<0>, blocks, ADAMW_THREADS, 0, p, g, m, v, n, segs, nsegs, s, (bf16 *)NULL);
}
