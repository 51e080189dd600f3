/* test_optim.c: the optimizer pieces against their definitions, by hand: clip_grad_norm_'s
 * coefficient (max_norm / (norm + 1e-6), never above 1: clipping only scales down; 0 = off), the
 * learning-rate schedules (linear warm-up, cosine to min_lr, constant), and two AdamW steps on one
 * tensor (decoupled weight decay, both bias corrections). The PyTorch fixtures cover the same
 * code in whole runs, but there every step's norm is above the limit: a coefficient above 1 went
 * unnoticed (scripts/mutate.sh, clip_scales_up). */
#include <math.h>
#include <string.h>

#include "optim/adamw.h"
#include "optim/clip.h"
#include "optim/lr_schedule.h"
#include "test.h"

static void test_clip_coefficient(void) {
    CHECK_CLOSE(clip_coefficient(4.0, 1.0), 1.0 / (4.0 + 1e-6), 1e-15, 0, "a norm above the limit is scaled to it");
    CHECK(clip_coefficient(0.5, 1.0) == 1.0, "a norm below the limit is left alone: %g", clip_coefficient(0.5, 1.0));
    CHECK(clip_coefficient(1e-9, 1.0) == 1.0, "a tiny norm is not blown up: %g", clip_coefficient(1e-9, 1.0));
    CHECK(clip_coefficient(100.0, 0.0) == 1.0, "max_norm 0: clipping off");
}

static void test_lr_schedules(void) {
    LrSchedule s = {LR_COSINE, 1.0, 0.1, 10, 110};
    CHECK_CLOSE(lr_at(&s, 0), 0.1, 1e-15, 0, "warm-up step 1: lr * 1 / warmup");
    CHECK_CLOSE(lr_at(&s, 9), 1.0, 1e-15, 0, "warm-up ends at lr");
    CHECK_CLOSE(lr_at(&s, 10), 1.0, 1e-15, 0, "cosine starts at lr");
    CHECK_CLOSE(lr_at(&s, 60), 0.1 + 0.9 * 0.5, 1e-15, 0, "half way: (lr + min_lr) / 2");
    CHECK_CLOSE(lr_at(&s, 110), 0.1, 1e-15, 0, "ends at min_lr");
    CHECK_CLOSE(lr_at(&s, 500), 0.1, 1e-15, 0, "stays at min_lr");
    LrSchedule c = {LR_CONSTANT, 0.3, 0, 0, 50};
    CHECK(lr_at(&c, 0) == 0.3 && lr_at(&c, 49) == 0.3, "constant");
}

/* p = 1, g = 0.5 then -0.25, lr 0.1, wd 0.1, betas (0.9, 0.999), eps 1e-8 (torch.optim.AdamW):
 * step t: p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
 *         p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
static void test_adamw_two_steps(void) {
    ParamTable t;
    memset(&t, 0, sizeof t);
    ParamInfo info = {.numel = 1, .decay = 1};
    t.count = 1, t.info = &info, t.total = 1;
    AdamW o;
    adamw_create(&o, 0, 1);
    AdamWConfig cfg = {0.9, 0.999, 1e-8, 0.1};
    real p = 1, g = 0.5;
    double P = 1, m = 0, v = 0;
    for (int step = 1; step <= 2; step++) {
        adamw_step(&o, &cfg, 0.1, &p, &g, &t);
        double G = g;
        P *= 1 - 0.1 * 0.1;
        m = 0.9 * m + 0.1 * G;
        v = 0.999 * v + 0.001 * G * G;
        P -= 0.1 / (1 - pow(0.9, step)) * m / (sqrt(v) / sqrt(1 - pow(0.999, step)) + 1e-8);
        CHECK_CLOSE(p, P, 1e-6, 0, step == 1 ? "step 1" : "step 2");
        g = -0.25;
    }
    adamw_destroy(&o);
}

int main(void) {
    RUN(test_clip_coefficient);
    RUN(test_lr_schedules);
    RUN(test_adamw_two_steps);
    return TEST_SUMMARY();
}
