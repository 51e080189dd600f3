/* hf_config.c: read/write Hugging Face config.json for the gpt2, llama and mixtral families. */
#include "model/hf_config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/quote.h"
#include "util/error.h"

static cJSON *float_number(float v);

/* ---------- reading ---------- */

typedef struct {
    const cJSON *root;
    const char *src;
} Reader;

/* Integer key: required unless `fallback` is given (has_fallback). JSON null counts as absent. */
static int get_int(const Reader *r, const char *key, int has_fallback, int fallback, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->root, key);
    if (!v || cJSON_IsNull(v)) {
        if (has_fallback) {
            *out = fallback;
            return 0;
        }
        return myr_error("%s: missing required key \"%s\" (is this a complete Hugging Face config.json?)", r->src, key);
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d == floor(d)) || d < INT_MIN || d > INT_MAX)
        return myr_error("%s: \"%s\" must be an integer", r->src, key);
    *out = (int)d;
    return 0;
}

static int get_float(const Reader *r, const char *key, double fallback, float *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = (float)fallback;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 3e38)
        return myr_error("%s: \"%s\" must be a finite number", r->src, key);
    *out = (float)v->valuedouble;
    return 0;
}

static int get_bool(const Reader *r, const char *key, int fallback, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->root, key);
    if (!v || cJSON_IsNull(v)) {
        *out = fallback;
        return 0;
    }
    if (!cJSON_IsBool(v)) return myr_error("%s: \"%s\" must be true or false", r->src, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* A string key that must equal one of the accepted values when present (null = absent). */
static int expect_string(const Reader *r, const char *key, const char *const *accepted, const char *why) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->root, key);
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v))
        for (int i = 0; accepted[i]; i++)
            if (!strcmp(v->valuestring, accepted[i])) return 0;
    return myr_error("%s: \"%s\" = %s is not supported (%s)", r->src, key,
                     cJSON_IsString(v) ? io_quote(v->valuestring) : "(not a string)", why);
}

/* A key that must be absent, null or false (a feature we do not implement). */
static int expect_off(const Reader *r, const char *key, const char *why) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->root, key);
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 0;
    return myr_error("%s: \"%s\" is set but not supported (%s)", r->src, key, why);
}

static int read_gpt2(const Reader *r, ModelConfig *c) {
    static const char *const gelu_tanh[] = {"gelu_new", "gelu_pytorch_tanh", NULL};
    model_config_defaults(c, ARCH_GPT2);
    if (get_int(r, "n_layer", 0, 0, &c->layers) || get_int(r, "n_embd", 0, 0, &c->hidden) ||
        get_int(r, "n_head", 0, 0, &c->heads) || get_int(r, "vocab_size", 0, 0, &c->vocab) ||
        get_int(r, "n_positions", 0, 0, &c->max_seq))
        return -1;
    /* n_inner: null or absent means 4 * n_embd (transformers' GPT2MLP) */
    long long inner4 = 4LL * c->hidden;
    if (get_int(r, "n_inner", 1, inner4 > INT_MAX ? INT_MAX : (int)inner4, &c->ffn)) return -1;
    if (get_float(r, "layer_norm_epsilon", 1e-5, &c->norm_eps)) return -1;
    if (get_bool(r, "tie_word_embeddings", 1, &c->tied_embeddings)) return -1;
    c->kv_heads = c->heads;
    c->rope_theta = 0.0f;
    if (expect_string(r, "activation_function", gelu_tanh, "myriad's GPT-2 uses the tanh GELU, \"gelu_new\"") ||
        expect_off(r, "scale_attn_by_inverse_layer_idx", "attention is scaled by 1/sqrt(head_dim) only") ||
        expect_off(r, "add_cross_attention", "decoder-only models only"))
        return -1;
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(r->root, "scale_attn_weights");
    if (scale && cJSON_IsFalse(scale))
        return myr_error("%s: \"scale_attn_weights\": false is not supported (attention is always scaled)", r->src);
    return 0;
}

/* rope_scaling: null/absent or {"rope_type" (or the older "type"): "default" | "linear" |
 * "dynamic" | "llama3", "factor", ...}. Types that change the math in ways not implemented here
 * (yarn, longrope, ...) are refused by name. */
