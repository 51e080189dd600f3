/* placement.c: the gang placement search (see placement.h). One O(nodes) pass computes how many of
 * the job's tasks each node can hold and sums it per leaf and spine; O(1) counter checks reject most
 * impossible jobs before that pass. Inside the chosen group, bin-packing is best-fit greedy over
 * nodes bucketed by capacity (counting sort, no comparison sort on the hot path). */
#include "sched/placement.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#define BUCKETS 64 /* capacities above this share the top bucket */

int placer_init(Placer *pl, const Cluster *c, const Policy *pol, const Workload *wl) {
    memset(pl, 0, sizeof *pl);
    pl->pol = pol;
    pl->wl = wl;
    pl->nnodes = c->nnodes;
    pl->cap = malloc(sizeof(int) * c->nnodes);
    pl->order = malloc(sizeof(int) * c->nnodes * 2);
    pl->bucket_off = malloc(sizeof(int) * (BUCKETS + 2));
    pl->leaf_cap = malloc(sizeof(long) * c->nleaves);
    pl->spine_cap = malloc(sizeof(long) * c->nspines);
    if (!pl->cap || !pl->order || !pl->bucket_off || !pl->leaf_cap || !pl->spine_cap) return myr_error("out of memory");
    return 0;
}

void placer_free(Placer *pl) {
    free(pl->cap), free(pl->order), free(pl->bucket_off), free(pl->leaf_cap), free(pl->spine_cap);
    memset(pl, 0, sizeof *pl);
}

static inline bool type_ok(const Node *n, const Job *j) {
    if (j->gpus_per_task == 0) return true;
    return n->type >= 0 && (!j->type_mask || ((j->type_mask >> n->type) & 1));
}

static inline int imin(int a, int b) { return a < b ? a : b; }

/* How many of j's tasks node n can take now (at most limit). */
static int node_cap(const Node *n, const Job *j, int limit) {
    if (!node_schedulable(n) || !type_ok(n, j)) return 0;
    int cap = limit;
    if (j->gpus_per_task > 0) {
        if (job_is_fractional(j)) {
            int k = 0;
            for (int d = 0; d < n->ngpu; d++) k += n->gpu_free[d] / j->gpu_milli;
            cap = imin(cap, k);
        } else
            cap = imin(cap, __builtin_popcount(n->whole_mask) / j->gpus_per_task);
    }
    if (j->cpu_milli > 0) cap = imin(cap, n->cpu_free / j->cpu_milli);
    if (j->mem_mib > 0) cap = imin(cap, n->mem_free / j->mem_mib);
    return cap;
}

int place_tier(const Cluster *c, const TaskSlot *s, int n) {
    int node = s[0].node, leaf = c->nodes[node].leaf, spine = c->nodes[node].spine;
    bool same_node = true, same_leaf = true, same_spine = true;
    for (int i = 1; i < n; i++) {
        const Node *x = &c->nodes[s[i].node];
        if (s[i].node != node) same_node = false;
        if (x->leaf != leaf) same_leaf = false;
        if (x->spine != spine) same_spine = false;
    }
    return same_node ? 0 : same_leaf ? 1 : same_spine ? 2 : 3;
}

/* Device for one fractional task given the node's (scratch) free milli, by the policy's rule. */
static int pick_device(const int16_t *free, int ngpu, int milli, PlaceRule rule, bool fgd) {
    int best = -1;
    for (int d = 0; d < ngpu; d++) {
        if (free[d] < milli) continue;
        if (best < 0) { best = d; if (rule == PLACE_FIRSTFIT && !fgd) break; continue; }
        if (rule == PLACE_SPREAD && !fgd ? free[d] > free[best] : free[d] < free[best]) best = d;
    }
    return best;
}

