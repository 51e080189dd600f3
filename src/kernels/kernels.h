/* kernels.h: the compute boundary between the model and a backend.
 * The model (src/model/) calls only these functions, on flat row-major buffers that live in
 * the backend's memory. The only implementation today is the CPU one, src/kernels/cpu_*.c
 * (OpenBLAS + OpenMP); a GPU backend (not written yet) is to implement the same declarations,
 * so that the model and trainer do not change per device. Conventions:
 *   - N rows of activations (N = B*T tokens), C channels; weights are [out, in] (nn.Linear).
 *   - *_backward functions ACCUMULATE (+=) into parameter gradients, so gradient
 *     accumulation over micro-batches needs no extra pass; input gradients are written
 *     (=) unless the argument says otherwise.
 *   - Every reduction has a fixed order independent of the thread count, so results are
 *     bit-identical for any --threads. */
#ifndef MYRIAD_KERNELS_KERNELS_H
#define MYRIAD_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/real.h"

/* ---- memory and threads ---- */
real *dev_alloc(size_t count);     /* zeroed; dies on out-of-memory with the size asked */
void dev_free(real *p);
void dev_zero(real *p, size_t count);
void kernels_set_threads(int threads); /* OpenMP threads; BLAS is called from them, one thread each */
int kernels_threads(void);

/* ---- general matrix multiply, row-major: C[M,N] (= or += when accumulate) op(A) @ op(B),
 * op(A) is [M,K] (A stored [K,M] when trans_a), op(B) is [K,N] (B stored [N,K] when trans_b).
 * The CPU backend uses its own AVX-512 kernel in fp32 when the CPU has it (gemm_is_native()
 * says so), else BLAS. The sum over K runs in an order fixed by the shapes. */
void gemm(int trans_a, int trans_b, int M, int N, int K, const real *A, int lda, const real *B, int ldb,
          int accumulate, real *C, int ldc);
int gemm_is_native(void);

/* ---- linear layer: out[N,OC] = inp[N,IC] @ w[OC,IC]^T + bias ---- */
void matmul_forward(real *out, const real *inp, const real *w, const real *bias, int N, int IC, int OC);
/* dinp (= or += when accumulate_dinp) dout @ w; dw += dout^T @ inp; dbias += colsum(dout).
 * dbias may be NULL. */
void matmul_backward(real *dinp, real *dw, real *dbias, const real *dout, const real *inp, const real *w,
                     int N, int IC, int OC, int accumulate_dinp);

/* ---- normalisation (mean/rstd are saved per row for backward) ---- */
void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b,
                       int N, int C, real eps);
/* dinp += ..., dw += ..., db += ... */
void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, int N, int C);
void rmsnorm_forward(real *out, real *rstd, const real *inp, const real *w, int N, int C, real eps);
void rmsnorm_backward(real *dinp, real *dw, const real *dout, const real *inp, const real *w, const real *rstd,
                      int N, int C);

/* ---- pointwise ---- */
void gelu_forward(real *out, const real *inp, size_t n);             /* tanh approximation */
void gelu_backward(real *dinp, const real *inp, const real *dout, size_t n); /* dinp = ... */
/* inp rows are [gate (F) | up (F)]: out = silu(gate) * up, out is [N, F]. */
void swiglu_forward(real *out, const real *inp, int N, int F);
void swiglu_backward(real *dinp, const real *inp, const real *dout, int N, int F);
void residual_forward(real *out, const real *a, const real *b, size_t n); /* out = a + b */
void add_inplace(real *acc, const real *x, size_t n);                    /* acc += x */

/* ---- embeddings ---- */
/* out[n] = tok[tokens[n]] (+ pos[n % T] when pos != NULL) */
void embedding_forward(real *out, const int32_t *tokens, const real *tok, const real *pos, int N, int T, int C);
/* dtok[tokens[n]] += dout[n]; dpos[n % T] += dout[n] (when dpos != NULL); deterministic order. */
void embedding_backward(real *dtok, real *dpos, const real *dout, const int32_t *tokens, int N, int T, int C);

/* ---- vocabulary-parallel embedding (tensor parallelism): this rank holds rows
 * [vocab_lo, vocab_lo + vocab_n) of the table; rows of other tokens are written as zeros. */
void embedding_shard_forward(real *out, const int32_t *tokens, const real *tok_shard, int vocab_lo, int vocab_n,
                             int N, int C);
void embedding_shard_backward(real *dtok_shard, const real *dout, const int32_t *tokens, int vocab_lo, int vocab_n,
                              int N, int C);
