/* job.c: job storage, size classes and admission checks against the cluster. */
#include "sched/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

Job *jobset_add(JobSet *s) {
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 1024;
        Job *j = realloc(s->jobs, sizeof(Job) * cap);
        if (!j) return NULL;
        s->jobs = j, s->cap = cap;
    }
    Job *j = &s->jobs[s->n];
    memset(j, 0, sizeof *j);
    j->id = s->n++;
    j->gpu_milli = GPU_MILLI;
    j->topo_tier = SCHED_TIERS - 1;
    j->preemptible = true;
    return j;
}

void jobset_free(JobSet *s) {
    for (int i = 0; i < s->n; i++) free(s->jobs[i].slots);
    free(s->jobs);
    memset(s, 0, sizeof *s);
}

static const char *class_names[JOB_CLASSES] = {"cpu-only", "frac<1", "1", "2-8", "9-64", "65-512", "513+"};
const char *job_class_name(int k) { return k >= 0 && k < JOB_CLASSES ? class_names[k] : "?"; }

int job_size_class(const Job *j) {
    if (j->gpus_per_task == 0) return 0;
    if (job_is_fractional(j)) return 1;
    long g = job_whole_gpus(j);
    return g <= 1 ? 2 : g <= 8 ? 3 : g <= 64 ? 4 : g <= 512 ? 5 : 6;
}

/* Tasks of this shape an empty node can hold. */
static long empty_node_cap(const Node *n, const Job *j) {
    long cap = 1L << 30;
    if (j->gpus_per_task > 0) {
        if (n->type < 0 || (j->type_mask && !(j->type_mask & (1u << n->type)))) return 0;
        cap = job_is_fractional(j) ? (long)n->ngpu * (GPU_MILLI / j->gpu_milli) : n->ngpu / j->gpus_per_task;
    }
    if (j->cpu_milli > 0 && n->cpu_milli / j->cpu_milli < cap) cap = n->cpu_milli / j->cpu_milli;
    if (j->mem_mib > 0 && n->mem_mib / j->mem_mib < cap) cap = n->mem_mib / j->mem_mib;
    return cap;
}

int job_validate(Job *j, const Cluster *c, int spare_nodes) {
    j->state = JOB_REJECTED;
    if (j->ntasks < 1 || j->gpus_per_task < 0 || j->cpu_milli < 0 || j->mem_mib < 0 || j->duration < 0) {
        snprintf(j->reason, sizeof j->reason, "bad size: %d tasks x %d GPUs, cpu %d, mem %d, duration %g", j->ntasks,
                 j->gpus_per_task, j->cpu_milli, j->mem_mib, j->duration);
        return -1;
    }
    if (j->gpu_milli < 1 || j->gpu_milli > GPU_MILLI || (j->gpu_milli < GPU_MILLI && j->gpus_per_task != 1)) {
        snprintf(j->reason, sizeof j->reason, "gpu_milli %d: a GPU fraction (1..999) needs exactly 1 GPU per task",
                 j->gpu_milli);
        return -1;
    }
    if (j->gpus_per_task > SCHED_MAX_GPUS_PER_NODE) {
        snprintf(j->reason, sizeof j->reason, "%d GPUs per task: a task must fit in one node", j->gpus_per_task);
        return -1;
    }
    if (j->topo_tier < 0 || j->topo_tier >= SCHED_TIERS) j->topo_tier = SCHED_TIERS - 1;
    if (j->gpus_per_task > 0) {
        uint32_t have = 0;
        for (int t = 0; t < c->ntypes; t++)
            if (c->type_gpus[t] > 0) have |= 1u << t;
        if (j->type_mask && !(j->type_mask & have)) {
            snprintf(j->reason, sizeof j->reason, "asks for a GPU type the cluster does not have");
            return -1;
        }
    }
    /* Capacity of the empty cluster (and of the best single group at a hard tier), memoised by shape:
     * traces repeat a handful of shapes, and this keeps admission O(1) per job. */
    static struct { unsigned long c; int g, milli, cpu, mem, spare; uint32_t mask; long total, node, leaf, spine; } memo[64];
    unsigned h = (unsigned)(j->gpus_per_task * 131 + j->gpu_milli * 7 + j->cpu_milli * 3 + j->mem_mib + j->type_mask * 17) & 63;
    if (!(memo[h].c == c->uid && memo[h].g == j->gpus_per_task && memo[h].milli == j->gpu_milli &&
          memo[h].cpu == j->cpu_milli && memo[h].mem == j->mem_mib && memo[h].mask == j->type_mask &&
          memo[h].spare == spare_nodes)) {
        long total = 0, best_node = 0, best_leaf = 0, best_spine = 0;
        long *leaf = calloc(c->nleaves, sizeof(long)), *spine = calloc(c->nspines, sizeof(long));
        int usable = c->nnodes - spare_nodes;
        for (int i = 0; i < usable; i++) {
            long k = empty_node_cap(&c->nodes[i], j);
            total += k;
            if (k > best_node) best_node = k;
            leaf[c->nodes[i].leaf] += k;
            spine[c->nodes[i].spine] += k;
        }
        for (int l = 0; l < c->nleaves; l++) if (leaf[l] > best_leaf) best_leaf = leaf[l];
        for (int s = 0; s < c->nspines; s++) if (spine[s] > best_spine) best_spine = spine[s];
        free(leaf), free(spine);
        memo[h].c = c->uid, memo[h].g = j->gpus_per_task, memo[h].milli = j->gpu_milli, memo[h].cpu = j->cpu_milli;
        memo[h].mem = j->mem_mib, memo[h].mask = j->type_mask, memo[h].spare = spare_nodes;
        memo[h].total = total, memo[h].node = best_node, memo[h].leaf = best_leaf, memo[h].spine = best_spine;
    }
    long need = j->ntasks;
    if (memo[h].total < need) {
        snprintf(j->reason, sizeof j->reason,
                 "needs %d tasks x %d GPUs (%.2f each) but the whole cluster holds only %ld such tasks", j->ntasks,
                 j->gpus_per_task, j->gpu_milli / 1000.0, memo[h].total);
        return -1;
    }
    if (j->topo_hard && j->topo_tier < SCHED_TIERS - 1) {
        long cap = j->topo_tier == 0 ? memo[h].node : j->topo_tier == 1 ? memo[h].leaf : memo[h].spine;
        if (cap < need) {
            snprintf(j->reason, sizeof j->reason, "hard topology constraint: %d tasks cannot fit under one %s (max %ld)",
                     j->ntasks, j->topo_tier == 0 ? "node" : j->topo_tier == 1 ? "leaf" : "spine", cap);
            return -1;
        }
    }
    j->state = JOB_FUTURE;
    j->reason[0] = 0;
    return 0;
}
