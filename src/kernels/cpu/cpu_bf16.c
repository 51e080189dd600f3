/* cpu_bf16.c: the CPU backend with bf16 activations (`--device cpu --dtype bf16`), an emulation
 * of the CUDA backend's mixed precision: act buffers really hold bf16 (2 bytes), and each op
 * widens its bf16 operands to fp32, runs the fp32 reference kernel (cpu_kernels.h) and rounds
 * its act outputs to nearest even, once. The rounding points are therefore exactly the stored
 * tensors listed in docs/GPU.md; everything inside a kernel is fp32 as in the reference.
 * Slow (extra passes and allocations per op) and meant for testing bf16 numerics on any
 * machine. Ops without act operands are the fp32 table's. Not in the f64 build. */
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/cpu/cpu_kernels.h"

#ifdef MYRIAD_F64
const KernelBackend *cpu_bf16_backend(void) { return NULL; }
#else
#include "util/bf16.h"

#define B16(p) ((uint16_t *)(p))
#define CB16(p) ((const uint16_t *)(p))

static real *alloc_f32(size_t n) {
    real *p = malloc((n ? n : 1) * sizeof(real));
    if (!p) abort();
    return p;
}

/* a new fp32 copy of n bf16 elements */
static real *widen(const act *x, size_t n) {
    real *y = alloc_f32(n);
    const uint16_t *s = CB16(x);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) y[i] = bf16_to_f32(s[i]);
    return y;
}

/* round n fp32 values into bf16 storage */
static void narrow(act *dst, const real *src, size_t n) {
    uint16_t *d = B16(dst);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) d[i] = f32_to_bf16(src[i]);
}

/* round, then free the fp32 buffer */
static void narrow_free(act *dst, real *src, size_t n) {
    narrow(dst, src, n);
    free(src);
}

static void b_act_from_f32(act *dst, const real *src, size_t n) { narrow(dst, src, n); }
static void b_act_to_f32(real *dst, const act *src, size_t n) {
    const uint16_t *s = CB16(src);
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(s[i]);
}

static void b_matmul_forward(void *out, int out_f32, const act *inp, const act *w, const real *bias, int N, int IC,
                             int OC) {
    real *x = widen(inp, (size_t)N * IC), *wf = widen(w, (size_t)OC * IC);
    if (out_f32) {
        cpu_matmul_forward(out, x, wf, bias, N, IC, OC);
    } else {
        real *y = alloc_f32((size_t)N * OC);
        cpu_matmul_forward(y, x, wf, bias, N, IC, OC);
        narrow_free(out, y, (size_t)N * OC);
    }
    free(x);
    free(wf);
}

/* only the V real rows of w are widened: the kernel reads no others */
static void b_lm_head_forward(act *logits, const act *inp, const act *w, int N, int IC, int V, int Vr) {
    real *x = widen(inp, (size_t)N * IC), *wf = widen(w, (size_t)V * IC), *y = alloc_f32((size_t)N * Vr);
    cpu_lm_head_forward(y, x, wf, N, IC, V, Vr);
    narrow_free(logits, y, (size_t)N * Vr);
    free(x);
    free(wf);
}

static void b_lm_head_backward(real *dinp, real *dw, const act *dlogits, const act *inp, const act *w, int N, int IC,
                               int V, int Vr) {
    real *d = widen(dlogits, (size_t)N * Vr), *x = widen(inp, (size_t)N * IC), *wf = widen(w, (size_t)V * IC);
    cpu_lm_head_backward(dinp, dw, d, x, wf, N, IC, V, Vr);
    free(d);
    free(x);
    free(wf);
}

static void b_matmul_backward(void *dinp, int dinp_f32, real *dw, real *dbias, const act *dout, const act *inp,
                              const act *w, int N, int IC, int OC, int accumulate_dinp) {
    real *d = widen(dout, (size_t)N * OC), *x = widen(inp, (size_t)N * IC), *wf = widen(w, (size_t)OC * IC);
    real *dx = NULL;
    if (dinp) dx = dinp_f32 ? (real *)dinp : accumulate_dinp ? widen(dinp, (size_t)N * IC) : alloc_f32((size_t)N * IC);
    cpu_matmul_backward(dx, dw, dbias, d, x, wf, N, IC, OC, accumulate_dinp);
    if (dinp && !dinp_f32) narrow_free(dinp, dx, (size_t)N * IC);
    free(d);
    free(x);
    free(wf);
}

