/* cuda_emu.h: runs the CUDA backend's kernels on the CPU, for tests on machines without a GPU.
 * The same src/kernels/cuda/cuda_*.cu sources are compiled by the host C++ compiler with
 * -DMYRIAD_CUDA_EMU: this header turns the CUDA keywords into C++ and provides the execution
 * model — each CUDA thread of a block is a fiber (ucontext) and runs until it reaches a barrier
 * (__syncthreads, or a warp collective: shuffles, votes, ldmatrix, mma), so blocks run one at a
 * time with real barrier semantics, in alternating thread orders to expose missing barriers.
 * "Device memory" is host memory; the CUDA runtime calls the backend makes are emulated in
 * tests/cuda_emu_runtime.cc, and cuBLASLt by a reference GEMM with the documented column-major
 * semantics (so the backend's row-major mapping and epilogue settings are tested too).
 * It is strict where real GPUs punish quietly (tests/cuda_emu.cc has the details):
 *   - cp.async lands at the cp.async.wait_group that covers it (groups counted per thread as the
 *     hardware counts them); its destination reads as NaN until then, and ldmatrix of it aborts;
 *   - ldmatrix rows and cp.async addresses must be aligned to their size and in shared memory;
 *     every typed access (float4, uint2, uint32_t over bf16...) is checked for its alignment by
 *     the compiler's -fsanitize=alignment (the Makefile's EMU_FLAGS);
 *   - a launch asking more than 48 KiB of dynamic shared memory fails, as on the device, unless
 *     cudaFuncSetAttribute(MaxDynamicSharedMemorySize) allowed it for that kernel;
 *   - static shared memory (declared with MYR_SHARED) and dynamic shared memory read as NaN at
 *     the start of every block;
 *   - blocks run reversed or in a seeded shuffle, never in grid order;
 *   - async copies to or from pinned host memory complete only when the host synchronizes.
 * What it cannot show: timing, real memory-ordering races between warps, blocks running at the
 * same time, and the tensor cores' internal rounding (its mma sums in fp32). */
#ifndef MYRIAD_TESTS_CUDA_EMU_H
#define MYRIAD_TESTS_CUDA_EMU_H

#include <cuda_runtime_api.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#define __global__
#define __device__
#define __host__
/* Static shared memory is declared with MYR_SHARED (below), which the emulator can see; the bare
 * keyword would be an ordinary static variable that keeps its contents from block to block. */
#define __shared__ __shared___is_not_emulated_declare_with_MYR_SHARED
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace emu {
struct Thread {
    uint3 tid;
    int lane, warp;
};
extern Thread *current;
extern uint3 block_idx;
extern dim3 block_dim, grid_dim;
void syncthreads();
void warp_barrier();
unsigned char *warp_slots(); /* 32 lanes x 64 bytes: the current warp's exchange area */
unsigned char *dynamic_smem();
[[noreturn]] void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* names kernel, block, thread */
/* A MYR_SHARED variable: the first thread of each block to reach its declaration poisons it
 * (and registers it as shared memory for the cp.async and ldmatrix checks). */
struct SharedSite {
    void *addr;
    size_t bytes;
    unsigned char *inflight; /* one flag per 4 bytes: a cp.async is in flight there */
    long block, launch;      /* the block and launch that last entered it */
};
void shared_enter(SharedSite *site, void *addr, size_t bytes);
/* Between the two halves of the emulator (cuda_emu.cc runs kernels, cuda_emu_runtime.cc is the
 * runtime): a launch first completes what its stream has queued, may use up to
 * dynamic_smem_allowed(kernel) bytes, and leaves a refusal for cudaGetLastError. */
enum : size_t { DYNAMIC_SMEM_DEFAULT = 48 * 1024, DYNAMIC_SMEM_OPTIN_MAX = 227 * 1024 };
void stream_order(cudaStream_t stream);
size_t dynamic_smem_allowed(const void *kernel);
void set_last_error(cudaError_t e);
/* Runs every block of the grid now (after the stream's queued copies), or, where the device
 * would refuse the launch, runs nothing and leaves the error for cudaGetLastError. */
void launch(const char *name, const void *kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
            const std::function<void()> &body);
/* the warp-level matrix instructions the tensor-core kernels use (PTX ISA semantics) */
void mma_bf16_16816(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4]);
void ldmatrix_x4(uint32_t r[4], const void *row_address, bool trans);
/* cp.async.ca/cg.shared.global [dst], [src], bytes, src_bytes (bytes 4, 8 or 16; the rest of the
 * destination past src_bytes is zero-filled), commit_group, wait_group n, wait_all */
