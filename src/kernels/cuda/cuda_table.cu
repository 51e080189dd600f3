/* cuda_table.cu: the CUDA backend's table (backend.h): kernels.h's ops on the CUDA kernels of
 * this directory (cuda_backend.h), with the storage types the boundary fixes: `act` operands in
 * the run's dtype, `real` operands fp32. Chosen once per process by kernels_select; ranks on one
 * machine take GPU local_rank % visible GPUs (several ranks may share one). */
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cuda/cuda_common.cuh"

extern "C" int myr_error(const char *fmt, ...);
extern "C" void cpu_set_threads(int threads);

static int adt = CUDA_BF16; /* the run's activation dtype */
static int host_threads = 1;

static int t_device_info(DeviceInfo *out) {
    memset(out, 0, sizeof *out);
    int dev = 0;
    cudaGetDevice(&dev);
    CudaDeviceInfo i;
    char err[256];
    if (cuda_device_info(dev, &i, err, sizeof err)) return myr_error("%s", err);
    snprintf(out->name, sizeof out->name, "%s", i.name);
    out->total_bytes = i.total_bytes;
    out->free_bytes = i.free_bytes;
    out->ordinal = dev;
    out->count = cuda_device_count();
    out->sm_major = i.cc_major;
    out->sm_minor = i.cc_minor;
    return 0;
}

static cudaMemcpyKind kind_of(CopyKind k) {
    return k == COPY_H2D ? cudaMemcpyHostToDevice : k == COPY_D2H ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}
static void t_copy(void *dst, const void *src, size_t bytes, CopyKind k) {
    if (!bytes) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind_of(k), cuda_current_stream()));
    cuda_synchronize();
}
static void t_copy_async(void *dst, const void *src, size_t bytes, CopyKind k) {
    if (bytes) CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind_of(k), cuda_current_stream()));
}
/* Checkpoint snapshots on their own stream, so the device-to-host copy of the state runs on a copy
 * engine while the next step's kernels run: the stream waits for an event recorded on the compute
 * stream (the copy sees every queued update), and the wait, which may come from the checkpoint's
 * copy thread, synchronizes that stream on the device it belongs to. The host side is pinned (the
 * checkpoint mirrors), else the copy would be synchronous. */
static cudaStream_t snap_stream;
static cudaEvent_t snap_ready;
static int snap_device;
static void t_snapshot_async(void *host, const void *dev, size_t bytes) {
    if (!snap_stream) {
        CUDA_CHECK(cudaGetDevice(&snap_device));
        CUDA_CHECK(cudaStreamCreateWithFlags(&snap_stream, cudaStreamNonBlocking));
        CUDA_CHECK(cudaEventCreateWithFlags(&snap_ready, cudaEventDisableTiming));
    }
    CUDA_CHECK(cudaEventRecord(snap_ready, cuda_current_stream()));
    CUDA_CHECK(cudaStreamWaitEvent(snap_stream, snap_ready, 0));
    CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, snap_stream));
}
static void t_snapshot_wait(void) {
    if (!snap_stream) return;
    CUDA_CHECK(cudaSetDevice(snap_device)); /* this thread's current device (a copy thread starts on 0) */
    CUDA_CHECK(cudaStreamSynchronize(snap_stream));
}
static void *t_stream_handle(DevStream s) { return cuda_stream_handle(s == STREAM_COMM); }
static DevEvent *t_event_create(void) { return (DevEvent *)cuda_event_create(); }
static void t_event_destroy(DevEvent *e) { cuda_event_destroy(e); }
static void t_event_record(DevEvent *e, DevStream s) { cuda_event_record(e, s == STREAM_COMM); }
static void t_stream_wait_event(DevStream s, DevEvent *e) { cuda_stream_wait_event(s == STREAM_COMM, e); }
static int t_event_query(DevEvent *e) { return cuda_event_query(e); }
static void t_event_sync(DevEvent *e) { cuda_event_sync(e); }
static void t_set_threads(int threads) {
    host_threads = threads < 1 ? 1 : threads;
    cpu_set_threads(host_threads); /* the host's own OpenMP work (data, checkpoints) */
}
static int t_threads(void) { return host_threads; }
static void t_act_from_f32(act *dst, const real *src, size_t n) { cuda_convert(dst, adt, src, CUDA_F32, n); }
static void t_act_to_f32(real *dst, const act *src, size_t n) { cuda_convert(dst, CUDA_F32, src, adt, n); }
static void t_f32_to_bf16(uint16_t *dst, const real *src, size_t n) { cuda_convert(dst, CUDA_BF16, src, CUDA_F32, n); }
static void t_bf16_to_f32(real *dst, const uint16_t *src, size_t n) { cuda_convert(dst, CUDA_F32, src, CUDA_BF16, n); }

