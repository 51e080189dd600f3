/* context_parallel.h: the model's context-parallel ring exchange (model.h's ContextParallel)
 * over a comm group: nonblocking send to the next rank and receive from the previous; and a host
 * all-gather over the group. */
#ifndef MYRIAD_PARALLEL_CONTEXT_PARALLEL_H
#define MYRIAD_PARALLEL_CONTEXT_PARALLEL_H

#include "comm/comm.h"
#include "model/model.h"

/* Point m->cp at `group` (the cp group: its size and my rank in it become m->cp's). */
void cp_attach(Model *m, Comm *group);
/* Free what cp_attach made (the group itself belongs to the mesh). */
void cp_detach(Model *m);

#endif