void cp_async(void *dst, const void *src, int bytes, int src_bytes);
void cp_async_commit();
void cp_async_wait(int n);
void cp_async_wait_all();
int lane();

template <typename T> T exchange(T v, int src_lane) {
    static_assert(sizeof(T) <= 64, "exchange of at most 64 bytes");
    unsigned char *s = warp_slots();
    memcpy(s + 64 * lane(), &v, sizeof(T));
    warp_barrier();
    T r;
    memcpy(&r, s + 64 * (src_lane & 31), sizeof(T));
    warp_barrier();
    return r;
}
} // namespace emu

#define threadIdx (emu::current->tid)
#define blockIdx (emu::block_idx)
#define blockDim (emu::block_dim)
#define gridDim (emu::grid_dim)

inline void __syncthreads() { emu::syncthreads(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::warp_barrier(); }
inline void __threadfence() {}
inline void __threadfence_block() {}

template <typename T> T __shfl_xor_sync(unsigned, T v, int lane_mask, int width = 32) {
    int l = emu::lane();
    int src = l ^ lane_mask;
    if ((src & ~(width - 1)) != (l & ~(width - 1))) src = l;
    return emu::exchange(v, src);
}
template <typename T> T __shfl_sync(unsigned, T v, int src_lane, int width = 32) {
    int l = emu::lane();
    return emu::exchange(v, (l & ~(width - 1)) + (src_lane & (width - 1)));
}
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned delta, int width = 32) {
    int l = emu::lane();
    int src = (l & (width - 1)) + (int)delta < width ? l + (int)delta : l;
    return emu::exchange(v, src);
}
template <typename T> T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
    int l = emu::lane();
    int src = (l & (width - 1)) >= (int)delta ? l - (int)delta : l;
    return emu::exchange(v, src);
}
unsigned __ballot_sync(unsigned mask, int pred);
unsigned __match_any_sync(unsigned mask, unsigned value);
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == __ballot_sync(mask, 1); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline unsigned __lanemask_lt_emu() { return (1u << emu::lane()) - 1u; }

template <typename T> T atomicAdd(T *p, T v) { T old = *p; *p = old + v; return old; } /* fibers never interleave here */
template <typename T> T __ldg(const T *p) { return *p; }

inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }

/* kernel launch: runs every block of the grid now, on this thread; a launch the device would
 * refuse fails through the same cudaGetLastError check as the real macro (cuda_common.cuh) */
#define MYR_LAUNCH(kernel, grid, block, smem, ...)                                                      \
    do {                                                                                                \
        auto myr_kernel_ = kernel;                                                                      \
        emu::launch(#kernel, (const void *)myr_kernel_, dim3(grid), dim3(block), (smem), cuda_current_stream(), \
                    [&]() { myr_kernel_(__VA_ARGS__); });                                               \
        CUDA_CHECK(cudaGetLastError());                                                                 \
    } while (0)
#define MYR_DYNAMIC_SMEM(type, name) type *name = reinterpret_cast<type *>(emu::dynamic_smem())
template <typename T> using myr_shared_type = T;
#define MYR_SHARED(type, name)                   \
    static myr_shared_type<type> name;           \
    static emu::SharedSite myr_shared_site_##name; \
    emu::shared_enter(&myr_shared_site_##name, &name, sizeof(name))

#endif
