/* cpu_math.h: exp and the logistic function in a form the compiler vectorises inside
 * `omp simd` loops (glibc's expf/tanhf are scalar calls, and were a fifth of the step's
 * non-GEMM time). fp32: Cephes-style range reduction x = n*ln2 + r, a degree-6 polynomial
 * for e^r and 2^n built in the exponent bits; error within 2 ulp on [-87, 88], exact 0 below.
 * The fp64 build (gradient check) uses libm's exp, so the check stays exact. */
#ifndef MYRIAD_KERNELS_CPU_MATH_H
#define MYRIAD_KERNELS_CPU_MATH_H

#include <stdint.h>

#include "kernels/real.h"

#ifdef MYRIAD_F64
static inline real vexp(real x) { return exp(x); }
#else
static inline float vexp(float x) {
    float xc = x < -87.0f ? -87.0f : x > 88.0f ? 88.0f : x;
    /* round to nearest by the 1.5 * 2^23 trick: floorf would not vectorise without -ffast-math */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * r * r + r + 1.0f;
    union { int32_t i; float f; } scale = {.i = ((int32_t)n + 127) << 23};
    return x < -87.0f ? 0.0f : y * scale.f;
}
#endif

/* 1 / (1 + e^-x), safe for any x (e^-x may reach the clamp, never inf). */
static inline real vsigmoid(real x) { return 1 / (1 + vexp(-x)); }

#endif
