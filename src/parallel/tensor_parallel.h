/* tensor_parallel.h: the model's tensor-parallel collectives (model.h's TensorParallel) over a
 * comm group, and moving whole models in and out of their tensor-parallel slices. */
#ifndef MYRIAD_PARALLEL_TENSOR_PARALLEL_H
#define MYRIAD_PARALLEL_TENSOR_PARALLEL_H

#include "comm/comm.h"
#include "model/model.h"

/* Point m->tp's collectives at `group` (size and rank must match the model's). */
void tp_attach(Model *m, Comm *group);

#endif
