/* planner.c: enumerate parallel layouts of a model on N GPUs and keep the fastest to train.
 * Searched unless fixed by the caller (PlanFixed): tp (powers of two within the scale-up domain
 * that divide the heads), cp (long sequences), pp (every size whose product with tp and cp divides
 * the GPUs; when pp does not divide the layers, the Megatron/Llama 3 split with fewer layers on the
 * first and last stage), ep (MoE), recompute mode, and per layout the micro-batch and interleaving
 * (sim_step_search_ex). dp is what remains; the global batch is the requested one rounded to a
 * multiple of dp. A layout is recommended only below the memory headroom. Every rejection is
 * counted by its binding constraint so that "nothing fits" can say why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static const char *reason_names[PLAN_NREASONS] = {
    "the scale-up domain or the heads do not allow this tp", "cp does not split the sequence",
    "pp does not split the layers", "the GPUs are not a multiple of tp x cp x pp", "the experts do not split",
    "the GPU has no tensor cores for the dtype", "the global batch does not split", "memory above the headroom",
    "other"};
const char *sim_plan_reason_name(PlanReason r) { return reason_names[r]; }

static void keep(PlanResult *r, const PlanEntry *e) {
    int pos = r->nbest;
    while (pos > 0 && r->best[pos - 1].days > e->days) pos--;
    if (pos >= r->cap) return;
    int n = r->nbest < r->cap ? r->nbest + 1 : r->cap;
    memmove(&r->best[pos + 1], &r->best[pos], sizeof *e * (size_t)(n - 1 - pos));
    r->best[pos] = *e;
    r->nbest = n;
}

static void reject(PlanResult *r, const Layout *l, PlanReason why, const char *text) {
    r->count[why]++;
    if (!r->example[why][0])
        snprintf(r->example[why], sizeof r->example[why], "tp %d cp %d pp %d dp %d: %.100s", l->tp, l->cp, l->pp, l->dp, text);
    if (!r->rejected || r->nrejected >= 4096) return;
    snprintf(r->rejected[r->nrejected++], sizeof r->rejected[0], "tp %d cp %d pp %d dp %d ep %d recompute %s: %.120s", l->tp,
             l->cp, l->pp, l->dp, l->ep, sim_recompute_name(l->recompute), text);
}

/* The binding constraint of a sim_check_layout refusal, from its message. */
static PlanReason classify(const char *msg) {
    if (strstr(msg, "tensor cores")) return PLAN_DTYPE;
    if (strstr(msg, "scale-up domain") || strstr(msg, "attention heads") || strstr(msg, "kv heads")) return PLAN_TP;
    if (strstr(msg, "layers") || strstr(msg, "stage")) return PLAN_LAYERS;
    if (strstr(msg, "sequence")) return PLAN_CP;
    if (strstr(msg, "ep ") || strstr(msg, "expert")) return PLAN_EXPERTS;
    if (strstr(msg, "batch") || strstr(msg, "micro-batches")) return PLAN_BATCH;
    return PLAN_OTHER;
}

static int divides_layers(const SimModel *m, Layout *l) {
    l->first_layers = l->last_layers = 0;
    if (m->layers % l->pp == 0) return 1;
    if (l->pp < 3) return 0;
    /* fewer layers on the first and the last stage */
    int per = (m->layers + l->pp - 1) / l->pp, rest = m->layers - (l->pp - 2) * per;
    if (rest < 2) return 0;
    l->first_layers = rest / 2;
    l->last_layers = rest - rest / 2;
    return 1;
}

static void try_layout(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, const PlanFixed *fx, Layout *l,
                       double tokens, PlanResult *out) {
    out->considered++;
    int gb = (int)lround((double)l->global_batch / l->dp) * l->dp;
    l->global_batch = gb < l->dp ? l->dp : gb;
    /* the default batch, as sim's: 2^22 tokens, raised so that no pipeline has fewer micro-batches
     * than stages (dp x pp sequences) */
    if (fx->batch_default && (long)l->dp * l->pp > l->global_batch && (long)l->dp * l->pp < 0x7fffffff)
        l->global_batch = l->dp * l->pp;
    if (sim_check_layout(m, c, g, l)) {
        const char *msg = myr_last_error();
        reject(out, l, classify(msg), msg);
        return;
    }
    SearchOpts so = {0};
    so.search_mb = !fx->micro_batch;
    so.search_vpp = !fx->vpp;
    so.mem_cap = fx->mem_cap;
    SimResult r;
    if (sim_step_search_ex(m, c, g, l, &so, &r)) {
        const char *msg = myr_last_error();
        reject(out, l, classify(msg), msg);
        return;
    }
    if (r.mem.total > fx->mem_cap) {
        char why[160];
        snprintf(why, sizeof why, "needs %.1f GiB per GPU, above %.1f GiB (%g GiB less the headroom)", r.mem.total / GIB,
                 fx->mem_cap / GIB, g->hbm_gib);
        reject(out, l, PLAN_MEMORY, why);
        if (!out->least_mem || r.mem.total < out->least_mem) out->least_mem = r.mem.total;
        return;
    }
    PlanEntry e;
    e.layout = *l;
    e.res = r;
    e.days = (tokens > 0 ? tokens : 1e12) / r.tokens_per_s / 86400;
    keep(out, &e);
}

