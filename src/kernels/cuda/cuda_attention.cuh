/* cuda_attention.cuh: the pieces the two attention implementations share (cuda_attention.cu
 * chooses between them): the fp32-arithmetic kernels and the tensor-core ones. */
#ifndef MYRIAD_KERNELS_CUDA_ATTENTION_CUH
#define MYRIAD_KERNELS_CUDA_ATTENTION_CUH

#include "kernels/cuda/cuda_common.cuh"

void attention_forward_simple(void *out, float *lse, const void *qkv, int B, int T, int H, int KV, int hd, int dt);
void attention_backward_simple(void *dqkv, const void *dout, const void *qkv, const float *lse, const float *D, int B,
                               int T, int H, int KV, int hd, int dt);
/* D[b, h, t] = dot(dO, O) of each row and head, in scratch (the backward's first step) */
float *attention_backward_rowdots(const void *dout, const void *out, int B, int T, int H, int hd, int dt);

/* tensor cores (mma.sync bf16, fp32 accumulation): bf16 storage, hd 64 or 128 */
int attention_tc_supports(int dt, int hd);
void attention_forward_tc(void *out, float *lse, const void *qkv, int B, int T, int H, int KV, int hd);
void attention_backward_tc(void *dqkv, const void *dout, const void *qkv, const float *lse, const float *D, int B,
                           int T, int H, int KV, int hd);

#endif
