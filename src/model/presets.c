/* presets.c: the table of named model shapes. GPT-2 sizes follow OpenAI's released models
 * (Radford et al. 2019); Llama shapes follow the published configs (Touvron et al. 2023). */
#include "model/presets.h"

#include <string.h>

#include "util/error.h"

typedef struct {
    const char *name;
    ModelArch arch;
    int layers, hidden, heads, kv_heads, ffn, vocab, max_seq;
    float rope_theta;
} Preset;

static const Preset presets[] = {
    /* small byte-level models for the demo and tests (vocab 256 = the byte tokenizer) */
    {"tiny", ARCH_GPT2, 4, 128, 4, 4, 512, 256, 256, 0},
    {"llama-tiny", ARCH_LLAMA, 4, 128, 4, 2, 352, 256, 256, 10000},
    {"gpt2-124m", ARCH_GPT2, 12, 768, 12, 12, 3072, 50257, 1024, 0},
    {"gpt2-350m", ARCH_GPT2, 24, 1024, 16, 16, 4096, 50257, 1024, 0},
    {"gpt2-774m", ARCH_GPT2, 36, 1280, 20, 20, 5120, 50257, 1024, 0},
    {"gpt2-1558m", ARCH_GPT2, 48, 1600, 25, 25, 6400, 50257, 1024, 0},
    {"llama2-7b", ARCH_LLAMA, 32, 4096, 32, 32, 11008, 32000, 4096, 10000},
    {"llama3-8b", ARCH_LLAMA, 32, 4096, 32, 8, 14336, 128256, 8192, 500000},
};

const char *model_preset_names(void) {
    return "tiny, llama-tiny, gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m, llama2-7b, llama3-8b";
}

int model_preset(const char *name, ModelConfig *c) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const Preset *p = &presets[i];
        if (strcmp(p->name, name)) continue;
        memset(c, 0, sizeof *c);
        model_config_defaults(c, p->arch);
        c->layers = p->layers;
        c->hidden = p->hidden;
        c->heads = p->heads;
        c->kv_heads = p->kv_heads;
        c->ffn = p->ffn;
        c->vocab = p->vocab;
        c->max_seq = p->max_seq;
        if (p->arch == ARCH_LLAMA) c->rope_theta = p->rope_theta;
        return 0;
    }
    return myr_error("unknown preset '%s' (known: %s)", name, model_preset_names());
}
