/* cpu_pointwise.c: element-wise ops: GELU (tanh approximation), SwiGLU, residual adds. */
#include "kernels/kernels.h"

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_C 0.044715

void gelu_forward(real *out, const real *inp, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_K * (x + (real)GELU_C * x * x * x);
        out[i] = (real)0.5 * x * (1 + R_TANH(u));
    }
}

void gelu_backward(real *dinp, const real *inp, const real *dout, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        real x = inp[i];
        real u = (real)GELU_K * (x + (real)GELU_C * x * x * x);
        real t = R_TANH(u);
        real sech2 = 1 - t * t;
        real du = (real)GELU_K * (1 + 3 * (real)GELU_C * x * x);
        dinp[i] = dout[i] * ((real)0.5 * (1 + t) + (real)0.5 * x * sech2 * du);
    }
}

void swiglu_forward(real *out, const real *inp, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *g = inp + (size_t)n * 2 * F, *u = g + F;
        real *y = out + (size_t)n * F;
        for (int f = 0; f < F; f++) {
            real sig = 1 / (1 + R_EXP(-g[f]));
            y[f] = g[f] * sig * u[f];
        }
    }
}

void swiglu_backward(real *dinp, const real *inp, const real *dout, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *g = inp + (size_t)n * 2 * F, *u = g + F, *dy = dout + (size_t)n * F;
        real *dg = dinp + (size_t)n * 2 * F, *du = dg + F;
        for (int f = 0; f < F; f++) {
            real sig = 1 / (1 + R_EXP(-g[f]));
            real silu = g[f] * sig;
            dg[f] = dy[f] * u[f] * (sig + silu * (1 - sig));
            du[f] = dy[f] * silu;
        }
    }
}

void residual_forward(real *out, const real *a, const real *b, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void add_inplace(real *acc, const real *x, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}
