/* cpu_backend.c: the CPU backend's fp32 table (backend.h): device memory is host memory, copies
 * are memcpy, "asynchronous" copies complete at once, and act elements are `real`, so every op
 * is the reference kernel of cpu_kernels.h (an adapter only converts the pointer types). The
 * bf16 table is cpu_bf16.c's. */
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "util/bf16.h"

#define R(p) ((real *)(p))
#define CR(p) ((const real *)(p))

static void mem_zero(void *p, size_t bytes) { memset(p, 0, bytes); }
static void mem_copy(void *dst, const void *src, size_t bytes, CopyKind kind) {
    (void)kind;
    if (bytes) memcpy(dst, src, bytes);
}
static void mem_sync(void) {}
static void f32_act_from_f32(act *dst, const real *src, size_t n) { memcpy(dst, src, n * sizeof(real)); }
static void f32_act_to_f32(real *dst, const act *src, size_t n) { memcpy(dst, src, n * sizeof(real)); }

static void to_bf16(uint16_t *dst, const real *src, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = f32_to_bf16((float)src[i]);
}
static void from_bf16(real *dst, const uint16_t *src, size_t n) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}

static void f32_matmul_forward(void *out, int out_f32, const act *inp, const act *w, const real *bias, int N, int IC,
                               int OC) {
    (void)out_f32;
    cpu_matmul_forward(R(out), CR(inp), CR(w), bias, N, IC, OC);
}
static void f32_matmul_backward(void *dinp, int dinp_f32, real *dw, real *dbias, const act *dout, const act *inp,
                                const act *w, int N, int IC, int OC, int accumulate_dinp) {
    (void)dinp_f32;
    cpu_matmul_backward(R(dinp), dw, dbias, CR(dout), CR(inp), CR(w), N, IC, OC, accumulate_dinp);
}
static void f32_lm_head_forward(act *logits, const act *inp, const act *w, int N, int IC, int V, int Vr) {
    cpu_lm_head_forward(R(logits), CR(inp), CR(w), N, IC, V, Vr);
}
static void f32_lm_head_backward(real *dinp, real *dw, const act *dlogits, const act *inp, const act *w, int N,
                                 int IC, int V, int Vr) {
    cpu_lm_head_backward(dinp, dw, CR(dlogits), CR(inp), CR(w), N, IC, V, Vr);
}
static void f32_layernorm_forward(act *out, real *mean, real *rstd, const real *inp, const real *w, const real *b,
                                  int N, int C, real eps) {
    cpu_layernorm_forward(R(out), mean, rstd, inp, w, b, N, C, eps);
}
static void f32_rmsnorm_forward(act *out, real *rstd, const real *inp, const real *w, int N, int C, real eps) {
    cpu_rmsnorm_forward(R(out), rstd, inp, w, N, C, eps);
}
static void f32_gelu_forward(act *out, const act *inp, size_t n) { cpu_gelu_forward(R(out), CR(inp), n); }
static void f32_gelu_backward(act *dinp, const act *inp, const act *dout, size_t n) {
    cpu_gelu_backward(R(dinp), CR(inp), CR(dout), n);
}
static void f32_swiglu_forward(act *out, const act *inp, int N, int F) { cpu_swiglu_forward(R(out), CR(inp), N, F); }
static void f32_swiglu_backward(act *dinp, const act *inp, const act *dout, int N, int F) {
    cpu_swiglu_backward(R(dinp), CR(inp), CR(dout), N, F);
}
static void f32_vocab_shard_row_max(const act *logits, int N, int V, int ld, double *max) {
    cpu_vocab_shard_row_max(CR(logits), N, V, ld, max);
}
static void f32_vocab_shard_row_sumexp(const act *logits, int N, int V, int ld, const double *max, double *sum) {
    cpu_vocab_shard_row_sumexp(CR(logits), N, V, ld, max, sum);
}
static void f32_vocab_shard_target_logit(const act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                                         double *out) {
    cpu_vocab_shard_target_logit(CR(logits), targets, vocab_lo, N, V, ld, out);
}
static void f32_vocab_shard_grad(act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                                 const double *max, const double *sum, double scale) {
    cpu_vocab_shard_grad(R(logits), targets, vocab_lo, N, V, ld, max, sum, scale);
}
static void f32_rope_apply(act *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads,
                           int hd, int stride, int inverse) {
    cpu_rope_apply(R(qkv), cos_t, sin_t, N, T, heads, kv_heads, hd, stride, inverse);
}
static void f32_attention_forward(act *out, real *saved, const act *qkv, int B, int T, int H, int KV, int hd) {
    cpu_attention_forward(R(out), saved, CR(qkv), B, T, H, KV, hd);
}
static void f32_attention_backward(act *dqkv, const act *dout, const act *qkv, const act *out, const real *saved,
                                   int B, int T, int H, int KV, int hd) {
    (void)out; /* the reference backward reads the saved probabilities */
    cpu_attention_backward(R(dqkv), CR(dout), CR(qkv), saved, B, T, H, KV, hd);
}
static void f32_attention_block_forward(real *out, real *lse, const act *q, const act *k, const act *v,
                                        const AttnBlock *s) {
    cpu_attention_block_forward(out, lse, CR(q), CR(k), CR(v), s);
}
static void f32_attention_block_delta(real *delta, const act *dout, const act *out, const AttnBlock *s) {
    cpu_attention_block_delta(delta, CR(dout), CR(out), s);
}
static void f32_attention_block_backward(real *dq, real *dk, real *dv, const act *dout, const act *q, const act *k,
                                         const act *v, const real *lse, const real *delta, const AttnBlock *s) {
    cpu_attention_block_backward(dq, dk, dv, CR(dout), CR(q), CR(k), CR(v), lse, delta, s);
}
static double f32_cross_entropy(act *logits, real *losses, const int32_t *targets, int N, int V, int ld,
                                int want_grad, double grad_scale) {
    return cpu_cross_entropy_forward_backward(R(logits), losses, targets, N, V, ld, want_grad, grad_scale);
}
static void f32_moe_gather_rows(act *out, const act *x, const int32_t *idx, const real *scale, int R_, int C) {
    cpu_moe_gather_rows(R(out), CR(x), idx, scale, R_, C);
}
static void f32_moe_scatter_rows(act *out, const act *x, const int32_t *idx, int R_, int C) {
    cpu_moe_scatter_rows(R(out), CR(x), idx, R_, C);
}
static void f32_moe_combine(real *out, const act *x, const int32_t *idx, const real *w, int R_, int C) {
    cpu_moe_combine(out, CR(x), idx, w, R_, C);
}
static void f32_moe_row_dot(real *out, const act *a, const int32_t *idx, const act *b, int R_, int C) {
    cpu_moe_row_dot(out, CR(a), idx, CR(b), R_, C);
}

