/* cuda_backend.h: the CUDA implementation of the kernel boundary, as plain C-callable functions
 * (src/kernels/cuda/cuda_*.cu). Each op of kernels.h has a cuda_ counterpart with the same argument
 * order and meaning, plus the storage type of each activation tensor:
 *   CUDA_F32  fp32 storage;
 *   CUDA_BF16 bfloat16 storage (the top half of an fp32, rounded to nearest even).
 * Arithmetic is fp32 everywhere (GEMMs accumulate in fp32 on the tensor cores; norms, softmax and
 * loss statistics in fp32, sums the CPU backend does in double in double). Parameters, their
 * gradients and the AdamW state are fp32 (a bf16 copy of the weights feeds the bf16 GEMMs).
 *
 * All pointers are device memory unless the comment says host. Calls are asynchronous on one
 * stream (cuda_stream()) unless they return a value computed on the device, which waits.
 * Results are deterministic: the same inputs give the same bits run to run (no atomics on
 * floats; every reduction has an order fixed by the shapes; cuBLASLt on one stream with a fixed
 * workspace). Errors in the CUDA runtime are fatal, with the call and the message. */
#ifndef MYRIAD_KERNELS_CUDA_BACKEND_H
#define MYRIAD_KERNELS_CUDA_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { CUDA_F32 = 0, CUDA_BF16 = 1 };
size_t cuda_dtype_size(int dt);

/* ---- devices and the backend's context ---- */
/* Visible devices; 0 when there is no driver or no device (never fails). */
int cuda_device_count(void);
/* The same, with why none in why (may be NULL) when it returns 0. */
int cuda_device_count_why(char *why, size_t why_size);
typedef struct {
    char name[256];
    size_t total_bytes, free_bytes;
    int sm_count, cc_major, cc_minor;
} CudaDeviceInfo;
/* 0 on success; -1 with a one-line reason in err. */
int cuda_device_info(int device, CudaDeviceInfo *info, char *err, size_t errlen);
/* Select the device, create the stream, load cuBLASLt (dlopen: the binary does not need it to
 * start). 0 on success; -1 with a one-line reason in err (no device, cuBLASLt missing, ...). */
int cuda_init(int device, char *err, size_t errlen);
int cuda_initialized(void);
void cuda_shutdown(void);
/* fp32 GEMMs on the TF32 tensor cores (10-bit mantissa inputs): off unless allowed. */
void cuda_set_tf32(int allow);
/* Attention implementation: CUDA_ATTN_AUTO (tensor cores for bf16 with head size 64 or 128 on
 * sm_80+, else the fp32-arithmetic kernels), or force one. MYRIAD_CUDA_ATTN=simple|tc overrides. */
enum { CUDA_ATTN_AUTO = 0, CUDA_ATTN_SIMPLE = 1, CUDA_ATTN_TC = 2 };
void cuda_set_attention_impl(int impl);
int cuda_attention_impl_for(int dt, int hd); /* the one auto would pick */
void cuda_synchronize(void);
void *cuda_stream(void); /* the cudaStream_t every call runs on */

/* ---- memory ---- */
void *cuda_try_alloc(size_t bytes); /* zeroed; NULL when the device cannot hold it */
void *cuda_alloc(size_t bytes);     /* zeroed; dies naming the bytes asked and free */
void cuda_free(void *p);
void cuda_zero(void *p, size_t bytes);
void cuda_copy_to_device(void *dst, const void *host_src, size_t bytes); /* stream-ordered; waits for a pageable src */
void cuda_copy_to_host(void *host_dst, const void *src, size_t bytes);   /* returns when the bytes are in dst */
void cuda_copy_to_host_async(void *pinned_dst, const void *src, size_t bytes); /* stream-ordered */
void cuda_copy_device(void *dst, const void *src, size_t bytes);
void *cuda_host_alloc(size_t bytes);     /* pinned host memory (dies when it cannot) */
void *cuda_host_try_alloc(size_t bytes); /* the same; NULL when it cannot */
void cuda_host_free(void *p);
size_t cuda_bytes_in_use(void); /* by cuda_alloc, now and at peak */
size_t cuda_bytes_peak(void);
void cuda_reset_peak(void);
/* dst[i] = src[i] converted (fp32 -> bf16 rounds to nearest even) */
void cuda_convert(void *dst, int dst_dt, const void *src, int src_dt, size_t n);

/* ---- GEMM (cuBLASLt), row-major as kernels.h's gemm: C[M,N] (= or += when accumulate)
 * op(A) @ op(B); A and B share in_dt; C has c_dt. bf16 inputs run on the tensor cores with
 * fp32 accumulation; fp32 inputs use exact fp32 unless cuda_set_tf32(1). */
void cuda_gemm(int trans_a, int trans_b, int M, int N, int K, const void *A, int lda, const void *B, int ldb,
               int in_dt, int accumulate, void *C, int ldc, int c_dt);
/* out[N,OC] = inp[N,IC] @ w[OC,IC]^T + bias; inp and w have in_dt, bias (may be NULL) is fp32
 * and is added in fp32 before the output is rounded to out_dt (once). */
