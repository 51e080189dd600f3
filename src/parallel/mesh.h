/* mesh.h: myriad's process mesh for hybrid parallelism, built in this one place.
 *
 * world = tp x cp x dp x ep x pp. Rank order (fastest-varying first): tp, cp, dp, ep, pp, i.e.
 *     rank = tp_rank + tp * (cp_rank + cp * (dp_rank + dp * (ep_rank + ep * pp_rank)))
 * so the ranks of a tensor-parallel group are neighbours (they share a node, where the links are
 * fastest), and a pipeline stage is a contiguous block of tp*cp*dp*ep ranks. cp (context
 * parallel, docs/PARALLEL.md) splits each sequence over its ranks, whose gradients are reduced
 * with data parallelism's (MESH_DP | MESH_CP); ep (expert parallel, docs/MOE.md) splits the
 * experts of MoE layers and lives inside data parallelism: dense parameters are replicated over
 * the dp x ep ranks (MESH_DP | MESH_EP), expert parameters over dp (MESH_DP).
 *
 * Groups: along any set of axes (the ranks sharing my coordinates on every other axis, lowest
 * axis fastest), plus the embedding group: the first and the last pipeline stage ranks with my
 * (tp, cp, dp, ep) coordinates, whose tied embedding / LM-head gradients are summed.
 * docs/PIPELINE.md has the worked example for world 16 = tp 2 x dp 4 x pp 2. */
#ifndef MYRIAD_PARALLEL_MESH_H
#define MYRIAD_PARALLEL_MESH_H

#include <stdio.h>

#include "comm/comm.h"

/* Axis sets: OR the bits (MESH_TP | MESH_DP is the tp x dp group). The bit of each axis is its
 * index in the CommMesh (so a set is a comm_mesh axes mask). MESH_EMBED stands alone. */
typedef enum {
    MESH_TP = 1u << 0,
    MESH_CP = 1u << 1,
    MESH_DP = 1u << 2,
    MESH_EP = 1u << 3,
    MESH_PP = 1u << 4,
    MESH_EMBED = 1u << 8, /* first and last pipeline stage, same other coordinates */
} MeshAxis;

#define MESH_AXES 5 /* tp, cp, dp, ep, pp */

typedef struct {
    int world, rank;
    int tp, cp, ep, dp, pp;                          /* axis sizes */
    int tp_rank, cp_rank, ep_rank, dp_rank, pp_rank; /* this rank's coordinates */
    CommMesh m;                                      /* axes "tp","cp","dp","ep","pp" in rank order */
} ParallelMesh;

/* This rank's groups (NULL where it is not a member: embed on middle pipeline stages). */
typedef struct {
    Comm *tp, *cp, *dp, *ep, *pp;
    Comm *embed; /* first + last stage; a single-member group when pp == 1 (the tie is local) */
} MeshGroups;

/* Validate the layout and fill *pm for `rank` (0 <= rank < world). Every size must be >= 1 and
 * their product must equal world; otherwise -1 with a one-line reason such as
 * "tp 2 x dp 2 x pp 2 = 8 does not equal the world size 4 (launch 8 processes or change the layout)". */
int mesh_init(ParallelMesh *pm, int world, int rank, int tp, int cp, int ep, int dp, int pp);

/* World rank at the given coordinates. */
int mesh_rank_at(const ParallelMesh *pm, int tp_rank, int cp_rank, int dp_rank, int ep_rank, int pp_rank);
/* World rank of the pipeline stage `pp_rank + delta` with my other coordinates, or -1 past the ends. */
int mesh_pp_peer(const ParallelMesh *pm, int delta);
/* Size of the groups of `axis_set` (MESH_EMBED: 2, or 1 when pp == 1). */
int mesh_group_size(const ParallelMesh *pm, unsigned axis_set);

/* Members (world ranks, in group-rank order) of `rank`'s group for `axis_set`; returns the count
 * (ranks must hold mesh_group_size entries). For MESH_EMBED the group is {first stage, last stage};
 * a rank on a middle stage is in no embedding group: returns 0. -1 on a bad axis set or rank. */
int mesh_group_ranks(const ParallelMesh *pm, unsigned axis_set, int rank, int *ranks);

/* Create this rank's groups over `world` (whose size must be pm->world). Collective over world:
 * every rank calls it. The groups are named "tp", "cp", "dp", "ep", "pp", "embed". */
int mesh_build_groups(const ParallelMesh *pm, Comm *world, MeshGroups *out);
/* Free the groups made by mesh_build_groups (collective, as creation). */
int mesh_free_groups(MeshGroups *g);

/* Short name of a single axis bit ("tp", ..., "embed"). */
const char *mesh_axis_name(unsigned axis);
/* Print the layout: sizes, the rank order, each rank's coordinates and every group's members. */
void mesh_print(const ParallelMesh *pm, FILE *out);

#endif
