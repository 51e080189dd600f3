/* rope_scaling.c: the rotary inverse frequencies of a config, with Hugging Face's rope_scaling
 * variants computed in fp32 step by step as transformers' rope initialisation functions compute
 * them (modeling_rope_utils: default, linear, dynamic, llama3), so positions turn by the same
 * angles as in PyTorch:
 *   plain    inv[i] = 1 / theta^(2i/hd)
 *   linear   inv[i] / factor (positions stretched by the factor)
 *   dynamic  NTK-aware: theta grows to theta (factor seq/max - (factor - 1))^(hd/(hd-2)) once the
 *            sequence exceeds max_position_embeddings; at or below it, plain (myriad's --seq is at
 *            most max_seq, so a dynamic config trains exactly as a plain one)
 *   llama3   wavelengths above original_max / low_freq_factor divided by the factor, below
 *            original_max / high_freq_factor kept, in between interpolated (Llama 3.1). */
#include <math.h>

#include "model/config.h"

const char *model_rope_scaling_name(int kind) {
    switch (kind) {
    case ROPE_LINEAR: return "linear";
    case ROPE_DYNAMIC: return "dynamic";
    case ROPE_LLAMA3: return "llama3";
    default: return "none";
    }
}

void model_rope_inv_freq(const ModelConfig *c, int seq, float *inv) {
    int hd = c->hidden / c->heads, half = hd / 2;
    double base = c->rope_theta;
    if (c->rope_scaling == ROPE_DYNAMIC && seq > c->max_seq) {
        double f = c->rope_factor;
        base *= pow(f * seq / c->max_seq - (f - 1), (double)hd / (hd - 2));
    }
    for (int i = 0; i < half; i++) inv[i] = 1.0f / powf((float)base, (float)(2 * i) / (float)hd);
    if (c->rope_scaling == ROPE_LINEAR)
        for (int i = 0; i < half; i++) inv[i] = inv[i] / c->rope_factor;
    if (c->rope_scaling != ROPE_LLAMA3) return;
    float factor = c->rope_factor, low = c->rope_low_freq_factor, high = c->rope_high_freq_factor;
    float old = (float)c->rope_original_max_seq;
    float low_wavelen = (float)((double)c->rope_original_max_seq / c->rope_low_freq_factor);
    float high_wavelen = (float)((double)c->rope_original_max_seq / c->rope_high_freq_factor);
    float span = (float)((double)high - (double)low);
    for (int i = 0; i < half; i++) {
        float wavelen = (float)(2 * M_PI) / inv[i];
        float scaled = wavelen > low_wavelen ? inv[i] / factor : inv[i];
        int medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        if (medium) {
            float smooth = (old / wavelen - low) / span;
            scaled = (1 - smooth) * scaled / factor + smooth * scaled;
        }
        inv[i] = scaled;
    }
}
