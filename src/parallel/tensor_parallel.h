/* tensor_parallel.h: the model's tensor-parallel collectives (model.h's TensorParallel) over a
 * comm group, and moving whole models in and out of their tensor-parallel slices. */
#ifndef MYRIAD_PARALLEL_TENSOR_PARALLEL_H
#define MYRIAD_PARALLEL_TENSOR_PARALLEL_H

#include "comm/comm.h"
#include "model/model.h"

/* Point m->tp's collectives at `group` (size and rank must match the model's). */
void tp_attach(Model *m, Comm *group);
/* Gather the model-parallel pieces (tensor-parallel slices of every pipeline chunk, experts of
 * every expert-parallel rank) into `whole`
 * (a tp = 1 model of the same config, parameters overwritten) on every rank of the tp and pp
 * and ep groups (any may be NULL). `chunks` are this rank's n model chunks. Collective. */
int model_parallel_gather(Model *chunks, int n, Model *whole, Comm *tp, Comm *pp, Comm *ep);

#endif