const KernelBackend cpu_f32_table = {
    .device = "cpu",
    .device_info = cpu_device_info,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .memset_zero = mem_zero,
    .copy = mem_copy,
    .copy_async = mem_copy,
    .host_alloc_pinned = cpu_alloc,
    .host_free_pinned = cpu_free,
    .sync = mem_sync,
    .stream_handle = cpu_stream_handle,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait_event = cpu_stream_wait_event,
    .event_query = cpu_event_query,
    .event_sync = cpu_event_sync,
    .set_threads = cpu_set_threads,
    .threads = cpu_threads,
    .f32_to_bf16 = to_bf16,
    .bf16_to_f32 = from_bf16,
    .layernorm_backward = cpu_layernorm_backward,
    .rmsnorm_backward = cpu_rmsnorm_backward,
    .residual_forward = cpu_residual_forward,
    .add_inplace = cpu_add_inplace,
    .embedding_forward = cpu_embedding_forward,
    .embedding_backward = cpu_embedding_backward,
    .embedding_shard_forward = cpu_embedding_shard_forward,
    .embedding_shard_backward = cpu_embedding_shard_backward,
    .position_forward_add = cpu_position_forward_add,
    .position_backward = cpu_position_backward,
    .bias_add = cpu_bias_add,
    .bias_backward = cpu_bias_backward,
    .vocab_shard_losses = cpu_vocab_shard_losses,
    .rope_tables = cpu_rope_tables,
    .attention_saved_count = cpu_attention_saved_count,
    .moe_router_topk = cpu_moe_router_topk,
    .moe_router_backward = cpu_moe_router_backward,
    .moe_scatter_scalars = cpu_moe_scatter_scalars,
    .adamw_update = cpu_adamw_update,
    .sum_squares = cpu_sum_squares,
    .scale_inplace = cpu_scale_inplace,
    .reduce_bf16 = cpu_reduce_bf16,
    .dtype = DTYPE_F32,
    .act_size = sizeof(real),
    .host_accessible = 1,
    .act_from_f32 = f32_act_from_f32,
    .act_to_f32 = f32_act_to_f32,
    .matmul_forward = f32_matmul_forward,
    .matmul_backward = f32_matmul_backward,
    .lm_head_forward = f32_lm_head_forward,
    .lm_head_backward = f32_lm_head_backward,
    .layernorm_forward = f32_layernorm_forward,
    .rmsnorm_forward = f32_rmsnorm_forward,
    .gelu_forward = f32_gelu_forward,
    .gelu_backward = f32_gelu_backward,
    .swiglu_forward = f32_swiglu_forward,
    .swiglu_backward = f32_swiglu_backward,
    .vocab_shard_row_max = f32_vocab_shard_row_max,
    .vocab_shard_row_sumexp = f32_vocab_shard_row_sumexp,
    .vocab_shard_target_logit = f32_vocab_shard_target_logit,
    .vocab_shard_grad = f32_vocab_shard_grad,
    .rope_apply = f32_rope_apply,
    .attention_forward = f32_attention_forward,
    .attention_backward = f32_attention_backward,
    .attention_block_forward = f32_attention_block_forward,
    .attention_block_delta = f32_attention_block_delta,
    .attention_block_backward = f32_attention_block_backward,
    .cross_entropy_forward_backward = f32_cross_entropy,
    .moe_gather_rows = f32_moe_gather_rows,
    .moe_scatter_rows = f32_moe_scatter_rows,
    .moe_combine = f32_moe_combine,
    .moe_row_dot = f32_moe_row_dot,
};
