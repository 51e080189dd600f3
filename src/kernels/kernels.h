/* kernels.h: the compute boundary between the model and a backend.
 * The model (src/model/), the optimizer and the parallel modes call only these functions, on
 * flat row-major buffers that live in the backend's memory ("device memory"). Each function
 * dispatches at run time through the selected backend's table of function pointers
 * (src/kernels/backend.h, docs/GPU.md): the CPU backend (cpu_*.c: OpenBLAS/AVX-512 + OpenMP,
 * fp32; cpu_bf16.c: the same with bf16 activations emulated) or the CUDA backend (*.cu, built
 * when nvcc is found). kernels_select picks one per process, before any allocation.
 * Conventions:
 *   - N rows of activations (N = B*T tokens), C channels; weights are [out, in] (nn.Linear).
 *   - `real *` buffers hold fp32 (the f64 gradient-check build: double): master weights,
 *     gradients, optimizer state, the residual stream and its gradient, norm/softmax/loss
 *     statistics. `act *` buffers hold elements of the run's activation dtype (act_size()
 *     bytes each: fp32, or bf16 under --dtype bf16): GEMM inputs and outputs, the working copy
 *     of the weights, attention inputs/outputs, MLP activations and their gradients. `act` is an
 *     incomplete type on purpose: offsets go through act_at(), never pointer arithmetic. The
 *     exact rounding points are listed in docs/GPU.md ("Mixed precision").
 *   - *_backward functions ACCUMULATE (+=) into parameter gradients, so gradient
 *     accumulation over micro-batches needs no extra pass; input gradients are written
 *     (=) unless the argument says otherwise.
 *   - Every reduction has a fixed order independent of the thread count, so results are
 *     bit-identical for any --threads (and run to run on every backend by default).
 *   - Kernels are queued in order on the backend's one compute stream; functions returning a
 *     host value (a double, a count) wait for the work queued before them. Host code reads or
 *     writes device buffers only through the copy functions below (docs/GPU.md, "Memory"). */
#ifndef MYRIAD_KERNELS_KERNELS_H
#define MYRIAD_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/real.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- backend selection (once per process, before any device allocation) ---- */
typedef enum { DTYPE_F32 = 0, DTYPE_BF16 = 1 } Dtype;
typedef struct act act; /* one activation element: fp32 or bf16 by the run's dtype (never dereferenced) */

typedef struct {
    const char *device; /* "cpu" or "cuda"; NULL: cuda when usable (kernels_cuda_usable), else cpu */
    int dtype;          /* a Dtype; -1: bf16 on cuda, fp32 on cpu */
    int local_rank;     /* this process's rank on its machine: picks GPU local_rank % visible GPUs
                           (several ranks may share one GPU) */
    int allow_tf32;     /* fp32 GEMMs may use TF32 tensor cores (--tf32); off: fp32 is fp32 */
} KernelOptions;
/* Select the backend for this process (once, before any device allocation; the CPU fp32 table
 * is current until then). Resolves the defaults in *o. -1 + a one-line reason: unknown device,
 * no GPU, a binary built without CUDA, bf16 in the f64 build. */
int kernels_select(KernelOptions *o);
/* Whether `--device cuda` could be selected now (this binary has CUDA and a GPU is visible);
 * why (may be NULL) says why not. */
int kernels_cuda_usable(char *why, size_t why_size);
/* This process's rank on its machine from the launcher's environment (Open MPI, Slurm, PMIx); 0. */
int kernels_local_rank(void);
const char *kernels_device(void); /* "cpu" or "cuda" */
Dtype kernels_dtype(void);
const char *dtype_name(Dtype dt); /* "fp32", "bf16" */
int dtype_parse(const char *s, Dtype *out); /* -1 unless s is fp32 or bf16 */

typedef struct {
    char name[256];       /* "NVIDIA H200", or the CPU's model name */
    size_t total_bytes;   /* device memory (the CPU: physical memory) */
    size_t free_bytes;    /* free now (the CPU: MemAvailable) */
    int ordinal;          /* which GPU; 0 on the CPU */
    int count;            /* GPUs visible to this process; 1 on the CPU */
    int sm_major, sm_minor; /* compute capability; 0 on the CPU */
} DeviceInfo;
int kernels_device_info(DeviceInfo *out); /* -1 + reason on failure */
/* Bytes this process holds in dev_alloc* allocations now and at most since the start. */
void kernels_memory_usage(size_t *in_use, size_t *peak);

