/* cluster.h: the cluster model of the scheduler. Nodes (GPU type and count, CPU, memory, state)
 * grouped into topology tiers node -> leaf switch -> spine -> whole cluster, with the free-resource
 * bookkeeping every policy reads: per-device free milli-GPU, a bit mask of wholly free devices per
 * node, and whole-free-GPU counters per leaf, spine, GPU type and cluster, so that most "can this
 * job possibly fit?" questions are answered in O(1) instead of a scan of all nodes.
 * Readers: JSON (explicit nodes or a generated uniform cluster) and the openb node-list CSV. */
#ifndef MYRIAD_SCHED_CLUSTER_H
#define MYRIAD_SCHED_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>

#define SCHED_MAX_GPUS_PER_NODE 16
#define SCHED_MAX_TYPES 32
#define SCHED_TIERS 4 /* 0 node, 1 leaf, 2 spine, 3 cluster */
#define GPU_MILLI 1000

typedef enum { NODE_UP, NODE_FAILED, NODE_DRAINING, NODE_SPARE } NodeState;

typedef struct {
    char name[40];
    int type; /* GPU type index; -1 for a node without GPUs */
    int ngpu, cpu_milli, mem_mib;
    int leaf, spine;
    NodeState state;
    int16_t gpu_free[SCHED_MAX_GPUS_PER_NODE]; /* free milli-GPU per device */
    uint16_t whole_mask;                       /* devices with all 1000 milli free */
    int cpu_free, mem_free;
    uint32_t version; /* bumped on every change, so per-node caches know when to recompute */
} Node;

typedef struct {
    Node *nodes;
    int nnodes;
    char type_names[SCHED_MAX_TYPES][24];
    int ntypes;
    int nleaves, nspines;
    int *leaf_spine;          /* spine of each leaf */
    int *leaf_off, *leaf_nodes; /* CSR: nodes of leaf l are leaf_nodes[leaf_off[l] .. leaf_off[l+1]) */
    int *spine_off, *spine_leaves;
    /* whole free GPUs on schedulable (NODE_UP) nodes */
    int *leaf_free, *spine_free;
    int type_free[SCHED_MAX_TYPES];
    long total_free;
    long total_gpus;      /* every GPU of every node, whatever its state */
    long type_gpus[SCHED_MAX_TYPES];
    long alloc_milli;     /* GPU milli held by tasks */
    unsigned long uid;    /* distinct per loaded cluster (memo keys) */
} Cluster;

/* A uniform cluster: nnodes nodes of gpus_per_node GPUs of one type, grouped nodes_per_leaf to a
 * leaf and leaves_per_spine to a spine. */
int cluster_generate(Cluster *c, int nnodes, int gpus_per_node, const char *gpu_type, int cpu_milli,
                     int mem_mib, int nodes_per_leaf, int leaves_per_spine);
/* JSON: {"generate": {...}} and/or {"nodes": [...]}; see docs/SCHEDULER.md. */
int cluster_load_json(Cluster *c, const char *path);
/* openb node list CSV (sn,cpu_milli,memory_mib,gpu,model); topology is synthesised by index. */
int cluster_load_openb_csv(Cluster *c, const char *path, int nodes_per_leaf, int leaves_per_spine);
/* By file name: *.csv is openb, otherwise JSON; "gen:NxG" is a generated cluster. */
int cluster_load(Cluster *c, const char *spec);
void cluster_free(Cluster *c);

/* Index of a GPU type by name, -1 when absent. */
int cluster_type_index(const Cluster *c, const char *name);
/* Deep copy (for "what if" checks against an empty cluster). */
int cluster_clone(Cluster *dst, const Cluster *src);

static inline bool node_schedulable(const Node *n) { return n->state == NODE_UP; }
/* Change a node's state, keeping the free counters right. */
void cluster_set_state(Cluster *c, int node, NodeState s);

/* Bookkeeping for one task's share of a node: whole devices in `mask`, or `milli` of device `dev`. */
void cluster_take(Cluster *c, int node, uint16_t mask, int dev, int milli, int cpu, int mem);
void cluster_give(Cluster *c, int node, uint16_t mask, int dev, int milli, int cpu, int mem);

/* Free GPU capacity in milli on a node (all devices). */
int node_free_milli(const Node *n);

#endif