static void t_matmul_forward(void *out, int out_f32, const act *inp, const act *w, const real *bias, int N, int IC,
                             int OC) {
    cuda_matmul_forward(out, out_f32 ? CUDA_F32 : adt, inp, w, bias, adt, N, IC, OC);
}
static void t_matmul_backward(void *dinp, int dinp_f32, real *dw, real *dbias, const act *dout, const act *inp,
                              const act *w, int N, int IC, int OC, int accumulate_dinp) {
    cuda_matmul_backward(dinp, dinp_f32 ? CUDA_F32 : adt, dw, dbias, dout, inp, w, adt, N, IC, OC, accumulate_dinp);
}
static void t_layernorm_forward(act *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, int N,
                                int C, real eps) {
    cuda_layernorm_forward(out, adt, mean, rstd, inp, CUDA_F32, w, b, N, C, eps);
}
static void t_layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                                 const real *mean, const real *rstd, int N, int C) {
    cuda_layernorm_backward(dinp, CUDA_F32, dw, db, dout, CUDA_F32, inp, w, mean, rstd, N, C);
}
static void t_rmsnorm_forward(act *out, real *rstd, const real *inp, const real *w, int N, int C, real eps) {
    cuda_rmsnorm_forward(out, adt, rstd, inp, CUDA_F32, w, N, C, eps);
}
static void t_rmsnorm_backward(real *dinp, real *dw, const real *dout, const real *inp, const real *w, const real *rstd,
                               int N, int C) {
    cuda_rmsnorm_backward(dinp, CUDA_F32, dw, dout, CUDA_F32, inp, w, rstd, N, C);
}
static void t_gelu_forward(act *out, const act *inp, size_t n) { cuda_gelu_forward(out, inp, n, adt); }
static void t_gelu_backward(act *dinp, const act *inp, const act *dout, size_t n) {
    cuda_gelu_backward(dinp, inp, dout, n, adt);
}
static void t_swiglu_forward(act *out, const act *inp, int N, int F) { cuda_swiglu_forward(out, inp, N, F, adt); }
static void t_swiglu_backward(act *dinp, const act *inp, const act *dout, int N, int F) {
    cuda_swiglu_backward(dinp, inp, dout, N, F, adt);
}
static void t_residual_forward(real *out, const real *a, const real *b, size_t n) {
    cuda_residual_forward(out, CUDA_F32, a, CUDA_F32, b, CUDA_F32, n);
}
static void t_add_inplace(real *acc, const real *x, size_t n) { cuda_add_inplace(acc, CUDA_F32, x, CUDA_F32, n); }
static void t_embedding_forward(real *out, const int32_t *tokens, const real *tok, const real *pos, int N, int T,
                                int C) {
    cuda_embedding_forward(out, CUDA_F32, tokens, tok, pos, N, T, C);
}
static void t_embedding_backward(real *dtok, real *dpos, const real *dout, const int32_t *tokens, int N, int T, int C) {
    cuda_embedding_backward(dtok, dpos, dout, CUDA_F32, tokens, N, T, C);
}
static void t_embedding_shard_forward(real *out, const int32_t *tokens, const real *tok_shard, int vocab_lo, int vocab_n,
                                      int N, int C) {
    cuda_embedding_shard_forward(out, CUDA_F32, tokens, tok_shard, vocab_lo, vocab_n, N, C);
}
static void t_embedding_shard_backward(real *dtok_shard, const real *dout, const int32_t *tokens, int vocab_lo,
                                       int vocab_n, int N, int C) {
    cuda_embedding_shard_backward(dtok_shard, dout, CUDA_F32, tokens, vocab_lo, vocab_n, N, C);
}
static void t_position_forward_add(real *out, const real *pos, int row0, int N, int T, int C) {
    cuda_position_forward_add(out, CUDA_F32, pos, row0, N, T, C);
}
static void t_position_backward(real *dpos, const real *dout, int row0, int N, int T, int C) {
    cuda_position_backward(dpos, dout, CUDA_F32, row0, N, T, C);
}
static void t_bias_add(real *out, const real *bias, int N, int C) { cuda_bias_add(out, CUDA_F32, bias, CUDA_F32, N, C); }
static void t_bias_backward(real *dbias, const real *dout, int N, int C) { cuda_bias_backward(dbias, dout, CUDA_F32, N, C); }
static void t_row_max(const act *logits, int N, int V, int ld, double *max) {
    cuda_vocab_shard_row_max(logits, adt, N, V, ld, max);
}
static void t_row_sumexp(const act *logits, int N, int V, int ld, const double *max, double *sum) {
    cuda_vocab_shard_row_sumexp(logits, adt, N, V, ld, max, sum);
}
static void t_target_logit(const act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                           double *out) {
    cuda_vocab_shard_target_logit(logits, adt, targets, vocab_lo, N, V, ld, out);
}
static void t_shard_grad(act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld, const double *max,
                         const double *sum, double scale) {
    cuda_vocab_shard_grad(logits, adt, targets, vocab_lo, N, V, ld, max, sum, scale);
}
static void t_rope_apply(act *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                         int stride, int inverse) {
    cuda_rope_apply(qkv, adt, cos_t, sin_t, N, T, heads, kv_heads, hd, stride, inverse);
}
static size_t t_attention_saved_count(int B, int T, int H) { return (size_t)B * H * T; } /* the log-sum-exp */
static void t_attention_forward(act *out, real *saved, const act *qkv, int B, int T, int H, int KV, int hd) {
    cuda_attention_forward(out, saved, qkv, B, T, H, KV, hd, adt);
}
static void t_attention_backward(act *dqkv, const act *dout, const act *qkv, const act *out, const real *saved, int B,
                                 int T, int H, int KV, int hd) {
    cuda_attention_backward(dqkv, dout, qkv, out, saved, B, T, H, KV, hd, adt);
}
static double t_cross_entropy(act *logits, real *losses, const int32_t *targets, int N, int V, int ld,
                              int want_grad, double grad_scale) {
    return cuda_cross_entropy_forward_backward(logits, adt, losses, targets, N, V, ld, want_grad, grad_scale);
}
static void t_gather_rows(act *out, const act *x, const int32_t *idx, const real *scale, int R, int C) {
    cuda_moe_gather_rows(out, x, idx, scale, R, C, adt);
}
static void t_scatter_rows(act *out, const act *x, const int32_t *idx, int R, int C) {
    cuda_moe_scatter_rows(out, x, idx, R, C, adt);
}
static void t_combine(real *out, const act *x, const int32_t *idx, const real *w, int R, int C) {
    cuda_moe_combine(out, CUDA_F32, x, adt, idx, w, R, C);
}
static void t_row_dot(real *out, const act *a, const int32_t *idx, const act *b, int R, int C) {
    cuda_moe_row_dot(out, a, idx, b, R, C, adt);
}
static void t_adamw_update(real *p, const real *g, real *m, real *v, size_t n, const AdamWScalars *s) {
    CudaAdamWStep c = {s->decay, s->beta1, s->beta2, s->one_minus_beta1, s->one_minus_beta2, s->bc2_sqrt, s->eps,
                       s->neg_step, s->apply_decay};
    cuda_adamw_update(p, g, m, v, n, c);
}

