/* params.h: the parameter table of a model — every tensor's name, shape and place in the one
 * flat allocation that holds all parameters (and, with the same offsets, all gradients).
 * Internal layout, shared by both families:
 *   tok_emb [V,C]; pos_emb [S,C] (GPT-2 only);
 *   per layer: norm1_w [C], norm1_b [C] (GPT-2), qkv_w [(H+2KV)*hd, C] (rows q | k | v),
 *   qkv_b (GPT-2), attn_out_w [C, C], attn_out_b (GPT-2), norm2_w, norm2_b (GPT-2),
 *   fc_w [F, C] (GPT-2) or [2F, C] (Llama: rows gate | up), fc_b (GPT-2),
 *   mlp_out_w [C, F], mlp_out_b (GPT-2);
 *   normf_w [C], normf_b (GPT-2); lm_head [V, C] when not tied to tok_emb.
 * Weights are [out, in] like nn.Linear. Hugging Face names are mapped in hf_weights.c.
 *
 * MoE layers (docs/MOE.md) have no fc/mlp_out; instead router_w [E, C], optionally the shared
 * experts shared_fc_w / shared_fc_b / shared_out_w / shared_out_b (one MLP of S x expert_ffn,
 * shaped like fc/mlp_out), and per routed expert e held by this rank experts.<e>.fc_w, fc_b,
 * mlp_out_w, mlp_out_b (shaped like a dense MLP of expert_ffn).
 *
 * Units: the table is cut into contiguous units, in layout order: unit 0 = embeddings, then per
 * layer its unit and, for an MoE layer, a second unit right after it holding its routed experts
 * (reduced over the expert-data-parallel group, not the whole data-parallel group), and last the
 * head (final norm and an untied lm_head). layer_unit / expert_unit map layers to units. A unit is what
 * data parallelism reduces, shards and (ZeRO-3) gathers as one piece. With unit_align > 1 every
 * unit is padded with zeros to a multiple of unit_align elements, so it splits evenly over
 * that many ranks; padding belongs to no tensor and stays zero. */
#ifndef MYRIAD_MODEL_PARAMS_H
#define MYRIAD_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"
#include "model/config.h"

/* How a tensor is split over the tensor-parallel group (Megatron-style):
 *   NONE     replicated (norms, position embedding, biases of row-parallel layers)
 *   ROWS     output rows split in equal blocks (GPT-2 fc_w / fc_b: column-parallel)
 *   COLS     input columns split (attn_out_w, mlp_out_w: row-parallel)
 *   QKV      the q, k and v row blocks each split by heads (qkv_w, qkv_b)
 *   GATE_UP  the gate and up row blocks each split (Llama fc_w)
 *   VOCAB    rows split by vocabulary range [V*r/tp, V*(r+1)/tp) (tok_emb, lm_head), each slice
 *            padded with zero rows to model_vocab_rows (config.h, --vocab-pad). The padding rows
 *            are in the local shape and the flat layout but in no global box: global_shape is the
 *            real [V, C], so exports and checkpoints never hold padding. */
typedef enum { SHARD_NONE, SHARD_ROWS, SHARD_COLS, SHARD_QKV, SHARD_GATE_UP, SHARD_VOCAB } ShardKind;

/* The layers and ends one pipeline stage holds: layers [layer_lo, layer_hi), the embedding if
 * first, the final norm and LM head if last. The whole model is {0, L, 1, 1}. */
typedef struct {
    int layer_lo, layer_hi, first, last;
} StageSpec;

/* A rectangle of a global tensor of shape [rows, cols] (a vector is [n, 1]): rows [r0, r0 + nr) x
 * columns [c0, c0 + nc), its data row-major. What a rank holds of a tensor is a few such boxes
 * (its tensor-parallel slice, cut further by its ZeRO shard), and every producer and consumer of
 * weights that must not see the whole model (initialization, Hugging Face files in and out, the
 * checkpoints) works box by box in global coordinates. */
typedef struct {
    int64_t r0, nr, c0, nc;
} TensorBox;

/* Called once per box with the global tensor's name ("layers.3.qkv_w"; a tied LM head is named
 * "tok_emb"), its global shape and the box's data. Returns 0, or -1 + myr_error. */
typedef int (*TensorBoxFn)(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data);

typedef struct {
    char name[48];
    ShardKind shard;
    int tied_copy; /* the last stage's copy of a tied embedding (its gradient is summed with the
                      first stage's; it is not saved and not counted twice in the norm) */
    int64_t global_shape[2]; /* the whole tensor's shape (== shape when tp is 1) */
    int layer;      /* -1 for non-layer tensors */
    int ndim;
    int64_t shape[2];
    size_t offset;  /* in elements, into the flat buffer */
    size_t numel;
    int decay;      /* AdamW weight decay applies (tensors with 2 or more dimensions) */
    int unit;       /* see "Units" above */
    int expert;     /* a routed expert's tensor: reduced over the expert-data-parallel group */
} ParamInfo;