static void b_layernorm_forward(act *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, int N,
                                int C, real eps) {
    real *y = alloc_f32((size_t)N * C);
    cpu_layernorm_forward(y, mean, rstd, inp, w, b, N, C, eps);
    narrow_free(out, y, (size_t)N * C);
}

static void b_rmsnorm_forward(act *out, real *rstd, const real *inp, const real *w, int N, int C, real eps) {
    real *y = alloc_f32((size_t)N * C);
    cpu_rmsnorm_forward(y, rstd, inp, w, N, C, eps);
    narrow_free(out, y, (size_t)N * C);
}

static void b_gelu_forward(act *out, const act *inp, size_t n) {
    real *x = widen(inp, n), *y = alloc_f32(n);
    cpu_gelu_forward(y, x, n);
    narrow_free(out, y, n);
    free(x);
}

static void b_gelu_backward(act *dinp, const act *inp, const act *dout, size_t n) {
    real *x = widen(inp, n), *d = widen(dout, n), *dx = alloc_f32(n);
    cpu_gelu_backward(dx, x, d, n);
    narrow_free(dinp, dx, n);
    free(x);
    free(d);
}

static void b_swiglu_forward(act *out, const act *inp, int N, int F) {
    real *x = widen(inp, (size_t)N * 2 * F), *y = alloc_f32((size_t)N * F);
    cpu_swiglu_forward(y, x, N, F);
    narrow_free(out, y, (size_t)N * F);
    free(x);
}

static void b_swiglu_backward(act *dinp, const act *inp, const act *dout, int N, int F) {
    real *x = widen(inp, (size_t)N * 2 * F), *d = widen(dout, (size_t)N * F), *dx = alloc_f32((size_t)N * 2 * F);
    cpu_swiglu_backward(dx, x, d, N, F);
    narrow_free(dinp, dx, (size_t)N * 2 * F);
    free(x);
    free(d);
}

static void b_vocab_shard_row_max(const act *logits, int N, int V, int ld, double *max) {
    real *z = widen(logits, (size_t)N * ld);
    cpu_vocab_shard_row_max(z, N, V, ld, max);
    free(z);
}

static void b_vocab_shard_row_sumexp(const act *logits, int N, int V, int ld, const double *max, double *sum) {
    real *z = widen(logits, (size_t)N * ld);
    cpu_vocab_shard_row_sumexp(z, N, V, ld, max, sum);
    free(z);
}

static void b_vocab_shard_target_logit(const act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                                       double *out) {
    real *z = widen(logits, (size_t)N * ld);
    cpu_vocab_shard_target_logit(z, targets, vocab_lo, N, V, ld, out);
    free(z);
}

static void b_vocab_shard_grad(act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                               const double *max, const double *sum, double scale) {
    real *z = widen(logits, (size_t)N * ld);
    cpu_vocab_shard_grad(z, targets, vocab_lo, N, V, ld, max, sum, scale);
    narrow_free(logits, z, (size_t)N * ld);
}

static void b_rope_apply(act *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                         int stride, int inverse) {
    /* the v columns pass through unchanged (widening and rounding back is exact) */
    real *x = widen(qkv, (size_t)N * stride);
    cpu_rope_apply(x, cos_t, sin_t, N, T, heads, kv_heads, hd, stride, inverse);
    narrow_free(qkv, x, (size_t)N * stride);
}

static void b_attention_forward(act *out, real *saved, const act *qkv, int B, int T, int H, int KV, int hd) {
    size_t N = (size_t)B * T;
    real *x = widen(qkv, N * (H + 2 * KV) * hd), *y = alloc_f32(N * H * hd);
    cpu_attention_forward(y, saved, x, B, T, H, KV, hd);
    narrow_free(out, y, N * H * hd);
    free(x);
}

static void b_attention_backward(act *dqkv, const act *dout, const act *qkv, const act *out, const real *saved, int B,
                                 int T, int H, int KV, int hd) {
    (void)out;
    size_t N = (size_t)B * T, W = (size_t)(H + 2 * KV) * hd;
    real *x = widen(qkv, N * W), *d = widen(dout, N * H * hd), *dx = alloc_f32(N * W);
    cpu_attention_backward(dx, d, x, saved, B, T, H, KV, hd);
    narrow_free(dqkv, dx, N * W);
    free(x);
    free(d);
}

