/* test_stages.c: a model cut into pipeline stages and chained by hand in one process (each
 * stage's output fed to the next, the output gradient fed back) computes the whole model's
 * loss and gradients: this is what pipeline parallelism runs on each rank. */
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "model/hf_weights.h"
#include "test.h"
#include "util/error.h"

static void check_split(const char *dir, const int *cuts, int nstages) {
    Model whole;
    CHECK(hf_load(dir, &whole) == 0, "load %s: %s", dir, myr_last_error());
    enum { B = 2, T = 8 };
    int32_t x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) { x[i] = (i * 7 + 3) % whole.cfg.vocab; y[i] = (i * 5 + 1) % whole.cfg.vocab; }
    model_zero_grad(&whole);
    double lref = model_forward(&whole, x, y, B, T, 1.0);
    model_backward(&whole);

    Model st[4];
    for (int k = 0; k < nstages; k++) {
        StageSpec spec = {cuts[k], cuts[k + 1], k == 0, k == nstages - 1};
        CHECK(model_create_stage(&st[k], &whole.cfg, 1, 1, 0, &spec) == 0, "stage %d: %s", k, myr_last_error());
        model_copy_shards(&st[k], &whole, 1);
        model_zero_grad(&st[k]);
    }
    double loss = 0;
    /* stage boundaries travel through host memory, as the pipeline's transfer buffers do */
    real *act = malloc((size_t)B * T * whole.cfg.hidden * sizeof(real)), *grad = malloc((size_t)B * T * whole.cfg.hidden * sizeof(real));
    for (int k = 0; k < nstages; k++) {
        double l = model_forward_stage(&st[k], x, k ? act : NULL, k == nstages - 1 ? y : NULL, B, T, 1.0);
        if (k == nstages - 1) loss = l;
        else model_stage_output_to_host(&st[k], act);
    }
    for (int k = nstages - 1; k >= 0; k--) {
        model_backward_stage(&st[k], k == nstages - 1 ? NULL : grad);
        if (k) model_stage_input_grad_to_host(&st[k], grad);
    }
    free(act);
    free(grad);
    CHECK(loss == lref, "%s: stage loss %.9g vs whole %.9g", dir, loss, lref);
    /* every tensor's gradient, by name; a tied embedding's two halves are summed (as the
     * pipeline's embedding group does) */
    int compared = 0;
    for (int k = 0; k < nstages; k++) {
        for (int i = 0; i < st[k].table.count; i++) {
            const ParamInfo *p = &st[k].table.info[i];
            const ParamInfo *w = param_table_find(&whole.table, p->tied_copy ? "tok_emb" : p->name);
            const real *g = st[k].grads + p->offset, *gw = whole.grads + w->offset;
            if (p->tied_copy || (!strcmp(p->name, "tok_emb") && whole.cfg.tied_embeddings && nstages > 1)) {
                if (p->tied_copy) {
                    const ParamInfo *e = param_table_find(&st[0].table, "tok_emb");
                    double maxd = 0, maxr = 0;
                    for (size_t j = 0; j < p->numel; j++) {
                        double sum = (double)g[j] + st[0].grads[e->offset + j];
                        maxd = fmax(maxd, fabs(sum - gw[j]));
                        maxr = fmax(maxr, fabs(gw[j]));
                    }
                    CHECK(maxd <= 1e-6 * maxr, "%s tied embedding gradient off by %.3g", dir, maxd / maxr);
                    compared++;
                }
                continue;
            }
            CHECK(!memcmp(g, gw, p->numel * sizeof(real)), "%s stage %d %s gradient differs", dir, k, p->name);
            compared++;
        }
    }
    CHECK(compared == whole.table.count, "%s: compared %d of %d tensors", dir, compared, whole.table.count);
    for (int k = 0; k < nstages; k++) model_destroy(&st[k]);
    model_destroy(&whole);
}

static void test_gpt2_two_stages(void) { int c[] = {0, 1, 2}; check_split("tests/fixtures/gpt2-tiny", c, 2); }
static void test_llama_two_stages(void) { int c[] = {0, 1, 2}; check_split("tests/fixtures/llama-tiny", c, 2); }
static void test_gpt2_uneven_three_stages(void) { int c[] = {0, 0, 1, 2}; check_split("tests/fixtures/gpt2-tiny", c, 3); }

int main(void) {
    kernels_set_threads(1);
    RUN(test_gpt2_two_stages);
    RUN(test_llama_two_stages);
    RUN(test_gpt2_uneven_three_stages);
    return TEST_SUMMARY();
}
