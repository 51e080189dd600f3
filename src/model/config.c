/* config.c: model-shape defaults and validation. */
#include "model/config.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "util/error.h"

void model_config_defaults(ModelConfig *c, ModelArch arch) {
    c->arch = arch;
    /* dense unless asked (MoE settings are not family defaults) */
    c->experts = c->top_k = c->shared_experts = c->expert_ffn = c->moe_every = 0;
    c->vocab_pad = 0; /* no padded vocabulary: a run chooses one (--vocab-pad), a model file never has one */
    c->capacity_factor = c->aux_loss_coef = 0;
    c->rope_scaling = ROPE_PLAIN, c->rope_factor = c->rope_low_freq_factor = c->rope_high_freq_factor = 0;
    c->rope_original_max_seq = 0, c->attn_bias = c->mlp_bias = 0;
    if (arch == ARCH_GPT2) {
        c->norm_eps = 1e-5f;
        c->rope_theta = 0.0f;
        c->tied_embeddings = 1;
    } else {
        c->norm_eps = 1e-5f;
        c->rope_theta = 10000.0f;
        c->tied_embeddings = 0;
    }
}

const char *model_arch_name(ModelArch a) { return a == ARCH_GPT2 ? "gpt2" : "llama"; }

int model_arch_parse(const char *s, ModelArch *out) {
    if (!strcmp(s, "gpt2")) *out = ARCH_GPT2;
    else if (!strcmp(s, "llama")) *out = ARCH_LLAMA;
    else return myr_error("unknown architecture '%s' (use gpt2 or llama)", s);
    return 0;
}

int model_config_validate(const ModelConfig *c) {
    if (c->layers <= 0) return myr_error("layers must be positive (got %d)", c->layers);
    if (c->hidden <= 0) return myr_error("hidden must be positive (got %d)", c->hidden);
    if (c->heads <= 0) return myr_error("heads must be positive (got %d)", c->heads);
    if (c->kv_heads <= 0) return myr_error("kv heads must be positive (got %d)", c->kv_heads);
    if (c->ffn <= 0) return myr_error("ffn must be positive (got %d)", c->ffn);
    if (c->vocab <= 0) return myr_error("vocab must be positive (got %d)", c->vocab);
    if (c->max_seq <= 0) return myr_error("max_seq must be positive (got %d)", c->max_seq);
    if (c->hidden % c->heads)
        return myr_error("hidden %d is not divisible by heads %d (choose hidden = heads x head_dim)", c->hidden, c->heads);
    if (c->heads % c->kv_heads)
        return myr_error("kv heads %d do not divide heads %d (grouped-query attention needs heads = kv_heads x group)",
                         c->kv_heads, c->heads);
    if (c->arch == ARCH_GPT2 && c->kv_heads != c->heads)
        return myr_error("gpt2 has no grouped-query attention: kv heads %d must equal heads %d", c->kv_heads, c->heads);
    if (c->arch == ARCH_LLAMA && ((c->hidden / c->heads) % 2))
        return myr_error("llama head_dim %d must be even for rotary embeddings", c->hidden / c->heads);
    if (!(c->norm_eps > 0)) return myr_error("norm eps must be positive");
    if (c->rope_scaling && !(c->rope_factor >= 1))
        return myr_error("rope_scaling %s needs a factor >= 1 (got %g)", model_rope_scaling_name(c->rope_scaling),
                         (double)c->rope_factor);
    if (c->rope_scaling == ROPE_LLAMA3 &&
        (!(c->rope_low_freq_factor > 0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor) ||
         c->rope_original_max_seq <= 0))
        return myr_error("rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor and a positive "
                         "original_max_position_embeddings");
    if (c->arch == ARCH_GPT2 && (c->rope_scaling || c->attn_bias || c->mlp_bias))
        return myr_error("gpt2 has learned positions and always has biases: rope_scaling, attention_bias and mlp_bias "
                         "are Llama settings");
    if (c->vocab_pad < 0 || c->vocab_pad > 65536)
        return myr_error("--vocab-pad must be in 0..65536 (got %d; 1 or 0: no padding)", c->vocab_pad);
    if (c->experts < 0) return myr_error("experts must be >= 0 (got %d)", c->experts);
    if (c->experts == 0) return 0;
    if (c->top_k < 1) return myr_error("--top-k must be at least 1 (got %d)", c->top_k);
    if (c->top_k > c->experts)
        return myr_error("--top-k %d is larger than --experts %d (a token cannot pick more experts than exist)",
                         c->top_k, c->experts);
    if (c->shared_experts < 0) return myr_error("--shared-experts must be >= 0 (got %d)", c->shared_experts);
    if (c->expert_ffn < 0) return myr_error("--expert-ffn must be positive (got %d)", c->expert_ffn);
    if (c->moe_every < 0) return myr_error("--moe-every must be positive (got %d)", c->moe_every);
    if (!(c->aux_loss_coef >= 0)) return myr_error("--aux-loss-coef must be >= 0");
    if (!isfinite(c->capacity_factor)) return myr_error("--capacity-factor must be finite");
    return 0;
}

int model_vocab_lo(const ModelConfig *c, int tp, int r) { return (int)((int64_t)c->vocab * r / tp); }

int model_vocab_count(const ModelConfig *c, int tp, int r) {
    return model_vocab_lo(c, tp, r + 1) - model_vocab_lo(c, tp, r);
}

/* Every rank the same number of rows, the largest share rounded up to the multiple, so that the
 * GEMM strides are aligned on every rank; the tokens each rank holds do not move, so a padded run
 * computes exactly what an unpadded one of the same layout does. */
int model_vocab_rows(const ModelConfig *c, int tp, int r) {
    if (c->vocab_pad <= 1) return model_vocab_count(c, tp, r);
    int64_t most = ((int64_t)c->vocab + tp - 1) / tp, k = c->vocab_pad;
    return (int)((most + k - 1) / k * k);
}

int model_layer_is_moe(const ModelConfig *c, int l) {
    if (c->experts <= 0) return 0;
    int every = c->moe_every > 0 ? c->moe_every : 1;
    return (l + 1) % every == 0;
}

int model_expert_ffn(const ModelConfig *c) { return c->expert_ffn > 0 ? c->expert_ffn : c->ffn; }

int model_expert_capacity(const ModelConfig *c, int T) {
    if (!(c->capacity_factor > 0)) return INT32_MAX;
    double cap = ceil((double)c->capacity_factor * T * c->top_k / c->experts);
    return cap > INT32_MAX ? INT32_MAX : (int)cap;
}
