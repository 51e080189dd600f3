/* cuda_common.cuh: what every cuda_*.cu file shares: error checks, the launch macro, the stream
 * and scratch memory of the backend's context, bf16/fp32 loads and stores, and deterministic
 * warp and block reductions (a fixed tree, so the same inputs give the same bits).
 * Compiled by nvcc for the device, or by the host compiler with -DMYRIAD_CUDA_EMU for the CPU
 * emulation the tests use (tests/cuda_emu.h). */
#ifndef MYRIAD_KERNELS_CUDA_COMMON_CUH
#define MYRIAD_KERNELS_CUDA_COMMON_CUH

#ifdef MYRIAD_CUDA_EMU
#include "cuda_emu.h"
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#endif

#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/cuda_backend.h"

typedef __nv_bfloat16 bf16;

extern "C" void myr_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* ---- errors: a failing CUDA call is fatal, naming the call ---- */
void cuda_fail(cudaError_t e, const char *what, const char *file, int line) __attribute__((noreturn));
#define CUDA_CHECK(call)                                                        \
    do {                                                                        \
        cudaError_t myr_e_ = (call);                                            \
        if (myr_e_ != cudaSuccess) cuda_fail(myr_e_, #call, __FILE__, __LINE__); \
    } while (0)

#ifndef MYRIAD_CUDA_EMU
/* kernel<<<grid, block, smem, stream>>>(args) with the launch checked. The kernel may be a
 * template instance in parentheses: MYR_LAUNCH((k<float, 64>), ...). */
#define MYR_LAUNCH(kernel, grid, block, smem, ...)                                       \
    do {                                                                                 \
        auto myr_kernel_ = kernel;                                                       \
        myr_kernel_<<<(grid), (block), (smem), cuda_current_stream()>>>(__VA_ARGS__);    \
        CUDA_CHECK(cudaGetLastError());                                                  \
    } while (0)
#define MYR_DYNAMIC_SMEM(type, name)                                  \
    extern __shared__ __align__(16) unsigned char myr_dynamic_smem_[]; \
    type *name = reinterpret_cast<type *>(myr_dynamic_smem_)
/* A kernel's static shared memory: MYR_SHARED(float[32], sh) is `__shared__ float sh[32]`. A
 * macro rather than the keyword so that the emulation can see every such variable and hand
 * each block fresh, poisoned memory (tests/cuda_emu.h), as the device does. */
template <typename T> using myr_shared_type = T;
#define MYR_SHARED(type, name) __shared__ myr_shared_type<type> name
#endif

/* ---- the context (cuda_context.cu) ---- */
cudaStream_t cuda_current_stream();
/* Device scratch of at least `bytes`, valid until the next call (every op runs on one stream,
 * so an op's kernels finish with it before the next op's start). */
void *cuda_scratch(size_t bytes);
int cuda_sm_count();
int cuda_cc_major();
int cuda_tf32_allowed();
int cuda_attention_choice();
void cuda_require_init(const char *what);

/* ---- loads and stores in either storage type; arithmetic is fp32 ---- */
__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(bf16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float x) { return __float2bfloat16_rn(x); }

/* ---- deterministic reductions: a butterfly inside the warp, then warp partials in order ---- */
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
 * `sh` is __shared__ scratch of 32 values, free again when this returns. */
template <typename F> __device__ __forceinline__ F block_sum_with(F v, F *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads(); /* sh may still be read by a previous call */
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    F total = 0;
    for (int w = 0; w < warps; w++) total += sh[w];
    return total;
}
__device__ __forceinline__ float block_max_with(float v, float *sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    float m = -INFINITY;
    for (int w = 0; w < warps; w++) m = fmaxf(m, sh[w]);
    return m;
}

/* Dispatch on a storage type: DT_SWITCH(dt, T, call using T). */
#define DT_SWITCH(dt, T, ...)                                     \
    do {                                                          \
        if ((dt) == CUDA_BF16) { typedef bf16 T; __VA_ARGS__; }   \
        else { typedef float T; __VA_ARGS__; }                    \
    } while (0)
#define DT_SWITCH2(dt1, T1, dt2, T2, ...) DT_SWITCH(dt1, T1, DT_SWITCH(dt2, T2, __VA_ARGS__))

static inline unsigned ceil_div_u(size_t a, size_t b) { return (unsigned)((a + b - 1) / b); }
/* blocks for a grid-stride loop over n items: enough to fill the device, no more than needed */
static inline unsigned grid_for(size_t n, int threads) {
    size_t want = (n + threads - 1) / threads, cap = (size_t)cuda_sm_count() * 16;
    if (want < 1) want = 1;
    return (unsigned)(want < cap ? want : cap);
}

#endif
