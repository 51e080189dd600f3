/* cuda_rope.cu: rotary position embeddings (rotate-half), in place on the q and k heads of qkv
 * rows. The cos/sin tables are built on the host by the CPU backend's cpu_rope_tables (the way
 * transformers builds them) and copied over, so both backends rotate by the same numbers. */
#include <stdlib.h>

#include "kernels/cuda/cuda_common.cuh"

extern "C" void cpu_rope_tables(float *cos_t, float *sin_t, int max_seq, int hd, const float *inv_freq); /* cpu_rope.c */

extern "C" void cuda_rope_tables(float *cos_t, float *sin_t, int max_seq, int hd, const float *inv_freq) {
    size_t n = (size_t)max_seq * (hd / 2);
    float *hc = (float *)malloc(n * sizeof(float)), *hs = (float *)malloc(n * sizeof(float));
    if (!hc || !hs) myr_die("out of host memory for the rotary tables");
    cpu_rope_tables(hc, hs, max_seq, hd, inv_freq);
    cuda_copy_to_device(cos_t, hc, n * sizeof(float)); /* pageable source: returns once copied */
    cuda_copy_to_device(sin_t, hs, n * sizeof(float));
    cuda_synchronize();
    free(hc);
    free(hs);
}

template <typename T>
__global__ void rope_kernel(T *qkv, const float *cos_t, const float *sin_t, int N, int T_, int nheads, int hd,
                            int stride, float sign) {
    int half = hd / 2;
    size_t total = (size_t)N * nheads * half;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int j = (int)(i % half);
        size_t nh = i / half;
        int h = (int)(nh % nheads), n = (int)(nh / nheads);
        T *x = qkv + (size_t)n * stride + (size_t)h * hd;
        float c = cos_t[(size_t)(n % T_) * half + j], sn = sign * sin_t[(size_t)(n % T_) * half + j];
        float a = to_f32(x[j]), b = to_f32(x[j + half]);
        x[j] = from_f32<T>(a * c - b * sn);
        x[j + half] = from_f32<T>(b * c + a * sn);
    }
}

extern "C" void cuda_rope_apply(void *qkv, int dt, const float *cos_t, const float *sin_t, int N, int T, int heads,
                                int kv_heads, int hd, int stride, int inverse) {
    size_t n = (size_t)N * (heads + kv_heads) * (hd / 2);
    if (n)
        DT_SWITCH(dt, TT,
                  MYR_LAUNCH(rope_kernel<TT>, grid_for(n, 256), 256, 0, (TT *)qkv, cos_t, sin_t, N, T, heads + kv_heads,
                             hd, stride, inverse ? -1.0f : 1.0f));
}