static int read_rope_scaling(const Reader *r, ModelConfig *c) {
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(r->root, "rope_scaling");
    c->rope_scaling = ROPE_PLAIN;
    if (!rs || cJSON_IsNull(rs)) return 0;
    if (!cJSON_IsObject(rs)) return myr_error("%s: \"rope_scaling\" must be an object or null", r->src);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(rs, "type");
    if (!cJSON_IsString(type)) return myr_error("%s: \"rope_scaling\" has no \"rope_type\" string", r->src);
    const char *t = type->valuestring;
    if (!strcmp(t, "default")) return 0;
    if (!strcmp(t, "linear")) c->rope_scaling = ROPE_LINEAR;
    else if (!strcmp(t, "dynamic")) c->rope_scaling = ROPE_DYNAMIC;
    else if (!strcmp(t, "llama3")) c->rope_scaling = ROPE_LLAMA3;
    else
        return myr_error("%s: rope_scaling type %s is not supported (supported: default, linear, dynamic, llama3)",
                         r->src, io_quote(t));
    Reader sub = {rs, r->src};
    if (get_float(&sub, "factor", NAN, &c->rope_factor)) return -1;
    if (!(c->rope_factor >= 1))
        return myr_error("%s: rope_scaling %s needs a \"factor\" >= 1", r->src, io_quote(t));
    if (c->rope_scaling != ROPE_LLAMA3) return 0;
    if (get_float(&sub, "low_freq_factor", NAN, &c->rope_low_freq_factor) ||
        get_float(&sub, "high_freq_factor", NAN, &c->rope_high_freq_factor) ||
        get_int(&sub, "original_max_position_embeddings", 0, 0, &c->rope_original_max_seq))
        return -1;
    if (!(c->rope_low_freq_factor > 0) || !(c->rope_high_freq_factor > c->rope_low_freq_factor))
        return myr_error("%s: rope_scaling llama3 needs 0 < low_freq_factor < high_freq_factor", r->src);
    return 0;
}

static int read_llama(const Reader *r, ModelConfig *c) {
    static const char *const silu[] = {"silu", NULL};
    model_config_defaults(c, ARCH_LLAMA);
    if (get_int(r, "num_hidden_layers", 0, 0, &c->layers) || get_int(r, "hidden_size", 0, 0, &c->hidden) ||
        get_int(r, "num_attention_heads", 0, 0, &c->heads) || get_int(r, "intermediate_size", 0, 0, &c->ffn) ||
        get_int(r, "vocab_size", 0, 0, &c->vocab) || get_int(r, "max_position_embeddings", 0, 0, &c->max_seq))
        return -1;
    if (get_int(r, "num_key_value_heads", 1, c->heads, &c->kv_heads)) return -1;
    /* rms_norm_eps: LlamaConfig's default is 1e-6 */
    if (get_float(r, "rms_norm_eps", 1e-6, &c->norm_eps) || get_float(r, "rope_theta", 10000.0, &c->rope_theta) ||
        get_bool(r, "tie_word_embeddings", 0, &c->tied_embeddings))
        return -1;
    if (!(c->rope_theta > 0)) return myr_error("%s: \"rope_theta\" must be positive", r->src);
    if (expect_string(r, "hidden_act", silu, "Llama's MLP is SwiGLU with silu") ||
        get_bool(r, "attention_bias", 0, &c->attn_bias) || get_bool(r, "mlp_bias", 0, &c->mlp_bias) ||
        read_rope_scaling(r, c))
        return -1;
    const cJSON *hd = cJSON_GetObjectItemCaseSensitive(r->root, "head_dim");
    if (hd && !cJSON_IsNull(hd) && c->heads > 0 &&
        (!cJSON_IsNumber(hd) || hd->valuedouble != (double)c->hidden / c->heads))
        return myr_error("%s: \"head_dim\" must equal hidden_size / num_attention_heads (%d)", r->src,
                         c->heads ? c->hidden / c->heads : 0);
    return 0;
}

/* Mixture-of-experts keys, for both families: Mixtral's (num_local_experts, num_experts_per_tok,
 * router_aux_loss_coef; Mixtral is dropless) and myriad's own for what Mixtral cannot say
 * (capacity, shared experts, MoE every n-th layer, the dense layers' MLP size). */
