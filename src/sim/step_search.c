/* step_search.c: the search of what a run did not publish or the user left to `auto`: micro-batch,
 * interleaving and recompute mode, the fastest that fits (sim_step_search), each candidate one
 * sim_step. */
#include <stdio.h>
#include <stdlib.h>

#include "sim/sim.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

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
