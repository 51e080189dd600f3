/* cuda_emu_planted.cu: kernels with one planted bug each, the classes of bug a real GPU punishes
 * and a lenient emulation would pass: a miscounted cp.async wait, misaligned cp.async, ldmatrix
 * and vector accesses, more than 48 KiB of dynamic shared memory without the attribute, a read of
 * static shared memory another block wrote, a dependence on block order, and a host read of an
 * asynchronous copy before its synchronization. Compiled only into test_kernels_cuda_emu (with
 * the emulation's flags); the cases of tests/test_kernels_cuda.c check that the emulator reports
 * each, and that the correct form of each kernel (bug 0) runs clean. Written as CUDA, so the same
 * code would show the same bugs on a device. */
#include "cuda_emu_planted.h"

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_mma.cuh"
#include "kernels/cuda/cuda_vec.cuh"

#include <string.h>

/* an 8-byte cp.async (.ca: the 4- and 8-byte forms exist only there) */
__device__ __forceinline__ void cp_async_8(void *dst, const void *src) {
#ifdef MYRIAD_CUDA_EMU
    emu::cp_async(dst, src, 8, 8);
#else
    unsigned addr = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(addr), "l"(src));
#endif
}

static float *device_floats(const float *host, int n) {
    float *d = (float *)cuda_alloc((size_t)n * sizeof(float));
    if (host) cuda_copy_to_device(d, host, (size_t)n * sizeof(float));
    cuda_synchronize();
    return d;
}

/* ---- a miscounted cp.async.wait_group ---- */

template <int WAIT> __global__ void cp_async_wait_kernel(float *out, const float *in) {
    MYR_SHARED(float4[PLANTED_TILE / 4], tile4); /* float4: 16-byte aligned, as cp.async needs */
    float *tile = reinterpret_cast<float *>(tile4);
    const int t = threadIdx.x; /* 8 threads, each 16 bytes of each half */
    cp_async_16(tile + 4 * t, in + 4 * t, true);
    cp_async_commit();
    cp_async_16(tile + 32 + 4 * t, in + 32 + 4 * t, true);
    cp_async_commit();
    cp_async_wait<WAIT>(); /* both groups are read below: WAIT must be 0 */
    __syncthreads();
    for (int i = t; i < PLANTED_TILE; i += blockDim.x) out[i] = tile[i];
}

extern "C" void planted_cp_async_wait(int bug, float out[PLANTED_TILE]) {
    float in[PLANTED_TILE];
    for (int i = 0; i < PLANTED_TILE; i++) in[i] = (float)(i + 1);
    float *din = device_floats(in, PLANTED_TILE), *dout = device_floats(NULL, PLANTED_TILE);
    if (bug) MYR_LAUNCH(cp_async_wait_kernel<1>, 1, 8, 0, dout, din);
    else MYR_LAUNCH(cp_async_wait_kernel<0>, 1, 8, 0, dout, din);
    cuda_copy_to_host(out, dout, PLANTED_TILE * sizeof(float));
    cuda_free(din);
    cuda_free(dout);
}

/* tile A (group 1) then tile B (group 2), 32 rows of 16 bytes each; ldmatrix reads tile B */
template <int WAIT> __global__ void cp_async_ldmatrix_kernel(uint32_t *out, const bf16 *in) {
    MYR_DYNAMIC_SMEM(bf16, smem);
    const int lane = threadIdx.x;
    cp_async_16(smem + 8 * lane, in + 8 * lane, true);
    cp_async_commit();
    cp_async_16(smem + 256 + 8 * lane, in + 256 + 8 * lane, true);
    cp_async_commit();
    cp_async_wait<WAIT>(); /* tile B is the most recent group: WAIT must be 0 */
    __syncthreads();
    uint32_t r[4];
    ldsm_x4(r, smem + 256 + 8 * lane);
    for (int i = 0; i < 4; i++) out[4 * lane + i] = r[i];
}

extern "C" void planted_cp_async_ldmatrix(int bug) {
    bf16 *din = (bf16 *)cuda_alloc(512 * sizeof(bf16));
    uint32_t *dout = (uint32_t *)cuda_alloc(128 * sizeof(uint32_t));
    if (bug) MYR_LAUNCH(cp_async_ldmatrix_kernel<1>, 1, 32, 1024, dout, din);
    else MYR_LAUNCH(cp_async_ldmatrix_kernel<0>, 1, 32, 1024, dout, din);
    cuda_synchronize();
    cuda_free(din);
    cuda_free(dout);
}

/* ---- misaligned cp.async and ldmatrix ---- */

__global__ void cp_async_misaligned_kernel(const float *in, int bug) {
    MYR_DYNAMIC_SMEM(unsigned char, smem);
    if (bug == 1) cp_async_16(smem + 8, in, true);
    else if (bug == 2) cp_async_16(smem, (const unsigned char *)in + 8, true);
    else if (bug == 3) cp_async_8(smem + 4, in);
    else cp_async_8(smem + 8, (const unsigned char *)in + 8);
    cp_async_commit();
    cp_async_wait<0>();
}

extern "C" void planted_cp_async_misaligned(int bug) {
    float *din = device_floats(NULL, 64);
    MYR_LAUNCH(cp_async_misaligned_kernel, 1, 1, 64, din, bug);
    cuda_synchronize();
    cuda_free(din);
}

