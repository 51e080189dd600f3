/* cpu_kernels.h: the CPU backend's kernels on host fp32 (`real`) buffers: the reference
 * implementation of every op in kernels.h (same meaning, `act` buffers as `real`). The fp32
 * table (cpu_backend.c) points at them; the bf16 emulation (cpu_bf16.c) widens its bf16
 * operands, calls them, and rounds the results where the CUDA backend rounds. Internal to
 * src/kernels/ (and the kernel tests). */
#ifndef MYRIAD_KERNELS_CPU_KERNELS_H
#define MYRIAD_KERNELS_CPU_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"

void cpu_matmul_forward(real *out, const real *inp, const real *w, const real *bias, int N, int IC, int OC);
void cpu_matmul_backward(real *dinp, real *dw, real *dbias, const real *dout, const real *inp, const real *w, int N,
                         int IC, int OC, int accumulate_dinp);
void cpu_lm_head_forward(real *logits, const real *inp, const real *w, int N, int IC, int V, int Vr);
void cpu_lm_head_backward(real *dinp, real *dw, const real *dlogits, const real *inp, const real *w, int N, int IC,
                          int V, int Vr);
void cpu_layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, int N,
                           int C, real eps);
void cpu_layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                            const real *mean, const real *rstd, int N, int C);
void cpu_rmsnorm_forward(real *out, real *rstd, const real *inp, const real *w, int N, int C, real eps);
void cpu_rmsnorm_backward(real *dinp, real *dw, const real *dout, const real *inp, const real *w, const real *rstd,
                          int N, int C);
void cpu_gelu_forward(real *out, const real *inp, size_t n);
void cpu_gelu_backward(real *dinp, const real *inp, const real *dout, size_t n);
void cpu_swiglu_forward(real *out, const real *inp, int N, int F);
void cpu_swiglu_backward(real *dinp, const real *inp, const real *dout, int N, int F);
void cpu_residual_forward(real *out, const real *a, const real *b, size_t n);
void cpu_add_inplace(real *acc, const real *x, size_t n);
void cpu_embedding_forward(real *out, const int32_t *tokens, const real *tok, const real *pos, int N, int T, int C);
void cpu_embedding_backward(real *dtok, real *dpos, const real *dout, const int32_t *tokens, int N, int T, int C);
void cpu_embedding_shard_forward(real *out, const int32_t *tokens, const real *tok_shard, int vocab_lo, int vocab_n,
                                 int N, int C);
void cpu_embedding_shard_backward(real *dtok_shard, const real *dout, const int32_t *tokens, int vocab_lo,
                                  int vocab_n, int N, int C);
void cpu_position_forward_add(real *out, const real *pos, int row0, int N, int T, int C);
void cpu_position_backward(real *dpos, const real *dout, int row0, int N, int T, int C);
void cpu_bias_add(real *out, const real *bias, int N, int C);
void cpu_bias_backward(real *dbias, const real *dout, int N, int C);
void cpu_vocab_shard_row_max(const real *logits, int N, int V, int ld, double *max);
void cpu_vocab_shard_row_sumexp(const real *logits, int N, int V, int ld, const double *max, double *sum);
void cpu_vocab_shard_target_logit(const real *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                                  double *out);
void cpu_vocab_shard_grad(real *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                          const double *max, const double *sum, double scale);
double cpu_vocab_shard_losses(real *losses, const double *max, const double *sum, const double *target, int N);
void cpu_rope_tables(real *cos_t, real *sin_t, int max_seq, int hd, const float *inv_freq);
void cpu_rope_apply(real *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                    int stride, int inverse);
size_t cpu_attention_saved_count(int B, int T, int H); /* B*H*T*T: the probabilities */
void cpu_attention_forward(real *out, real *att, const real *qkv, int B, int T, int H, int KV, int hd);
/* blockwise attention (kernels.h, cpu_attention_block.c) on fp32 buffers */
void cpu_attention_block_forward(real *out, real *lse, const real *q, const real *k, const real *v, const AttnBlock *s);
void cpu_attention_block_delta(real *delta, const real *dout, const real *out, const AttnBlock *s);
void cpu_attention_block_backward(real *dq, real *dk, real *dv, const real *dout, const real *q, const real *k,
                                  const real *v, const real *lse, const real *delta, const AttnBlock *s);
void cpu_attention_backward(real *dqkv, const real *dout, const real *qkv, const real *att, int B, int T, int H,
                            int KV, int hd);
double cpu_cross_entropy_forward_backward(real *logits, real *losses, const int32_t *targets, int N, int V, int ld,
                                          int want_grad, double grad_scale);
void cpu_moe_router_topk(real *probs, int32_t *topk, real *gates, int N, int E, int k);
void cpu_moe_router_backward(real *dlogits, const real *probs, const int32_t *topk, const real *gates,
                             const real *dgates, const real *daux, int N, int T, int E, int k);
void cpu_moe_gather_rows(real *out, const real *x, const int32_t *idx, const real *scale, int R, int C);
void cpu_moe_scatter_rows(real *out, const real *x, const int32_t *idx, int R, int C);
void cpu_moe_combine(real *out, const real *x, const int32_t *idx, const real *w, int R, int C);
void cpu_moe_row_dot(real *out, const real *a, const int32_t *idx, const real *b, int R, int C);
void cpu_moe_scatter_scalars(real *dst, const real *src, const int32_t *slot, int A);
void cpu_adamw_update(real *p, const real *g, real *m, real *v, size_t n, const AdamWScalars *s);
double cpu_sum_squares(const real *x, size_t n);
void cpu_scale_inplace(real *x, real s, size_t n);
void cpu_reduce_bf16(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor);
/* streams and events (cpu_stream.c) */
void *cpu_stream_handle(DevStream s);
DevEvent *cpu_event_create(void);
void cpu_event_destroy(DevEvent *e);
void cpu_event_record(DevEvent *e, DevStream s);
void cpu_stream_wait_event(DevStream s, DevEvent *e);
int cpu_event_query(DevEvent *e);
void cpu_event_sync(DevEvent *e);
/* the calling thread's count of kernels.h calls (dispatch.c): the compute stream's work */
const uint64_t *cpu_dispatch_count(void);

/* memory and threads of the CPU backend (cpu_memory.c) */
void *cpu_alloc(size_t bytes); /* zeroed, 64-byte aligned; NULL when out of memory */
void cpu_free(void *p);
void cpu_set_threads(int threads);
int cpu_threads(void);
int cpu_device_info(DeviceInfo *out);

/* the tables (backend.h): fp32 (cpu_backend.c) and the bf16 emulation built over it (cpu_bf16.c) */
struct KernelBackend;
extern const struct KernelBackend cpu_f32_table;
const struct KernelBackend *cpu_bf16_backend(void);

#endif
