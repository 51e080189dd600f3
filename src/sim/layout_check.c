/* layout_check.c: is a layout possible for this model, cluster and GPU (sim_check_layout; each
 * refusal names its constraint), and the search of what a run did not publish or the user left to
 * `auto`: micro-batch, interleaving and recompute mode, fastest that fits (sim_step_search). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

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

static int divisors_upto(int n, int cap, int *out, int max_out) {
    int k = 0;
    for (int d = 1; d <= n && d <= cap && k < max_out; d++)
        if (n % d == 0) out[k++] = d;
    return k;
}

int sim_step_search_ex(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, Layout *l, const SearchOpts *so,
                       SimResult *r) {
    int per_dp = l->dp > 0 ? l->global_batch / l->dp : 0;
    int bs[64], nb, vs[16], nv, nrc = 1;
    Recompute rcs[3] = {l->recompute, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    if (so->search_recompute) { rcs[0] = RECOMPUTE_NONE; nrc = 3; }
    if (l->micro_batch > 0 && !so->search_mb) { bs[0] = l->micro_batch; nb = 1; }
    else nb = divisors_upto(per_dp > 0 ? per_dp : 1, so->max_mb > 0 ? so->max_mb : 16, bs, 64);
    if (so->search_vpp && l->pp > 1 && l->n_stage_layers == 0) {
        /* interleaving depths up to 8, or the smallest above when only 1 divides the stage's layers;
         * with fewer layers on the first/last stage, the middle stages' count must split */
        int per = m->layers / l->pp > 0 ? m->layers / l->pp : 1;
        if (sim_uneven(l)) per = sim_stage_layer_count(m, l, l->pp > 2 ? 1 : 0);
        nv = divisors_upto(per, 8, vs, 16);
        if (nv == 1)
            for (int d = 9; d <= per && d <= 32; d++)
                if (per % d == 0) { vs[nv++] = d; break; }
    }
    else { vs[0] = l->vpp; nv = 1; }
    double cap = so->mem_cap > 0 ? so->mem_cap : g->hbm_gib * GIB;
    int found = 0, found_fit = 0;
    SimResult best = {0};
    Layout best_l = *l;
    char err[512] = "";
    for (int q = 0; q < nrc; q++)
        for (int i = 0; i < nb; i++)
            for (int j = 0; j < nv; j++) {
                Layout x = *l;
                x.micro_batch = bs[i];
                x.vpp = vs[j];
                x.recompute = rcs[q];
                SimResult t;
                if (sim_step(m, c, g, &x, &t, NULL)) {
                    if (!err[0]) snprintf(err, sizeof err, "%s", myr_last_error());
                    continue;
                }
                int fits = t.mem.total <= cap;
                int better = !found || (fits && !found_fit) ||
                             (fits == found_fit && (fits ? t.step_time < best.step_time : t.mem.total < best.mem.total));
                if (better) { best = t; best_l = x; found = 1; found_fit = fits; }
            }
    if (!found) return myr_error("%s", err[0] ? err : "no valid micro-batch / vpp for this layout");
    *l = best_l;
    *r = best;
    return 0;
}

int sim_step_search(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, Layout *l, int search_vpp,
                    SimResult *r) {
    SearchOpts so = {0};
    so.search_vpp = search_vpp;
    return sim_step_search_ex(m, c, g, l, &so, r);
}