typedef struct {
    real *norm1_w, *norm1_b, *qkv_w, *qkv_b, *attn_out_w, *attn_out_b;
    real *norm2_w, *norm2_b, *fc_w, *fc_b, *mlp_out_w, *mlp_out_b;
    /* MoE layers: router, shared experts, and routed experts by global index (NULL where this
     * rank does not hold the expert) */
    real *router_w, *shared_fc_w, *shared_fc_b, *shared_out_w, *shared_out_b;
    real **ex_fc_w, **ex_fc_b, **ex_out_w, **ex_out_b; /* [experts] */
} LayerTensors;

typedef struct {
    real *tok_emb, *pos_emb, *normf_w, *normf_b, *lm_head;
    LayerTensors *layer; /* [layers] */
} ModelTensors;

typedef struct {
    int count;
    ParamInfo *info;
    size_t total; /* elements, padding included */
    int units;
    size_t *unit_lo, *unit_hi; /* [units]: element range of each unit (hi includes padding) */
    int *layer_unit, *expert_unit; /* [layers of the config]: unit of layer l and of its experts, or -1 */
    int ep, ep_rank;               /* expert parallelism: this rank holds experts [E*ep_rank/ep, E*(ep_rank+1)/ep) */
} ParamTable;

/* Build the table for a (validated) config; units padded to multiples of unit_align (>= 1). */
void param_table_build(ParamTable *t, const ModelConfig *c, int unit_align);
/* The table of tensor-parallel rank tp_rank of tp: local shapes per ShardKind. The caller
 * checks divisibility (heads, kv heads and ffn by tp). */
void param_table_build_tp(ParamTable *t, const ModelConfig *c, int unit_align, int tp, int tp_rank);
/* The table of one pipeline stage (units renumbered from 0 in layout order). */
void param_table_build_stage(ParamTable *t, const ModelConfig *c, int unit_align, int tp, int tp_rank,
                             const StageSpec *st);
/* The same with expert parallelism: only this rank's routed experts are in the table. */
void param_table_build_ep(ParamTable *t, const ModelConfig *c, int unit_align, int tp, int tp_rank, int ep, int ep_rank,
                          const StageSpec *st);
/* Copy between a whole tensor (global, laid out as global_shape) and rank tp_rank's slice of it
 * (local, laid out as shape): to_local = 1 copies global -> local, 0 copies local -> global
 * (only the slice's elements of global are written). */
void param_shard_copy(const ModelConfig *c, const ParamInfo *p, int tp, int tp_rank, real *global, real *local,
                      int to_local);
/* Elements [la, lb) of rank tp_rank's slice of tensor p (local row-major order, data pointing at
 * element la) as boxes of the global tensor, in order: fn(ctx, name, global shape, box, data)
 * for each, data advancing by each box's elements. `name` is the global tensor's (a tied copy of
 * the embedding is named "tok_emb"). A tp slice is at most three row blocks (qkv) or one column
 * block; a flat range of it cuts each block into at most three boxes. */
int param_range_boxes(const ModelConfig *c, const ParamInfo *p, int tp, int tp_rank, int64_t la, int64_t lb,
                      real *data, TensorBoxFn fn, void *ctx);
/* Every tensor of a model's table whose elements lie in base (laid out as the table), as boxes
 * (tied copies skipped when skip_tied). */
int param_table_boxes(const ModelConfig *c, const ParamTable *t, int tp, int tp_rank, real *base, int skip_tied,
                      TensorBoxFn fn, void *ctx);
/* Element count of the tensors alone (no padding). */
size_t param_table_tensor_elements(const ParamTable *t);
void param_table_free(ParamTable *t);
const ParamInfo *param_table_find(const ParamTable *t, const char *name);
/* Point every tensor field at its place in `base` (params or grads); allocates m->layer. */
void model_tensors_bind(ModelTensors *m, const ParamTable *t, const ModelConfig *c, real *base);
/* The same over the working copy of the weights (act elements, docs/GPU.md): the fields keep
 * their real * type but point at act elements, so they are read only through a cast to act *
 * (model.c's WT). */
void model_tensors_bind_act(ModelTensors *m, const ParamTable *t, const ModelConfig *c, act *base);
/* Re-point the tensors of one unit at `unit_base`, which holds that unit's elements
 * (unit_base[0] is element unit_lo[unit]). Used to place a unit in gathered or transient memory. */
void model_tensors_bind_unit(ModelTensors *m, const ParamTable *t, const ModelConfig *c, int unit, real *unit_base);
/* The same over act elements (a unit's working copy in bf16 runs). */
void model_tensors_bind_unit_act(ModelTensors *m, const ParamTable *t, const ModelConfig *c, int unit, act *unit_base);
void model_tensors_free(ModelTensors *m);
/* The pointer a bound ModelTensors holds for tensor p. */
real *model_tensors_get(const ModelTensors *m, const ParamInfo *p);

#endif
