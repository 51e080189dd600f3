/* ring_attention.h: context-parallel (ring) attention for the model: the load-balanced chunk
 * layout of a sequence over the cp group (which global positions this rank's rows hold) and the
 * forward/backward of causal attention with K/V blocks passed around the ring (model.h's
 * ContextParallel), built of kernels.h's blockwise attention. */
#ifndef MYRIAD_MODEL_RING_ATTENTION_H
#define MYRIAD_MODEL_RING_ATTENTION_H

#include "model/model_types.h"

/* Whether this forward splits the sequence over the cp group (cp size > 1 and not `whole`). */
int cp_splits(const Model *m);
/* Whether attention runs blockwise through this file: a split sequence, or packed documents
 * (whose masks the blockwise kernels apply; one rank is a ring of one). */
int ring_used(const Model *m);
/* Before a forward that ring_used: each local row's position and document start from the batch's
 * tokens x [B, T * cp] (host; the whole sequences), for the position steps and the masks. */
void ring_prepare(Model *m, const int32_t *x, int B, int T);
/* Global chunk index of local chunk a (0 or 1) on cp rank r of P: r, then 2P - 1 - r. */
static inline int cp_global_chunk(int P, int r, int a) { return a ? 2 * P - 1 - r : r; }
/* Global position of the first row of local chunk a, for local sequences of T rows (T / 2 per chunk). */
int cp_chunk_pos0(const Model *m, int T, int a);
/* From local row j, the run of rows [j, j + n) before row1 whose positions (ring_prepare's) are
 * consecutive: returns n and sets *pos0 to the position of row j. */
int cp_position_run(const Model *m, int j, int row1, int *pos0);
/* This rank's chunks of host tokens [B, T * size] into [B, T] (slot 0: tokens, 1: targets). */
const int32_t *cp_local_tokens(Model *m, const int32_t *x, int B, int T, int slot);

/* out [B*T, H*hd] act and lse [B, H, T] (what backward keeps) from this rank's qkv rows
 * [B*T, (H + 2 KV) hd] (rope applied), T local rows per sequence. Collective over the cp group. */
void ring_attention_forward(Model *m, act *out, real *lse, const act *qkv, int B, int T, int H, int KV, int hd);
/* dqkv (written) from dout, the forward's qkv, output and lse. Collective over the cp group. */
void ring_attention_backward(Model *m, act *dqkv, const act *dout, const act *qkv, const act *out, const real *lse,
                             int B, int T, int H, int KV, int hd);
/* Device bytes of the ring's buffers for B x T local rows (memory planning). */
size_t ring_attention_scratch_bytes(int B, int T, int H, int KV, int hd);
void ring_attention_free(Model *m);

#endif
