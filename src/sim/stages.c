/* stages.c: how the layers of a model are split over the pipeline. Virtual stage k = chunk * pp +
 * stage (Megatron-LM's interleaved order) holds count[k] consecutive layers.
 *   even (default): layers / (pp vpp) each (must divide);
 *   --stage-layers a,b,...: every virtual stage given (pp vpp entries, as `myriad train` takes them);
 *   --first-stage-layers F / --last-stage-layers L: the first / last pipeline stage holds F / L
 *     layers and the middle stages share the rest evenly (Megatron-LM's
 *     --decoder-first/last-pipeline-num-layers; Llama 3 405B: 126 layers over 16 stages with one
 *     layer fewer on the first and the last, Dubey et al. 2024 Sec. 3.3.2). Within a stage the
 *     layers go evenly over its vpp chunks; a shortfall is taken from the stage's first chunk on
 *     the first stage and from its last chunk on the last stage, which is what Megatron-LM's
 *     account_for_embedding/loss_in_pipeline_split do (the embedding and the loss take a layer's
 *     slot in the first and last virtual stage; NeMo's Llama 3.1 405B recipes use it with pp 8 x
 *     vpp 8) and what torchtitan's default split points give (first and last stage one short). */
#include <stdio.h>
#include <stdlib.h>

#include "sim/sim.h"
#include "util/error.h"

int sim_uneven(const Layout *l) { return l->n_stage_layers > 0 || l->first_layers > 0 || l->last_layers > 0; }

/* Spread n layers over v chunks; the shortfall against ceil(n / v) comes off chunk 0 (from_front)
 * or off the last chunk. */
static void spread(int n, int v, int from_front, int *out) {
    int base = n / v, extra = n % v;
    for (int c = 0; c < v; c++) out[c] = base;
    /* extra chunks get one more; the ones that do not are at the front (or back) */
    for (int i = 0; i < extra; i++) out[from_front ? v - 1 - i : i] += 1;
}

int sim_vstage_layers(const SimModel *m, const Layout *l, int *count) {
    int p = l->pp, v = l->vpp > 0 ? l->vpp : 1, V = p * v, L = m->layers;
    if (l->n_stage_layers > 0) {
        if (l->first_layers || l->last_layers)
            return myr_error("give either --stage-layers or --first/--last-stage-layers, not both");
        if (l->n_stage_layers != V)
            return myr_error("--stage-layers lists %d virtual stages; pp %d x vpp %d needs %d", l->n_stage_layers, p, v, V);
        long sum = 0;
        for (int k = 0; k < V; k++) {
            if (l->stage_layers[k] < 1)
                return myr_error("--stage-layers gives virtual stage %d %d layers; each needs at least 1", k, l->stage_layers[k]);
            count[k] = l->stage_layers[k];
            sum += count[k];
        }
        if (sum != L) return myr_error("--stage-layers adds up to %ld layers but the model has %d", sum, L);
        return 0;
    }
    if (!l->first_layers && !l->last_layers) {
        if (L % V)
            return myr_error("pp %d x vpp %d does not divide the %d layers (give --first-stage-layers / "
                             "--last-stage-layers or --stage-layers for an uneven split)", p, v, L);
        for (int k = 0; k < V; k++) count[k] = L / V;
        return 0;
    }
    if (p < 2) return myr_error("--first-stage-layers and --last-stage-layers need pp >= 2");
    int mid = p - 2;
    int first = l->first_layers, last = l->last_layers;
    int rest = L - (first > 0 ? first : 0) - (last > 0 ? last : 0);
    int nfree = mid + (first > 0 ? 0 : 1) + (last > 0 ? 0 : 1); /* stages that share the rest */
    if (rest < 0 || (nfree == 0 && rest != 0))
        return myr_error("first %d + last %d stage layers do not add up to the model's %d layers over pp %d", first, last,
                         L, p);
    int per = nfree ? rest / nfree : 0;
    if (nfree && rest % nfree)
        return myr_error("the %d layers left after the first/last stages do not divide over the other %d stages "
                         "(%d layers, %d stages)", rest, nfree, rest, nfree);
    if (first <= 0) first = per;
    if (last <= 0) last = per;
    int c[1024];
    for (int s = 0; s < p; s++) {
        int n = s == 0 ? first : s == p - 1 ? last : per;
        if (n < v)
            return myr_error("pipeline stage %d would hold %d layers, fewer than its %d virtual chunks", s, n, v);
        if (v > 1024) return myr_error("vpp %d is above 1024", v);
        /* middle stages' chunks must be even; the first and last may be one short at one end */
        spread(n, v, s == 0, c);
        if (s > 0 && s < p - 1 && n % v)
            return myr_error("stage %d's %d layers do not divide over vpp %d chunks", s, n, v);
        for (int k = 0; k < v; k++) count[k * p + s] = c[k];
    }
    return 0;
}

void sim_vstage_kinds(const SimModel *m, const int *count, int k, int *dense, int *moe) {
    int start = 0;
    for (int j = 0; j < k; j++) start += count[j];
    int d = 0;
    if (m->experts <= 1) d = count[k];
    else if (start < m->dense_layers) d = (m->dense_layers - start < count[k]) ? m->dense_layers - start : count[k];
    *dense = d;
    *moe = count[k] - d;
}

int sim_stage_layer_count(const SimModel *m, const Layout *l, int stage) {
    int V = l->pp * (l->vpp > 0 ? l->vpp : 1);
    int buf[4096], *count = buf;
    if (V > 4096) return m->layers / l->pp;
    if (sim_vstage_layers(m, l, count)) return -1;
    int n = 0;
    for (int k = stage; k < V; k += l->pp) n += count[k];
    return n;
}

int sim_parse_stage_list(const char *s, Layout *l) {
    l->n_stage_layers = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long n = strtol(p, &end, 10);
        if (end == p || n < 1 || n > 1 << 20 || l->n_stage_layers == SIM_MAX_VSTAGES || (*end && *end != ','))
            return myr_error("--stage-layers expects up to %d positive layer counts separated by commas, got '%s'",
                             SIM_MAX_VSTAGES, s);
        l->stage_layers[l->n_stage_layers++] = (int)n;
        p = *end ? end + 1 : end;
    }
    if (!l->n_stage_layers) return myr_error("--stage-layers expects layer counts like 7,8,8,7");
    return 0;
}