/* rows are global rows row0 .. row0 + N - 1 (sequence parallelism holds a block of them) */
void position_forward_add(real *out, const real *pos, int row0, int N, int T, int C); /* += pos[(row0+n) % T] */
void position_backward(real *dpos, const real *dout, int row0, int N, int T, int C);
void bias_add(real *out, const real *bias, int N, int C);      /* out[n] += bias */
void bias_backward(real *dbias, const real *dout, int N, int C); /* dbias += column sums (fixed order) */

/* ---- vocabulary-parallel softmax cross-entropy: per-row pieces over this rank's logits [N, V],
 * combined across ranks by the caller (max, then sums). */
void vocab_shard_row_max(const real *logits, int N, int V, double *max);
void vocab_shard_row_sumexp(const real *logits, int N, int V, const double *max, double *sum);
/* the logit of each row's target if this rank holds it, else 0 */
void vocab_shard_target_logit(const real *logits, const int32_t *targets, int vocab_lo, int N, int V, double *out);
/* logits <- scale * (softmax - onehot) on this rank's columns */
void vocab_shard_grad(real *logits, const int32_t *targets, int vocab_lo, int N, int V, const double *max,
                      const double *sum, double scale);

/* ---- rotary embeddings (rotate-half), applied in place to the q and k heads of each row.
 * qkv rows have `stride` values; q = heads*hd at offset 0, k = kv_heads*hd right after.
 * cos/sin tables are [max_seq, hd/2]; row n has position n % T. inverse=1 rotates back
 * (this is the backward of the rotation). */
void rope_tables(real *cos_t, real *sin_t, int max_seq, int hd, float theta);
void rope_apply(real *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                int stride, int inverse);

/* ---- causal self-attention over qkv rows [q (H*hd) | k (KV*hd) | v (KV*hd)] ----
 * out [N, H*hd]; att [B, H, T, T] holds the softmax probabilities (saved for backward). */
void attention_forward(real *out, real *att, const real *qkv, int B, int T, int H, int KV, int hd);
/* dqkv = gradient w.r.t. qkv (written), from dout and saved att. */
void attention_backward(real *dqkv, const real *dout, const real *qkv, const real *att, int B, int T, int H, int KV,
                        int hd);

/* ---- softmax + cross-entropy, fused ----
 * losses[n] = -log softmax(logits[n])[targets[n]]; returns the mean over n (double).
 * With want_grad, logits are overwritten by dloss/dlogits for the mean loss times grad_scale. */
double cross_entropy_forward_backward(real *logits, real *losses, const int32_t *targets, int N, int V,
                                      int want_grad, double grad_scale);

/* ---- mixture of experts (src/model/moe.c) ----
 * Router: probs [N, E] holds the router logits on entry and softmax(logits) on return; topk
 * [N, k] the chosen experts by falling probability (ties: the lower expert index); gates [N, k]
 * their probabilities renormalised over the k chosen. */
void moe_router_topk(real *probs, int32_t *topk, real *gates, int N, int E, int k);
/* dlogits [N, E] (written) from dgates [N, k] (d loss / d gate) through the renormalisation and
 * the softmax, plus d loss / d probs of the load-balancing loss: daux [N / T, E], the same for
 * every token of a sequence of T. */
void moe_router_backward(real *dlogits, const real *probs, const int32_t *topk, const real *gates, const real *dgates,
                         const real *daux, int N, int T, int E, int k);
/* out[r] = x[idx[r]] (x scale[r] when scale != NULL): gather token rows of C values. */
void moe_gather_rows(real *out, const real *x, const int32_t *idx, const real *scale, int R, int C);
/* out[idx[r]] = x[r]: the inverse of a gather by a permutation. */
void moe_scatter_rows(real *out, const real *x, const int32_t *idx, int R, int C);
/* out[idx[r]] += (w ? w[r] : 1) * x[r], in order r = 0, 1, ... (the weighted combine and the
 * backward of a gather; a fixed order whatever the threads). */
void moe_combine(real *out, const real *x, const int32_t *idx, const real *w, int R, int C);
/* out[r] = dot(a[idx[r]], b[r]) over C values (double accumulation): d loss / d gate. */
void moe_row_dot(real *out, const real *a, const int32_t *idx, const real *b, int R, int C);

/* ---- measured matmul rate (FLOP/s) of an n x n x n GEMM, best of `reps` ---- */
double kernels_measure_peak_flops(int n, int reps);

/* ---- deterministic reductions ---- */
double sum_squares(const real *x, size_t n); /* fixed-order, double accumulation */
void scale_inplace(real *x, real s, size_t n);

#endif
