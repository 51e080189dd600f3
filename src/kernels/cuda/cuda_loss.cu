/* cuda_loss.cu: softmax cross-entropy fused with its gradient, and the per-rank pieces of the
 * vocabulary-parallel form. One block per row. The fused kernel reads the row once for its
 * statistics (each thread keeps a running max and a sum rescaled when the max grows; the
 * threads' pairs combine in a fixed tree) and, when the gradient is wanted, once more to write
 * it in place: the logits are written once. The mean loss is the row losses summed in double by
 * one block in a fixed order. Rows are ld apart: a padded vocabulary (--vocab-pad) keeps its
 * GEMM strides aligned, and only columns [0, V) are tokens: the padding columns are never read
 * (so they cannot be predicted, nor weigh in the loss) and their gradient is written as 0. */
#include <math.h>

#include "kernels/cuda/cuda_common.cuh"

enum { CE_THREADS = 512 };

/* (m, s) pairs: s = sum of exp(x - m); combining keeps the larger max */
__device__ __forceinline__ void lse_combine(float &m, float &s, float m2, float s2) {
    if (m2 == -INFINITY) return;
    if (m == -INFINITY) { m = m2; s = s2; return; }
    if (m2 > m) {
        s = s * expf(m - m2) + s2;
        m = m2;
    } else {
        s = s + s2 * expf(m2 - m);
    }
}

template <typename T>
__global__ void cross_entropy_kernel(T *logits, float *losses, const int32_t *targets, int V, int ld,
                                     int want_grad, float dscale) {
    MYR_SHARED(float[CE_THREADS / 32], shm);
    MYR_SHARED(float[CE_THREADS / 32], shs);
    int n = blockIdx.x;
    T *z = logits + (size_t)n * ld;
    float m = -INFINITY, s = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float x = to_f32(z[v]);
        if (x > m) {
            s = (m == -INFINITY ? 0.0f : s * expf(m - x)) + 1.0f;
            m = x;
        } else {
            s += expf(x - m);
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        float m2 = __shfl_xor_sync(0xffffffffu, m, o), s2 = __shfl_xor_sync(0xffffffffu, s, o);
        /* both lanes of a pair must compute the same result: combine in a symmetric order */
        float ma = fmaxf(m, m2);
        float sa = (m == -INFINITY ? 0.0f : s * expf(m - ma)) + (m2 == -INFINITY ? 0.0f : s2 * expf(m2 - ma));
        if (ma == -INFINITY) sa = 0.0f;
        m = ma;
        s = sa;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) {
        shm[warp] = m;
        shs[warp] = s;
    }
    __syncthreads();
    float M = -INFINITY, S = 0;
    for (int w = 0; w < (int)(blockDim.x >> 5); w++) lse_combine(M, S, shm[w], shs[w]);
    int t = targets[n];
    if (threadIdx.x == 0) losses[n] = (float)(log((double)S) - (double)(to_f32(z[t]) - M));
    if (!want_grad) return;
    __syncthreads(); /* z[t] is read above before any thread overwrites it */
    float scale = (1.0f / S) * dscale;
    for (int v = threadIdx.x; v < ld; v += blockDim.x) {
        float g = v < V ? expf(to_f32(z[v]) - M) * scale : 0.0f;
        if (v == t) g -= dscale;
        z[v] = from_f32<T>(g);
    }
}

/* *mean = sum of losses[0, N) / N, in double, fixed order */
__global__ void mean_kernel(double *mean, const float *losses, int N) {
    MYR_SHARED(double[32], sh);
    int per = (N + blockDim.x - 1) / blockDim.x, lo = threadIdx.x * per, hi = lo + per < N ? lo + per : N;
    double s = 0;
    for (int i = lo; i < hi; i++) s += losses[i];
    s = block_sum_with(s, sh);
    if (threadIdx.x == 0) *mean = s / N;
}

extern "C" void cuda_cross_entropy_async(void *logits, int dt, float *losses, const int32_t *targets, int N, int V,
                                         int ld, int want_grad, double grad_scale, double *mean_dev) {
    if (N <= 0) return;
    float dscale = (float)(grad_scale / N);
    DT_SWITCH(dt, T,
              MYR_LAUNCH(cross_entropy_kernel<T>, N, CE_THREADS, 0, (T *)logits, losses, targets, V, ld, want_grad,
                         dscale));
    if (mean_dev) MYR_LAUNCH(mean_kernel, 1, 1024, 0, mean_dev, losses, N);
}