/* ---- device memory and copies ---- */
void *dev_alloc_bytes(size_t bytes); /* zeroed; dies on out-of-memory naming bytes asked and free */
real *dev_alloc(size_t count);       /* fp32 (real) elements, zeroed */
act *dev_alloc_act(size_t count);    /* activation elements, zeroed */
void dev_free(void *p);              /* NULL is fine */
void dev_zero(real *p, size_t count);
void dev_zero_act(act *p, size_t count);
void dev_zero_bytes(void *p, size_t bytes);
size_t act_size(void); /* bytes per act element: sizeof(real), or 2 under bf16 */
static inline act *act_at(const act *p, size_t i) { return (act *)((char *)p + i * act_size()); }
/* Synchronous copies (wait for queued work that writes src / reads dst). */
void dev_to_host(void *host, const void *dev, size_t bytes);
void host_to_dev(void *dev, const void *host, size_t bytes);
void dev_to_dev(void *dst, const void *src, size_t bytes);
/* Pinned host memory (page-locked for DMA on CUDA; plain memory on the CPU): the host side of
 * asynchronous copies, MPI staging buffers, checkpoint snapshots. */
void *host_alloc_pinned(size_t bytes);
void host_free_pinned(void *p);
/* Asynchronous copies: queued in order with the kernels (a later kernel sees the data; an
 * earlier kernel's results are what is copied). The host buffer must be pinned and must not be
 * touched until dev_sync() returns. */
void host_to_dev_async(void *dev, const void *host, size_t bytes);
void dev_to_host_async(void *host, const void *dev, size_t bytes);
void dev_sync(void); /* wait for everything queued */
/* Checkpoint snapshots: a device -> pinned host copy ordered after the work queued so far that
 * may overlap the compute queued after it (a side stream and copy engine on a GPU: the next
 * step's forward and backward run while the state is copied); dev_snapshot_wait() waits, on the
 * host and from any thread, for every snapshot issued. The device buffer must not change until
 * then (checkpoints wait before the optimizer update). */
void dev_snapshot_async(void *host, const void *dev, size_t bytes);
void dev_snapshot_wait(void);
/* Whether host code may read and write device pointers directly (the CPU backend, unless
 * MYRIAD_DEVICE_GUARD=1 or =strict makes its memory inaccessible to rehearse a GPU).
 * Code that may skip a staging copy when this holds must give the same bits either way. */
int dev_host_accessible(void);
/* Device memory handed to a transport library that moves it itself (a CUDA-aware MPI, NCCL):
 * whether this backend allows it (a GPU, the plain CPU backend, the strict guard; not
 * MYRIAD_DEVICE_GUARD=1, whose memory is closed outside kernel calls), and the address such a
 * library is given for device pointer p: p itself, or under MYRIAD_DEVICE_GUARD=strict the
 * emulated device's own mapping of it, so that only the library's call sites can reach the bytes
 * and any other host access still faults. NULL where not allowed. Only transports call these. */
int dev_transport_capable(void);
void *dev_transport_address(const void *p);
/* Conversions between fp32 and the activation dtype (round to nearest even), device to
 * device; a copy in fp32 runs. */
void act_from_f32(act *dst, const real *src, size_t n);
void act_to_f32(real *dst, const act *src, size_t n);
/* Device activations read into a host fp32 array (sampling, tests). */
void act_to_host_f32(float *host, const act *dev, size_t n);
/* fp32 <-> bf16 arrays on the device whatever the run's dtype (bf16 gradient reduction). */
void dev_f32_to_bf16(uint16_t *dst, const real *src, size_t n);
void dev_bf16_to_f32(real *dst, const uint16_t *src, size_t n);

/* ---- streams and events: a communication stream beside the compute stream ----
 * Every op above runs on the compute stream. A transport library (NCCL) queues its work on the
 * communication stream, ordered with the compute stream only by events: record an event on one
 * stream, make the other wait for it. So a reduction queued after a gradient bucket's backward
 * runs while the next layers' backward runs (docs/COMM.md). On the CPU the compute stream is
 * synchronous and the communication stream holds what a library queued until it is waited for
 * (kernels/cpu/cpu_stream.h), so missing orderings read stale data there too. */
