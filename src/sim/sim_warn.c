/* sim_warn.c: what an answer of the simulator must say about itself. A step whose pipelines run
 * fewer micro-batches than they have stages, a bubble above 25% of the step, and a predicted MFU
 * above the best measured run of that GPU and software in the validation sets (validated.c) are
 * flagged; `sim` prints each as a warning line and `plan` marks the layouts. */
#include <stdio.h>

#include "sim/sim.h"

int sim_result_flags(const char *gpu, const char *software, const Layout *l, const SimResult *r) {
    int f = 0;
    if (l->pp > 1 && r->microbatches < l->pp) f |= SIM_WARN_FEW_MB;
    if (r->step_time > 0 && r->bubble > 0.25 * r->step_time) f |= SIM_WARN_BUBBLE;
    int exact;
    double best = sim_validated_mfu(gpu, software, l->dtype == DT_FP8, NULL, &exact);
    /* GPUs outside the table (a calibrated CPU, a new part) are not flagged: nothing to compare */
    if (sim_gpu_family(gpu) && (best <= 0 || !exact || r->mfu > best)) f |= SIM_WARN_MFU;
    return f;
}

void sim_result_warning(int flag, const char *gpu, const char *software, const Layout *l, const SimResult *r, char *buf,
                        size_t cap) {
    buf[0] = 0;
    if (flag == SIM_WARN_FEW_MB) {
        long need = (long)l->dp * r->micro_batch * l->pp;
        snprintf(buf, cap, "%d micro-batches for %d pipeline stages: every stage idles while the pipeline fills and "
                 "drains; give --global-batch %ld or more (dp %d x micro-batch %d x pp %d)", r->microbatches, l->pp, need,
                 l->dp, r->micro_batch, l->pp);
    } else if (flag == SIM_WARN_BUBBLE) {
        snprintf(buf, cap, "the pipeline bubble is %.0f%% of the step (above 25%%): more micro-batches (--global-batch), "
                 "interleaving (--vpp) or fewer stages (--pp) shrink it", 100 * r->bubble / r->step_time);
    } else if (flag == SIM_WARN_MFU) {
        const char *run;
        int exact;
        int fp8 = l->dtype == DT_FP8;
        double best = sim_validated_mfu(gpu, software, fp8, &run, &exact);
        const char *prec = fp8 ? "fp8" : "16-bit";
        if (best <= 0)
            snprintf(buf, cap, "no published run on %s is in the validation sets: the MFU of %.1f%% is unvalidated", gpu,
                     100 * r->mfu);
        else if (!exact)
            snprintf(buf, cap, "no published %s run of %s on %s is in the validation sets (the GPU's best: %.1f%%, %s): "
                     "the MFU of %.1f%% is unvalidated%s", prec, software, gpu, 100 * best, run, 100 * r->mfu,
                     r->mfu > best ? " and above every validated run of the GPU" : "");
        else
            snprintf(buf, cap, "MFU %.1f%% is above the best validated %s run of %s on %s (%.1f%%, %s): the model was never "
                     "checked against a run this fast", 100 * r->mfu, prec, software, gpu, 100 * best, run);
    }
}
