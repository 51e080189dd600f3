/* cuda_norm.cu: LayerNorm (GPT-2) and RMSNorm (Llama), forward and backward, fused per row:
 * one warp owns a row, reads it in coalesced passes, reduces with a fixed butterfly, and writes
 * the output (and the fp32 mean/rstd the backward needs). The weight/bias gradients are column
 * sums over rows (cuda_colsum.cuh), deterministic. Statistics are fp32 whatever the storage. */
#include "kernels/cuda/cuda_colsum.cuh"
#include "kernels/cuda/cuda_common.cuh"

enum { ROWS_PER_BLOCK = 8 }; /* warps per block, one row each */

template <typename TY, typename TX>
__global__ void layernorm_forward_kernel(TY *y, float *mean, float *rstd, const TX *x, const float *w, const float *b,
                                         int N, int C, float eps) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return; /* whole warps leave together */
    const TX *xr = x + (size_t)row * C;
    float s = 0;
    for (int c = lane; c < C; c += 32) s += to_f32(xr[c]);
    float m = warp_sum(s) / C;
    float v = 0;
    for (int c = lane; c < C; c += 32) {
        float d = to_f32(xr[c]) - m;
        v += d * d;
    }
    float r = 1.0f / sqrtf(warp_sum(v) / C + eps);
    TY *yr = y + (size_t)row * C;
    for (int c = lane; c < C; c += 32) yr[c] = from_f32<TY>((to_f32(xr[c]) - m) * r * w[c] + b[c]);
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = r;
    }
}

template <typename TX, typename TY>
__global__ void layernorm_backward_dx_kernel(TX *dx, const TY *dy, const TX *x, const float *w, const float *mean,
                                             const float *rstd, int N, int C) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const TX *xr = x + (size_t)row * C;
    const TY *dyr = dy + (size_t)row * C;
    float m = mean[row], r = rstd[row], a = 0, bsum = 0;
    for (int c = lane; c < C; c += 32) {
        float xhat = (to_f32(xr[c]) - m) * r, dxhat = to_f32(dyr[c]) * w[c];
        a += dxhat;
        bsum += dxhat * xhat;
    }
    float mean_dxhat = warp_sum(a) / C, mean_dxhat_xhat = warp_sum(bsum) / C;
    TX *dxr = dx + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float xhat = (to_f32(xr[c]) - m) * r, dxhat = to_f32(dyr[c]) * w[c];
        dxr[c] = from_f32<TX>(to_f32(dxr[c]) + r * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat));
    }
}

/* dw += dy * xhat, db += dy (column sums) */
template <typename TX, typename TY> struct LayerNormParamGrad {
    const TY *dy;
    const TX *x;
    const float *mean, *rstd;
    int C;
    __device__ void operator()(int n, int c, float *s) const {
        float d = to_f32(dy[(size_t)n * C + c]);
        s[0] += d * ((to_f32(x[(size_t)n * C + c]) - mean[n]) * rstd[n]);
        s[1] += d;
    }
};

extern "C" void cuda_layernorm_forward(void *y, int y_dt, float *mean, float *rstd, const void *x, int x_dt,
                                       const float *w, const float *b, int N, int C, float eps) {
    if (N <= 0) return;
    DT_SWITCH2(y_dt, TY, x_dt, TX,
               MYR_LAUNCH((layernorm_forward_kernel<TY, TX>), ceil_div_u(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0,
                          (TY *)y, mean, rstd, (const TX *)x, w, b, N, C, eps));
}

extern "C" void cuda_layernorm_backward(void *dx, int x_dt, float *dw, float *db, const void *dy, int y_dt,
                                        const void *x, const float *w, const float *mean, const float *rstd, int N,
                                        int C) {
    if (N <= 0) return;
    DT_SWITCH2(x_dt, TX, y_dt, TY, {
        MYR_LAUNCH((layernorm_backward_dx_kernel<TX, TY>), ceil_div_u(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0,
                   (TX *)dx, (const TY *)dy, (const TX *)x, w, mean, rstd, N, C);
        colsum_run<2>(dw, db, N, C, LayerNormParamGrad<TX, TY>{(const TY *)dy, (const TX *)x, mean, rstd, C});
    });
}

/* ---- RMSNorm: y = w * (x * rstd), rstd = 1 / sqrt(mean(x^2) + eps) ---- */
template <typename TY, typename TX>
__global__ void rmsnorm_forward_kernel(TY *y, float *rstd, const TX *x, const float *w, int N, int C, float eps) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const TX *xr = x + (size_t)row * C;
    float ss = 0;
    for (int c = lane; c < C; c += 32) {
        float v = to_f32(xr[c]);
        ss += v * v;
    }
    float r = 1.0f / sqrtf(warp_sum(ss) / C + eps);
    TY *yr = y + (size_t)row * C;
    for (int c = lane; c < C; c += 32) yr[c] = from_f32<TY>(w[c] * (to_f32(xr[c]) * r));
    if (lane == 0) rstd[row] = r;
}

template <typename TX, typename TY>
__global__ void rmsnorm_backward_dx_kernel(TX *dx, const TY *dy, const TX *x, const float *w, const float *rstd, int N,
                                           int C) {
    int row = blockIdx.x * ROWS_PER_BLOCK + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= N) return;
    const TX *xr = x + (size_t)row * C;
    const TY *dyr = dy + (size_t)row * C;
    float r = rstd[row], a = 0;
    for (int c = lane; c < C; c += 32) a += to_f32(dyr[c]) * w[c] * to_f32(xr[c]) * r;
    float mean_dxhat_xhat = warp_sum(a) / C;
    TX *dxr = dx + (size_t)row * C;
    for (int c = lane; c < C; c += 32) {
        float xhat = to_f32(xr[c]) * r;
        dxr[c] = from_f32<TX>(to_f32(dxr[c]) + r * (to_f32(dyr[c]) * w[c] - xhat * mean_dxhat_xhat));
    }
}

template <typename TX, typename TY> struct RmsNormParamGrad {
    const TY *dy;
    const TX *x;
    const float *rstd;
    int C;
    __device__ void operator()(int n, int c, float *s) const {
        s[0] += to_f32(dy[(size_t)n * C + c]) * (to_f32(x[(size_t)n * C + c]) * rstd[n]);
    }
};

extern "C" void cuda_rmsnorm_forward(void *y, int y_dt, float *rstd, const void *x, int x_dt, const float *w, int N,
                                     int C, float eps) {
    if (N <= 0) return;
    DT_SWITCH2(y_dt, TY, x_dt, TX,
               MYR_LAUNCH((rmsnorm_forward_kernel<TY, TX>), ceil_div_u(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0,
                          (TY *)y, rstd, (const TX *)x, w, N, C, eps));
}

extern "C" void cuda_rmsnorm_backward(void *dx, int x_dt, float *dw, const void *dy, int y_dt, const void *x,
                                      const float *w, const float *rstd, int N, int C) {
    if (N <= 0) return;
    DT_SWITCH2(x_dt, TX, y_dt, TY, {
        MYR_LAUNCH((rmsnorm_backward_dx_kernel<TX, TY>), ceil_div_u(N, ROWS_PER_BLOCK), 32 * ROWS_PER_BLOCK, 0,
                   (TX *)dx, (const TY *)dy, (const TX *)x, w, rstd, N, C);
        colsum_run<1>(dw, (float *)NULL, N, C, RmsNormParamGrad<TX, TY>{(const TY *)dy, (const TX *)x, rstd, C});
    });
}