static KernelBackend table;

static void fill_table(int dt) {
    KernelBackend t;
    memset(&t, 0, sizeof t);
    t.device = "cuda";
    t.dtype = dt == CUDA_BF16 ? DTYPE_BF16 : DTYPE_F32;
    t.act_size = cuda_dtype_size(dt);
    t.host_accessible = 0;
    t.device_info = t_device_info;
    t.alloc = cuda_try_alloc;
    t.free = cuda_free;
    t.memset_zero = cuda_zero;
    t.copy = t_copy;
    t.copy_async = t_copy_async;
    t.snapshot_async = t_snapshot_async;
    t.snapshot_wait = t_snapshot_wait;
    t.host_alloc_pinned = cuda_host_try_alloc;
    t.host_free_pinned = cuda_host_free;
    t.sync = cuda_synchronize;
    t.stream_handle = t_stream_handle;
    t.event_create = t_event_create;
    t.event_destroy = t_event_destroy;
    t.event_record = t_event_record;
    t.stream_wait_event = t_stream_wait_event;
    t.event_query = t_event_query;
    t.event_sync = t_event_sync;
    t.set_threads = t_set_threads;
    t.threads = t_threads;
    t.act_from_f32 = t_act_from_f32;
    t.act_to_f32 = t_act_to_f32;
    t.f32_to_bf16 = t_f32_to_bf16;
    t.bf16_to_f32 = t_bf16_to_f32;
    t.matmul_forward = t_matmul_forward;
    t.matmul_backward = t_matmul_backward;
    t.layernorm_forward = t_layernorm_forward;
    t.layernorm_backward = t_layernorm_backward;
    t.rmsnorm_forward = t_rmsnorm_forward;
    t.rmsnorm_backward = t_rmsnorm_backward;
    t.gelu_forward = t_gelu_forward;
    t.gelu_backward = t_gelu_backward;
    t.swiglu_forward = t_swiglu_forward;
    t.swiglu_backward = t_swiglu_backward;
    t.residual_forward = t_residual_forward;
    t.add_inplace = t_add_inplace;
    t.embedding_forward = t_embedding_forward;
    t.embedding_backward = t_embedding_backward;
    t.embedding_shard_forward = t_embedding_shard_forward;
    t.embedding_shard_backward = t_embedding_shard_backward;
    t.position_forward_add = t_position_forward_add;
    t.position_backward = t_position_backward;
    t.bias_add = t_bias_add;
    t.bias_backward = t_bias_backward;
    t.vocab_shard_row_max = t_row_max;
    t.vocab_shard_row_sumexp = t_row_sumexp;
    t.vocab_shard_target_logit = t_target_logit;
    t.vocab_shard_grad = t_shard_grad;
    t.vocab_shard_losses = cuda_vocab_shard_losses;
    t.rope_tables = cuda_rope_tables;
    t.rope_apply = t_rope_apply;
    t.attention_saved_count = t_attention_saved_count;
    t.attention_forward = t_attention_forward;
    t.attention_backward = t_attention_backward;
    t.cross_entropy_forward_backward = t_cross_entropy;
    t.moe_router_topk = cuda_moe_router_topk;
    t.moe_router_backward = cuda_moe_router_backward;
    t.moe_gather_rows = t_gather_rows;
    t.moe_scatter_rows = t_scatter_rows;
    t.moe_combine = t_combine;
    t.moe_row_dot = t_row_dot;
    t.moe_scatter_scalars = cuda_moe_scatter_scalars;
    t.adamw_update = t_adamw_update;
    t.sum_squares = cuda_sum_squares;
    t.scale_inplace = cuda_scale_inplace;
    t.reduce_bf16 = cuda_reduce_bf16;
    table = t;
}

extern "C" int cuda_backend_usable(char *why, size_t why_size) { return cuda_device_count_why(why, why_size) > 0; }

extern "C" const KernelBackend *cuda_backend(const KernelOptions *o, char *why, size_t why_size) {
    int count = cuda_device_count_why(why, why_size);
    if (count == 0) return NULL;
    if (o->dtype != DTYPE_F32 && o->dtype != DTYPE_BF16) {
        snprintf(why, why_size, "unknown dtype %d (fp32 or bf16)", o->dtype);
        return NULL;
    }
    int device = (o->local_rank > 0 ? o->local_rank : 0) % count;
    if (!cuda_initialized() && cuda_init(device, why, why_size)) return NULL;
    cuda_set_tf32(o->allow_tf32);
    adt = o->dtype == DTYPE_BF16 ? CUDA_BF16 : CUDA_F32;
    fill_table(adt);
    return &table;
}
