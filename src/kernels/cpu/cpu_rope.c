/* cpu_rope.c: rotary position embeddings in the rotate-half convention (as Hugging Face
 * Llama): dimension i pairs with i + hd/2 and turns at inv_freq[i] per position (theta^(-2i/hd),
 * or its rope_scaling variant: model/rope_scaling.c). The tables are built the way transformers
 * builds them (angles in fp32) so logits match. */
#include <math.h>

#include "kernels/cpu/cpu_kernels.h"

void cpu_rope_tables(real *cos_t, real *sin_t, int max_seq, int hd, const float *inv_freq) {
    int half = hd / 2;
    for (int i = 0; i < half; i++) {
        for (int p = 0; p < max_seq; p++) {
            float angle = (float)p * inv_freq[i];
            cos_t[(size_t)p * half + i] = (real)cosf(angle);
            sin_t[(size_t)p * half + i] = (real)sinf(angle);
        }
    }
}

void cpu_rope_apply(real *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                int stride, int inverse) {
    int half = hd / 2;
    int nheads = heads + kv_heads; /* q heads then k heads, contiguous */
    real sign = inverse ? -1 : 1;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *c = cos_t + (size_t)(n % T) * half, *s = sin_t + (size_t)(n % T) * half;
        for (int h = 0; h < nheads; h++) {
            real *x = qkv + (size_t)n * stride + (size_t)h * hd;
#pragma omp simd
            for (int i = 0; i < half; i++) {
                real a = x[i], b = x[i + half], sn = sign * s[i];
                x[i] = a * c[i] - b * sn;
                x[i + half] = b * c[i] + a * sn;
            }
        }
    }
}
