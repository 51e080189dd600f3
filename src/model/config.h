/* config.h: the shape and family of one decoder-only transformer.
 * Both families share one struct; `arch` selects the per-family choices:
 *   GPT-2: LayerNorm (with bias), GELU (tanh), learned positions, tied embeddings, biases.
 *   Llama: RMSNorm, SwiGLU, rotary (rotate-half, rope_theta), GQA, untied lm_head, no biases. */
#ifndef MYRIAD_MODEL_CONFIG_H
#define MYRIAD_MODEL_CONFIG_H

typedef enum { ARCH_GPT2 = 0, ARCH_LLAMA = 1 } ModelArch;

typedef struct {
    ModelArch arch;
    int layers;
    int hidden;     /* d_model */
    int heads;      /* query heads */
    int kv_heads;   /* key/value heads (== heads for GPT-2) */
    int ffn;        /* MLP inner size (GPT-2: usually 4*hidden) */
    int vocab;
    int max_seq;    /* positions (GPT-2 n_positions, Llama max_position_embeddings) */
    float norm_eps; /* LayerNorm / RMSNorm epsilon */
    float rope_theta;
    int tied_embeddings; /* lm_head shares the token embedding (GPT-2: 1, Llama: usually 0) */
} ModelConfig;

/* Fill family defaults (eps, theta, tying) for `arch`; shape fields are left to the caller. */
void model_config_defaults(ModelConfig *c, ModelArch arch);
/* Check the shape; on error returns -1 with a one-line reason (e.g. hidden not divisible by heads). */
int model_config_validate(const ModelConfig *c);
/* "gpt2" / "llama" */
const char *model_arch_name(ModelArch a);
/* Parse "gpt2" / "llama"; -1 if unknown. */
int model_arch_parse(const char *s, ModelArch *out);

#endif
