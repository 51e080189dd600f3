/* test_hf_config.c: Hugging Face config.json reading (real GPT-2 / Llama configs, defaults,
 * every error path as one line) and writing (round trip, checked by an independent Python
 * reader of the keys transformers needs). */
#include <string.h>

#include "files.h"
#include "model/hf_config.h"
#include "test.h"
#include "util/error.h"

static const char *dir;

/* openai-community/gpt2's config.json, as published on the Hugging Face hub. */
static const char gpt2_json[] =
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"attn_pdrop\": 0.1,"
    " \"bos_token_id\": 50256, \"embd_pdrop\": 0.1, \"eos_token_id\": 50256, \"initializer_range\": 0.02,"
    " \"layer_norm_epsilon\": 1e-05, \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12,"
    " \"n_layer\": 12, \"n_positions\": 1024, \"resid_pdrop\": 0.1, \"summary_activation\": null,"
    " \"summary_first_dropout\": 0.1, \"summary_proj_to_labels\": true, \"summary_type\": \"cls_index\","
    " \"summary_use_proj\": true, \"task_specific_params\": {\"text-generation\": {\"do_sample\": true,"
    " \"max_length\": 50}}, \"vocab_size\": 50257}";

/* TinyLlama-1.1B's config.json (GQA: 32 heads, 4 kv heads). */
static const char llama_json[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\","
    " \"hidden_size\": 2048, \"initializer_range\": 0.02, \"intermediate_size\": 5632,"
    " \"max_position_embeddings\": 2048, \"model_type\": \"llama\", \"num_attention_heads\": 32,"
    " \"num_hidden_layers\": 22, \"num_key_value_heads\": 4, \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05,"
    " \"rope_scaling\": null, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\","
    " \"transformers_version\": \"4.35.0\", \"use_cache\": true, \"vocab_size\": 32000}";

static int parse(const char *json, ModelConfig *c) { return hf_config_parse(json, strlen(json), "cfg.json", c); }

static void test_reads_gpt2(void) {
    ModelConfig c;
    CHECK(parse(gpt2_json, &c) == 0, "%s", myr_last_error());
    CHECK(c.arch == ARCH_GPT2 && c.layers == 12 && c.hidden == 768 && c.heads == 12 && c.kv_heads == 12, "shape");
    CHECK(c.ffn == 3072, "n_inner absent -> 4*n_embd, got %d", c.ffn);
    CHECK(c.vocab == 50257 && c.max_seq == 1024 && c.norm_eps == 1e-5f && c.tied_embeddings == 1, "rest");
    CHECK(parse("{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":8,\"n_head\":2,\"n_inner\":null,\"vocab_size\":"
                "10,\"n_positions\":16,\"layer_norm_epsilon\":0.001}", &c) == 0, "%s", myr_last_error());
    CHECK(c.ffn == 32 && c.norm_eps == 0.001f, "n_inner null -> 32, got %d", c.ffn);
    CHECK(parse("{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":8,\"n_head\":2,\"n_inner\":20,\"vocab_size\":"
                "10,\"n_positions\":16}", &c) == 0 && c.ffn == 20, "explicit n_inner");
}

static void test_reads_llama(void) {
    ModelConfig c;
    CHECK(parse(llama_json, &c) == 0, "%s", myr_last_error());
    CHECK(c.arch == ARCH_LLAMA && c.layers == 22 && c.hidden == 2048 && c.heads == 32 && c.kv_heads == 4, "shape");
    CHECK(c.ffn == 5632 && c.vocab == 32000 && c.max_seq == 2048 && c.norm_eps == 1e-5f, "rest");
    CHECK(c.rope_theta == 10000.0f && c.tied_embeddings == 0, "rope/tie");
    /* absent optional keys take transformers' LlamaConfig defaults */
    CHECK(parse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":16,\"num_attention_heads\":4,"
                "\"intermediate_size\":40,\"vocab_size\":50,\"max_position_embeddings\":32}", &c) == 0, "%s",
          myr_last_error());
    CHECK(c.kv_heads == 4 && c.rope_theta == 10000.0f && c.tied_embeddings == 0 && c.norm_eps == 1e-6f, "defaults");
    CHECK(parse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":16,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":2,\"intermediate_size\":40,\"vocab_size\":50,\"max_position_embeddings\":32,"
                "\"rope_theta\":500000.0,\"tie_word_embeddings\":true,\"rms_norm_eps\":1e-5}", &c) == 0, "%s",
          myr_last_error());
    CHECK(c.kv_heads == 2 && c.rope_theta == 500000.0f && c.tied_embeddings == 1 && c.norm_eps == 1e-5f, "explicit");
    /* a Llama 3.1 config as the hub has it */
    CHECK(parse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":16,\"num_attention_heads\":4,"
                "\"num_key_value_heads\":2,\"intermediate_size\":40,\"vocab_size\":50,\"max_position_embeddings\":131072,"
                "\"head_dim\":4,\"attention_bias\":false,\"mlp_bias\":false,\"rope_theta\":500000.0,"
                "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}}", &c) == 0, "%s", myr_last_error());
    CHECK(c.rope_scaling == ROPE_LLAMA3 && c.rope_factor == 8 && c.rope_low_freq_factor == 1 &&
          c.rope_high_freq_factor == 4 && c.rope_original_max_seq == 8192 && c.max_seq == 131072, "llama3 scaling");
    CHECK(parse("{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":16,\"num_attention_heads\":4,"
                "\"intermediate_size\":40,\"vocab_size\":50,\"max_position_embeddings\":32,\"attention_bias\":true,"
                "\"mlp_bias\":true,\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}}", &c) == 0, "%s", myr_last_error());
    CHECK(c.attn_bias && c.mlp_bias && c.rope_scaling == ROPE_LINEAR && c.rope_factor == 2, "biases, linear");
}

