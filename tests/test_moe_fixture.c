/* test_moe_fixture.c: the mixture-of-experts layer against PyTorch (fixtures made by
 * scripts/make_moe_fixture.py with Debian's python3-torch; the oracle computes every expert
 * densely and masks by the routing). For top-1 with capacity dropping, top-1 and top-2 dropless,
 * and top-2 with capacity, a shared expert and a dense layer: router probabilities, logits, the loss with
 * the load-balancing term, the number of dropped assignments, and every parameter gradient
 * agree to 1e-5 relative (max abs difference over the tensor's max abs value). */
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "kernels/kernels.h"
#include "model/hf_weights.h"
#include "model/moe.h"
#include "fixture_util.h"
#include "test.h"
#include "util/error.h"

static void check_case(const char *name) {
    char dir[256], path[512];
    snprintf(dir, sizeof dir, "tests/fixtures/%s", name);
    Model m;
    CHECK(hf_load(dir, &m) == 0, "load %s: %s", dir, myr_last_error());
    if (test_failures_in_case) return;
    CHECK(m.cfg.experts == 4, "%s: %d experts from config.json", name, m.cfg.experts);
    snprintf(path, sizeof path, "%s/expected.safetensors", dir);
    StFile ex;
    CHECK(st_open(path, &ex) == 0, "%s", myr_last_error());
    int64_t n, k;
    float *xf = read_tensor(&ex, "x", &n), *yf = read_tensor(&ex, "y", &n);
    int32_t *x = malloc(n * sizeof(int32_t)), *y = malloc(n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)xf[i], y[i] = (int32_t)yf[i];
    int B = 2, T = (int)n / 2;
    model_zero_grad(&m);
    moe_stats_reset(&m);
    double loss = model_forward(&m, x, y, B, T, 1.0);
    float *ref = read_tensor(&ex, "loss", &k);
    CHECK_CLOSE(loss, ref[0], 1e-5, 0, "loss (cross-entropy + coef x aux)");
    free(ref);
    ref = read_tensor(&ex, "aux", &k);
    CHECK_CLOSE(m.moe_aux, ref[0], 1e-5, 0, "load-balancing loss");
    free(ref);
    ref = read_tensor(&ex, "dropped", &k);
    CHECK(m.moe_stats.dropped == (int64_t)ref[0], "%s dropped %lld, PyTorch %g", name, (long long)m.moe_stats.dropped,
          ref[0]);
    printf("# %s: loss %.6f aux %.6f dropped %lld\n", name, loss, m.moe_aux, (long long)m.moe_stats.dropped);
    free(ref);
    int layers_with_probs = 0;
    for (int l = 0; l < m.cfg.layers; l++) {
        char pn[32];
        snprintf(pn, sizeof pn, "probs.%d", l);
        ref = read_tensor(&ex, pn, &k);
        CHECK((ref != NULL) == model_layer_is_moe(&m.cfg, l), "%s layer %d: MoE in one model only", name, l);
        if (!ref) continue;
        double e = scaled_error(ref, moe_router_probs(&m, l), k);
        CHECK(e < 1e-5, "%s router probabilities of layer %d: error %.3g", name, l, e);
        layers_with_probs++;
        free(ref);
    }
    CHECK(layers_with_probs > 0, "%s: no router probabilities compared", name);
    /* logits as the fused loss left them are gradients; a second forward without targets keeps logits */
    model_backward(&m);
    char tmp[] = "/tmp/myriad-moefix-XXXXXX";
    StFile ours;
    CHECK(open_grads_as_hf(&m, tmp, path, sizeof path, &ours) == 0, "our gradients as HF tensors: %s", myr_last_error());
    double worst = 0;
    int compared = 0, expected_grads = 0;
    for (int i = 0; i < ex.n; i++) {
        const char *tn = ex.tensors[i].name;
        if (strncmp(tn, "grad.", 5)) continue;
        expected_grads++;
        const StTensor *t = st_find(&ours, tn + 5);
        CHECK(t != NULL, "%s: no gradient for %s", name, tn + 5);
        if (!t) continue;
        float *r = read_tensor(&ex, tn, &k), *got = malloc(k * sizeof(float));
        CHECK(st_numel(t) == k, "%s %s: %lld elements, PyTorch %lld", name, tn + 5, (long long)st_numel(t), (long long)k);
        st_read_f32(&ours, t, got, k);
        real *gr = malloc(k * sizeof(real));
        for (int64_t j = 0; j < k; j++) gr[j] = got[j];
        double err = scaled_error(r, gr, k);
        CHECK(err < 1e-5, "%s gradient %s error %.3g", name, tn + 5, err);
        if (err > worst) worst = err;
        compared++;
        free(r), free(got), free(gr);
    }
    CHECK(compared == expected_grads && compared == ours.n, "%s: compared %d of %d gradients (%d exported)", name,
          compared, expected_grads, ours.n);
    printf("# %s: %d gradients, worst error %.2e\n", name, compared, worst);
    st_close(&ours);
    snprintf(path, sizeof path, "rm -rf %s", tmp);
    if (system(path)) {}
    /* logits (a forward without targets keeps them) */
    model_forward(&m, x, NULL, B, T, 0);
    ref = read_tensor(&ex, "logits", &k);
    float *ours_logits = malloc(k * sizeof(float));
    model_logits_to_host(&m, ours_logits);
    double e = scaled_error(ref, ours_logits, k);
    free(ours_logits);
    CHECK(e < 1e-5, "%s logits error %.3g", name, e);
    free(ref);
    st_close(&ex);
    free(xf), free(yf), free(x), free(y);
    model_destroy(&m);
}

static void test_top1_capacity(void) { check_case("moe-top1-capacity"); }
static void test_top2_dropless(void) { check_case("moe-top2-dropless"); }
static void test_top1_dropless(void) { check_case("moe-top1-dropless"); }
static void test_top2_capacity_shared_dense(void) { check_case("moe-top2-capacity-shared"); }

int main(void) {
    RUN(test_top1_capacity);
    RUN(test_top2_dropless);
    RUN(test_top1_dropless);
    RUN(test_top2_capacity_shared_dense);
    return TEST_SUMMARY();
}
