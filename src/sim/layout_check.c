/* layout_check.c: is a layout possible for this model, cluster and GPU (sim_check_layout; each
 * refusal names its constraint). sim_step runs it first; step_search.c searches what a layout left
 * open. */
#include <stdlib.h>

#include "sim/sim.h"
#include "util/error.h"

int sim_check_layout(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const Layout *l) {
    if (l->tp < 1 || l->cp < 1 || l->pp < 1 || l->vpp < 1 || l->dp < 1 || l->ep < 1)
        return myr_error("tp, cp, pp, vpp, dp and ep must all be at least 1");
    if (l->tp > c->scaleup_domain)
        return myr_error("tp %d exceeds the %d-GPU scale-up domain (tensor parallelism needs NVLink; use tp <= %d and "
                         "more pp)", l->tp, c->scaleup_domain, c->scaleup_domain);
    if (m->heads % l->tp) return myr_error("tp %d does not divide the %d attention heads", l->tp, m->heads);
    if (m->kv_heads % l->tp && l->tp % m->kv_heads)
        return myr_error("tp %d and the %d kv heads must divide one another", l->tp, m->kv_heads);
    if (l->pp > 1024) return myr_error("pp %d is above the simulator's 1024 stages", l->pp);
    if (l->pp > m->layers) return myr_error("pp %d exceeds the %d layers", l->pp, m->layers);
    long V = (long)l->pp * l->vpp;
    if (V > (long)m->layers) return myr_error("pp %d x vpp %d exceeds the %d layers", l->pp, l->vpp, m->layers);
    int *count = malloc(sizeof(int) * (size_t)V);
    if (!count) return myr_error("out of memory");
    int rc = sim_vstage_layers(m, l, count);
    free(count);
    if (rc) return -1;
    if (l->seq < 1) return myr_error("sequence length must be positive");
    if (l->seq % l->cp) return myr_error("cp %d does not divide the sequence length %d", l->cp, l->seq);
    if (l->cp > 1 && l->seq % (2 * l->cp))
        return myr_error("cp %d needs the sequence length %d to split into 2 x cp = %d load-balanced chunks", l->cp,
                         l->seq, 2 * l->cp);
    if (l->global_batch < 1) return myr_error("global batch must be positive");
    if (l->global_batch % l->dp)
        return myr_error("global batch %d is not a multiple of dp %d", l->global_batch, l->dp);
    int per_dp = l->global_batch / l->dp;
    if (l->micro_batch > 0 && per_dp % l->micro_batch)
        return myr_error("micro batch %d does not divide the %d sequences per data-parallel rank", l->micro_batch, per_dp);
    if (l->ep > 1) {
        if (m->experts <= 1) return myr_error("ep %d needs a mixture-of-experts model (this one is dense)", l->ep);
        if (m->experts % l->ep) return myr_error("ep %d does not divide the %d experts", l->ep, m->experts);
        if ((l->dp * l->cp) % l->ep)
            return myr_error("ep %d must divide dp x cp = %d (experts are spread over data-parallel ranks)", l->ep,
                             l->dp * l->cp);
    }
    if (l->etp > 0) {
        if (m->experts <= 1) return myr_error("--etp needs a mixture-of-experts model");
        if (l->etp > l->tp || l->tp % l->etp) return myr_error("etp %d must divide tp %d", l->etp, l->tp);
    }
    if (l->zero < 0 || l->zero > 3) return myr_error("zero must be 0, 1, 2 or 3");
    if (g->peak_tflops[l->dtype] <= 0 && !(l->dtype == DT_BF16 && g->peak_tflops[DT_FP16] > 0) &&
        !(l->dtype == DT_FP16 && g->peak_tflops[DT_BF16] > 0))
        return myr_error("%s has no %s tensor cores (choose another --dtype)", g->name, sim_dtype_name(l->dtype));
    if (l->vpp > 1 && l->pp == 1) return myr_error("vpp %d needs pipeline parallelism (pp > 1)", l->vpp);
    if (l->vpp > 1 && l->schedule == SCHED_GPIPE) return myr_error("the GPipe schedule has no interleaving (vpp 1)");
    if (l->schedule == SCHED_DUALPIPE && l->pp > 1) {
        if (l->vpp > 1) return myr_error("DualPipe runs two stages per device of its own: vpp must be 1");
        if (l->pp % 2) return myr_error("DualPipe needs an even pp (pairs of stages from both ends), got pp %d", l->pp);
        int mbs = l->micro_batch > 0 ? per_dp / l->micro_batch : 0;
        if (l->micro_batch > 0 && (mbs % 2 || mbs < l->pp))
            return myr_error("DualPipe needs an even number of micro-batches, at least pp %d (half go each way): got %d; "
                             "give --global-batch a multiple of dp %d x micro-batch %d x 2 of at least %ld", l->pp, mbs,
                             l->dp, l->micro_batch, (long)l->dp * l->micro_batch * l->pp);
    }
    if (l->vpp_group < 0) return myr_error("--vpp-group must be positive");
    if (l->vpp_group > 0 && l->vpp_group < l->pp)
        return myr_error("--vpp-group %d is below pp %d: Megatron-core's interleaved schedule would deadlock (its warm-up "
                         "assumes a group fills the pipeline); give at least %d", l->vpp_group, l->pp, l->pp);
    if (l->vpp > 1 && l->micro_batch > 0 && l->vpp_group >= l->pp) {
        int mbs = per_dp / l->micro_batch, last = mbs % l->vpp_group;
        if (last && last < l->pp)
            return myr_error("with --vpp-group %d the %d micro-batches leave a last group of %d, below pp %d (the "
                             "schedule would deadlock): give a group size that divides them or leaves at least %d",
                             l->vpp_group, mbs, last, l->pp, l->pp);
    }
    if (l->vpp > 1 && l->micro_batch > 0 && l->vpp_group <= 0 && (per_dp / l->micro_batch) % l->pp)
        return myr_error("the interleaved schedule needs micro-batches (%d) to be a multiple of pp %d (give "
                         "--global-batch a multiple of dp %d x micro-batch %d x pp %d = %ld, or --vpp 1, or --vpp-group N)",
                         per_dp / l->micro_batch, l->pp, l->dp, l->micro_batch, l->pp,
                         (long)l->dp * l->micro_batch * l->pp);
    long gpus = (long)l->tp * l->cp * l->pp * l->dp;
    if (c->gpus > 0 && gpus > c->gpus)
        return myr_error("layout needs %ld GPUs, the cluster %s has %d", gpus, c->name, c->gpus);
    return 0;
}