/* Puts k tasks of j on node n, writing k slots. */
static void fill_node(const Cluster *c, const Job *j, const Policy *pol, int n, int k, TaskSlot *out) {
    const Node *nd = &c->nodes[n];
    uint16_t whole = nd->whole_mask;
    int16_t free[SCHED_MAX_GPUS_PER_NODE];
    memcpy(free, nd->gpu_free, sizeof free);
    for (int t = 0; t < k; t++) {
        out[t].node = n;
        out[t].mask = 0;
        out[t].dev = -1;
        if (j->gpus_per_task == 0) continue;
        if (job_is_fractional(j)) {
            int d = pick_device(free, nd->ngpu, j->gpu_milli, pol->place, pol->fgd);
            free[d] -= j->gpu_milli;
            out[t].dev = (int8_t)d;
        } else {
            uint16_t m = 0;
            for (int g = 0; g < j->gpus_per_task; g++) {
                uint16_t bit = whole & (uint16_t)-whole; /* lowest free device */
                m |= bit;
                whole &= (uint16_t)~bit;
            }
            out[t].mask = m;
        }
    }
}

void workload_from_jobs(Workload *w, const Job *jobs, int n) {
    /* count distinct (g, milli) shapes; traces have few, so a small linear table is enough */
    enum { MAXS = 256 };
    int g[MAXS], milli[MAXS], ns = 0;
    long cnt[MAXS];
    double cpu[MAXS], mem[MAXS];
    for (int i = 0; i < n; i++) {
        const Job *j = &jobs[i];
        if (j->gpus_per_task == 0 || j->state == JOB_REJECTED) continue;
        int k;
        for (k = 0; k < ns; k++)
            if (g[k] == j->gpus_per_task && milli[k] == j->gpu_milli) break;
        if (k == ns) {
            if (ns == MAXS) continue;
            g[ns] = j->gpus_per_task, milli[ns] = j->gpu_milli, cpu[ns] = mem[ns] = 0, cnt[ns++] = 0;
        }
        cnt[k]++;
        cpu[k] += j->cpu_milli, mem[k] += j->mem_mib;
    }
    memset(w, 0, sizeof *w);
    double total = 0;
    for (int pick = 0; pick < FGD_MAX_CLASSES && pick < ns; pick++) {
        int best = -1;
        for (int k = 0; k < ns; k++)
            if (cnt[k] > 0 && (best < 0 || cnt[k] > cnt[best])) best = k;
        if (best < 0) break;
        w->g[w->n] = g[best], w->milli[w->n] = milli[best], w->p[w->n] = (double)cnt[best];
        w->cpu[w->n] = (int)(cpu[best] / cnt[best]), w->mem[w->n] = (int)(mem[best] / cnt[best]);
        total += cnt[best];
        cnt[best] = 0;
        w->n++;
    }
    for (int k = 0; k < w->n; k++) w->p[k] /= total;
}

/* Fragmentation (expected unusable free milli) of a node state given as free milli per device. */
static double frag_of(const int16_t *free, int ngpu, int cpu_free, int mem_free, const Workload *w) {
    int total = 0, whole = 0, partial = 0;
    for (int d = 0; d < ngpu; d++) {
        total += free[d];
        if (free[d] == GPU_MILLI) whole++;
        else partial += free[d];
    }
    if (total == 0) return 0;
    double f = 0;
    for (int k = 0; k < w->n; k++) {
        int unusable;
        if (cpu_free < w->cpu[k] || mem_free < w->mem[k]) unusable = total;
        else if (w->milli[k] == GPU_MILLI) unusable = whole >= w->g[k] ? partial : total;
        else {
            unusable = 0;
            for (int d = 0; d < ngpu; d++)
                if (free[d] < w->milli[k]) unusable += free[d];
        }
        f += w->p[k] * unusable;
    }
    return f;
}

double fgd_node_frag(const Node *n, const Workload *w) { return frag_of(n->gpu_free, n->ngpu, n->cpu_free, n->mem_free, w); }