extern "C" double cuda_cross_entropy_forward_backward(void *logits, int dt, float *losses, const int32_t *targets, int N,
                                                      int V, int ld, int want_grad, double grad_scale) {
    if (N <= 0) return 0;
    double *mean = (double *)cuda_scratch(sizeof(double));
    cuda_cross_entropy_async(logits, dt, losses, targets, N, V, ld, want_grad, grad_scale, mean);
    double h = 0;
    cuda_copy_to_host(&h, mean, sizeof h);
    return h;
}

/* ---- vocabulary-parallel pieces ---- */
__global__ void shard_losses_kernel(float *losses, const double *max, const double *sum, const double *target, int N) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x)
        losses[n] = (float)(log(sum[n]) - (target[n] - max[n]));
}

extern "C" double cuda_vocab_shard_losses(float *losses, const double *max, const double *sum, const double *target,
                                          int N) {
    if (N <= 0) return 0;
    double *mean = (double *)cuda_scratch(sizeof(double));
    MYR_LAUNCH(shard_losses_kernel, grid_for(N, 256), 256, 0, losses, max, sum, target, N);
    MYR_LAUNCH(mean_kernel, 1, 1024, 0, mean, losses, N);
    double h = 0;
    cuda_copy_to_host(&h, mean, sizeof h);
    return h;
}

template <typename T> __global__ void row_max_kernel(const T *logits, int V, int ld, double *max) {
    MYR_SHARED(float[32], sh);
    const T *z = logits + (size_t)blockIdx.x * ld;
    float m = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, to_f32(z[v]));
    m = block_max_with(m, sh);
    if (threadIdx.x == 0) max[blockIdx.x] = m;
}

template <typename T>
__global__ void row_sumexp_kernel(const T *logits, int V, int ld, const double *max, double *sum) {
    MYR_SHARED(double[32], sh);
    const T *z = logits + (size_t)blockIdx.x * ld;
    float m = (float)max[blockIdx.x];
    double s = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += exp((double)(to_f32(z[v]) - m));
    s = block_sum_with(s, sh);
    if (threadIdx.x == 0) sum[blockIdx.x] = s;
}

template <typename T>
__global__ void target_logit_kernel(const T *logits, const int32_t *targets, int lo, int N, int V, int ld,
                                    double *out) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x) {
        int t = targets[n] - lo;
        out[n] = t >= 0 && t < V ? (double)to_f32(logits[(size_t)n * ld + t]) : 0.0;
    }
}

template <typename T>
__global__ void shard_grad_kernel(T *logits, const int32_t *targets, int lo, int N, int V, int ld, const double *max,
                                  const double *sum, float s) {
    size_t total = (size_t)N * ld;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i / ld), v = (int)(i % ld);
        if (v >= V) { /* padding column: no token, no gradient */
            logits[i] = from_f32<T>(0.0f);
            continue;
        }
        float m = (float)max[n], inv = (float)(1.0 / sum[n]);
        float g = expf(to_f32(logits[i]) - m) * inv * s;
        if (v == targets[n] - lo) g -= s;
        logits[i] = from_f32<T>(g);
    }
}

extern "C" void cuda_vocab_shard_row_max(const void *logits, int dt, int N, int V, int ld, double *max) {
    if (N > 0) DT_SWITCH(dt, T, MYR_LAUNCH(row_max_kernel<T>, N, 256, 0, (const T *)logits, V, ld, max));
}
extern "C" void cuda_vocab_shard_row_sumexp(const void *logits, int dt, int N, int V, int ld, const double *max,
                                            double *sum) {
    if (N > 0) DT_SWITCH(dt, T, MYR_LAUNCH(row_sumexp_kernel<T>, N, 256, 0, (const T *)logits, V, ld, max, sum));
}
extern "C" void cuda_vocab_shard_target_logit(const void *logits, int dt, const int32_t *targets, int vocab_lo, int N,
                                              int V, int ld, double *out) {
    if (N > 0)
        DT_SWITCH(dt, T,
                  MYR_LAUNCH(target_logit_kernel<T>, grid_for(N, 256), 256, 0, (const T *)logits, targets, vocab_lo, N,
                             V, ld, out));
}
extern "C" void cuda_vocab_shard_grad(void *logits, int dt, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                                      const double *max, const double *sum, double scale) {
    size_t n = (size_t)N * ld;
    if (n)
        DT_SWITCH(dt, T,
                  MYR_LAUNCH(shard_grad_kernel<T>, grid_for(n, 256), 256, 0, (T *)logits, targets, vocab_lo, N, V, ld,
                             max, sum, (float)scale));
}
