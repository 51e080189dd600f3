/* model_types.h: the data of one model object as its layers share it: activations, gradient
 * scratch, the unit hooks, the parallel groups as callbacks (tensor, expert, context), the MoE
 * statistics and Model itself. The layers (model.c, moe.c, ring_attention.c) read and write these
 * structures; their functions are declared in their own headers (model.h, moe.h,
 * ring_attention.h), so a layer depends on the data, never on another layer's code. */
#ifndef MYRIAD_MODEL_MODEL_TYPES_H
#define MYRIAD_MODEL_MODEL_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/config.h"
#include "model/params.h"

/* With sequence parallelism the residual stream and the norms hold only this rank's rows
 * (N / tp of them); norm*_in are the all-gathered norm outputs the matmuls read. Without it,
 * norm*_in alias norm*. real buffers are fp32 (the residual stream, statistics); act buffers hold
 * the run's activation dtype (kernels.h; the rounding points are in docs/GPU.md). Every buffer
 * is device memory. `att` holds what attention saves for backward (attention_saved_count). */
typedef struct {
    /* per layer (arrays of pointers into acts) */
    real **res_in, **norm1_mean, **norm1_rstd, **att, **res_mid, **norm2_mean, **norm2_rstd;
    act **norm1, **norm1_in, **qkv, **attn_y, **norm2, **norm2_in, **fc, **fc_act;
    real *res_out, *normf_mean, *normf_rstd, *losses;
    act *normf, *normf_in, *logits;
    struct MoeActs **moe; /* per MoE layer: routing and expert activations (src/model/moe.c) */
} Activations;

/* d_res: the residual stream's gradient (fp32); d_norm: a norm output's gradient (fp32: the sum
 * of matmul input gradients, completed over tensor parallelism); full: [N, C] fp32, row-parallel
 * partial outputs and gathered gradients (sequence parallel); dres_act: [N, C] act, the residual
 * gradient rounded for the GEMMs that read it (bf16 runs only; NULL in fp32, where they read the
 * fp32 buffer itself). */
typedef struct {
    real *d_res, *d_norm, *d_norm_local, *full;
    act *d_qkv, *d_attn_y, *d_fc, *d_act, *dres_act;
} GradScratch;

/* Calls at unit boundaries (units: see params.h), so that data parallelism can gather sharded
 * parameters just before a unit runs, and reduce a unit's gradients as soon as they are final.
 * Forward visits units 0, 1..L, L+1; backward L+1, L..1, 0. NULL members are skipped.
 * Unit 0's backward (the embedding's) reads no weights, only token ids and the residual's
 * gradient: its before_backward needs the gradient buffer bound, not the parameters. */
typedef struct {
    void (*before_forward)(void *ctx, int unit);
    void (*after_forward)(void *ctx, int unit);
    void (*before_backward)(void *ctx, int unit);
    void (*after_backward)(void *ctx, int unit);
    /* sequence parallelism: may the replicated gradients of `unit` be summed over the group now?
     * Not while micro-batches still accumulate into the same buffer (the sum must happen once). */
    int (*sum_replicated_now)(void *ctx, int unit);
    void *ctx;
} ModelHooks;

/* Tensor parallelism as the model sees it: its rank in the group and two collectives, so that
 * the model needs no communication library (the comm-backed implementation lives in
 * src/parallel/tensor_parallel.c). size 1: no tensor parallelism. */
typedef struct {
    int size, rank;
    void (*sum)(void *ctx, real *x, size_t n);                  /* all-reduce sum, in place (device) */
    void (*sum_exact)(void *ctx, double *x, size_t n, int max); /* host doubles: exact sum (rank order) or max */
    /* sequence parallelism: rows split in rank order; n = this rank's element count (device) */
    void (*reduce_scatter)(void *ctx, const real *full, real *local, size_t n); /* sum, keep own rows */
    /* elements of elem_size bytes: sizeof(real) for fp32 rows, act_size() for activation rows */
    void (*all_gather)(void *ctx, const void *local, void *full, size_t n, size_t elem_size);
    int sp; /* sequence parallel (needs size > 1) */
    void *ctx;
} TensorParallel;

/* Expert parallelism as the model sees it: its rank in the ep group and an all-to-all-v of
 * 32-bit words (send_counts[r] words to rank r, packed in rank order; recv_counts[r] from r) in
 * device memory (device = 1: token rows) or host memory (0: counts), implemented over a comm
 * group in src/parallel/expert_parallel.c. size 1: all experts local. */
typedef struct {
    int size, rank;
    void (*all_to_all_v)(void *ctx, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                         int device);
    /* measurement aid (--a2a-barrier): when set, called before each all-to-all so that the
     * all-to-all's time excludes waiting for the other ranks (logged apart as the wait) */
    void (*barrier)(void *ctx);
    void *ctx;
} ExpertParallel;

/* Context parallelism as the model sees it (src/model/ring_attention.c, docs/PARALLEL.md): each
 * sequence of T tokens is cut into 2 x size chunks of T / (2 size) and this rank keeps chunks rank
 * and 2 size - 1 - rank (T / size rows per sequence, the same causal work on every rank); attention
 * passes K/V blocks around the ring. The exchange moves bytes between device buffers, implemented
 * over a comm group in src/parallel/context_parallel.c. size 1: no context parallelism. */
