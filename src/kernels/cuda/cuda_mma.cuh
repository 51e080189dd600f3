/* cuda_mma.cuh: the warp-level tensor-core instructions the attention kernels use (sm_80+,
 * also on sm_90): mma.sync m16n8k16 bf16 x bf16 -> fp32, and ldmatrix (x4, plain or transposed)
 * to load fragments from shared memory. Fragment layouts (PTX ISA, "Matrix fragments for
 * mma.m16n8k16"), for lane l with g = l / 4 and q = l % 4, two bf16 per 32-bit register, the
 * lower column (or row, for B) in the low half:
 *   A 16x16 (row-major): a0 = (g, 2q..2q+1)  a1 = (g+8, 2q..)  a2 = (g, 2q+8..)  a3 = (g+8, 2q+8..)
 *   B 16x8  (k x n):     b0 = (k 2q..2q+1, n g)  b1 = (k 2q+8.., n g)
 *   C 16x8 fp32:         c0, c1 = (g, 2q..2q+1)  c2, c3 = (g+8, 2q..2q+1)
 * ldmatrix.x4: lanes 8i..8i+7 give the 16-byte row addresses of 8x8 matrix i; lane l receives
 * (l / 4, 2q..2q+1) of each matrix, or with .trans (2q..2q+1, l / 4).
 * Under MYRIAD_CUDA_EMU the same calls run on the CPU emulation (tests/cuda_emu.cc). */
#ifndef MYRIAD_KERNELS_CUDA_MMA_CUH
#define MYRIAD_KERNELS_CUDA_MMA_CUH

#include "kernels/cuda/cuda_common.cuh"

/* d += a * b */
__device__ __forceinline__ void mma_bf16(float d[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#ifdef MYRIAD_CUDA_EMU
    uint32_t b[2] = {b0, b1};
    emu::mma_bf16_16816(d, a, b, d);
#else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

/* d0 += a * b[0..1], d1 += a * b[2..3]: a 16-wide B tile from one ldsm_x4 feeds two n8 MMAs */
__device__ __forceinline__ void mma_bf16_x2(float d0[4], float d1[4], const uint32_t a[4], const uint32_t b[4]) {
    mma_bf16(d0, a, b[0], b[1]);
    mma_bf16(d1, a, b[2], b[3]);
}

__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const bf16 *row) {
#ifdef MYRIAD_CUDA_EMU
    emu::ldmatrix_x4(r, row, false);
#else
    unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const bf16 *row) {
#ifdef MYRIAD_CUDA_EMU
    emu::ldmatrix_x4(r, row, true);
#else
    unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
#endif
}

/* 16 bytes global -> shared without a trip through registers (cp.async, sm_80+); zeros when
 * !valid (src is then not read, but must still be a valid 16-byte-aligned address). Completion:
 * cp_async_commit() closes this thread's group of copies, cp_async_wait<N>() waits until at most
 * the N most recent of its groups are in flight; a __syncthreads() after it makes the data
 * visible to the block. The emulation lands each copy only at the wait that covers it (the
 * destination reads as NaN until then) and checks both addresses' alignment. */
__device__ __forceinline__ void cp_async_16(void *dst, const void *src, bool valid) {
#ifdef MYRIAD_CUDA_EMU
    emu::cp_async(dst, src, 16, valid ? 16 : 0);
#else
    unsigned addr = (unsigned)__cvta_generic_to_shared(dst);
    int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(bytes));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#ifdef MYRIAD_CUDA_EMU
    emu::cp_async_commit();
#else
    asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N> __device__ __forceinline__ void cp_async_wait() {
#ifdef MYRIAD_CUDA_EMU
    emu::cp_async_wait(N);
#else
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/* two fp32 values as one register of two bf16 (lo in the low half), rounded to nearest even */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    bf16 l = __float2bfloat16_rn(lo), h = __float2bfloat16_rn(hi);
    uint16_t ul, uh;
    memcpy(&ul, (const void *)&l, 2);
    memcpy(&uh, (const void *)&h, 2);
    return (uint32_t)ul | ((uint32_t)uh << 16);
}

#endif
