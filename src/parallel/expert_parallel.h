/* expert_parallel.h: the model's expert-parallel all-to-all (ExpertParallel in model.h) over a
 * comm group, and assembling a whole model whose experts are spread over the ep group. */
#ifndef MYRIAD_PARALLEL_EXPERT_PARALLEL_H
#define MYRIAD_PARALLEL_EXPERT_PARALLEL_H

#include "comm/comm.h"
#include "model/model.h"

/* Give m the all-to-all over `ep` (m was created with model_create_ep for this group's size);
 * timing_barrier: a barrier before each all-to-all (measurement aid, see ExpertParallel). */
void ep_attach(Model *m, Comm *ep, int timing_barrier);

#endif
