/* hf_weights.h: models in the Hugging Face layout, read and written box by box so that no
 * process ever holds more than its own share (docs/FORMATS.md):
 *   DIR/config.json and DIR/model.safetensors, or DIR/model.safetensors.index.json naming shard
 *   files (model-00001-of-0000N.safetensors: how every model above ~5 GB ships);
 *   GPT2LMHeadModel names (Conv1D weights stored [in, out], with or without the "transformer."
 *   prefix; attention mask buffers ignored), LlamaForCausalLM / MixtralForCausalLM names
 *   (nn.Linear weights [out, in]; q/k/v and gate/up fused into our qkv_w and fc_w rows).
 * Reading (HfSource): headers only are parsed; each box is read with pread from the bytes it
 * needs, F32/BF16/F16 converted to the fp32 master copy. Writing (HfExport): the files are laid
 * out from the config alone, so every rank streams its own slices into place (pwrite) after one
 * process has created them; F32 or BF16; one model.safetensors below the shard size, else shards
 * with an index, as Hugging Face writes them. */
#ifndef MYRIAD_MODEL_HF_WEIGHTS_H
#define MYRIAD_MODEL_HF_WEIGHTS_H

#include <stdint.h>

#include "model/model.h"

/* ---- reading ---- */
typedef struct HfSource HfSource;

/* DIR/config.json plus the weights (model.safetensors, else model.safetensors.index.json and
 * its shards): every tensor the config needs must be present with its shape and a float dtype,
 * nothing unexpected may be there. -1 + a one-line reason naming the file and the fix. */
int hf_source_open(const char *dir, HfSource **out);
/* One safetensors file for a model of config c. */
int hf_source_open_file(const char *path, const ModelConfig *c, HfSource **out);
const ModelConfig *hf_source_config(const HfSource *s);
/* "DIR/model.safetensors (BF16)" or "DIR: 4 shards (model.safetensors.index.json), BF16". */
const char *hf_source_describe(const HfSource *s);
/* A TensorBoxFn (ctx: the HfSource): reads one box of a global tensor from the files. */
int hf_source_box(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data);
/* Bytes read so far (what a rank read of the checkpoint), and the bytes of all its weights. */
uint64_t hf_source_bytes_read(const HfSource *s);
uint64_t hf_source_total_bytes(const HfSource *s);
void hf_source_close(HfSource *s);

/* ---- writing ---- */
typedef struct HfExport HfExport;

typedef enum { HF_SAVE_F32 = 0, HF_SAVE_BF16 = 1 } HfSaveDtype;
enum { HF_DEFAULT_SHARD_BYTES = 5000000000 }; /* Hugging Face's default max_shard_size, "5GB" */

/* The files of a save of config c: tensors in order, a new shard whenever the next tensor would
 * take the current one past shard_bytes (a tensor larger than that gets a shard of its own). */
int hf_export_plan(const ModelConfig *c, HfSaveDtype dtype, uint64_t shard_bytes, HfExport **out);
int hf_export_files(const HfExport *e);
const char *hf_export_file_name(const HfExport *e, int i);
uint64_t hf_export_total_bytes(const HfExport *e); /* every file's size together */
/* One process, first: DIR created, each file created under a temporary name with its header,
 * at its full size (space reserved where the filesystem can, so a full disk fails here). */
int hf_export_create(const HfExport *e, const char *dir);
/* Every writer: open the temporary files, write boxes (hf_export_box), close (fsync). */
int hf_export_open(HfExport *e, const char *dir);
/* A TensorBoxFn (ctx: the HfExport): converts one box and writes it into its place. */
int hf_export_box(void *ctx, const char *name, const int64_t gshape[2], const TensorBox *box, real *data);
int hf_export_close(HfExport *e);
/* One process, last: the files renamed into place, the index (when sharded), config.json; stale
 * files of an earlier save of another shape removed; the directory fsynced. */
int hf_export_commit(const HfExport *e, const char *dir, const ModelConfig *c);
/* One process, on failure: the temporary files removed (what was in DIR before stays). */
void hf_export_abort(const HfExport *e, const char *dir);
void hf_export_free(HfExport *e);

/* ---- one process's whole Model (tests, eval) ---- */
/* Read DIR/config.json, create the model and load its weights (single file or sharded). */
int hf_load(const char *dir, Model *m);
/* Same, with units padded to multiples of unit_align (see model_create_aligned). */
int hf_load_aligned(const char *dir, Model *m, int unit_align);
/* The same with parameters only (no gradients): a model that is evaluated, never trained. */
int hf_load_inference(const char *dir, Model *m);
/* Load weights only, into an already created model (any slice of the file's config). */
int hf_load_weights(const char *safetensors_path, Model *m);
/* Write DIR/config.json and the weights in F32 (DIR is created; sharded above 5 GB). */
int hf_save(const char *dir, const Model *m);
/* The same with a dtype and a shard size. */
int hf_save_as(const char *dir, const Model *m, HfSaveDtype dtype, uint64_t shard_bytes);

#endif
