/* test_torch_fixture.c: the model against PyTorch (fixtures made by
 * scripts/make_torch_fixture.py with Debian's python3-torch). For tiny GPT-2 and Llama (GQA):
 * logits, loss and every parameter gradient of batch 0 agree with PyTorch to 1e-5 relative
 * (max abs difference over the tensor's max abs value), and 10 AdamW steps with clipping and a
 * warmup+cosine schedule give PyTorch's losses to 1e-5 relative. The same holds with a padded
 * vocabulary (--vocab-pad: vocab 67 in 128 rows of the embedding and head, the logits' stride),
 * where PyTorch's model has no padding at all: padding that weighed in the softmax would be off
 * by far more than 1e-5. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "model/hf_config.h"
#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/hf_weights.h"
#include "fixture_util.h"
#include "test.h"
#include "train/trainer.h"
#include "util/error.h"

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return cJSON_Parse(buf);
}

/* The fixture's model, its vocabulary padded to a multiple of pad (pad <= 1: as the files say). */
static int load_padded(const char *dir, int pad, Model *m) {
    if (pad <= 1) return hf_load(dir, m);
    char path[512];
    ModelConfig c;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (hf_config_read(path, &c)) return -1;
    c.vocab_pad = pad;
    if (model_create(m, &c)) return -1;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (hf_load_weights(path, m)) return -1;
    CHECK(m->vocab_rows == (c.vocab + pad - 1) / pad * pad && m->vocab_local == c.vocab, "padded rows %d of %d",
          m->vocab_rows, m->vocab_local);
    return 0;
}

/* Gradients are compared under their Hugging Face names: our gradient buffer is exported
 * through the same name mapping as the weights (hf_save) and read back. */
static void check_family(const char *dir, int pad) {
    char path[512];
    Model m;
    CHECK(load_padded(dir, pad, &m) == 0, "load %s: %s", dir, myr_last_error());
    if (test_failures_in_case) return;
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    StFile ex;
    CHECK(st_open(path, &ex) == 0, "%s", myr_last_error());
    int64_t n;
    float *xf = read_tensor(&ex, "x", &n);
    float *yf = read_tensor(&ex, "y", &n);
    int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) { x[i] = (int32_t)xf[i]; y[i] = (int32_t)yf[i]; }
    snprintf(path, sizeof path, "%s/expected.json", dir);
    cJSON *js = read_json(path);
    int B = cJSON_GetObjectItem(js, "B")->valueint, T = cJSON_GetObjectItem(js, "T")->valueint;

    /* logits and loss, without gradient */
    model_forward(&m, x, NULL, B, T, 0);
    int64_t nl;
    float *logits = read_tensor(&ex, "logits", &nl);
    float *ours_logits = malloc(nl * sizeof(float));
    model_logits_to_host(&m, ours_logits);
    double e = scaled_error(logits, ours_logits, nl);
    free(ours_logits);
    CHECK(e < 1e-5, "%s logits error %.3g", dir, e);
    printf("# %s logits error %.2e\n", dir, e);
    model_zero_grad(&m);
    double loss = model_forward(&m, x, y, B, T, 1.0);
    model_backward(&m);
    float *ref_loss = read_tensor(&ex, "loss", &nl);
    CHECK_CLOSE(loss, ref_loss[0], 1e-5, 0, "loss");

    /* every gradient: export our gradients under HF names and compare by name */
    char tmp[] = "/tmp/myriad-fixture-XXXXXX";
    StFile ours;
    CHECK(open_grads_as_hf(&m, tmp, path, sizeof path, &ours) == 0, "our gradients as HF tensors: %s", myr_last_error());
    double worst = 0;
    int compared = 0;
    for (int i = 0; i < ex.n; i++) {
        const char *name = ex.tensors[i].name;
        if (strncmp(name, "grad.", 5)) continue;
        const char *hf = name + 5;
        char prefixed[160];
        snprintf(prefixed, sizeof prefixed, "transformer.%s", hf);
        const StTensor *t = st_find(&ours, hf);
        if (!t) t = st_find(&ours, prefixed);
        CHECK(t != NULL, "no gradient for %s", hf);
        if (!t) continue;
        int64_t k;
        float *ref = read_tensor(&ex, name, &k);
        float *got = malloc(k * sizeof(float));
        st_read_f32(&ours, t, got, k);
        real *gr = malloc(k * sizeof(real));
        for (int64_t j = 0; j < k; j++) gr[j] = got[j];
        double err = scaled_error(ref, gr, k);
        CHECK(err < 1e-5, "%s gradient %s error %.3g", dir, hf, err);
        if (err > worst) worst = err;
        compared++;
        free(ref); free(got); free(gr);
    }
    CHECK(compared == m.table.count + (m.cfg.arch == ARCH_LLAMA ? 3 : 0) * m.cfg.layers,
          "compared %d gradients", compared);
    printf("# %s: %d gradients, worst error %.2e\n", dir, compared, worst);
    st_close(&ours);
    snprintf(path, sizeof path, "rm -rf %s", tmp);
    if (system(path)) {}
    model_destroy(&m);

    /* 10 training steps from the same initial weights */
    CHECK(load_padded(dir, pad, &m) == 0, "reload");
    cJSON *tr = cJSON_GetObjectItem(js, "train");
    OptimOptions o;
    optim_options_default(&o);
    o.adam.beta1 = cJSON_GetObjectItem(tr, "beta1")->valuedouble;
    o.adam.beta2 = cJSON_GetObjectItem(tr, "beta2")->valuedouble;
    o.adam.eps = cJSON_GetObjectItem(tr, "eps")->valuedouble;
    o.adam.weight_decay = cJSON_GetObjectItem(tr, "weight_decay")->valuedouble;
    o.clip = cJSON_GetObjectItem(tr, "clip")->valuedouble;
    o.schedule.kind = LR_COSINE;
    o.schedule.lr = cJSON_GetObjectItem(tr, "lr")->valuedouble;
    o.schedule.min_lr = cJSON_GetObjectItem(tr, "min_lr")->valuedouble;
    o.schedule.warmup = cJSON_GetObjectItem(tr, "warmup")->valueint;
    int steps = cJSON_GetObjectItem(js, "steps")->valueint;
    o.schedule.steps = steps;
    Trainer t;
    trainer_create(&t, &m, &o, NULL, 0);
    /* the batches: tokens.bin read directly (header 256 x int32, then uint16) */
    snprintf(path, sizeof path, "%s/tokens.bin", dir);
    FILE *f = fopen(path, "rb");
    int32_t header[256];
    CHECK(fread(header, 4, 256, f) == 256, "header");
    uint16_t *tok = malloc(header[2] * sizeof(uint16_t));
    CHECK(fread(tok, 2, header[2], f) == (size_t)header[2], "tokens");
    fclose(f);
    cJSON *losses = cJSON_GetObjectItem(js, "losses"), *norms = cJSON_GetObjectItem(js, "grad_norms");
    double worst_loss = 0;
    for (int s = 0; s < steps; s++) {
        for (int i = 0; i < B * T; i++) {
            x[i] = tok[s * B * T + i];
            y[i] = tok[s * B * T + i + 1];
        }
        StepResult r = trainer_step(&t, x, y, B, T);
        if (s == steps - 1 && pad > 1) { /* the padding rows never moved off zero */
            const ParamInfo *h = param_table_find(&m.table, m.cfg.tied_embeddings ? "tok_emb" : "lm_head");
            const real *w = m.params + h->offset;
            int nonzero = 0;
            for (size_t k = (size_t)m.vocab_local * m.cfg.hidden; k < h->numel; k++) nonzero += w[k] != 0;
            CHECK(nonzero == 0, "%d padding weights became nonzero", nonzero);
        }
        double ref = cJSON_GetArrayItem(losses, s)->valuedouble;
        CHECK_CLOSE(r.loss, ref, 1e-5, 0, "training loss");
        CHECK_CLOSE(r.grad_norm, cJSON_GetArrayItem(norms, s)->valuedouble, 1e-5, 0, "grad norm");
        worst_loss = fmax(worst_loss, fabs(r.loss - ref) / fabs(ref));
    }
    printf("# %s: %d steps, worst loss relative error %.2e\n", dir, steps, worst_loss);
    trainer_destroy(&t);
    model_destroy(&m);
    free(tok); free(x); free(y); free(xf); free(yf); free(logits); free(ref_loss);
    cJSON_Delete(js);
    st_close(&ex);
}

