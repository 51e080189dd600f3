/* cuda_emu_planted.h: kernels with one planted bug each (tests/cuda_emu_planted.cu), built only
 * into test_kernels_cuda_emu, so its cases can prove that the emulator catches each class of bug
 * a real GPU punishes. `bug` 0 runs the correct form of the same kernel (the control: it must
 * run clean), 1 (or more) a planted form. Where the emulator aborts, the driver does not return;
 * the test runs those in a child process. */
#ifndef MYRIAD_TESTS_CUDA_EMU_PLANTED_H
#define MYRIAD_TESTS_CUDA_EMU_PLANTED_H

#ifdef __cplusplus
extern "C" {
#endif

enum { PLANTED_TILE = 64 }; /* floats per cp.async tile in planted_cp_async_wait */

/* Two cp.async groups fill a 64-float shared tile (floats 0-31, then 32-63); bug 1 waits with
 * cp.async.wait_group 1 where 0 is needed, then every float of the tile is read into out[64]. */
void planted_cp_async_wait(int bug, float out[PLANTED_TILE]);
/* ldmatrix of the tile of the most recent cp.async group: bug 1 after wait_group 1 (aborts) */
void planted_cp_async_ldmatrix(int bug);
/* cp.async with bug 1: the 16-byte destination 8 bytes off, 2: the 16-byte source 8 bytes off,
 * 3: an 8-byte cp.async 4 bytes off (bug 0 does an 8-byte copy 8 bytes off: aligned to its size) */
void planted_cp_async_misaligned(int bug);
/* ldmatrix with bug 1: a row address 8 bytes off 16, 2: a row address in global memory */
void planted_ldmatrix_misaligned(int bug);
/* cuda_vec.cuh's load4 with bug 1: fp32 (a float4) 4 bytes off 16, 2: bf16 (a uint2) 2 bytes off 8 */
void planted_vector_misaligned(int bug);
/* a launch with 64 KiB of dynamic shared memory; bug 1: without cudaFuncSetAttribute, bug 2:
 * with the attribute set to 60 KiB only, bug 3: 40 KiB dynamic and 16 KiB static, no attribute */
void planted_big_dynamic_smem(int bug);
/* Block 0 fills a static __shared__ table of 32 floats from `in`, every block copies the table to
 * out[block * 32 ..]: bug 1 has only block 0 fill it (blocks >= 1 read what an earlier block
 * left, if anything). Two launches, out[2][nblocks * 32]. */
void planted_stale_static_smem(int bug, const float in[32], float *out, int nblocks);
/* out[b] = b + 1 for blocks b < nblocks; bug 1: block b reads out[b - 1] (written by block
 * b - 1 in the same launch) and adds 1, which holds only if blocks run in grid order */
void planted_block_order(int bug, int *out, int nblocks);
/* n floats device -> pinned host with cuda_copy_to_host_async; before[] is read from the pinned
 * buffer right after the call (bug 1: no synchronization; bug 0 synchronizes first), after[]
 * after cuda_synchronize */
void planted_pinned_read(int bug, const float *in, float *before, float *after, int n);

#ifdef __cplusplus
}
#endif

#endif
