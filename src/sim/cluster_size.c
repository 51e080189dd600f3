/* cluster_size.c: which cluster a run uses and how big it is.
 *   The default cluster follows the GPU: a100-* -> selene, h100-sxm -> h100-ib (DGX SuperPOD),
 *   h100-gt500 -> grand-teton-roce, h200 -> h200-ib, b200 -> b200-ib, h800 -> h800-multiplane;
 *   any other GPU gets the built-in two-tier InfiniBand fat-tree.
 *   A cluster file may omit "gpus" (its design, any size). Asked for more GPUs than a file holds,
 *   the same design is built with more nodes: each switch tier keeps its radix and taper, and tiers
 *   (of the top tier's radix, non-blocking) are added while a folded Clos of the existing tiers
 *   cannot reach that many NIC ports (capacity d (R/2)^(L-2) R for L tiers, d = the leaf's down
 *   ports; Al-Fares et al. 2008). The one-line note says what was built. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sim/sim.h"
#include "util/error.h"

const char *sim_default_cluster(const char *gpu) {
    if (!strncmp(gpu, "a100", 4)) return "selene";
    if (!strcmp(gpu, "h100-sxm")) return "h100-ib";
    if (!strcmp(gpu, "h100-gt500")) return "grand-teton-roce";
    if (!strcmp(gpu, "h200")) return "h200-ib";
    if (!strcmp(gpu, "b200")) return "b200-ib";
    if (!strcmp(gpu, "h800")) return "h800-multiplane";
    return NULL;
}

int sim_load_default_cluster(const char *gpu, ClusterSpec *c) {
    const char *name = sim_default_cluster(gpu);
    if (name) return sim_load_cluster(name, c);
    sim_cluster_defaults(c);
    snprintf(c->gpu, sizeof c->gpu, "%s", gpu);
    snprintf(c->name, sizeof c->name, "fat-tree-ib");
    return 0;
}

/* NIC ports a folded Clos of the cluster's tiers reaches. */
static double tier_capacity(const ClusterSpec *c) {
    if (c->ntiers < 1) return 1e18;
    double R = c->tier[0].radix;
    double o2 = c->ntiers > 1 ? c->tier[1].oversub : 1;
    double d = floor(R * o2 / (o2 + 1));
    if (c->ntiers == 1) return R;
    double cap = d;
    for (int k = 1; k < c->ntiers; k++) cap *= k == c->ntiers - 1 ? c->tier[k].radix : c->tier[k].radix / 2.0;
    return cap;
}

int sim_cluster_fit(ClusterSpec *c, int gpus, char *note, size_t cap) {
    if (note && cap) note[0] = 0;
    if (gpus < 1) return myr_error("--gpus must be positive");
    int nics = c->nics_per_gpu > 0 ? c->nics_per_gpu : 1;
    if (c->gpus > 0 && gpus <= c->gpus) return 0;
    int had = c->gpus, tiers0 = c->ntiers;
    /* each plane (or, rail-only, each rail) is its own fat-tree of 1/F of the NIC ports */
    double ports = ceil((double)gpus * nics / sim_fabrics(c));
    while (tier_capacity(c) < ports) {
        if (c->ntiers >= SIM_MAX_TIERS)
            return myr_error("%d GPUs exceed what %d switch tiers of cluster %s can connect (%.0f NIC ports); give a "
                             "cluster file with larger switches", gpus, SIM_MAX_TIERS, c->name, tier_capacity(c));
        NetTier *top = &c->tier[c->ntiers - 1], *t = &c->tier[c->ntiers];
        *t = *top;
        snprintf(t->name, sizeof t->name, "tier%d", c->ntiers + 1);
        t->oversub = 1;
        t->latency_us = top->latency_us + 1;
        t->gpus_below = 0;
        c->ntiers++;
    }
    c->gpus = gpus;
    if (note && cap) {
        int nodes = (gpus + c->gpus_per_node - 1) / c->gpus_per_node;
        if (had > 0)
            snprintf(note, cap, "cluster %s holds %d GPUs; built the same design with %d GPUs (%d nodes of %d), %d switch "
                     "tiers of radix %d%s", c->name, had, gpus, nodes, c->gpus_per_node, c->ntiers, c->tier[0].radix,
                     c->ntiers > tiers0 ? " (tiers added)" : "");
        else
            snprintf(note, cap, "cluster %s sized to %d GPUs (%d nodes of %d), %d switch tiers of radix %d", c->name, gpus,
                     nodes, c->gpus_per_node, c->ntiers, c->tier[0].radix);
    }
    return 0;
}
