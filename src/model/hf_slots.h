/* hf_slots.h: the names and layout of a model's tensors in the Hugging Face format (internal to
 * src/model/hf_*.c). Each Hugging Face tensor is rows [row0, row0 + rows) of one of our global
 * tensors (all its columns), stored as it is or transposed (GPT-2's Conv1D weights [in, out]):
 * its file shape is [rows, cols], [cols, rows] when transposed, or [rows] for a vector. Llama's
 * q/k/v and gate/up are row blocks of our fused qkv_w and fc_w. */
#ifndef MYRIAD_MODEL_HF_SLOTS_H
#define MYRIAD_MODEL_HF_SLOTS_H

#include <stdint.h>

#include "model/params.h"

typedef struct {
    char hf[96];
    const ParamInfo *p; /* in the whole (tp = 1, ep = 1, all stages) table: global shapes */
    int64_t row0, rows;
    int transpose;
} HfSlot;

typedef struct {
    HfSlot *s;
    int n, cap;
} HfSlotList;

/* Every Hugging Face tensor of config c, in the order a save writes them, over the whole table t. */
void hf_slots_build(const ModelConfig *c, const ParamTable *t, HfSlotList *l);
void hf_slots_free(HfSlotList *l);
/* Columns of the slot's internal tensor (1 for vectors). */
int64_t hf_slot_cols(const HfSlot *s);
/* The slot's shape in the file (ndim returned). */
int hf_slot_shape(const HfSlot *s, int64_t shape[2]);
/* Names a loader skips (buffers that carry no parameters: attention masks, rotary caches). */
int hf_name_ignorable(const char *name);

/* The slots of each internal tensor, by its name (a small hash): first slot index and the next
 * slot of the same tensor (-1 ends). */
typedef struct {
    int *head;   /* [nbuckets] */
    int *next;   /* [slots] */
    int nbuckets;
    const HfSlotList *l;
} HfSlotIndex;

void hf_slot_index_build(HfSlotIndex *ix, const HfSlotList *l);
void hf_slot_index_free(HfSlotIndex *ix);
/* The first slot of internal tensor `name` ("layers.0.qkv_w"), -1 if none; the next one after
 * slot i, -1 after the last. */
int hf_slot_first(const HfSlotIndex *ix, const char *name);
int hf_slot_next(const HfSlotIndex *ix, int i, const char *name);

#endif