static void expect_error(const char *json, const char *needle) {
    ModelConfig c;
    int rc = parse(json, &c);
    CHECK(rc == -1, "accepted: %s", json);
    CHECK(strstr(myr_last_error(), needle) != NULL, "'%s' lacks '%s'", myr_last_error(), needle);
    CHECK(strstr(myr_last_error(), "cfg.json") != NULL, "names the file: %s", myr_last_error());
    CHECK(one_line(myr_last_error()), "one line");
}

#define LLAMA_BASE "\"model_type\":\"llama\",\"num_hidden_layers\":2,\"intermediate_size\":40,\"vocab_size\":50,\"max_position_embeddings\":32"
static void test_errors(void) {
    expect_error("{\"model_type\":\"bert\",\"hidden_size\":8}", "unknown model_type 'bert' (supported: gpt2, llama, mixtral)");
    expect_error("{\"n_layer\":2}", "missing required key \"model_type\"");
    expect_error("{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_head\":2,\"vocab_size\":10,\"n_positions\":16}",
                 "missing required key \"n_embd\"");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16}", "missing required key \"num_attention_heads\"");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":18,\"num_attention_heads\":4}", "not divisible by heads");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"num_key_value_heads\":3}",
                 "do not divide heads");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16.5,\"num_attention_heads\":4}", "\"hidden_size\" must be an integer");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":\"16\",\"num_attention_heads\":4}", "must be an integer");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"hidden_act\":\"gelu\"}", "hidden_act");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"rope_scaling\":{\"type\":\"linear\"}}",
                 "rope_scaling");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":\"yarn\","
                 "\"factor\":4.0}}", "rope_scaling type yarn is not supported (supported: default, linear, dynamic, llama3)");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"rope_scaling\":{\"rope_type\":\"llama3\","
                 "\"factor\":8.0,\"low_freq_factor\":4.0,\"high_freq_factor\":1.0,"
                 "\"original_max_position_embeddings\":8192}}", "low_freq_factor < high_freq_factor");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"attention_bias\":1}", "true or false");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"head_dim\":8}", "head_dim");
    expect_error("{" LLAMA_BASE ",\"hidden_size\":16,\"num_attention_heads\":4,\"tie_word_embeddings\":1}",
                 "true or false");
    expect_error("{\"model_type\":\"gpt2\",\"n_layer\":2,\"n_embd\":8,\"n_head\":2,\"vocab_size\":10,\"n_positions\":16,"
                 "\"activation_function\":\"relu\"}", "activation_function");
    expect_error("{\"model_type\":\"gpt2\",\"n_layer\":-2,\"n_embd\":8,\"n_head\":2,\"vocab_size\":10,\"n_positions\":16}",
                 "layers must be positive");
    expect_error("{\"model_type\":\"gpt2\",", "not valid JSON");
    expect_error("{\"model_type\":\"gpt2\"} {}", "unexpected text");
    expect_error("[\"model_type\"]", "expected a JSON object");
    ModelConfig c;
    const char *missing = path_in(dir, "nope/config.json");
    CHECK(hf_config_read(missing, &c) == -1 && strstr(myr_last_error(), missing) && one_line(myr_last_error()), "%s",
          myr_last_error());
}

