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
    /* rail-only: what leaves the node to a GPU of another index first crosses NVLink to the GPU of
     * the destination's rail (Wang et al. 2023), on top of the node's own all-to-all share */
    if (n->rail_only && level > 0) {
        double gpn = n->gpus_per_node > 1 ? n->gpus_per_node : 1;
        double remote = (1.0 - m0 / g.size) * bytes;
        t = fmax(t, ((m0 - 1) / g.size * bytes + remote * (gpn - 1) / gpn) / n->bw[0]);
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

/* One MoE dispatch (or combine) of T tokens to their top_k experts, token_bytes each, over the ep
 * group g.
 *   flat (NCCL all-to-all, Megatron-core's alltoall dispatcher): every (token, expert) pair is its
 *     own message; what leaves each level's domain crosses that level (alltoall above).
 *   two-stage (DeepEP; DeepSeek-V3 Sec. 3.2.2): a token crosses the network once per remote node
 *     holding one of its experts (to the GPU of the same local index), then NVLink forwards it to
 *     the GPUs of those experts; both stages run at once (the time of the slower). Node-limited
 *     routing caps the nodes a token reaches at route_nodes (DeepSeek-V3: 4 of 8).
 * Uniform routing: a token's experts touch D = n (1 - (1 - 1/n)^k) of the n nodes on average. */
double sim_ep_dispatch_time(const Network *n, Group g, double T, double token_bytes, int top_k, int route_nodes,
                            int two_stage) {
    if (g.size <= 1 || T <= 0) return 0;
    int m0;
    int L = sim_group_level(n, g, &m0);
    double pairs = T * top_k * token_bytes;
    if (!two_stage || L == 0) return sim_coll_time(n, COLL_ALLTOALL, ALG_AUTO, pairs, g);
    double nodes = ceil((double)g.size / m0);
    double D = nodes * (1 - pow(1 - 1 / nodes, top_k));
    if (route_nodes > 0 && D > route_nodes) D = route_nodes;
    double remote = D * (nodes - 1) / nodes;
    double ib = T * remote * token_bytes / n->bw[L];
    double nvl = pairs * (m0 - 1) / m0 / n->bw[0];
    return fmax(ib, nvl) + n->alpha[L] + n->alpha[0];
}