void cuda_matmul_forward(void *out, int out_dt, const void *inp, const void *w, const float *bias, int in_dt, int N,
                         int IC, int OC);
/* The same with GELU fused into the GEMM's epilogue: pre = inp @ w^T + bias (kept for the
 * backward), out = gelu(pre); inp, w, pre and out in dt. */
void cuda_matmul_forward_gelu(void *out, void *pre, const void *inp, const void *w, const float *bias, int dt, int N,
                              int IC, int OC);
/* How many linear-layer calls took the fp32-scratch route (cuBLASLt without an fp32 bias for
 * the output type) since the start: a figure for the device check's report. */
long cuda_matmul_fallbacks(void);
/* dinp (= or += when accumulate_dinp; may be NULL) = dout @ w, in dinp_dt (accumulated in fp32,
 * rounded once); dw += dout^T @ inp and dbias += column sums of dout (may be NULL), both fp32.
 * dout, inp, w have dt. */
void cuda_matmul_backward(void *dinp, int dinp_dt, float *dw, float *dbias, const void *dout, const void *inp,
                          const void *w, int dt, int N, int IC, int OC, int accumulate_dinp);

/* ---- normalisation: x is the input (and dx its gradient), y the output (and dy); statistics
 * fp32 per row; weights and their gradients fp32. Backward: dx +=, dw +=, db +=. */
void cuda_layernorm_forward(void *y, int y_dt, float *mean, float *rstd, const void *x, int x_dt, const float *w,
                            const float *b, int N, int C, float eps);
void cuda_layernorm_backward(void *dx, int x_dt, float *dw, float *db, const void *dy, int y_dt, const void *x,
                             const float *w, const float *mean, const float *rstd, int N, int C);
void cuda_rmsnorm_forward(void *y, int y_dt, float *rstd, const void *x, int x_dt, const float *w, int N, int C,
                          float eps);
void cuda_rmsnorm_backward(void *dx, int x_dt, float *dw, const void *dy, int y_dt, const void *x, const float *w,
                           const float *rstd, int N, int C);

/* ---- pointwise ---- */
void cuda_gelu_forward(void *out, const void *inp, size_t n, int dt);
void cuda_gelu_backward(void *dinp, const void *inp, const void *dout, size_t n, int dt);
void cuda_swiglu_forward(void *out, const void *inp, int N, int F, int dt);
void cuda_swiglu_backward(void *dinp, const void *inp, const void *dout, int N, int F, int dt);
void cuda_residual_forward(void *out, int out_dt, const void *a, int a_dt, const void *b, int b_dt, size_t n);
void cuda_add_inplace(void *acc, int acc_dt, const void *x, int x_dt, size_t n);
void cuda_scale_inplace(float *x, float s, size_t n);

/* ---- communication (cuda_comm.cu): the comm layer's bf16 reduction (kernels.h dev_reduce_bf16);
 * the communication stream (which = 1; 0 is the compute stream) and events ordering the two ---- */
void cuda_reduce_bf16(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor);
void *cuda_stream_handle(int which);
void *cuda_event_create(void);
void cuda_event_destroy(void *e);
void cuda_event_record(void *e, int which);
void cuda_stream_wait_event(int which, void *e);
int cuda_event_query(void *e); /* 1 done, 0 not yet */
void cuda_event_sync(void *e);

/* ---- embeddings (tables and their gradients fp32; backward deterministic: rows are grouped
 * by token with a stable sort and each table row is summed by one block in row order) ---- */
void cuda_embedding_forward(void *out, int out_dt, const int32_t *tokens, const float *tok, const float *pos, int N,
                            int T, int C);
void cuda_embedding_backward(float *dtok, float *dpos, const void *dout, int dout_dt, const int32_t *tokens, int N,
                             int T, int C);
void cuda_embedding_shard_forward(void *out, int out_dt, const int32_t *tokens, const float *tok_shard, int vocab_lo,
                                  int vocab_n, int N, int C);
void cuda_embedding_shard_backward(float *dtok_shard, const void *dout, int dout_dt, const int32_t *tokens,
                                   int vocab_lo, int vocab_n, int N, int C);
void cuda_position_forward_add(void *out, int out_dt, const float *pos, int row0, int N, int T, int C);
void cuda_position_backward(float *dpos, const void *dout, int dout_dt, int row0, int N, int T, int C);
void cuda_bias_add(void *out, int out_dt, const void *bias, int bias_dt, int N, int C);
void cuda_bias_backward(float *dbias, const void *dout, int dout_dt, int N, int C);

/* ---- vocabulary-parallel cross-entropy pieces (max, sum, out: device doubles) ---- */
/* rows of ld values: columns [0, V) this rank's tokens, [V, ld) padding (never read; 0 in the gradient) */
void cuda_vocab_shard_row_max(const void *logits, int dt, int N, int V, int ld, double *max);
void cuda_vocab_shard_row_sumexp(const void *logits, int dt, int N, int V, int ld, const double *max, double *sum);
void cuda_vocab_shard_target_logit(const void *logits, int dt, const int32_t *targets, int vocab_lo, int N, int V,
                                   int ld, double *out);