static int read_moe(const Reader *r, ModelConfig *c, int mixtral) {
    if (get_int(r, "num_local_experts", !mixtral, 0, &c->experts)) return -1;
    if (c->experts == 0) return 0;
    float coef = 0, cf = 0;
    if (get_int(r, "num_experts_per_tok", 1, 2, &c->top_k) || get_float(r, "router_aux_loss_coef", 0.001, &coef) ||
        get_float(r, "myriad_capacity_factor", 0.0, &cf) || get_int(r, "myriad_shared_experts", 1, 0, &c->shared_experts) ||
        get_int(r, "myriad_moe_every", 1, 1, &c->moe_every))
        return -1;
    c->aux_loss_coef = coef;
    c->capacity_factor = cf;
    if (mixtral) { /* intermediate_size is the experts'; dense layers (if any) have their own */
        c->expert_ffn = c->ffn;
        if (get_int(r, "myriad_dense_intermediate_size", 1, c->ffn, &c->ffn)) return -1;
    } else if (get_int(r, "myriad_expert_ffn", 1, c->ffn, &c->expert_ffn)) {
        return -1;
    }
    return 0;
}

static void write_moe(cJSON *root, const ModelConfig *c) {
    if (!c->experts) return;
    cJSON_AddNumberToObject(root, "num_local_experts", c->experts);
    cJSON_AddNumberToObject(root, "num_experts_per_tok", c->top_k);
    cJSON_AddItemToObject(root, "router_aux_loss_coef", float_number(c->aux_loss_coef));
    cJSON_AddItemToObject(root, "myriad_capacity_factor", float_number(c->capacity_factor > 0 ? c->capacity_factor : 0));
    cJSON_AddNumberToObject(root, "myriad_shared_experts", c->shared_experts);
    cJSON_AddNumberToObject(root, "myriad_moe_every", c->moe_every > 0 ? c->moe_every : 1);
    if (c->arch == ARCH_LLAMA) cJSON_AddNumberToObject(root, "myriad_dense_intermediate_size", c->ffn);
    else cJSON_AddNumberToObject(root, "myriad_expert_ffn", model_expert_ffn(c));
}

int hf_config_parse(const char *text, size_t len, const char *src, ModelConfig *c) {
    memset(c, 0, sizeof *c);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) return myr_error("%s: not valid JSON (error near byte %td)", src, end ? end - text : (ptrdiff_t)0);
    int rc = 0;
    for (const char *p = end; p < text + len && !rc; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            rc = myr_error("%s: unexpected text after the JSON object (byte %td)", src, p - text);
    Reader r = {root, src};
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    if (rc) {
    } else if (!cJSON_IsObject(root)) {
        rc = myr_error("%s: expected a JSON object (a Hugging Face config.json)", src);
    } else if (!mt) {
        rc = myr_error("%s: missing required key \"model_type\" (supported: gpt2, llama)", src);
    } else if (!cJSON_IsString(mt)) {
        rc = myr_error("%s: \"model_type\" must be a string (supported: gpt2, llama)", src);
    } else if (!strcmp(mt->valuestring, "gpt2")) {
        rc = read_gpt2(&r, c);
        if (!rc) rc = read_moe(&r, c, 0);
    } else if (!strcmp(mt->valuestring, "llama")) {
        rc = read_llama(&r, c);
    } else if (!strcmp(mt->valuestring, "mixtral")) {
        rc = read_llama(&r, c);
        if (!rc) rc = read_moe(&r, c, 1);
    } else {
        rc = myr_error("%s: unknown model_type '%s' (supported: gpt2, llama, mixtral)", src, io_quote(mt->valuestring));
    }
    cJSON_Delete(root);
    if (!rc && model_config_validate(c)) {
        char why[1024];
        snprintf(why, sizeof why, "%s", myr_last_error());
        rc = myr_error("%s: %s", src, why);
    }
    return rc;
}

int hf_config_read(const char *path, ModelConfig *c) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return myr_error("cannot open %s: %s (expected a Hugging Face config.json)", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + len, 1, cap - len, fp)) > 0;) {
        len += got;
        if (len == cap) {
            if (cap >= (64u << 20)) { /* a config.json is a few KB; refuse to slurp something huge */
                free(buf);
                fclose(fp);
                return myr_error("%s is larger than 64 MB; not a config.json", path);
            }
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
        }
    }
    int err = ferror(fp);
    fclose(fp);
    if (!buf) return myr_error("out of memory reading %s", path);
    if (err) {
        free(buf);
        return myr_error("cannot read %s", path);
    }
    int rc = hf_config_parse(buf, len, path, c);
    free(buf);
    return rc;
}

/* ---------- writing ---------- */

/* Shortest decimal that reads back as the same float, as a raw JSON number (e.g. 1e-05). */
static cJSON *float_number(float v) {
    char s[48];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, (double)v);
        if (strtof(s, NULL) == v) break;
    }
    return cJSON_CreateRaw(s);
}

char *hf_config_to_json(const ModelConfig *c) { return hf_config_to_json_dtype(c, "float32"); }

