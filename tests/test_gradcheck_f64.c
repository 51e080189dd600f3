/* test_gradcheck_f64.c: every parameter gradient of tiny GPT-2 and Llama (GQA) models against
 * central finite differences. Built with real = double (see src/kernels/real.h) so the check
 * itself is precise: relative error per tensor ||g - fd|| / max(||g||, ||fd||) < 1e-4. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "test.h"
#include "gradcheck_util.h"
#include "util/rng.h"

static void tiny_config(ModelConfig *c, ModelArch arch) {
    memset(c, 0, sizeof *c);
    model_config_defaults(c, arch);
    c->layers = 2;
    c->hidden = 16;
    c->heads = 4;
    c->kv_heads = arch == ARCH_LLAMA ? 2 : 4;
    c->ffn = arch == ARCH_LLAMA ? 24 : 64;
    c->vocab = 29;
    c->max_seq = 16;
}

static void check_model(ModelArch arch, int tied) {
    ModelConfig c;
    tiny_config(&c, arch);
    if (arch == ARCH_LLAMA) c.tied_embeddings = tied;
    Model m;
    CHECK(model_create(&m, &c) == 0, "create");
    model_init_weights(&m, 7);
    Rng rng = {99};
    enum { B = 2, T = 7 };
    int32_t x[B * T], y[B * T];
    gradcheck_perturb_and_draw(&m, &rng, x, y, B * T);
    model_zero_grad(&m);
    model_forward(&m, x, y, B, T, 1.0);
    model_backward(&m);
    const char *worst_name;
    double worst = gradcheck_all_tensors(&m, x, y, B, T, model_arch_name(arch), &worst_name);
    printf("# %s%s: %d tensors, worst relative error %.2e (%s)\n", model_arch_name(arch), tied ? " tied" : "",
           m.table.count, worst, worst_name);
    model_destroy(&m);
}

static void test_gradcheck_gpt2(void) { check_model(ARCH_GPT2, 1); }
static void test_gradcheck_llama_gqa(void) { check_model(ARCH_LLAMA, 0); }
static void test_gradcheck_llama_tied(void) { check_model(ARCH_LLAMA, 1); }

int main(void) {
    /* thousands of tiny forwards: one thread avoids barrier waits on a busy machine */
    kernels_set_threads(1);
    RUN(test_gradcheck_gpt2);
    RUN(test_gradcheck_llama_gqa);
    RUN(test_gradcheck_llama_tied);
    return TEST_SUMMARY();
}
