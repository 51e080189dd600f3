/* moe.h: the mixture-of-experts layer that replaces the MLP of an MoE layer (docs/MOE.md):
 * router (softmax, top-k, gates renormalised over the k), capacity per sequence with token
 * dropping (or dropless), the load-balancing loss per sequence (whole sequences under context
 * parallelism: their statistics gathered over the cp group), shared experts, and the
 * dispatch of token rows to the experts' ranks and back (expert parallelism through the
 * model's ExpertParallel callbacks, so the model needs no communication library). */
#ifndef MYRIAD_MODEL_MOE_H
#define MYRIAD_MODEL_MOE_H

#include "model/model_types.h"

/* out [N, C] (written) = the MoE block of layer l on x [N, C] (the normalised rows); under tensor
 * parallelism a partial sum over the group, like a row-parallel matmul's output. Keeps what
 * backward needs in the current activation slot. Collective over the expert-parallel group. */
void moe_forward(Model *m, int l, const act *x, real *out, int B, int T);
/* dx [N, C] (written; partial under tensor parallelism) from dy = d(out) [N, C] (the residual
 * gradient as act); accumulates the router's and the experts' gradients, including the
 * load-balancing loss's. Collective. */
void moe_backward(Model *m, int l, const act *x, const act *dy, real *dx);
/* Free one layer's saved state (NULL is fine). */
void moe_acts_free(struct MoeActs *s);
/* The router's softmax [N, E] of layer l in the last forward, host memory (NULL before one). */
const real *moe_router_probs(const Model *m, int l);
/* Zero the per-step statistics (tokens per expert, dropped, all-to-all bytes and time). */
void moe_stats_reset(Model *m);

#endif