char *hf_config_to_json_dtype(const ModelConfig *c, const char *torch_dtype) {
    if (model_config_validate(c)) return NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root) {
        myr_error("out of memory");
        return NULL;
    }
    cJSON *arch = cJSON_AddArrayToObject(root, "architectures");
    if (c->arch == ARCH_GPT2) {
        cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
        cJSON_AddStringToObject(root, "model_type", "gpt2");
        cJSON_AddNumberToObject(root, "n_layer", c->layers);
        cJSON_AddNumberToObject(root, "n_embd", c->hidden);
        cJSON_AddNumberToObject(root, "n_head", c->heads);
        cJSON_AddNumberToObject(root, "n_inner", c->ffn);
        cJSON_AddNumberToObject(root, "vocab_size", c->vocab);
        cJSON_AddNumberToObject(root, "n_positions", c->max_seq);
        cJSON_AddNumberToObject(root, "n_ctx", c->max_seq); /* older transformers read n_ctx */
        cJSON_AddItemToObject(root, "layer_norm_epsilon", float_number(c->norm_eps));
        cJSON_AddStringToObject(root, "activation_function", "gelu_new");
        /* myriad trains without dropout; say so, or transformers would apply its 0.1 defaults */
        cJSON_AddNumberToObject(root, "attn_pdrop", 0);
        cJSON_AddNumberToObject(root, "embd_pdrop", 0);
        cJSON_AddNumberToObject(root, "resid_pdrop", 0);
    } else {
        int moe = c->experts > 0; /* Mixtral: intermediate_size is the experts' */
        cJSON_AddItemToArray(arch, cJSON_CreateString(moe ? "MixtralForCausalLM" : "LlamaForCausalLM"));
        cJSON_AddStringToObject(root, "model_type", moe ? "mixtral" : "llama");
        cJSON_AddNumberToObject(root, "num_hidden_layers", c->layers);
        cJSON_AddNumberToObject(root, "hidden_size", c->hidden);
        cJSON_AddNumberToObject(root, "num_attention_heads", c->heads);
        cJSON_AddNumberToObject(root, "num_key_value_heads", c->kv_heads);
        cJSON_AddNumberToObject(root, "intermediate_size", moe ? model_expert_ffn(c) : c->ffn);
        cJSON_AddNumberToObject(root, "vocab_size", c->vocab);
        cJSON_AddNumberToObject(root, "max_position_embeddings", c->max_seq);
        cJSON_AddItemToObject(root, "rms_norm_eps", float_number(c->norm_eps));
        cJSON_AddItemToObject(root, "rope_theta", float_number(c->rope_theta));
        cJSON_AddStringToObject(root, "hidden_act", "silu");
        cJSON_AddBoolToObject(root, "attention_bias", c->attn_bias != 0);
        cJSON_AddBoolToObject(root, "mlp_bias", c->mlp_bias != 0);
        cJSON_AddNumberToObject(root, "head_dim", c->hidden / c->heads);
        if (c->rope_scaling == ROPE_PLAIN) {
            cJSON_AddNullToObject(root, "rope_scaling");
        } else {
            cJSON *rs = cJSON_AddObjectToObject(root, "rope_scaling");
            cJSON_AddStringToObject(rs, "rope_type", model_rope_scaling_name(c->rope_scaling));
            cJSON_AddItemToObject(rs, "factor", float_number(c->rope_factor));
            if (c->rope_scaling == ROPE_LLAMA3) {
                cJSON_AddItemToObject(rs, "low_freq_factor", float_number(c->rope_low_freq_factor));
                cJSON_AddItemToObject(rs, "high_freq_factor", float_number(c->rope_high_freq_factor));
                cJSON_AddNumberToObject(rs, "original_max_position_embeddings", c->rope_original_max_seq);
            }
        }
    }
    write_moe(root, c);
    cJSON_AddBoolToObject(root, "tie_word_embeddings", c->tied_embeddings != 0);
    cJSON_AddStringToObject(root, "torch_dtype", torch_dtype);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) myr_error("out of memory");
    return text;
}

int hf_config_write(const char *path, const ModelConfig *c) { return hf_config_write_dtype(path, c, "float32"); }

int hf_config_write_dtype(const char *path, const ModelConfig *c, const char *torch_dtype) {
    char *text = hf_config_to_json_dtype(c, torch_dtype);
    if (!text) return -1;
    int rc = atomic_write_text(path, text);
    free(text);
    return rc;
}
