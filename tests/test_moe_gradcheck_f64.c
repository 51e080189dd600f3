/* test_moe_gradcheck_f64.c: every parameter gradient of tiny mixture-of-experts models against
 * central finite differences (double build, as test_gradcheck_f64.c): GELU experts (GPT-2) with
 * a shared expert and capacity dropping, SwiGLU experts (Llama) top-1 dropless on every second
 * layer, and top-2 with capacity dropping. The loss includes the load-balancing term, so the
 * router's gradient through it is checked too; each case must actually drop tokens (or not). */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/model.h"
#include "test.h"
#include "gradcheck_util.h"
#include "util/rng.h"

static void check_moe(ModelArch arch, int experts, int top_k, int shared, float cf, int every, int expect_drops,
                      uint64_t seed) {
    ModelConfig c;
    memset(&c, 0, sizeof c);
    model_config_defaults(&c, arch);
    c.layers = 2;
    c.hidden = 16;
    c.heads = 4;
    c.kv_heads = arch == ARCH_LLAMA ? 2 : 4;
    c.ffn = 24;
    c.vocab = 29;
    c.max_seq = 16;
    c.experts = experts;
    c.top_k = top_k;
    c.shared_experts = shared;
    c.expert_ffn = 12;
    c.capacity_factor = cf;
    c.aux_loss_coef = 0.3f;
    c.moe_every = every;
    Model m;
    CHECK(model_create(&m, &c) == 0, "create");
    model_init_weights(&m, 7);
    Rng rng = {seed};
    enum { B = 2, T = 7 };
    int32_t x[B * T], y[B * T];
    gradcheck_perturb_and_draw(&m, &rng, x, y, B * T);
    model_zero_grad(&m);
    memset(m.moe_stats.tokens, 0, sizeof(int64_t) * c.layers * c.experts);
    m.moe_stats.dropped = 0;
    model_forward(&m, x, y, B, T, 1.0);
    model_backward(&m);
    CHECK(m.moe_aux > 0, "aux loss %g", m.moe_aux);
    long long dropped = (long long)m.moe_stats.dropped;
    CHECK((dropped > 0) == expect_drops, "dropped %lld assignments", dropped);
    const char *worst_name;
    double worst = gradcheck_all_tensors(&m, x, y, B, T, model_arch_name(arch), &worst_name);
    printf("# %s E=%d k=%d shared=%d cf=%g every=%d: %d tensors, %lld dropped, worst relative error %.2e (%s)\n",
           model_arch_name(arch), experts, top_k, shared, cf, every, m.table.count, dropped,
           worst, worst_name);
    model_destroy(&m);
}

static void test_moe_gelu_shared_capacity(void) { check_moe(ARCH_GPT2, 4, 2, 1, 1.0f, 1, 1, 8); }
static void test_moe_swiglu_top1_dropless(void) { check_moe(ARCH_LLAMA, 4, 1, 0, 0.0f, 2, 0, 99); }
static void test_moe_swiglu_top2_capacity(void) { check_moe(ARCH_LLAMA, 3, 2, 0, 0.75f, 1, 1, 99); }

int main(void) {
    kernels_set_threads(1);
    RUN(test_moe_gelu_shared_capacity);
    RUN(test_moe_swiglu_top1_dropless);
    RUN(test_moe_swiglu_top2_capacity);
    return TEST_SUMMARY();
}