void cuda_vocab_shard_grad(void *logits, int dt, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                           const double *max, const double *sum, double scale);
/* losses[n] = log(sum[n]) - (target[n] - max[n]) rounded to fp32; waits and returns their mean
 * (summed in double in a fixed order). */
double cuda_vocab_shard_losses(float *losses, const double *max, const double *sum, const double *target, int N);

/* ---- rotary embeddings: tables fp32, built on the host exactly as the CPU backend builds them ---- */
void cuda_rope_tables(float *cos_t, float *sin_t, int max_seq, int hd, const float *inv_freq);
void cuda_rope_apply(void *qkv, int dt, const float *cos_t, const float *sin_t, int N, int T, int heads,
                     int kv_heads, int hd, int stride, int inverse);

/* ---- causal grouped-query attention over qkv rows [q (H*hd) | k (KV*hd) | v (KV*hd)], flash
 * style: the T x T matrix is never stored. lse [B, H, T] (fp32) keeps each row's log-sum-exp
 * for the backward, which recomputes the probabilities. dqkv is written. hd <= 128. */
void cuda_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int H, int KV, int hd, int dt);
void cuda_attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B,
                             int T, int H, int KV, int hd, int dt);

/* ---- softmax + cross-entropy, fused: one read of each logit row for the statistics, one
 * read and one write for the gradient. losses [N] fp32. The first form waits and returns the
 * mean; the second leaves it (as a double) in mean_dev, stream-ordered. Rows of ld values, the
 * vocabulary in columns [0, V): the padding (--vocab-pad) is never read and gets a 0 gradient. */
double cuda_cross_entropy_forward_backward(void *logits, int dt, float *losses, const int32_t *targets, int N, int V,
                                           int ld, int want_grad, double grad_scale);
void cuda_cross_entropy_async(void *logits, int dt, float *losses, const int32_t *targets, int N, int V, int ld,
                              int want_grad, double grad_scale, double *mean_dev);

/* ---- mixture of experts (router tensors fp32) ---- */
void cuda_moe_router_topk(float *probs, int32_t *topk, float *gates, int N, int E, int k);
void cuda_moe_router_backward(float *dlogits, const float *probs, const int32_t *topk, const float *gates,
                              const float *dgates, const float *daux, int N, int T, int E, int k);
void cuda_moe_gather_rows(void *out, const void *x, const int32_t *idx, const float *scale, int R, int C, int dt);
void cuda_moe_scatter_rows(void *out, const void *x, const int32_t *idx, int R, int C, int dt);
/* out[idx[r]] += w[r] * x[r], each output row summed in r order (stable sort by idx) */
void cuda_moe_combine(void *out, int out_dt, const void *x, int x_dt, const int32_t *idx, const float *w, int R, int C);
void cuda_moe_row_dot(float *out, const void *a, const int32_t *idx, const void *b, int R, int C, int dt);
/* dst[slot[a]] = src[a] for a < A */
void cuda_moe_scatter_scalars(float *dst, const float *src, const int32_t *slot, int A);

/* ---- optimizer and reductions ---- */
typedef struct {
    size_t lo, hi; /* element range, relative to the p passed to cuda_adamw */
    int decay;     /* weight decay applies */
} CudaAdamWSegment;
/* torch.optim.AdamW over the segments of p[0, n) (elements in no segment are left alone), with
 * the CPU backend's operation order (optim/adamw.c). g is read times grad_scale (the clip
 * coefficient; 1 for none). segs is device memory. p_bf16 (may be NULL) receives p rounded to
 * bf16 (the GEMM copy of the weights). step counts from 1. */
void cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, const CudaAdamWSegment *segs, int nsegs,
                float grad_scale, double lr, double beta1, double beta2, double eps, double weight_decay, long step,
                void *p_bf16);
/* One AdamW update of p[0, n) with scalars formed on the host as optim/adamw.c forms them
 * (kernels.h's AdamWScalars): p = (apply_decay ? p * decay : p); m = m b1 + g (1 - b1);
 * v = v b2 + g g (1 - b2); p += neg_step * m / (sqrt(v) / bc2_sqrt + eps). */
typedef struct {
    float decay, beta1, beta2, one_minus_beta1, one_minus_beta2, bc2_sqrt, eps, neg_step;
    int apply_decay;
} CudaAdamWStep;
void cuda_adamw_update(float *p, const float *g, float *m, float *v, size_t n, CudaAdamWStep s);
/* sum of squares in double, in an order fixed by n: the first waits and returns it; the second
 * adds weight * sum to *acc_dev, stream-ordered. */
double cuda_sum_squares(const float *x, size_t n);
void cuda_sum_squares_accumulate(double *acc_dev, const float *x, size_t n, double weight);

/* ---- measured bf16 (or fp32) GEMM rate of an n x n x n product, FLOP/s, best of reps ---- */
double cuda_measure_peak_flops(int n, int reps, int dt);

#ifdef __cplusplus
}
#endif

#endif
