/* cuda_vec.cuh: four consecutive elements loaded or stored as one access (16 bytes of fp32,
 * 8 of bf16), converted to and from fp32 registers. Memory-bound kernels move groups of four
 * when the pointers are aligned and the count is a multiple of four, else single elements. */
#ifndef MYRIAD_KERNELS_CUDA_VEC_CUH
#define MYRIAD_KERNELS_CUDA_VEC_CUH

#include "kernels/cuda/cuda_common.cuh"

__device__ __forceinline__ void load4(const float *p, float f[4]) {
    float4 v = *reinterpret_cast<const float4 *>(p);
    f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
}
__device__ __forceinline__ void load4(const bf16 *p, float f[4]) {
    uint2 v = *reinterpret_cast<const uint2 *>(p);
    bf16 h[4];
    memcpy((void *)h, &v, sizeof v);
    for (int i = 0; i < 4; i++) f[i] = __bfloat162float(h[i]);
}
__device__ __forceinline__ void store4(float *p, const float f[4]) {
    *reinterpret_cast<float4 *>(p) = make_float4(f[0], f[1], f[2], f[3]);
}
__device__ __forceinline__ void store4(bf16 *p, const float f[4]) {
    bf16 h[4];
    for (int i = 0; i < 4; i++) h[i] = __float2bfloat16_rn(f[i]);
    uint2 v;
    memcpy(&v, (const void *)h, sizeof v);
    *reinterpret_cast<uint2 *>(p) = v;
}

static inline int aligned4(const void *p, int dt) { return ((uintptr_t)p % (4 * cuda_dtype_size(dt))) == 0; }

#endif