static double b_cross_entropy(act *logits, real *losses, const int32_t *targets, int N, int V, int ld,
                              int want_grad, double grad_scale) {
    real *z = widen(logits, (size_t)N * ld);
    double mean = cpu_cross_entropy_forward_backward(z, losses, targets, N, V, ld, want_grad, grad_scale);
    if (want_grad) narrow(logits, z, (size_t)N * ld);
    free(z);
    return mean;
}

/* row moves stay in bf16: a plain copy, or one rounding of the scaled row */
static void b_moe_gather_rows(act *out, const act *x, const int32_t *idx, const real *scale, int R, int C) {
    for (int r = 0; r < R; r++) {
        const uint16_t *src = CB16(x) + (size_t)idx[r] * C;
        uint16_t *dst = B16(out) + (size_t)r * C;
        if (!scale) {
            memcpy(dst, src, (size_t)C * sizeof(uint16_t));
            continue;
        }
        real s = scale[r];
        for (int c = 0; c < C; c++) dst[c] = f32_to_bf16(s * bf16_to_f32(src[c]));
    }
}

static void b_moe_scatter_rows(act *out, const act *x, const int32_t *idx, int R, int C) {
    for (int r = 0; r < R; r++)
        memcpy(B16(out) + (size_t)idx[r] * C, CB16(x) + (size_t)r * C, (size_t)C * sizeof(uint16_t));
}

static void b_moe_combine(real *out, const act *x, const int32_t *idx, const real *w, int R, int C) {
    real *xf = widen(x, (size_t)R * C);
    cpu_moe_combine(out, xf, idx, w, R, C);
    free(xf);
}

static void b_moe_row_dot(real *out, const act *a, const int32_t *idx, const act *b, int R, int C) {
    for (int r = 0; r < R; r++) {
        const uint16_t *u = CB16(a) + (size_t)idx[r] * C, *v = CB16(b) + (size_t)r * C;
        double s = 0;
        for (int c = 0; c < C; c++) s += (double)bf16_to_f32(u[c]) * bf16_to_f32(v[c]);
        out[r] = (real)s;
    }
}

const KernelBackend *cpu_bf16_backend(void) {
    static KernelBackend t;
    static int built;
    if (built) return &t;
    t = cpu_f32_table;
    t.dtype = DTYPE_BF16;
    t.act_size = sizeof(uint16_t);
    t.act_from_f32 = b_act_from_f32;
    t.act_to_f32 = b_act_to_f32;
    t.matmul_forward = b_matmul_forward;
    t.matmul_backward = b_matmul_backward;
    t.lm_head_forward = b_lm_head_forward;
    t.lm_head_backward = b_lm_head_backward;
    t.layernorm_forward = b_layernorm_forward;
    t.rmsnorm_forward = b_rmsnorm_forward;
    t.gelu_forward = b_gelu_forward;
    t.gelu_backward = b_gelu_backward;
    t.swiglu_forward = b_swiglu_forward;
    t.swiglu_backward = b_swiglu_backward;
    t.vocab_shard_row_max = b_vocab_shard_row_max;
    t.vocab_shard_row_sumexp = b_vocab_shard_row_sumexp;
    t.vocab_shard_target_logit = b_vocab_shard_target_logit;
    t.vocab_shard_grad = b_vocab_shard_grad;
    t.rope_apply = b_rope_apply;
    t.attention_forward = b_attention_forward;
    t.attention_backward = b_attention_backward;
    /* no blockwise attention in bf16 yet: --cp is refused (kernels.h) rather than fed bf16 as fp32 */
    t.attention_block_forward = NULL;
    t.attention_block_delta = NULL;
    t.attention_block_backward = NULL;
    t.cross_entropy_forward_backward = b_cross_entropy;
    t.moe_gather_rows = b_moe_gather_rows;
    t.moe_scatter_rows = b_moe_scatter_rows;
    t.moe_combine = b_moe_combine;
    t.moe_row_dot = b_moe_row_dot;
    built = 1;
    return &t;
}
#endif
