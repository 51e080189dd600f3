/* collectives.c: alpha-beta cost of NCCL-style collectives on the levelled network of cluster.c.
 * Flat formulas (n ranks, S bytes per rank, bandwidth B per rank, per-step latency a):
 *   ring all-reduce      2(n-1) a + 2 (n-1)/n S/B        (Patarasuk & Yuan 2009)
 *   ring RS / AG         (n-1) a + (n-1)/n S/B
 *   double binary tree   2 ceil(log2 n) a + 2 S/B        (Sanders et al. 2009; NCCL 2.4)
 *   in-network (SHARP)   2 L a + S/B                     (each rank sends and receives S once)
 * Hierarchical: reduce-scatter inside the scale-up domain (m ranks), the inter-domain algorithm on
 * S/m bytes per rank (every GPU drives its own NIC), all-gather inside the domain.
 * Traffic crossing level k gets the bandwidth of that level (already divided by oversubscription). */
#include <math.h>

#include "sim/sim.h"

double sim_ring_allreduce(int n, double bytes, double bw, double a) {
    if (n <= 1) return 0;
    return 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * bytes / bw;
}
double sim_ring_gather(int n, double bytes, double bw, double a) {
    if (n <= 1) return 0;
    return (n - 1) * a + (double)(n - 1) / n * bytes / bw;
}
double sim_tree_allreduce(int n, double bytes, double bw, double a) {
    if (n <= 1) return 0;
    return 2.0 * ceil(log2((double)n)) * a + 2.0 * bytes / bw;
}
static double sharp_allreduce(int n, double bytes, double bw, double a, int levels) {
    if (n <= 1) return 0;
    return 2.0 * levels * a + bytes / bw;
}

/* Members of the group inside one level-k switch group. */
static double members_under(const Network *n, Group g, int k) {
    double per = g.stride >= n->reach[k] ? 1 : fmin(g.size, floor(n->reach[k] / g.stride));
    return per < 1 ? 1 : per;
}

static double alltoall(const Network *n, double bytes, Group g, int level) {
    double t = 0;
    double m0 = members_under(n, g, 0);
    t = fmax(t, (m0 - 1) / g.size * bytes / n->bw[0]);
    for (int k = 1; k <= level; k++) {
        double inside = members_under(n, g, k - 1);
        t = fmax(t, (1.0 - inside / g.size) * bytes / n->bw[k]);
    }
    return t + (g.size - 1) * n->alpha[level] / 8.0 + n->alpha[level]; /* sends are posted concurrently */
}

double sim_coll_time(const Network *n, CollKind kind, CollAlg alg, double bytes, Group g) {
    if (g.size <= 1 || bytes <= 0) return 0;
    int m0;
    int L = sim_group_level(n, g, &m0);
    double bwL = n->bw[L], aL = n->alpha[L];
    if (kind == COLL_P2P) return aL + bytes / bwL;
    if (kind == COLL_ALLTOALL) return alltoall(n, bytes, g, L);
    int outer = (g.size + m0 - 1) / m0;
    if (L == 0 || m0 <= 1) {
        /* one level: flat algorithms only */
        if (kind != COLL_ALLREDUCE) return sim_ring_gather(g.size, bytes, bwL, aL);
        double ring = sim_ring_allreduce(g.size, bytes, bwL, aL);
        double tree = sim_tree_allreduce(g.size, bytes, bwL, aL);
        double sh = (L > 0 && n->sharp) ? sharp_allreduce(g.size, bytes, bwL, aL, L) : INFINITY;
        if (alg == ALG_RING || alg == ALG_HIER) return ring;
        if (alg == ALG_TREE) return tree;
        if (alg == ALG_SHARP) return sh < INFINITY ? sh : ring;
        return fmin(ring, fmin(tree, sh));
    }
    double bw0 = n->bw[0], a0 = n->alpha[0];
    if (kind != COLL_ALLREDUCE) {
        /* 2D: inside the domain, then across domains on 1/m0 of the data */
        double intra = sim_ring_gather(m0, bytes, bw0, a0);
        double inter = sim_ring_gather(outer, bytes / m0, bwL, aL);
        double flat = sim_ring_gather(g.size, bytes, bwL, aL);
        if (alg == ALG_RING) return flat;
        return alg == ALG_AUTO ? fmin(flat, intra + inter) : intra + inter;
    }
    double edge = 2.0 * sim_ring_gather(m0, bytes, bw0, a0); /* reduce-scatter + all-gather in domain */
    double flat = sim_ring_allreduce(g.size, bytes, bwL, aL);
    double hier = edge + sim_ring_allreduce(outer, bytes / m0, bwL, aL);
    double tree = edge + sim_tree_allreduce(outer, bytes / m0, bwL, aL);
    double sh = n->sharp ? edge + sharp_allreduce(outer, bytes / m0, bwL, aL, L) : INFINITY;
    switch (alg) {
    case ALG_RING: return flat;
    case ALG_HIER: return hier;
    case ALG_TREE: return tree;
    case ALG_SHARP: return sh < INFINITY ? sh : hier;
    default: return fmin(fmin(flat, hier), fmin(tree, sh));
    }
}