/* FGD choice for a single task: the node (and device) with the smallest rise in fragmentation. */
static int place_fgd(Placer *pl, const Cluster *c, const Job *j, TaskSlot *slot) {
    double best = 1e300;
    int best_node = -1, best_dev = -1, best_free = 0;
    for (int n = 0; n < c->nnodes; n++) {
        if (pl->cap[n] < 1) continue;
        const Node *nd = &c->nodes[n];
        double before = frag_of(nd->gpu_free, nd->ngpu, nd->cpu_free, nd->mem_free, pl->wl);
        int cpu_after = nd->cpu_free - j->cpu_milli, mem_after = nd->mem_free - j->mem_mib;
        int16_t after[SCHED_MAX_GPUS_PER_NODE];
        int nfree = node_free_milli(nd);
        if (!job_is_fractional(j)) { /* whole GPUs, or none: a CPU-only task can strand a node's GPUs too */
            memcpy(after, nd->gpu_free, sizeof after);
            uint16_t whole = nd->whole_mask;
            for (int g = 0; g < j->gpus_per_task; g++) {
                int d = __builtin_ctz(whole);
                after[d] = 0;
                whole &= (uint16_t)(whole - 1);
            }
            double delta = frag_of(after, nd->ngpu, cpu_after, mem_after, pl->wl) - before;
            if (delta < best - 1e-9 || (delta < best + 1e-9 && nfree < best_free)) {
                best = delta, best_node = n, best_dev = -1, best_free = nfree;
            }
            continue;
        }
        int16_t tried[SCHED_MAX_GPUS_PER_NODE];
        int ntried = 0;
        for (int d = 0; d < nd->ngpu; d++) {
            if (nd->gpu_free[d] < j->gpu_milli) continue;
            int dup = 0; /* devices with equal free milli give the same result */
            for (int t = 0; t < ntried; t++) dup |= tried[t] == nd->gpu_free[d];
            if (dup) continue;
            tried[ntried++] = nd->gpu_free[d];
            memcpy(after, nd->gpu_free, sizeof after);
            after[d] -= j->gpu_milli;
            double delta = frag_of(after, nd->ngpu, cpu_after, mem_after, pl->wl) - before;
            if (delta < best - 1e-9 || (delta < best + 1e-9 && nfree < best_free)) {
                best = delta, best_node = n, best_dev = d, best_free = nfree;
            }
        }
    }
    if (best_node < 0) return -1;
    slot->node = best_node;
    slot->mask = 0;
    slot->dev = -1;
    if (j->gpus_per_task > 0) {
        if (job_is_fractional(j)) slot->dev = (int8_t)best_dev;
        else fill_node(c, j, pl->pol, best_node, 1, slot);
    }
    return 0;
}

/* Collect the nodes (with room) of group `g` at tier L into pl->order, in leaf order. */
static int gather(Placer *pl, const Cluster *c, int L, int g) {
    int m = 0;
    int s0 = L == 2 ? g : 0, s1 = L == 2 ? g + 1 : c->nspines;
    if (L == 1) {
        for (int k = c->leaf_off[g]; k < c->leaf_off[g + 1]; k++)
            if (pl->cap[c->leaf_nodes[k]] > 0) pl->order[m++] = c->leaf_nodes[k];
        return m;
    }
    for (int s = s0; s < s1; s++)
        for (int li = c->spine_off[s]; li < c->spine_off[s + 1]; li++) {
            int l = c->spine_leaves[li];
            for (int k = c->leaf_off[l]; k < c->leaf_off[l + 1]; k++)
                if (pl->cap[c->leaf_nodes[k]] > 0) pl->order[m++] = c->leaf_nodes[k];
        }
    return m;
}