int sim_plan(const SimModel *m, const ClusterSpec *c, const GpuSpec *g, int gpus, const Layout *base,
             const PlanFixed *fx, double tokens, int k, PlanResult *out) {
    memset(out, 0, sizeof *out);
    out->cap = k > 0 ? k : 5;
    out->best = calloc((size_t)out->cap + 1, sizeof(PlanEntry));
    out->rejected = malloc(sizeof out->rejected[0] * 4096);
    if (!out->best || !out->rejected) { sim_plan_free(out); return myr_error("out of memory"); }
    int tps[16], ntp = 0, cps[8], ncp = 0, eps[64], nep = 0;
    Recompute recs[3] = {RECOMPUTE_NONE, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL};
    if (fx->tp) tps[ntp++] = base->tp;
    else
        for (int tp = 1; tp <= c->scaleup_domain && tp <= gpus && ntp < 16; tp *= 2) tps[ntp++] = tp;
    if (fx->cp) cps[ncp++] = base->cp;
    else
        for (int cp = 1; cp <= 32 && ncp < 8; cp *= 2)
            if (cp == 1 || base->seq / cp >= 8192) cps[ncp++] = cp; /* cp pays only for long sequences */
    if (fx->ep || m->experts <= 1) eps[nep++] = base->ep;
    else
        for (int ep = 1; ep <= m->experts && nep < 64; ep++)
            if (m->experts % ep == 0) eps[nep++] = ep;
    for (int ti = 0; ti < ntp; ti++)
        for (int ci = 0; ci < ncp; ci++)
            for (int pp = fx->pp ? base->pp : 1; pp <= (fx->pp ? base->pp : m->layers); pp++) {
                int tp = tps[ti], cp = cps[ci];
                Layout l = *base;
                l.tp = tp; l.cp = cp; l.pp = pp;
                if (gpus % (tp * cp * pp)) {
                    /* not a layout of these GPUs at all: counted, not considered */
                    if (fx->tp || fx->pp || fx->cp) {
                        l.dp = 0;
                        reject(out, &l, PLAN_GPUS, "the GPUs are not a multiple of tp x cp x pp");
                    } else out->count[PLAN_GPUS]++;
                    continue;
                }
                l.dp = gpus / (tp * cp * pp);
                if (!fx->stages && !divides_layers(m, &l)) {
                    out->considered++;
                    reject(out, &l, PLAN_LAYERS, "pp does not split the layers (even, or one short at both ends)");
                    continue;
                }
                if (!fx->sp) l.sp = tp > 1 && l.sw_sp;
                if (!fx->etp) l.etp = 0;
                for (int ei = 0; ei < nep; ei++)
                    for (int ri = 0; ri < 3; ri++) {
                        Layout x = l;
                        x.ep = eps[ei];
                        if (fx->recompute) { if (ri) break; }
                        else {
                            x.recompute = recs[ri];
                            /* Megatron's selective recompute keeps nothing fused attention does not already drop */
                            if (x.recompute == RECOMPUTE_SELECTIVE && x.flash != ATTN_UNFUSED && !x.selective_op && !x.selective_ds) continue;
                            if (x.recompute == RECOMPUTE_SELECTIVE && !x.sw_selective) continue; /* the software has none */
                        }
                        if (!fx->micro_batch) x.micro_batch = 0;
                        if (!fx->vpp) x.vpp = 1;
                        try_layout(m, c, g, fx, &x, tokens, out);
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

void sim_plan_why_none(const PlanResult *r, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "no layout fits: of %d layouts of these GPUs", r->considered);
    if (r->count[PLAN_GPUS]) n += (size_t)snprintf(buf + n, cap - n, " (%d more tp x cp x pp do not divide the GPUs)", r->count[PLAN_GPUS]);
    n += (size_t)snprintf(buf + n, cap - n, ",");
    /* the most frequent constraint first */
    int order[PLAN_NREASONS];
    for (int i = 0; i < PLAN_NREASONS; i++) order[i] = i;
    for (int i = 1; i < PLAN_NREASONS; i++)
        for (int j = i; j > 0 && r->count[order[j]] > r->count[order[j - 1]]; j--) {
            int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    for (int q = 0; q < PLAN_NREASONS && n < cap; q++) {
        int i = order[q];
        if (!r->count[i] || i == PLAN_GPUS) continue;
        n += (size_t)snprintf(buf + n, cap - n, " %d: %s%s%s%s;", r->count[i], reason_names[i],
                              r->example[i][0] ? " (e.g. " : "", r->example[i], r->example[i][0] ? ")" : "");
        if (i == PLAN_MEMORY && r->least_mem > 0 && n < cap)
            n += (size_t)snprintf(buf + n, cap - n, " the smallest needs %.1f GiB;", r->least_mem / GIB);
    }
}
