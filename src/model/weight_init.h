/* weight_init.h: the seeded initialization of a model, computed piece by piece.
 *
 * Every weight's initial value is a function of (seed, config, tensor, global element index)
 * alone: element i of the model's random stream (the whole tp = 1 model's tensors in table order,
 * random tensors only) is the normal drawn from splitmix64 state seed + 2 i x golden, which is
 * exactly the value one sequential generator gives (two draws per normal, rng_normal). So a rank
 * creates only the boxes it holds, in any order and on any number of threads, and every layout
 * starts from the same model as one process: no buffer of the whole model is ever made.
 *
 * Values (GPT-2 style): norm weights 1, other vectors (biases) 0, matrices N(0, 0.02), the
 * residual projections (attn_out_w, mlp_out_w, shared_out_w) N(0, 0.02 / sqrt(2 L)). */
#ifndef MYRIAD_MODEL_WEIGHT_INIT_H
#define MYRIAD_MODEL_WEIGHT_INIT_H

#include <stdint.h>

#include "model/config.h"
#include "model/params.h"

typedef struct WeightInit WeightInit;

/* The plan for a config: each tensor's rule and place in the random stream (a table of the
 * tensors' names, no weights). -1 + myr_error if the config does not validate. */
int weight_init_create(WeightInit **out, const ModelConfig *c, uint64_t seed);
void weight_init_free(WeightInit *w);
/* A TensorBoxFn (ctx: the WeightInit): fills one box with its initial values. -1 + reason for a
 * tensor name the config does not have. */
int weight_init_box(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data);

#endif