/* Stable counting sort of pl->order[0..m) by capacity (descending); bucket offsets kept. */
static int *sort_by_cap(Placer *pl, int m) {
    int *off = pl->bucket_off, *src = pl->order, *dst = pl->order + pl->nnodes;
    memset(off, 0, sizeof(int) * (BUCKETS + 2));
    for (int i = 0; i < m; i++) off[BUCKETS - imin(pl->cap[src[i]], BUCKETS) + 1]++;
    for (int b = 1; b <= BUCKETS + 1; b++) off[b] += off[b - 1];
    int pos[BUCKETS + 1];
    memcpy(pos, off, sizeof pos);
    for (int i = 0; i < m; i++) dst[pos[BUCKETS - imin(pl->cap[src[i]], BUCKETS)]++] = src[i];
    return dst; /* bucket b (capacity BUCKETS-b) is dst[off[b] .. off[b+1]) */
}

/* Spread T tasks over the gathered nodes; returns slots written. */
static int assign(Placer *pl, const Cluster *c, const Job *j, int m, TaskSlot *slots) {
    const Policy *pol = pl->pol;
    int r = j->ntasks, w = 0;
    if (pol->place == PLACE_FIRSTFIT) {
        for (int i = 0; i < m && r > 0; i++) {
            int n = pl->order[i], k = imin(pl->cap[n], r);
            fill_node(c, j, pol, n, k, slots + w);
            w += k, r -= k;
        }
        return w;
    }
    int *sorted = sort_by_cap(pl, m);
    int *off = pl->bucket_off;
    if (pol->place == PLACE_SPREAD) {
        /* one task per node per round, roomiest nodes first */
        for (int round = 0; r > 0; round++) {
            int progressed = 0;
            for (int i = 0; i < m && r > 0; i++) {
                int n = sorted[i];
                if (pl->cap[n] <= round) continue;
                fill_node(c, j, pol, n, 1, slots + w); /* device choice recomputed from live state below */
                w++, r--, progressed = 1;
            }
            if (!progressed) break;
        }
        /* tasks that share a node must not share devices: redo per node with the right count */
        int i = 0;
        while (i < w) {
            int n = slots[i].node, k = 0;
            for (int t = i; t < w; t++) if (slots[t].node == n) k++;
            /* gather this node's tasks together */
            int pos = i;
            for (int t = i; t < w; t++)
                if (slots[t].node == n) { TaskSlot tmp = slots[pos]; slots[pos] = slots[t]; slots[t] = tmp; pos++; }
            fill_node(c, j, pol, n, k, slots + i);
            i += k;
        }
        return w;
    }
    /* bin-pack: best-fit greedy. The smallest node that takes all remaining tasks, else the roomiest. */
    int front[BUCKETS + 1];
    for (int b = 0; b <= BUCKETS; b++) front[b] = off[b];
    while (r > 0) {
        int pick = -1, b;
        if (r <= BUCKETS)
            for (b = BUCKETS - r; b >= 0; b--) /* capacity BUCKETS-b ascending from r */
                if (front[b] < off[b + 1]) { pick = sorted[front[b]++]; break; }
        if (pick < 0)
            for (b = 0; b <= BUCKETS; b++)
                if (front[b] < off[b + 1]) { pick = sorted[front[b]++]; break; }
        if (pick < 0) break;
        int k = imin(pl->cap[pick], r);
        fill_node(c, j, pol, pick, k, slots + w);
        w += k, r -= k;
    }
    return w;
}

static bool better(PlaceRule rule, long cand, long best) {
    return rule == PLACE_SPREAD ? cand > best : rule == PLACE_BINPACK ? cand < best : false;
}

