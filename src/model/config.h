/* config.h: the shape and family of one decoder-only transformer.
 * Both families share one struct; `arch` selects the per-family choices:
 *   GPT-2: LayerNorm (with bias), GELU (tanh), learned positions, tied embeddings, biases.
 *   Llama: RMSNorm, SwiGLU, rotary (rotate-half, rope_theta), GQA, untied lm_head, no biases. */
#ifndef MYRIAD_MODEL_CONFIG_H
#define MYRIAD_MODEL_CONFIG_H

typedef enum { ARCH_GPT2 = 0, ARCH_LLAMA = 1 } ModelArch;

typedef enum { ROPE_PLAIN = 0, ROPE_LINEAR, ROPE_DYNAMIC, ROPE_LLAMA3 } RopeScaling;

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
    /* Hugging Face rope_scaling (model/rope_scaling.c): how the rotary frequencies are scaled */
    int rope_scaling;           /* ROPE_PLAIN, ROPE_LINEAR, ROPE_DYNAMIC or ROPE_LLAMA3 */
    float rope_factor;          /* linear / dynamic / llama3: the context extension factor */
    float rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    int rope_original_max_seq;  /* llama3: original_max_position_embeddings */
    int attn_bias, mlp_bias;    /* Llama: biases on q/k/v/o (attention_bias), gate/up/down (mlp_bias) */
    int tied_embeddings; /* lm_head shares the token embedding (GPT-2: 1, Llama: usually 0) */
    /* padded vocabulary (--vocab-pad, as llm.c's 50257 -> 50304): each tensor-parallel rank's rows
     * of tok_emb and lm_head, the logits' row stride, are rounded up to a multiple of this; <= 1:
     * none. A layout choice like --tp, not part of the model: the padding rows are never looked
     * up, never predicted, stay zero, and no export or checkpoint holds them (model_vocab_rows). */
    int vocab_pad;
    /* mixture of experts (docs/MOE.md); experts == 0 is a dense model and the rest is ignored */
    int experts;           /* routed experts per MoE layer */
    int top_k;             /* experts chosen per token */
    int shared_experts;    /* experts every token goes through (one MLP of shared_experts x expert_ffn) */
    int expert_ffn;        /* inner size of one expert (0: ffn) */
    int moe_every;         /* layer l is an MoE layer when (l + 1) % moe_every == 0 (0 counts as 1) */
    float capacity_factor; /* per sequence and expert: ceil(cf * T * top_k / experts) tokens; <= 0: dropless */
    float aux_loss_coef;   /* weight of the load-balancing loss in the training loss */
} ModelConfig;

/* Fill family defaults (eps, theta, tying) for `arch`; shape fields are left to the caller. */
void model_config_defaults(ModelConfig *c, ModelArch arch);
/* Check the shape; on error returns -1 with a one-line reason (e.g. hidden not divisible by heads). */
int model_config_validate(const ModelConfig *c);
/* The vocabulary split over tp ranks: rank r holds tokens [model_vocab_lo(c, tp, r), + its
 * model_vocab_count) (as without padding), in model_vocab_rows >= count rows of its slices of
 * tok_emb / lm_head (the logits' row stride), the rows past count being padding. */
int model_vocab_lo(const ModelConfig *c, int tp, int r);
int model_vocab_count(const ModelConfig *c, int tp, int r);
int model_vocab_rows(const ModelConfig *c, int tp, int r);
/* Layer l of c replaces its MLP by experts. */
int model_layer_is_moe(const ModelConfig *c, int l);
/* Inner size of one expert. */
int model_expert_ffn(const ModelConfig *c);
/* Tokens one expert may take from one sequence of T tokens (INT32_MAX when dropless). */
int model_expert_capacity(const ModelConfig *c, int T);
/* The rotary inverse frequencies [head_dim / 2] for sequences of `seq` tokens (dynamic scaling
 * depends on it), computed as transformers computes them (rope_scaling.c). */
void model_rope_inv_freq(const ModelConfig *c, int seq, float *inv_freq);
/* "none", "linear", "dynamic", "llama3" */
const char *model_rope_scaling_name(int kind);
/* "gpt2" / "llama" */
const char *model_arch_name(ModelArch a);
/* Parse "gpt2" / "llama"; -1 if unknown. */
int model_arch_parse(const char *s, ModelArch *out);

#endif
