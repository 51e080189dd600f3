/* place.h: turning a placement into launch files for a real job, and the cluster's topology into
 * configuration for other schedulers: an mpirun hostfile and rankfile whose rank order keeps each
 * tensor-parallel group inside one node and pipeline neighbours under one leaf switch; a Slurm
 * topology.conf (topology/tree plugin); Volcano HyperNode objects (topology.volcano.sh/v1alpha1). */
#ifndef MYRIAD_SCHED_PLACE_H
#define MYRIAD_SCHED_PLACE_H

#include <stdio.h>

#include "sched/cluster.h"
#include "sched/job.h"

/* Megatron rank order (tp fastest, then dp, then pp): rank = t + tp*d + tp*dp*p.
 * Given the job's slots, fills rank_node[r] and rank_dev[r] for every rank r < tp*pp*dp.
 * GPUs are taken leaf by leaf, node by node; each consecutive run of tp GPUs is one TP group and
 * consecutive TP groups are consecutive pipeline stages of one data-parallel replica.
 * Fails (with reason) when a TP group would straddle two nodes. */
int place_rank_layout(const Cluster *c, const Job *j, int tp, int pp, int dp, int *rank_node, int *rank_dev);

/* Pipeline-neighbour pairs (stage p, p+1 of one replica, any TP index 0) under different leaves. */
int place_pp_cross_leaf(const Cluster *c, int tp, int pp, int dp, const int *rank_node);

int place_write_hostfile(FILE *f, const Cluster *c, int nranks, const int *rank_node);
int place_write_rankfile(FILE *f, const Cluster *c, int nranks, const int *rank_node, const int *rank_dev);
int place_write_slurm_topology(FILE *f, const Cluster *c);
int place_write_hypernodes(FILE *f, const Cluster *c);

int cmd_sched_place(int argc, char **argv);

#endif