typedef struct {
    int size, rank;
    /* start sending `bytes` of `send` to the next rank of the ring and receiving as many from the
     * previous into `recv` on channel ch (0 or 1: two exchanges may be in flight); wait finishes it */
    void (*ring_start)(void *ctx, int ch, const void *send, void *recv, size_t bytes);
    void (*ring_wait)(void *ctx, int ch);
    /* host memory: every cp rank's `bytes` of `local` into `all`, in cp rank order (the MoE
     * router's statistics of whole sequences); bytes a multiple of 4 */
    void (*all_gather)(void *ctx, const void *local, void *all, size_t bytes);
    void *ctx;
    int whole;                   /* 1: forwards run whole sequences on every cp rank (sampling: no split, no ring) */
    struct RingScratch *scratch; /* ring_attention.c's buffers */
    int32_t *host_tokens;        /* [2 x host_n]: this rank's chunks of the batch's tokens and targets */
    size_t host_n;
    int32_t *pos, *lo;           /* [pos_n] host: each local row's position (restarting at each document
                                    under doc_mask) and its document's first global position */
    size_t pos_n;
} ContextParallel;

/* Mixture-of-experts figures since the last moe_stats_reset (this rank's tokens). */
typedef struct {
    int64_t *tokens;          /* [layers * experts]: assignments kept per (layer, expert) */
    int64_t dropped, assigned; /* assignments dropped by capacity, assignments made */
    double aux_sum;           /* load-balancing loss summed over MoE layers and forwards */
    int64_t forwards;         /* forwards counted */
    double a2a_bytes, a2a_s;  /* bytes this rank sent to other ranks in all-to-alls, and their time */
    double a2a_wait_s;        /* time in the barriers before them (--a2a-barrier) */
} MoeStats;

/* Activation recomputation: none keeps every layer's activations; selective keeps all but the
 * attention probabilities (B x H x T x T per layer), recomputed in backward; full keeps only
 * each layer's input and recomputes the layer in backward. */
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE = 1, RECOMPUTE_FULL = 2 } Recompute;

typedef struct {
    ModelConfig cfg;
    TensorParallel tp;
    ContextParallel cp; /* size 0 or 1: none */
    /* packed documents (--doc-mask): a document starts at each token doc_sep; attention stays inside
     * documents and positions restart at each (set before the first forward) */
    int doc_mask, doc_sep;
    Recompute recompute; /* set before the first forward */
    StageSpec stage;     /* the layers this model object holds (pipeline parallelism) */
    /* this rank's share of the dimensions tensor parallelism splits (the whole when tp is 1) */
    int heads_local, kv_local, ffn_local, vocab_local, vocab_lo;
    /* rows of this rank's tok_emb / lm_head slices and the logits' row stride: vocab_local, or
     * more with a padded vocabulary (cfg.vocab_pad; model_vocab_rows): the rows past vocab_local
     * are zero, never looked up, never predicted */
    int vocab_rows;
    const ModelHooks *hooks; /* NULL: single process, everything resident */
    ParamTable table;
    real *params, *grads; /* fp32 master weights and their gradients (device) */
    ModelTensors p, g;
    /* bf16 runs: the working copy of the weights the GEMMs read (act elements, rounded from the
     * master weights unit by unit at each forward, as autocast casts them at each use), bound
     * in w; NULL in fp32 runs, where the GEMMs read the master weights */
    act *lp;
    ModelTensors w;
    int lowp; /* bf16 runs: the GEMMs read w. lp is NULL at ZeRO-3, where data parallelism rounds
                 each gathered unit into a transient working copy and binds w to it */
    real *rope_cos, *rope_sin; /* Llama only */
    /* activations, sized for B x T on first use */
    int B, T;
    void *acts_mem, *scratch_mem;
    size_t acts_bytes, scratch_bytes;
    Activations a;
    GradScratch s;
    int32_t *tokens, *targets;        /* device copies of the running forward's batch */
    int32_t *staging; int staging_n;  /* pinned host staging of their asynchronous copies (2 x staging_n) */
    int ready_for_backward; /* the last forward was a training forward */
    int scratch_B, scratch_T;
    /* activation slots (pipeline parallelism keeps several micro-batches in flight): the fields
     * above are the current slot's; the others wait here */
    struct ActivationSlot *slots;
    int nslots, cur_slot;
    int live_slots, peak_live_slots; /* activation sets allocated now / at most (the allocator's count) */
    /* mixture of experts */
    ExpertParallel ep;
    double moe_aux;        /* load-balancing loss of the last forward: sum over this object's MoE layers */
    double moe_grad_scale; /* the running forward's grad_scale (the aux loss's gradient uses it) */
    int moe_recomputing;   /* backward is recomputing a layer: no statistics, no routing dump */
    MoeStats moe_stats;
    FILE *moe_routing;     /* when set, training forwards write their routing (docs/MOE.md) */
    int moe_seq0;          /* global index of the next forward's first sequence (routing dump; advances by B) */
    int moe_seq_base;      /* ... of the running forward */
} Model;

/* The working copy a GEMM reads for weight `field` of m (an lvalue of ModelTensors, e.g.
 * layer[l].qkv_w): the bf16 copy in bf16 runs, the fp32 master weight itself otherwise. */
#define MODEL_WT(m, field) ((const act *)((m)->lowp ? (m)->w.field : (m)->p.field))

#endif
