/* backend.h: the table of functions a kernel backend provides (docs/GPU.md, "The backend
 * table"). kernels.h's functions are thin dispatchers (dispatch.c) over the selected table, so
 * one binary holds every backend and the model never knows which one runs:
 *   cpu_backend(DTYPE_F32)   cpu_*.c, the reference (OpenBLAS / our AVX-512 GEMM + OpenMP)
 *   cpu_backend(DTYPE_BF16)  cpu_bf16.c: the same kernels with bf16 activations stored and
 *                            rounded exactly where the CUDA backend rounds them (emulated)
 *   cuda_backend(dtype, ..)  the CUDA kernels (the .cu files of src/kernels, cuBLASLt), linked when the
 *                            build found nvcc; cuda_absent.c says why not otherwise.
 * Every member is required (no NULLs) except those marked optional. The signatures are kernels.h's, with the same meaning;
 * members named like a kernels.h function implement it. */
#ifndef MYRIAD_KERNELS_BACKEND_H
#define MYRIAD_KERNELS_BACKEND_H

#include "kernels/kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { COPY_H2D = 0, COPY_D2H = 1, COPY_D2D = 2 } CopyKind;

typedef struct KernelBackend {
    const char *device; /* "cpu" or "cuda" */
    Dtype dtype;        /* what act elements are */
    size_t act_size;    /* bytes per act element */
    int host_accessible; /* host code may dereference device pointers */

    /* device and memory */
    int (*device_info)(DeviceInfo *out);
    void *(*alloc)(size_t bytes); /* zeroed, aligned to 256 bytes; NULL when out of memory (no message) */
    void (*free)(void *p);
    void (*memset_zero)(void *p, size_t bytes);
    void (*copy)(void *dst, const void *src, size_t bytes, CopyKind kind);       /* synchronous */
    void (*copy_async)(void *dst, const void *src, size_t bytes, CopyKind kind); /* pinned host side */
    /* optional (NULL: a synchronous copy / nothing): dev_snapshot_async / dev_snapshot_wait */
    void (*snapshot_async)(void *host, const void *dev, size_t bytes);
    void (*snapshot_wait)(void);
    void *(*host_alloc_pinned)(size_t bytes); /* NULL when out of memory */
    void (*host_free_pinned)(void *p);
    void (*sync)(void);
    /* streams and events (kernels.h); the CPU's are cpu_stream.c's */
    void *(*stream_handle)(DevStream s);
    DevEvent *(*event_create)(void);
    void (*event_destroy)(DevEvent *e);
    void (*event_record)(DevEvent *e, DevStream s);
    void (*stream_wait_event)(DevStream s, DevEvent *e);
    int (*event_query)(DevEvent *e);
    void (*event_sync)(DevEvent *e);
    void (*set_threads)(int threads);
    int (*threads)(void);
    void (*act_from_f32)(act *dst, const real *src, size_t n);
    void (*act_to_f32)(real *dst, const act *src, size_t n);
    void (*f32_to_bf16)(uint16_t *dst, const real *src, size_t n);
    void (*bf16_to_f32)(real *dst, const uint16_t *src, size_t n);

    /* ops */
    void (*matmul_forward)(void *out, int out_f32, const act *inp, const act *w, const real *bias, int N, int IC,
                           int OC);
    void (*matmul_backward)(void *dinp, int dinp_f32, real *dw, real *dbias, const act *dout, const act *inp,
                            const act *w, int N, int IC, int OC, int accumulate_dinp);
    /* optional (NULL: matmul_forward / matmul_backward over all Vr rows): kernels.h's LM head */
    void (*lm_head_forward)(act *logits, const act *inp, const act *w, int N, int IC, int V, int Vr);
    void (*lm_head_backward)(real *dinp, real *dw, const act *dlogits, const act *inp, const act *w, int N, int IC,
                             int V, int Vr);
    void (*layernorm_forward)(act *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, int N,
                              int C, real eps);
    void (*layernorm_backward)(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                               const real *mean, const real *rstd, int N, int C);
    void (*rmsnorm_forward)(act *out, real *rstd, const real *inp, const real *w, int N, int C, real eps);
    void (*rmsnorm_backward)(real *dinp, real *dw, const real *dout, const real *inp, const real *w, const real *rstd,
                             int N, int C);
    void (*gelu_forward)(act *out, const act *inp, size_t n);
    void (*gelu_backward)(act *dinp, const act *inp, const act *dout, size_t n);
    void (*swiglu_forward)(act *out, const act *inp, int N, int F);
    void (*swiglu_backward)(act *dinp, const act *inp, const act *dout, int N, int F);
    void (*residual_forward)(real *out, const real *a, const real *b, size_t n);
    void (*add_inplace)(real *acc, const real *x, size_t n);
    void (*embedding_forward)(real *out, const int32_t *tokens, const real *tok, const real *pos, int N, int T, int C);
    void (*embedding_backward)(real *dtok, real *dpos, const real *dout, const int32_t *tokens, int N, int T, int C);
    void (*embedding_shard_forward)(real *out, const int32_t *tokens, const real *tok_shard, int vocab_lo,
                                    int vocab_n, int N, int C);
    void (*embedding_shard_backward)(real *dtok_shard, const real *dout, const int32_t *tokens, int vocab_lo,
                                     int vocab_n, int N, int C);
    void (*position_forward_add)(real *out, const real *pos, int row0, int N, int T, int C);
    void (*position_backward)(real *dpos, const real *dout, int row0, int N, int T, int C);
    void (*bias_add)(real *out, const real *bias, int N, int C);
    void (*bias_backward)(real *dbias, const real *dout, int N, int C);
    void (*vocab_shard_row_max)(const act *logits, int N, int V, int ld, double *max);
    void (*vocab_shard_row_sumexp)(const act *logits, int N, int V, int ld, const double *max, double *sum);
    void (*vocab_shard_target_logit)(const act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                                     double *out);
    void (*vocab_shard_grad)(act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                             const double *max, const double *sum, double scale);
    double (*vocab_shard_losses)(real *losses, const double *max, const double *sum, const double *target, int N);
    void (*rope_tables)(real *cos_t, real *sin_t, int max_seq, int hd, const float *inv_freq);
    void (*rope_apply)(act *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                       int stride, int inverse);
    size_t (*attention_saved_count)(int B, int T, int H);
    void (*attention_forward)(act *out, real *saved, const act *qkv, int B, int T, int H, int KV, int hd);
    void (*attention_backward)(act *dqkv, const act *dout, const act *qkv, const act *out, const real *saved, int B,
                               int T, int H, int KV, int hd);
    /* optional (NULL: no context parallelism on this backend): kernels.h's blockwise attention */
    void (*attention_block_forward)(real *out, real *lse, const act *q, const act *k, const act *v,
                                    const AttnBlock *s);
    void (*attention_block_delta)(real *delta, const act *dout, const act *out, const AttnBlock *s);
    void (*attention_block_backward)(real *dq, real *dk, real *dv, const act *dout, const act *q, const act *k,
                                     const act *v, const real *lse, const real *delta, const AttnBlock *s);
    double (*cross_entropy_forward_backward)(act *logits, real *losses, const int32_t *targets, int N, int V,
                                             int ld, int want_grad, double grad_scale);
    void (*moe_router_topk)(real *probs, int32_t *topk, real *gates, int N, int E, int k);
    void (*moe_router_backward)(real *dlogits, const real *probs, const int32_t *topk, const real *gates,
                                const real *dgates, const real *daux, int N, int T, int E, int k);
    void (*moe_gather_rows)(act *out, const act *x, const int32_t *idx, const real *scale, int R, int C);
    void (*moe_scatter_rows)(act *out, const act *x, const int32_t *idx, int R, int C);
    void (*moe_combine)(real *out, const act *x, const int32_t *idx, const real *w, int R, int C);
    void (*moe_row_dot)(real *out, const act *a, const int32_t *idx, const act *b, int R, int C);
    void (*moe_scatter_scalars)(real *dst, const real *src, const int32_t *slot, int A);
    void (*adamw_update)(real *p, const real *g, real *m, real *v, size_t n, const AdamWScalars *s);
    double (*sum_squares)(const real *x, size_t n);
    void (*scale_inplace)(real *x, real s, size_t n);
    void (*reduce_bf16)(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor);
} KernelBackend;

/* The CPU tables (dispatch.c; DTYPE_BF16 is NULL in the f64 build). */
const KernelBackend *cpu_backend(Dtype dtype);
/* The CUDA table for o->dtype on GPU o->local_rank % visible GPUs, initialised (device set,
 * cuBLASLt handle, streams; TF32 only when o->allow_tf32); NULL with a one-line reason in why
 * when there is none: no GPU visible, no driver, or this binary built without CUDA
 * (cuda_absent.c). o->device is "cuda" and o->dtype resolved. */
const KernelBackend *cuda_backend(const KernelOptions *o, char *why, size_t why_size);
/* Whether cuda_backend could succeed (a GPU is visible), without initialising anything. */
int cuda_backend_usable(char *why, size_t why_size);

#ifdef __cplusplus
}
#endif

#endif
