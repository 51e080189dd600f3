/* test_optim.c: the optimizer pieces against their definitions, by hand: clip_grad_norm_'s
 * coefficient (max_norm / (norm + 1e-6), never above 1: clipping only scales down; 0 = off), the
 * learning-rate schedules (linear warm-up, cosine to min_lr, constant), and two AdamW steps on one
 * tensor (decoupled weight decay, both bias corrections). The PyTorch fixtures cover the same
 * code in whole runs, but there every step's norm is above the limit: a coefficient above 1 went
 * unnoticed (scripts/mutate.sh, clip_scales_up), and they clip at 1 only: a coefficient clamped
 * at max_norm instead of 1 did too (clip_clamped_at_max_norm; limits 0.1 to 2.5 here). */
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

/* Limits other than 1 (--clip 0.5, 0.1, 2.5): with max_norm 1 a coefficient clamped at max_norm
 * instead of 1 is the same number, so only another limit shows it (scripts/mutate.sh,
 * clip_clamped_at_max_norm: below the limit every gradient would be scaled by max_norm, down for
 * --clip < 1, up for --clip > 1). Above the limit the norm after clipping is the limit. */
static void test_clip_other_limits(void) {
    const double limits[] = {0.5, 0.25, 0.1, 2.5};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        double m = limits[i];
        double below[] = {0.0, 1e-9, 0.3 * m, 0.9 * m, m - 1e-3};
        for (size_t k = 0; k < sizeof below / sizeof below[0]; k++) {
            double c = clip_coefficient(below[k], m);
            CHECK(c == 1.0, "--clip %g, norm %g below it: coefficient %g, want 1 (left alone)", m, below[k], c);
        }
        double above[] = {1.5 * m, 4 * m, 100.0};
        for (size_t k = 0; k < sizeof above / sizeof above[0]; k++) {
            double c = clip_coefficient(above[k], m);
            CHECK_CLOSE(c, m / (above[k] + 1e-6), 1e-15, 0, "--clip above the limit: scaled to it");
            CHECK_CLOSE(c * above[k], m, 1e-5, 0, "the clipped norm is the limit");
        }
    }
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
    RUN(test_clip_other_limits);
    RUN(test_lr_schedules);
    RUN(test_adamw_two_steps);
    return TEST_SUMMARY();
}
