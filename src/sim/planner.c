/* planner.c: enumerate parallel layouts of a model on N GPUs and keep the fastest to train.
 * Searched: tp (powers of two up to the scale-up domain, dividing the heads), pp (dividing the
 * layers), cp (long sequences only), ep (MoE only), recompute mode, and for each layout the
 * micro-batch and the interleaving (sim_step_search). dp is what remains. The global batch is kept
 * near the requested one, rounded to a multiple of dp. Layouts that do not fit in HBM are dropped
 * and counted; one example of the reason is kept. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static void keep(PlanResult *r, const PlanEntry *e) {
    int pos = r->nbest;
    while (pos > 0 && r->best[pos - 1].days > e->days) pos--;
    if (pos >= r->cap) return;
    int n = r->nbest < r->cap ? r->nbest + 1 : r->cap;
    memmove(&r->best[pos + 1], &r->best[pos], sizeof *e * (size_t)(n - 1 - pos));
    r->best[pos] = *e;
    r->nbest = n;
}

static void reject(PlanResult *r, const Layout *l, const char *why) {
    if (!r->rejected || r->nrejected >= 4096) return;
    snprintf(r->rejected[r->nrejected++], sizeof r->rejected[0], "tp %d cp %d pp %d dp %d ep %d recompute %s: %s", l->tp,
             l->cp, l->pp, l->dp, l->ep, sim_recompute_name(l->recompute), why);
}

int sim_plan(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, int gpus, const Layout *base, double tokens,
             int k, PlanResult *out) {
    memset(out, 0, sizeof *out);
    out->cap = k > 0 ? k : 5;
    out->best = calloc((size_t)out->cap + 1, sizeof(PlanEntry));
    out->rejected = malloc(sizeof out->rejected[0] * 4096);
    if (!out->best || !out->rejected) { sim_plan_free(out); return myr_error("out of memory"); }
    double cap = g->hbm_gib * GIB;
    int cps[4] = {1, 2, 4, 8}, ncp = base->seq >= 16384 ? 4 : base->seq >= 8192 ? 2 : 1;
    Recompute recs[3] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    for (int tp = 1; tp <= c->scaleup_domain && tp <= gpus; tp *= 2) {
        if (m->heads % tp) continue;
        for (int ci = 0; ci < ncp; ci++) {
            int cp = cps[ci];
            for (int pp = 1; pp <= m->layers && tp * cp * pp <= gpus; pp++) {
                if (m->layers % pp || gpus % (tp * cp * pp)) continue;
                int dp = gpus / (tp * cp * pp);
                for (int ep = 1; ep <= (m->experts > 1 ? m->experts : 1); ep++) {
                    if (m->experts > 1 && (m->experts % ep || dp % ep)) continue;
                    for (int ri = 0; ri < 3; ri++) {
                        /* with fused attention there is no attention core to recompute: selective == none */
                        if (base->flash && recs[ri] == RECOMPUTE_SELECTIVE) continue;
                        Layout l = *base;
                        l.tp = tp; l.cp = cp; l.pp = pp; l.dp = dp; l.ep = ep; l.vpp = 1;
                        l.recompute = recs[ri];
                        l.sp = tp > 1;
                        l.micro_batch = 0;
                        int gb = (int)lround((double)base->global_batch / dp) * dp;
                        l.global_batch = gb < dp ? dp : gb;
                        out->considered++;
                        if (sim_check_layout(m, c, g, &l)) { out->invalid++; reject(out, &l, myr_last_error()); continue; }
                        SimResult r;
                        if (sim_step_search(m, c, g, &l, 1, &r)) { out->invalid++; reject(out, &l, myr_last_error()); continue; }
                        if (r.mem.total > cap) {
                            char why[128];
                            snprintf(why, sizeof why, "needs %.1f GiB per GPU, has %g", r.mem.total / GIB, g->hbm_gib);
                            reject(out, &l, why);
                            out->no_fit++;
                            if (!out->why_no_fit[0])
                                snprintf(out->why_no_fit, sizeof out->why_no_fit,
                                         "e.g. tp %d pp %d dp %d recompute %s needs %.1f GiB per GPU, has %g", tp, pp, dp,
                                         sim_recompute_name(l.recompute), r.mem.total / GIB, g->hbm_gib);
                            continue;
                        }
                        PlanEntry e;
                        e.layout = l;
                        e.res = r;
                        e.days = (tokens > 0 ? tokens : 1e12) / r.tokens_per_s / 86400;
                        keep(out, &e);
                    }
                }
            }
        }
    }
    return 0;
}

void sim_plan_free(PlanResult *r) {
    free(r->best);
    free(r->rejected);
    r->best = NULL;
    r->rejected = NULL;
}
