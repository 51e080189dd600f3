/* cpu_pointwise.c: element-wise ops: GELU (tanh approximation), SwiGLU, residual adds. */
#include "kernels/cpu/cpu_math.h"
#include "kernels/cpu/cpu_kernels.h"

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */
#define GELU_C 0.044715

/* 0.5 * (1 + tanh(u)) = sigmoid(2u): one vectorised exp instead of a libm tanh call. */
enum { BLOCK = 4096 }; /* elements per parallel iteration; the inner loop is vectorised */

void cpu_gelu_forward(real *out, const real *inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        int len = n - i0 < BLOCK ? (int)(n - i0) : BLOCK;
        const real *in = inp + i0;
        real *o = out + i0;
#pragma omp simd
        for (int i = 0; i < len; i++) {
            real x = in[i];
            real u = (real)GELU_K * (x + (real)GELU_C * x * x * x);
            o[i] = x * vsigmoid(2 * u);
        }
    }
}

/* d/dx [x * sig(2u)] = sig + x * 2 sig (1 - sig) * du/dx, since 1 - tanh(u)^2 = 4 sig (1 - sig). */
void cpu_gelu_backward(real *dinp, const real *inp, const real *dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        int len = n - i0 < BLOCK ? (int)(n - i0) : BLOCK;
        const real *in = inp + i0, *dy = dout + i0;
        real *dx = dinp + i0;
#pragma omp simd
        for (int i = 0; i < len; i++) {
            real x = in[i];
            real u = (real)GELU_K * (x + (real)GELU_C * x * x * x);
            real sig = vsigmoid(2 * u);
            real du = (real)GELU_K * (1 + 3 * (real)GELU_C * x * x);
            dx[i] = dy[i] * (sig + 2 * x * sig * (1 - sig) * du);
        }
    }
}

void cpu_swiglu_forward(real *out, const real *inp, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *g = inp + (size_t)n * 2 * F, *u = g + F;
        real *y = out + (size_t)n * F;
#pragma omp simd
        for (int f = 0; f < F; f++) {
            real sig = vsigmoid(g[f]);
            y[f] = g[f] * sig * u[f];
        }
    }
}

void cpu_swiglu_backward(real *dinp, const real *inp, const real *dout, int N, int F) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *g = inp + (size_t)n * 2 * F, *u = g + F, *dy = dout + (size_t)n * F;
        real *dg = dinp + (size_t)n * 2 * F, *du = dg + F;
#pragma omp simd
        for (int f = 0; f < F; f++) {
            real sig = vsigmoid(g[f]);
            real silu = g[f] * sig;
            dg[f] = dy[f] * u[f] * (sig + silu * (1 - sig));
            du[f] = dy[f] * silu;
        }
    }
}

void cpu_residual_forward(real *out, const real *a, const real *b, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void cpu_add_inplace(real *acc, const real *x, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}