__global__ void ldmatrix_misaligned_kernel(const bf16 *global, int bug) {
    MYR_DYNAMIC_SMEM(bf16, smem);
    const int lane = threadIdx.x;
    for (int i = lane; i < 264; i += 32) smem[i] = __float2bfloat16_rn(1.0f);
    __syncthreads();
    const bf16 *row = smem + 8 * lane;
    if (bug == 1 && lane == 5) row += 4; /* 8 bytes off */
    if (bug == 2 && lane == 5) row = global;
    uint32_t r[4];
    ldsm_x4(r, row);
}

extern "C" void planted_ldmatrix_misaligned(int bug) {
    bf16 *d = (bf16 *)cuda_alloc(512 * sizeof(bf16));
    MYR_LAUNCH(ldmatrix_misaligned_kernel, 1, 32, 528, d, bug);
    cuda_synchronize();
    cuda_free(d);
}

/* ---- a misaligned vector access ---- */

template <typename T> __global__ void vector_kernel(float *out, const T *in, int offset) {
    float f[4];
    load4(in + offset, f); /* four elements as one access: 16 bytes of fp32, 8 of bf16 */
    for (int i = 0; i < 4; i++) out[i] = f[i];
}

extern "C" void planted_vector_misaligned(int bug) {
    float *out = device_floats(NULL, 4), *in = device_floats(NULL, 16);
    if (bug == 2) MYR_LAUNCH(vector_kernel<bf16>, 1, 1, 0, out, (const bf16 *)in, 1);
    else MYR_LAUNCH(vector_kernel<float>, 1, 1, 0, out, in, bug == 1 ? 1 : 4);
    cuda_synchronize();
    cuda_free(out);
    cuda_free(in);
}

/* ---- dynamic shared memory above 48 KiB ---- */

__global__ void big_smem_kernel(float *out) {
    MYR_DYNAMIC_SMEM(float, smem);
    smem[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = smem[threadIdx.x];
}

/* 16 KiB of static shared memory besides the dynamic */
__global__ void static_and_dynamic_smem_kernel(float *out) {
    MYR_SHARED(float[4096], table);
    MYR_DYNAMIC_SMEM(float, smem);
    table[threadIdx.x] = 1.0f;
    smem[threadIdx.x] = 2.0f;
    __syncthreads();
    out[threadIdx.x] = table[threadIdx.x] + smem[threadIdx.x];
}

extern "C" void planted_big_dynamic_smem(int bug) {
    const size_t bytes = 64 * 1024;
    float *out = device_floats(NULL, 32);
    if (bug == 3) { /* 40 KiB dynamic + 16 KiB static, no attribute: over 48 KiB together */
        MYR_LAUNCH(static_and_dynamic_smem_kernel, 1, 32, 40 * 1024, out);
        cuda_synchronize();
        cuda_free(out);
        return;
    }
    if (bug == 0)
        CUDA_CHECK(cudaFuncSetAttribute((const void *)big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        (int)bytes));
    if (bug == 2)
        CUDA_CHECK(cudaFuncSetAttribute((const void *)big_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        60 * 1024));
    MYR_LAUNCH(big_smem_kernel, 1, 32, bytes, out);
    cuda_synchronize();
    cuda_free(out);
}

/* ---- static shared memory another block wrote ---- */

__global__ void stale_static_kernel(float *out, const float *in, int bug) {
    MYR_SHARED(float[32], table);
    if (!bug || blockIdx.x == 0) table[threadIdx.x] = in[threadIdx.x]; /* bug: "block 0 fills the cache" */
    __syncthreads();
    out[blockIdx.x * 32 + threadIdx.x] = table[threadIdx.x];
}

extern "C" void planted_stale_static_smem(int bug, const float in[32], float *out, int nblocks) {
    float *din = device_floats(in, 32), *dout = device_floats(NULL, nblocks * 32);
    for (int launch = 0; launch < 2; launch++) {
        MYR_LAUNCH(stale_static_kernel, nblocks, 32, 0, dout, din, bug);
        cuda_copy_to_host(out + (size_t)launch * nblocks * 32, dout, (size_t)nblocks * 32 * sizeof(float));
    }
    cuda_free(din);
    cuda_free(dout);
}

/* ---- a dependence on block order ---- */

__global__ void block_chain_kernel(volatile int *out, int bug) {
    if (threadIdx.x != 0) return;
    const int b = blockIdx.x;
    out[b] = bug && b > 0 ? out[b - 1] + 1 : b + 1; /* bug: block b - 1 may not have run yet */
}

extern "C" void planted_block_order(int bug, int *out, int nblocks) {
    int *d = (int *)cuda_alloc((size_t)nblocks * sizeof(int));
    MYR_LAUNCH(block_chain_kernel, nblocks, 32, 0, d, bug);
    cuda_copy_to_host(out, d, (size_t)nblocks * sizeof(int));
    cuda_free(d);
}

/* ---- a host read of an asynchronous copy before its synchronization ---- */

extern "C" void planted_pinned_read(int bug, const float *in, float *before, float *after, int n) {
    float *d = device_floats(in, n);
    float *pinned = (float *)cuda_host_alloc((size_t)n * sizeof(float));
    cuda_copy_to_host_async(pinned, d, (size_t)n * sizeof(float));
    if (!bug) cuda_synchronize();
    memcpy(before, pinned, (size_t)n * sizeof(float)); /* bug: the copy may still be in flight */
    cuda_synchronize();
    memcpy(after, pinned, (size_t)n * sizeof(float));
    cuda_host_free(pinned);
    cuda_free(d);
}