static void test_write_read_roundtrip(void) {
    ModelConfig in[3];
    model_config_defaults(&in[0], ARCH_GPT2);
    in[0].layers = 3, in[0].hidden = 48, in[0].heads = 6, in[0].kv_heads = 6, in[0].ffn = 100, in[0].vocab = 257,
    in[0].max_seq = 64, in[0].norm_eps = 1e-5f;
    model_config_defaults(&in[1], ARCH_LLAMA);
    in[1].layers = 2, in[1].hidden = 64, in[1].heads = 8, in[1].kv_heads = 2, in[1].ffn = 172, in[1].vocab = 300,
    in[1].max_seq = 128, in[1].norm_eps = 1e-6f, in[1].rope_theta = 500000.0f;
    in[2] = in[1];
    in[2].tied_embeddings = 1, in[2].norm_eps = 3.3e-7f, in[2].rope_theta = 12345.678f;
    in[2].attn_bias = 1, in[2].mlp_bias = 1, in[2].rope_scaling = ROPE_LLAMA3, in[2].rope_factor = 8;
    in[2].rope_low_freq_factor = 1, in[2].rope_high_freq_factor = 4, in[2].rope_original_max_seq = 8192;
    for (int i = 0; i < 3; i++) {
        const char *p = path_in(dir, "config.json");
        CHECK(hf_config_write(p, &in[i]) == 0, "write: %s", myr_last_error());
        ModelConfig out;
        CHECK(hf_config_read(p, &out) == 0, "read: %s", myr_last_error());
        CHECK(!memcmp(&in[i], &out, sizeof out), "config %d round trips exactly", i);
    }
    /* an invalid config is refused and the existing file kept */
    size_t n0, n1;
    unsigned char *before = file_read(path_in(dir, "config.json"), &n0);
    ModelConfig bad = in[0];
    bad.heads = 5;
    CHECK(hf_config_write(path_in(dir, "config.json"), &bad) == -1 && one_line(myr_last_error()), "bad refused");
    unsigned char *after = file_read(path_in(dir, "config.json"), &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "old config untouched");
    free(before), free(after);
}

/* The keys and types transformers' GPT2Config / LlamaConfig read, checked independently. */
static void test_python_reads_written_config(void) {
    ModelConfig g, l;
    model_config_defaults(&g, ARCH_GPT2);
    g.layers = 2, g.hidden = 32, g.heads = 4, g.kv_heads = 4, g.ffn = 128, g.vocab = 256, g.max_seq = 64;
    model_config_defaults(&l, ARCH_LLAMA);
    l.layers = 2, l.hidden = 32, l.heads = 4, l.kv_heads = 2, l.ffn = 88, l.vocab = 256, l.max_seq = 64;
    l.norm_eps = 1e-6f;
    CHECK(hf_config_write(path_in(dir, "gpt2.json"), &g) == 0, "write gpt2");
    CHECK(hf_config_write(path_in(dir, "llama.json"), &l) == 0, "write llama");
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 - %s/gpt2.json %s/llama.json 1>&2 <<'EOF'\n"
             "import json, sys\n"
             "g = json.load(open(sys.argv[1])); l = json.load(open(sys.argv[2]))\n"
             "assert g['architectures'] == ['GPT2LMHeadModel'] and g['model_type'] == 'gpt2', g\n"
             "assert (g['n_layer'], g['n_embd'], g['n_head'], g['n_inner'], g['vocab_size'], g['n_positions']) == (2, 32, 4, 128, 256, 64), g\n"
             "assert g['layer_norm_epsilon'] == 1e-5 and g['activation_function'] == 'gelu_new' and g['torch_dtype'] == 'float32', g\n"
             "assert g['tie_word_embeddings'] is True and g['resid_pdrop'] == 0, g\n"
             "assert l['architectures'] == ['LlamaForCausalLM'] and l['model_type'] == 'llama', l\n"
             "assert (l['num_hidden_layers'], l['hidden_size'], l['num_attention_heads'], l['num_key_value_heads'], l['intermediate_size'], l['vocab_size'], l['max_position_embeddings']) == (2, 32, 4, 2, 88, 256, 64), l\n"
             "assert l['rms_norm_eps'] == 1e-6 and l['rope_theta'] == 10000 and l['tie_word_embeddings'] is False, l\n"
             "assert l['hidden_act'] == 'silu' and l['torch_dtype'] == 'float32' and l['rope_scaling'] is None, l\n"
             "for cfg in (g, l):\n"
             "    for k, v in cfg.items():\n"
             "        assert not (isinstance(v, float) and v.is_integer() and k.endswith(('size', 'layers', 'heads'))), k\n"
             "EOF",
             dir, dir);
    CHECK(system(cmd) == 0, "python checks of the written config.json (see stderr)");
}

int main(void) {
    dir = tmpdir_make();
    RUN(test_reads_gpt2);
    RUN(test_reads_llama);
    RUN(test_errors);
    RUN(test_write_read_roundtrip);
    if (python_has("json")) RUN(test_python_reads_written_config);
    else SKIP(test_python_reads_written_config, "/usr/bin/python3 not found");
    tmpdir_remove(dir);
    return TEST_SUMMARY();
}
