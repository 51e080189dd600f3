/* config.c: model-shape defaults and validation. */
#include "model/config.h"

#include <string.h>

#include "util/error.h"

void model_config_defaults(ModelConfig *c, ModelArch arch) {
    c->arch = arch;
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
    return 0;
}
