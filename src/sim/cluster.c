/* cluster.c: the network a job sees, as levels: level 0 is the scale-up (NVLink/NVSwitch) domain,
 * level k >= 1 the k-th switch tier of the scale-out fabric. For each level: the bandwidth one GPU
 * gets for traffic that must reach that level, its per-step latency, and how many GPUs sit under
 * one switch group of that level (its reach).
 *
 * Contention: a collective whose traffic reaches level k is charged the NIC bandwidth divided by the
 * product of the oversubscription ratios up to k, as if every GPU under a switch pushed traffic
 * through the switch's uplinks at once. That is the case for symmetric layouts (all data-parallel
 * groups reduce at the same moment) and when rank order is not aligned with the tree. */
#include <math.h>

#include "sim/sim.h"

void sim_network(const ClusterSpec *c, const GpuSpec *g, Network *n) {
    double su = (c->scaleup_gbps > 0 ? c->scaleup_gbps : g->scaleup_gbps) * 1e9;
    int nics = c->nics_per_gpu > 0 ? c->nics_per_gpu : g->nics;
    double nic = (c->nic_gbps > 0 ? c->nic_gbps : g->nic_gbps) / 8.0 * 1e9 * nics;
    n->nlevels = c->ntiers + 1;
    n->sharp = c->sharp;
    n->rail_only = c->rail_only;
    n->gpus_per_node = c->gpus_per_node;
    n->bw[0] = su * c->scaleup_eff;
    n->alpha[0] = c->scaleup_latency_us * 1e-6;
    n->reach[0] = c->scaleup_domain;
    double taper = 1.0;
    double below = 0;
    for (int k = 1; k <= c->ntiers; k++) {
        const NetTier *t = &c->tier[k - 1];
        taper *= t->oversub;
        n->bw[k] = nic * c->net_eff / taper;
        n->alpha[k] = t->latency_us * 1e-6;
        if (k == c->ntiers) { n->reach[k] = 1e18; break; }
        double up_ratio = c->tier[k].oversub; /* links from this tier to the next are tapered by it */
        double down = floor(t->radix * up_ratio / (up_ratio + 1.0));
        if (down < 1) down = 1;
        if (k == 1)
            below = c->rail_optimized ? down * c->gpus_per_node : down / (nics > 0 ? nics : 1);
        else
            below *= down;
        if (t->gpus_below > 0) below = t->gpus_below; /* as built (e.g. Llama 3 pods of 3,072 GPUs) */
        if (below < n->reach[0]) below = n->reach[0];
        n->reach[k] = below;
    }
    if (c->ntiers == 0) n->reach[0] = 1e18;
}

int sim_group_level(const Network *n, Group g, int *members_per_domain) {
    int level = n->nlevels - 1;
    for (int k = n->nlevels - 1; k >= 0; k--) {
        double per = g.stride >= n->reach[k] ? 1 : fmin(g.size, floor(n->reach[k] / g.stride));
        if (per < 1) per = 1;
        if (k == 0 && members_per_domain) *members_per_domain = (int)per;
        if (per >= g.size) level = k; /* the whole group fits under one level-k switch group */
    }
    if (g.size <= 1) level = 0;
    return level;
}