typedef enum { STREAM_COMPUTE = 0, STREAM_COMM = 1 } DevStream;
typedef struct DevEvent DevEvent;
void *dev_stream_handle(DevStream s);           /* cudaStream_t on CUDA; a CpuStream on the CPU */
DevEvent *dev_event_create(void);
void dev_event_destroy(DevEvent *e);
void dev_event_record(DevEvent *e, DevStream s);      /* marks the work queued on s so far */
void dev_stream_wait_event(DevStream s, DevEvent *e); /* work queued on s from now on runs after e's */
int dev_event_query(DevEvent *e);                     /* 1 when e's work is done; never blocks; any thread */
void dev_event_sync(DevEvent *e);                     /* the host waits for e's work */

void kernels_set_threads(int threads); /* host threads of the CPU backend; BLAS is called from them */
int kernels_threads(void);

/* ---- linear layer: out[N,OC] = inp[N,IC] @ w[OC,IC]^T + bias (fp32 accumulation; the bias is
 * added in fp32 before the output is rounded). out is act, or real when out_f32 (the row-parallel
 * projections that feed the fp32 residual stream). w is the working copy (act). bias may be NULL. */
void matmul_forward(void *out, int out_f32, const act *inp, const act *w, const real *bias, int N, int IC, int OC);
/* dinp (= or += when accumulate_dinp) dout @ w, act or real (dinp_f32) and may be NULL;
 * dw += dout^T @ inp (fp32 master gradient); dbias += colsum(dout) (may be NULL). */
void matmul_backward(void *dinp, int dinp_f32, real *dw, real *dbias, const act *dout, const act *inp, const act *w,
                     int N, int IC, int OC, int accumulate_dinp);
/* The LM head over a padded vocabulary (model_vocab_rows): logits[N,Vr] = inp[N,IC] @ w[Vr,IC]^T, where
 * only the first V of the Vr rows of w are real (the rest zero) and logits' columns past V come out 0;
 * backward: dinp = dlogits @ w (fp32, overwritten), dw += dlogits^T @ inp, dlogits' columns past V 0.
 * Why not matmul_* over Vr: the CPU multiplies only the V real rows, so padding never changes a GEMM's
 * shape (BLAS gives other bits for another shape, and padded runs must equal unpadded ones bit for
 * bit); CUDA multiplies all Vr, the aligned strides that are the point of padding. */
void lm_head_forward(act *logits, const act *inp, const act *w, int N, int IC, int V, int Vr);
void lm_head_backward(real *dinp, real *dw, const act *dlogits, const act *inp, const act *w, int N, int IC, int V,
                      int Vr);

/* ---- normalisation: fp32 statistics (mean/rstd saved per row for backward) from the fp32
 * residual stream; out (the next GEMM's input) rounded to act. Backward is fp32 throughout. ---- */
void layernorm_forward(act *out, real *mean, real *rstd, const real *inp, const real *w, const real *b, int N, int C,
                       real eps);
/* dinp += ..., dw += ..., db += ... */
void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, int N, int C);
void rmsnorm_forward(act *out, real *rstd, const real *inp, const real *w, int N, int C, real eps);
void rmsnorm_backward(real *dinp, real *dw, const real *dout, const real *inp, const real *w, const real *rstd, int N,
                      int C);

/* ---- pointwise (computed in fp32, rounded on store) ---- */
void gelu_forward(act *out, const act *inp, size_t n);                  /* tanh approximation */
void gelu_backward(act *dinp, const act *inp, const act *dout, size_t n); /* dinp = ... */
/* inp rows are [gate (F) | up (F)]: out = silu(gate) * up, out is [N, F]. */
void swiglu_forward(act *out, const act *inp, int N, int F);
void swiglu_backward(act *dinp, const act *inp, const act *dout, int N, int F);
void residual_forward(real *out, const real *a, const real *b, size_t n); /* out = a + b (fp32 residual) */
void add_inplace(real *acc, const real *x, size_t n);                    /* acc += x */

/* ---- embeddings (fp32 tables into the fp32 residual stream; tokens are device int32) ---- */
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

