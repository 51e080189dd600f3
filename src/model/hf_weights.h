/* hf_weights.h: load and save a model in the Hugging Face layout: DIR/config.json +
 * DIR/model.safetensors with GPT2LMHeadModel names (Conv1D weights stored [in, out], with or
 * without the "transformer." prefix; attention mask buffers ignored) or LlamaForCausalLM names
 * (nn.Linear weights [out, in]; q/k/v and gate/up are fused into our qkv_w and fc_w rows). */
#ifndef MYRIAD_MODEL_HF_WEIGHTS_H
#define MYRIAD_MODEL_HF_WEIGHTS_H

#include "model/model.h"

/* Read DIR/config.json, create the model and load DIR/model.safetensors into it.
 * Every expected tensor must be present with its shape; unknown tensors are an error. */
int hf_load(const char *dir, Model *m);
/* Same, with units padded to multiples of unit_align (see model_create_aligned). */
int hf_load_aligned(const char *dir, Model *m, int unit_align);
/* Same into a host-side model (model_create_host): the whole model a run starts from. */
int hf_load_host(const char *dir, Model *m);
/* Load weights only, into an already created model (its config must match the file's). */
int hf_load_weights(const char *safetensors_path, Model *m);
/* Write DIR/config.json and DIR/model.safetensors (each atomically; DIR is created). */
int hf_save(const char *dir, const Model *m);

#endif
