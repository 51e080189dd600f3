/* hf_config.h: Hugging Face `config.json` <-> ModelConfig, for model_type "gpt2"
 * (GPT2LMHeadModel) and "llama" (LlamaForCausalLM; "mixtral"). Llama keys as the hub has them:
 * rope_theta, rope_scaling (default, linear, dynamic, llama3), attention_bias, mlp_bias,
 * head_dim (equal to hidden / heads), tie_word_embeddings, max_position_embeddings. The reader
 * rejects settings that would make our model compute something different from transformers'
 * (another activation, another rope_scaling type, ...) instead of silently ignoring them. See
 * docs/FORMATS.md. */
#ifndef MYRIAD_IO_HF_CONFIG_H
#define MYRIAD_IO_HF_CONFIG_H

#include <stddef.h>

#include "model/config.h"

/* Read and validate (model_config_validate) a config.json; -1 + one-line myr_error naming the file. */
int hf_config_read(const char *path, ModelConfig *c);
/* Same from memory (json_text need not be NUL-terminated); source_name is used in messages. */
int hf_config_parse(const char *json_text, size_t len, const char *source_name, ModelConfig *c);
/* Write a config.json transformers accepts (torch_dtype float32). Atomic (io/atomic_file.h). */
int hf_config_write(const char *path, const ModelConfig *c);
/* The same with the weights' torch_dtype ("float32", "bfloat16"). */
int hf_config_write_dtype(const char *path, const ModelConfig *c, const char *torch_dtype);
/* The same JSON text (malloc'd, caller frees); NULL + myr_error if c does not validate. */
char *hf_config_to_json(const ModelConfig *c);
char *hf_config_to_json_dtype(const ModelConfig *c, const char *torch_dtype);

#endif