/* ---- vocabulary-parallel softmax cross-entropy: per-row pieces over this rank's logits [N, ld]
 * (act), combined across ranks by the caller (max, then sums). Columns [0, V) are this rank's
 * tokens; [V, ld) are the padded vocabulary (--vocab-pad): never read, and the gradient there is
 * written as 0. V may be 0 (max -inf, sum 0). The double arrays are device buffers of N values
 * (the caller copies them to the host for the exchange and back). */
void vocab_shard_row_max(const act *logits, int N, int V, int ld, double *max);
void vocab_shard_row_sumexp(const act *logits, int N, int V, int ld, const double *max, double *sum);
/* the logit of each row's target if this rank holds it, else 0 */
void vocab_shard_target_logit(const act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                              double *out);
/* logits <- scale * (softmax - onehot) on this rank's columns, 0 on its padding columns */
void vocab_shard_grad(act *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld, const double *max,
                      const double *sum, double scale);
/* losses[n] = log(sum[n]) - (target[n] - max[n]) (rounded to real); returns their mean, summed in
 * row order in double from the rounded values (as cross_entropy_forward_backward does). */
double vocab_shard_losses(real *losses, const double *max, const double *sum, const double *target, int N);

/* ---- rotary embeddings (rotate-half), applied in place to the q and k heads of each row
 * (computed in fp32, rounded on store). qkv rows have `stride` values; q = heads*hd at offset
 * 0, k = kv_heads*hd right after. cos/sin tables are [max_seq, hd/2] fp32; row n has position
 * n % T. inverse=1 rotates back (this is the backward of the rotation). */
/* inv_freq: hd/2 host floats, the angle per position of each dimension pair (model/rope_scaling.c). */
void rope_tables(real *cos_t, real *sin_t, int max_seq, int hd, const float *inv_freq);
void rope_apply(act *qkv, const real *cos_t, const real *sin_t, int N, int T, int heads, int kv_heads, int hd,
                int stride, int inverse);

/* ---- causal self-attention over qkv rows [q (H*hd) | k (KV*hd) | v (KV*hd)] ----
 * out [N, H*hd]. `saved` holds what the backend keeps for backward, attention_saved_count()
 * fp32 values: the CPU backend (the unfused reference) the softmax probabilities [B, H, T, T];
 * a fused (flash-style) backend the per-row log-sum-exp [B, H, T], never a T x T matrix. */
size_t attention_saved_count(int B, int T, int H);
void attention_forward(act *out, real *saved, const act *qkv, int B, int T, int H, int KV, int hd);
/* dqkv = gradient w.r.t. qkv (written), from dout, the forward's inputs, its output `out` and
 * what it saved. */
void attention_backward(act *dqkv, const act *dout, const act *qkv, const act *out, const real *saved, int B, int T,
                        int H, int KV, int hd);

/* ---- blockwise attention (context parallelism: src/model/ring_attention.c) ----
 * One block pair: the queries of one chunk of a sequence against the keys/values of another,
 * for B sequences and every head (GQA: query head h reads kv head h / (H / KV)). The mask of a
 * pair is chosen by the caller from the chunks' positions: causal on the diagonal (same chunk:
 * query t sees keys s <= t; Sq == Sk), full for keys entirely before the queries; pairs with
 * keys entirely after the queries are skipped (never called). Buffers are strided so that the
 * chunks are read where they lie: element (b, t, head, d) of q is q[b*q_bs + t*q_rs + head*hd + d],
 * likewise k, v, dk, dv with kv_*, out, dout, dq with o_*; lse and delta are [b*lse_bs + h*lse_hs + t].
 * These members are optional in a backend (NULL: --cp is refused with a one-line reason). */
typedef struct {
    int B, Sq, Sk, H, KV, hd;
    int causal;
    int q_rs, kv_rs, o_rs;          /* row strides (elements) */
    size_t q_bs, kv_bs, o_bs;       /* batch strides (elements) */
    size_t lse_bs, lse_hs;          /* lse / delta strides */
    /* packed documents (optional, NULL: none): query row t of sequence b sees only keys at global
     * positions >= q_lo[b*lo_bs + t] (its document's first position; device int32); the block's
     * key row j is at global position k_pos0 + j. A row that sees no key of a block is left as it was. */
    const int32_t *q_lo;
    size_t lo_bs;
    int k_pos0;
} AttnBlock;
/* Whether the selected backend has the blockwise attention kernels (why says which is missing). */
int attention_block_supported(char *why, size_t why_size);
/* Online-softmax step: folds this block's attention into the running (out, lse): out [fp32]
 * holds the output normalised over the keys seen so far, lse their log-sum-exp (-INFINITY and
 * anything in out before the first block). Returns the block's own lse merged with the old by
 * lse' = log(exp(lse) + exp(lse_blk)), out' = out*exp(lse - lse') + out_blk*exp(lse_blk - lse'). */