int place_find(Placer *pl, const Cluster *c, const Job *j, int max_tier, TaskSlot *slots) {
    const Policy *pol = pl->pol;
    int T = j->ntasks;
    if (j->gpus_per_task > 0 && !job_is_fractional(j)) { /* O(1) reject on whole-GPU counters */
        long avail = 0;
        if (!j->type_mask) avail = c->total_free;
        else
            for (int t = 0; t < c->ntypes; t++)
                if ((j->type_mask >> t) & 1) avail += c->type_free[t];
        if (avail < (long)T * j->gpus_per_task) return -1;
    }
    memset(pl->leaf_cap, 0, sizeof(long) * c->nleaves);
    memset(pl->spine_cap, 0, sizeof(long) * c->nspines);
    /* a leaf whose whole-free counter cannot hold one task is skipped without touching its nodes */
    int leaf_min = j->gpus_per_task > 0 && !job_is_fractional(j) ? j->gpus_per_task : 0;
    long total = 0;
    for (int l = 0; l < c->nleaves; l++) {
        int k0 = c->leaf_off[l], k1 = c->leaf_off[l + 1];
        if (c->leaf_free[l] < leaf_min) {
            for (int k = k0; k < k1; k++) pl->cap[c->leaf_nodes[k]] = 0;
            continue;
        }
        long lc = 0;
        for (int k = k0; k < k1; k++) {
            int n = c->leaf_nodes[k], cap = node_cap(&c->nodes[n], j, T);
            pl->cap[n] = cap;
            lc += cap;
        }
        total += lc;
        pl->leaf_cap[l] = lc;
        pl->spine_cap[c->leaf_spine[l]] += lc;
    }
    if (total < T) return -1;
    if (T == 1 && pol->fgd && pl->wl && pl->wl->n > 0) return place_fgd(pl, c, j, slots) ? -1 : 0;

    for (int L = pol->topology ? 0 : max_tier; L <= max_tier; L++) {
        int best = -1;
        long best_score = 0;
        if (L == 0) {
            for (int n = 0; n < c->nnodes; n++) {
                if (pl->cap[n] < T) continue;
                long score = node_free_milli(&c->nodes[n]);
                if (best < 0 || better(pol->place, score, best_score)) best = n, best_score = score;
                if (pol->place == PLACE_FIRSTFIT) break;
            }
            if (best < 0) continue;
            fill_node(c, j, pol, best, T, slots);
            return 0;
        }
        if (L == 3) best = 0;
        else {
            int ng = L == 1 ? c->nleaves : c->nspines;
            const long *gc = L == 1 ? pl->leaf_cap : pl->spine_cap;
            for (int g = 0; g < ng; g++) {
                if (gc[g] < T) continue;
                if (best < 0 || better(pol->place, gc[g], best_score)) best = g, best_score = gc[g];
                if (pol->place == PLACE_FIRSTFIT) break;
            }
            if (best < 0) continue;
        }
        int m = gather(pl, c, L, best);
        int w = assign(pl, c, j, m, slots);
        if (w < T) return -1; /* cannot happen: the group's capacity was checked */
        return place_tier(c, slots, T);
    }
    return -1;
}

void place_apply(Cluster *c, const Job *j, const TaskSlot *s) {
    for (int t = 0; t < j->ntasks; t++)
        cluster_take(c, s[t].node, s[t].mask, s[t].dev, j->gpu_milli, j->cpu_milli, j->mem_mib);
}

void place_release(Cluster *c, const Job *j, const TaskSlot *s) {
    for (int t = 0; t < j->ntasks; t++)
        cluster_give(c, s[t].node, s[t].mask, s[t].dev, j->gpu_milli, j->cpu_milli, j->mem_mib);
}

int place_unusable_milli(const Node *n, const Job *j) {
    if (j->gpus_per_task == 0 || !node_schedulable(n) || n->ngpu == 0) return 0;
    int total = node_free_milli(n);
    if (!type_ok(n, j) || (j->cpu_milli > 0 && n->cpu_free < j->cpu_milli) || (j->mem_mib > 0 && n->mem_free < j->mem_mib))
        return total;
    if (!job_is_fractional(j)) {
        if (__builtin_popcount(n->whole_mask) < j->gpus_per_task) return total;
        return total - __builtin_popcount(n->whole_mask) * GPU_MILLI;
    }
    int u = 0;
    for (int d = 0; d < n->ngpu; d++)
        if (n->gpu_free[d] < j->gpu_milli) u += n->gpu_free[d];
    return u;
}
