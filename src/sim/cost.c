/* cost.c: switches, links and optics of a folded-Clos (fat-tree) network for N GPUs, and the power
 * and money of a cluster. Leaf switches use d = R o/(o+1) ports down and R - d up (o: the
 * oversubscription of the next tier); middle tiers split R/2 down, R/2 up; the top tier points all
 * R ports down. The number of tiers is the fewest whose capacity d (R/2)^(L-2) R reaches the NIC
 * ports (Al-Fares et al. 2008 for the non-blocking k-ary fat-tree: R^L / 2^(L-1) hosts).
 * Each switch-to-switch link takes two optical transceivers; NIC-to-leaf links take one optic at
 * the switch end (and one at the NIC, counted with the NIC). Rail-optimized designs need the same
 * ports; they change which GPUs share a leaf, not how many switches there are. A multi-plane
 * fabric (DeepSeek-V3 Sec. 3.1's multi-plane fat-tree) is P independent fat-trees, each for 1/P of
 * the NIC ports (NIC i of every node on plane i); a rail-only network (Wang et al. 2023, "How to
 * Build Low-cost Networks for Large Language Models (without Sacrificing Performance)") is one
 * fabric per rail (GPU index x NIC), none above them: fewer ports per fabric, so fewer tiers. */
#include <math.h>
#include <string.h>

#include "sim/sim.h"

/* independent fabrics the NIC ports split into: planes, or one per rail (rail-only) */
int sim_fabrics(const ClusterSpec *c) {
    int nics = c->nics_per_gpu > 0 ? c->nics_per_gpu : 1;
    if (c->rail_only) return c->gpus_per_node * nics;
    return c->planes > 0 ? c->planes : 1;
}

int sim_fat_tree(const ClusterSpec *c, int gpus, ClusterCost *o) {
    memset(o, 0, sizeof *o);
    int nics = c->nics_per_gpu > 0 ? c->nics_per_gpu : 1;
    int F = sim_fabrics(c);
    double ports = ceil((double)gpus * nics / F);
    double R = c->tier[0].radix;
    double o2 = c->ntiers > 1 ? c->tier[1].oversub : 1;
    double d = floor(R * o2 / (o2 + 1));
    if (ports <= R) { /* one switch */
        o->tiers = 1;
        o->switches = 1;
        o->links = ports;
        o->optics = ports;
    } else {
        int L = 2;
        while (d * pow(R / 2, L - 2) * R < ports && L < 6) L++;
        o->tiers = L;
        double leaves = ceil(ports / d);
        double up = leaves * (R - d);
        double sw = leaves, links = ports, optics = ports;
        for (int t = 2; t <= L; t++) {
            double per = t == L ? R : R / 2;
            double n = ceil(up / per);
            sw += n;
            links += up;
            optics += 2 * up;
            double ot = t < c->ntiers ? c->tier[t].oversub : 1; /* taper to the next tier */
            up = t == L ? 0 : n * (R / 2) / ot;
        }
        o->switches = sw;
        o->links = links;
        o->optics = optics;
    }
    o->switches *= F;
    o->links *= F;
    o->optics *= F;
    o->nics = (double)gpus * nics;
    return 0;
}

void sim_cost(const ClusterSpec *c, const GpuSpec *g, int gpus, ClusterCost *o) {
    sim_fat_tree(c, gpus, o);
    o->network_usd = o->switches * c->switch_usd + o->optics * c->optic_usd + o->nics * c->nic_usd;
    o->gpu_capex_usd = (double)gpus * c->gpu_usd;
    o->power_kw = gpus * (g->tdp_w + c->host_w_per_gpu) * c->pue / 1000.0;
}