void attention_block_forward(real *out, real *lse, const act *q, const act *k, const act *v, const AttnBlock *s);
/* delta[b,h,t] = sum_d dout * out (the final output, act) over head h's hd values. */
void attention_block_delta(real *delta, const act *dout, const act *out, const AttnBlock *s);
/* Backward of one block pair given the final lse and delta: dq += dS k, dk += dS^T q,
 * dv += P^T dout (fp32 accumulators), P = exp(scale q k^T - lse), dS = P (dout v^T - delta) scale. */
void attention_block_backward(real *dq, real *dk, real *dv, const act *dout, const act *q, const act *k,
                              const act *v, const real *lse, const real *delta, const AttnBlock *s);
/* rows x row_bytes bytes from src (rows src_pitch bytes apart) to dst (dst_pitch apart), device
 * to device: packing and unpacking strided rows (the k/v columns of qkv rows). */
void dev_copy_rows(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t row_bytes, int rows);

/* ---- softmax + cross-entropy, fused (statistics in fp32/double) ----
 * Rows of ld values (the padded vocabulary, --vocab-pad), of which columns [0, V) are the
 * vocabulary: losses[n] = -log softmax(logits[n][0..V))[targets[n]]; the padding columns are never
 * read; returns the mean over n (double, on the host). With want_grad, logits are overwritten by
 * dloss/dlogits for the mean loss times grad_scale, and the padding columns by 0. */
double cross_entropy_forward_backward(act *logits, real *losses, const int32_t *targets, int N, int V, int ld,
                                      int want_grad, double grad_scale);

/* ---- mixture of experts (src/model/moe.c); router statistics in fp32, token rows act ----
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
void moe_gather_rows(act *out, const act *x, const int32_t *idx, const real *scale, int R, int C);
/* out[idx[r]] = x[r]: the inverse of a gather by a permutation. */
void moe_scatter_rows(act *out, const act *x, const int32_t *idx, int R, int C);
/* out[idx[r]] += (w ? w[r] : 1) * x[r] into fp32 rows, in order r = 0, 1, ... (the weighted
 * combine and the backward of a gather; a fixed order whatever the threads). */
void moe_combine(real *out, const act *x, const int32_t *idx, const real *w, int R, int C);
/* out[r] = dot(a[idx[r]], b[r]) over C values (double accumulation): d loss / d gate. */
void moe_row_dot(real *out, const act *a, const int32_t *idx, const act *b, int R, int C);
/* dst[slot[a]] = src[a] for a < A (dst is not otherwise written): per-assignment values into
 * their (token, choice) slots. */
void moe_scatter_scalars(real *dst, const real *src, const int32_t *slot, int A);

/* ---- optimizer: one AdamW update of n elements (torch.optim.AdamW's operation order and
 * rounding points; see src/optim/adamw.c for how the scalars are formed). decay = 1 - lr*wd,
 * applied only when apply_decay. */
typedef struct {
    real decay, beta1, beta2, one_minus_beta1, one_minus_beta2, bc2_sqrt, eps, neg_step;
    int apply_decay;
} AdamWScalars;
void adamw_update(real *p, const real *g, real *m, real *v, size_t n, const AdamWScalars *s);

/* ---- deterministic reductions (fp32 buffers; results on the host) ---- */
double sum_squares(const real *x, size_t n); /* fixed-order, double accumulation */
void scale_inplace(real *x, real s, size_t n);
/* The comm layer's bf16 reduction on the device (docs/COMM.md): src holds nsrc copies of n bf16
 * values back to back; out[k] = bf16(fp32 sum over the copies in order), or their max (op 2), or the
 * sum divided by divisor (op 1, avg); op numbers are CommOp's. One rounding per element. */
void dev_reduce_bf16(uint16_t *out, const uint16_t *src, int nsrc, size_t n, int op, int divisor);

#ifdef __cplusplus
}
#endif

#endif
