/* model.h: one decoder-only transformer (GPT-2 or Llama family): parameters, gradients and
 * activations in flat allocations, and the forward/backward pass over them (llm.c-style).
 * The model calls only src/kernels/kernels.h, so a different backend does not touch it. The
 * structures themselves are in model_types.h. */
#ifndef MYRIAD_MODEL_MODEL_H
#define MYRIAD_MODEL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "model/model_types.h"

/* Make slot k current (slots are created on first use; slot 0 is the default). */
void model_select_slot(Model *m, int k);
/* Free the current slot's activations (after its backward). */
void model_release_slot(Model *m);

/* Allocate parameters and gradients (zeroed) for a validated config. */
int model_create(Model *m, const ModelConfig *cfg);
/* Same, with every unit padded to a multiple of unit_align elements (data parallelism). */
int model_create_aligned(Model *m, const ModelConfig *cfg, int unit_align);
/* Rank tp_rank's slice of a tensor-parallel model (tp ranks): attention split by heads, MLP by
 * ffn columns, embedding and LM head by vocabulary. -1 + reason if heads, kv heads or ffn are
 * not divisible by tp. m->tp.sum / sum_exact must be set before the first forward when tp > 1. */
int model_create_tp(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank);
/* The same with expert parallelism: rank ep_rank of ep holds experts [E*ep_rank/ep, E*(ep_rank+1)/ep)
 * of every MoE layer. -1 + reason if the experts are not divisible by ep. */
int model_create_ep(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank, int ep, int ep_rank,
                    const StageSpec *st);
/* Creation in two halves, so that a run can size its device memory before allocating any:
 * model_plan_ep checks the layout and builds the table (no device memory; -1 + reason), and
 * model_alloc allocates parameters, gradients and the working copy. model_create_ep is both. */
int model_plan_ep(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank, int ep, int ep_rank,
                  const StageSpec *st);
void model_alloc(Model *m);
/* The same, leaving out the whole local parameters (params = 0: ZeRO-3 keeps only its shard) or
 * gradients (grads = 0: ZeRO 2 and 3 reduce into shards); their tensors stay unbound (NULL)
 * until data parallelism binds gathered units. */
void model_alloc_parts(Model *m, int params, int grads);
/* Device bytes model_alloc takes: fp32 parameters and gradients, and the bf16 working copy. */
size_t model_weight_bytes(const Model *m);
/* One pipeline stage of it (layers st->layer_lo .. layer_hi - 1, embedding if first, head if last). */
int model_create_stage(Model *m, const ModelConfig *cfg, int unit_align, int tp, int tp_rank, const StageSpec *st);
/* Copy this model's slices (tensor-parallel rank, pipeline stage) out of (to_local) or into
 * (!to_local) a whole tp = 1 model of the same config, matching tensors by name (a tied copy
 * of the embedding is read from tok_emb and never written back). */
void model_copy_shards(Model *m, Model *whole, int to_local);
/* Pipeline stages: forward from tokens x (first stage) or from `input` [rows, hidden] (the
 * previous stage's output, host memory); targets only on the last stage, which returns the loss;
 * other stages return their part of it (aux_loss_coef x their MoE layers' load-balancing loss; 0
 * if dense). Tokens, targets and input are host memory, copied to the device. */
double model_forward_stage(Model *m, const int32_t *x, const real *input, const int32_t *targets, int B, int T,
                           double grad_scale);
/* The stage output [rows, hidden] after forward (not last stage), copied into host memory. */
void model_stage_output_to_host(const Model *m, real *host);
/* Backward from the loss (last stage) or from dout = d(stage output) (other stages; host memory). */
void model_backward_stage(Model *m, const real *dout);
/* d(input) after backward (not first stage), copied into host memory. */
void model_stage_input_grad_to_host(const Model *m, real *host);
/* Rows of the residual stream this rank holds for B x T tokens (all, or 1/tp under --sp; 1/cp of
 * them under context parallelism). */
size_t model_local_rows(const Model *m, size_t N);
void model_destroy(Model *m);
/* GPT-2-style init from seed: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)),
 * biases 0, norm weights 1. Depends only on (seed, config). */
void model_init_weights(Model *m, uint64_t seed);
/* The parameters as host memory: m->params itself when host code may touch it (a host-side
 * model, or the CPU backend), else a host copy; _done writes the copy back when asked and frees
 * it. */
real *model_params_view(const Model *m);
void model_params_view_done(Model *m, real *view, int write_back);
/* The parameters (table.total elements, padding included) to / from host memory. */
void model_params_to_host(const Model *m, real *host);
void model_params_from_host(Model *m, const real *host);
/* This forward's logits [B*T, vocab_local] as host fp32 (the padding columns left out). */
void model_logits_to_host(const Model *m, float *host);
/* Forward over x[B*T] (positions 0..T-1 per row). With targets, returns the mean cross-entropy
 * plus aux_loss_coef x the load-balancing loss (MoE models; m->moe_aux holds it unweighted)
 * (else 0 and logits stay in m->a.logits). With grad_scale > 0, also prepares backward: the
 * logits buffer becomes d(grad_scale * mean loss)/dlogits. */
double model_forward(Model *m, const int32_t *x, const int32_t *targets, int B, int T, double grad_scale);
/* Accumulate parameter gradients (+=) for the last forward (which must have had grad_scale > 0). */
void model_backward(Model *m);
void model_zero_grad(Model *m);
size_t model_num_params(const Model *m); /* tensor elements (no unit padding; a padded vocabulary's rows count: they take memory) */
/* Training FLOPs per token: 6 x (matmul parameters) + causal attention 6 x L x T x C (fwd+bwd). */
double model_flops_per_token(const ModelConfig *c, int T);
/* Bytes of stored activations for B x T (what the forward keeps for backward; one slot), and
 * of the backward's scratch (shared by the slots), in the selected backend's dtype. */
size_t model_activation_bytes(const Model *m, int B, int T);
size_t model_scratch_bytes(const Model *m, int B, int T);

#endif
