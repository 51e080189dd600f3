/* cuda_pointwise.cu: element-wise ops: GELU (tanh approximation), SwiGLU, residual adds,
 * scaling, and the bias add / bias gradient. One grid-stride loop per op over groups of four
 * elements (cuda_vec.cuh) when alignment allows; arithmetic in fp32, one rounding at the store. */
#include "kernels/cuda/cuda_colsum.cuh"
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_vec.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */
#define GELU_C 0.044715f

/* 0.5 * (1 + tanh(u)) = sigmoid(2u), the form the CPU backend uses (no cancellation for x < 0) */
__device__ __forceinline__ float gelu_f(float x) {
    float u = GELU_K * (x + GELU_C * x * x * x);
    return x / (1.0f + expf(-2.0f * u));
}
__device__ __forceinline__ float gelu_grad_f(float x) {
    float u = GELU_K * (x + GELU_C * x * x * x);
    float sig = 1.0f / (1.0f + expf(-2.0f * u));
    float du = GELU_K * (1.0f + 3.0f * GELU_C * x * x);
    return sig + 2.0f * x * sig * (1.0f - sig) * du;
}

/* out = f(a, b) element-wise, with the vector path when every pointer and n allow it */
struct GeluFwd {
    __device__ float operator()(float x, float) const { return gelu_f(x); }
};
struct GeluBwd {
    __device__ float operator()(float x, float dy) const { return dy * gelu_grad_f(x); }
};
struct Add {
    __device__ float operator()(float a, float b) const { return a + b; }
};

template <typename F, typename TO, typename TA, typename TB>
__global__ void map2_kernel(TO *out, const TA *a, const TB *b, size_t n, int vec, F f) {
    size_t stride = (size_t)gridDim.x * blockDim.x, i0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (vec) {
        for (size_t i = i0; i < n / 4; i += stride) {
            float x[4], y[4] = {0, 0, 0, 0}, r[4];
            load4(a + 4 * i, x);
            if (b) load4(b + 4 * i, y);
            for (int j = 0; j < 4; j++) r[j] = f(x[j], y[j]);
            store4(out + 4 * i, r);
        }
    } else {
        for (size_t i = i0; i < n; i += stride) out[i] = from_f32<TO>(f(to_f32(a[i]), b ? to_f32(b[i]) : 0.0f));
    }
}

template <typename F, typename TO, typename TA, typename TB>
static void map2(TO *out, int out_dt, const TA *a, int a_dt, const TB *b, int b_dt, size_t n, F f) {
    if (n == 0) return;
    int vec = n % 4 == 0 && aligned4(out, out_dt) && aligned4(a, a_dt) && (!b || aligned4(b, b_dt));
    MYR_LAUNCH((map2_kernel<F, TO, TA, TB>), grid_for(vec ? n / 4 : n, 256), 256, 0, out, a, b, n, vec, f);
}

extern "C" void cuda_gelu_forward(void *out, const void *inp, size_t n, int dt) {
    DT_SWITCH(dt, T, map2(static_cast<T *>(out), dt, static_cast<const T *>(inp), dt, (const T *)NULL, dt, n, GeluFwd()));
}

extern "C" void cuda_gelu_backward(void *dinp, const void *inp, const void *dout, size_t n, int dt) {
    DT_SWITCH(dt, T,
              map2(static_cast<T *>(dinp), dt, static_cast<const T *>(inp), dt, static_cast<const T *>(dout), dt, n,
                   GeluBwd()));
}

extern "C" void cuda_residual_forward(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt,
                                      size_t n) {
    DT_SWITCH2(out_dt, TO, a_dt, TA,
               DT_SWITCH(b_dt, TB,
                         map2(static_cast<TO *>(out), out_dt, static_cast<const TA *>(a), a_dt,
                              static_cast<const TB *>(b), b_dt, n, Add())));
}

extern "C" void cuda_add_inplace(void *acc, int acc_dt, const void *x, int x_dt, size_t n) {
    cuda_residual_forward(acc, acc_dt, acc, acc_dt, x, x_dt, n);
}

__global__ void scale_kernel(float *x, float s, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] *= s;
}

extern "C" void cuda_scale_inplace(float *x, float s, size_t n) {
    if (n) MYR_LAUNCH(scale_kernel, grid_for(n, 256), 256, 0, x, s, n);
}

/* ---- SwiGLU: inp rows are [gate (F) | up (F)], out = silu(gate) * up ---- */
template <typename T> __global__ void swiglu_forward_kernel(T *out, const T *inp, int N, int F) {
    size_t total = (size_t)N * F;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / F, f = i % F;
        float g = to_f32(inp[n * 2 * F + f]), u = to_f32(inp[n * 2 * F + F + f]);
        float sig = 1.0f / (1.0f + expf(-g));
        out[i] = from_f32<T>(g * sig * u);
    }
}

template <typename T> __global__ void swiglu_backward_kernel(T *dinp, const T *inp, const T *dout, int N, int F) {
    size_t total = (size_t)N * F;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t n = i / F, f = i % F;
        float g = to_f32(inp[n * 2 * F + f]), u = to_f32(inp[n * 2 * F + F + f]), dy = to_f32(dout[i]);
        float sig = 1.0f / (1.0f + expf(-g)), silu = g * sig;
        dinp[n * 2 * F + f] = from_f32<T>(dy * u * (sig + silu * (1.0f - sig)));
        dinp[n * 2 * F + F + f] = from_f32<T>(dy * silu);
    }
}

extern "C" void cuda_swiglu_forward(void *out, const void *inp, int N, int F, int dt) {
    size_t n = (size_t)N * F;
    if (n) DT_SWITCH(dt, T, MYR_LAUNCH(swiglu_forward_kernel<T>, grid_for(n, 256), 256, 0, (T *)out, (const T *)inp, N, F));
}

extern "C" void cuda_swiglu_backward(void *dinp, const void *inp, const void *dout, int N, int F, int dt) {
    size_t n = (size_t)N * F;
    if (n)
        DT_SWITCH(dt, T,
                  MYR_LAUNCH(swiglu_backward_kernel<T>, grid_for(n, 256), 256, 0, (T *)dinp, (const T *)inp,
                             (const T *)dout, N, F));
}

/* ---- bias ---- */
template <typename TO, typename TB> __global__ void bias_add_kernel(TO *out, const TB *bias, int N, int C) {
    size_t total = (size_t)N * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x)
        out[i] = from_f32<TO>(to_f32(out[i]) + to_f32(bias[i % C]));
}

extern "C" void cuda_bias_add(void *out, int out_dt, const void *bias, int bias_dt, int N, int C) {
    size_t n = (size_t)N * C;
    if (n)
        DT_SWITCH2(out_dt, TO, bias_dt, TB,
                   MYR_LAUNCH((bias_add_kernel<TO, TB>), grid_for(n, 256), 256, 0, (TO *)out, (const TB *)bias, N, C));
}

template <typename T> struct ColumnValue {
    const T *x;
    int C;
    __device__ void operator()(int n, int c, float *s) const { s[0] += to_f32(x[(size_t)n * C + c]); }
};

extern "C" void cuda_bias_backward(float *dbias, const void *dout, int dout_dt, int N, int C) {
    DT_SWITCH(dout_dt, T, colsum_run<1>(dbias, (float *)NULL, N, C, ColumnValue<T>{(const T *)dout, C}));
}
