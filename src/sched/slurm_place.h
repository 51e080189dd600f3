/* slurm_place.h: `myriad sched place --from-slurm`: placement of one job on a live Slurm cluster.
 * The cluster is read from Slurm (`sinfo --json` for nodes, states and GPUs; `scontrol show
 * topology` for the switch tree), the job's nodes are chosen among the idle ones so that every
 * tensor-parallel group sits under one leaf switch and the job spans the fewest switches, and the
 * result is a node list for `sbatch --nodelist` (plus --switches) and a host file in rank order
 * for `myriad run --hosts`. */
#ifndef MYRIAD_SCHED_SLURM_PLACE_H
#define MYRIAD_SCHED_SLURM_PLACE_H

#include <stdio.h>

#include "util/hostlist.h"

typedef struct {
    char name[64];
    char state[32];   /* Slurm's base state: idle, mixed, allocated, down, ... */
    int flags;        /* any state flag (DRAIN, NOT_RESPONDING, RESERVED, ...) */
    int gpus, cpus;
    int free;         /* idle without flags, in the wanted partition: can take a new job */
    int leaf;         /* index of its leaf switch in SlurmView.sw; -1 when the topology omits it */
} SlurmNode;

typedef struct {
    char name[64];
    int level;        /* 0 = leaf */
    int parent;       /* index in sw, -1 for the top */
    HostList nodes;   /* every node below it */
    HostList children;/* the switches it connects (Switches=) */
} SlurmSwitch;

typedef struct {
    SlurmNode *nodes; /* in Slurm's node order (rank order under block distribution) */
    int nnodes;
    SlurmSwitch *sw;
    int nsw;
} SlurmView;

/* Nodes from `sinfo --json` output; only nodes of `partition` count as free (NULL: any). */
int slurm_view_parse_nodes(SlurmView *v, const char *json, const char *partition);
/* Switches from `scontrol show topology` output (after the nodes); empty text = one flat switch. */
int slurm_view_parse_topology(SlurmView *v, const char *text);
void slurm_view_free(SlurmView *v);

typedef struct {
    int tp, pp, dp;
    int tasks_per_node;  /* 0: the GPUs of a node (1 without GPUs) */
} SlurmJobShape;

typedef struct {
    int *node;           /* [nranks] index into v->nodes of each rank's node */
    int nranks, nnodes;  /* ranks, distinct nodes */
    int leaves;          /* leaf switches used */
    int top;             /* index of the lowest switch holding every node (-1: no topology) */
    int pp_cross_leaf;   /* pipeline neighbour pairs under different leaves */
    int slurm_order_ok;  /* block distribution in Slurm's node order gives this same rank order */
} SlurmPlacement;

/* Chooses the nodes: 0, or -1 with myr_error() saying why it cannot be placed now. */
int slurm_place(const SlurmView *v, const SlurmJobShape *shape, SlurmPlacement *out);
void slurm_placement_free(SlurmPlacement *p);

/* `myriad sched place --from-slurm ...` (options parsed by cmd_sched_place): places the job on the
 * idle nodes that sinfo --json (or nodes_file) lists, under the switches of scontrol show topology
 * (or topo_file), prints the node list, a summary and an sbatch line, and writes hostfile if given. */
int sched_place_from_slurm(const SlurmJobShape *shape, const char *partition, const char *hostfile,
                           const char *nodes_file, const char *topo_file);

#endif