/* Recomputation changes what is stored, never the result: selective and full give gradients
 * bit-identical to keeping everything. */
static void check_recompute(const char *dir) {
    Model ref, m;
    CHECK(hf_load(dir, &ref) == 0 && hf_load(dir, &m) == 0, "load %s", dir);
    enum { B = 2, T = 8 };
    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) { x[i] = (i * 7 + 3) % ref.cfg.vocab; y[i] = (i * 5 + 1) % ref.cfg.vocab; }
    model_zero_grad(&ref);
    double lref = model_forward(&ref, x, y, B, T, 1.0);
    model_backward(&ref);
    for (int mode = RECOMPUTE_SELECTIVE; mode <= RECOMPUTE_FULL; mode++) {
        Model r;
        CHECK(hf_load(dir, &r) == 0, "load");
        r.recompute = (Recompute)mode;
        model_zero_grad(&r);
        double l = model_forward(&r, x, y, B, T, 1.0);
        model_backward(&r);
        CHECK(l == lref, "recompute %d loss %.9g vs %.9g", mode, l, lref);
        CHECK(!memcmp(r.grads, ref.grads, ref.table.total * sizeof(real)), "recompute %d gradients differ", mode);
        CHECK(model_activation_bytes(&r, B, T) < model_activation_bytes(&ref, B, T), "recompute %d stores less", mode);
        model_destroy(&r);
    }
    model_destroy(&ref);
    model_destroy(&m);
}

static void test_recompute_is_exact_gpt2(void) { check_recompute("tests/fixtures/gpt2-tiny"); }
static void test_recompute_is_exact_llama(void) { check_recompute("tests/fixtures/llama-tiny"); }

static void test_gpt2_matches_pytorch(void) { check_family("tests/fixtures/gpt2-tiny", 1); }
static void test_llama_gqa_matches_pytorch(void) { check_family("tests/fixtures/llama-tiny", 1); }
static void test_gpt2_padded_vocab_matches_pytorch(void) { check_family("tests/fixtures/gpt2-tiny", 128); }
static void test_llama_padded_vocab_matches_pytorch(void) { check_family("tests/fixtures/llama-tiny", 64); }

int main(void) {
    kernels_set_threads(2);
    RUN(test_gpt2_matches_pytorch);
    RUN(test_llama_gqa_matches_pytorch);
    RUN(test_gpt2_padded_vocab_matches_pytorch);
    RUN(test_llama_padded_vocab_matches_pytorch);
    RUN(test_recompute_is_exact_gpt2);
    RUN(test_recompute_is_exact_llama);
    return TEST_SUMMARY();
}
