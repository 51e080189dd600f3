/* mesh.c: the hybrid-parallel process mesh (tp, cp, dp, ep, pp): validation with one-line
 * reasons, rank <-> coordinates, the members of every group (axis groups and the embedding
 * group), creating those groups over the comm layer, and printing the layout. */
#include "parallel/mesh.h"

#include <stdlib.h>
#include <string.h>

#include "util/error.h"

static const char *const axis_names[MESH_AXES] = {"tp", "cp", "dp", "ep", "pp"};

const char *mesh_axis_name(unsigned axis) {
    if (axis == MESH_EMBED) return "embed";
    for (int i = 0; i < MESH_AXES; i++)
        if (axis == 1u << i) return axis_names[i];
    return "?";
}

int mesh_init(ParallelMesh *pm, int world, int rank, int tp, int cp, int ep, int dp, int pp) {
    const int sizes[MESH_AXES] = {tp, cp, dp, ep, pp};
    for (int i = 0; i < MESH_AXES; i++)
        if (sizes[i] < 1)
            return myr_error("%s is %d; every parallel size must be at least 1", axis_names[i], sizes[i]);
    long long product = (long long)tp * cp * dp * ep * pp;
    if (product != world) {
        /* name the axes in use (tp, pp, dp always; cp and ep only when set) */
        char expr[160];
        size_t len = 0;
        const int order[MESH_AXES] = {0, 4, 2, 1, 3}; /* tp, pp, dp, cp, ep: how people say it */
        for (int k = 0; k < MESH_AXES; k++) {
            int i = order[k];
            if (sizes[i] == 1 && (i == 1 || i == 3)) continue;
            len += snprintf(expr + len, sizeof expr - len, "%s%s %d", len ? " x " : "", axis_names[i], sizes[i]);
        }
        return myr_error("%s = %lld does not equal the world size %d (launch %lld processes or change the layout)",
                         expr, product, world, product);
    }
    if (rank < 0 || rank >= world) return myr_error("rank %d is outside the world 0..%d", rank, world - 1);
    memset(pm, 0, sizeof *pm);
    if (comm_mesh_init(&pm->m, MESH_AXES, axis_names, sizes) < 0) return -1;
    pm->world = world, pm->rank = rank;
    pm->tp = tp, pm->cp = cp, pm->dp = dp, pm->ep = ep, pm->pp = pp;
    pm->tp_rank = comm_mesh_coord(&pm->m, rank, 0);
    pm->cp_rank = comm_mesh_coord(&pm->m, rank, 1);
    pm->dp_rank = comm_mesh_coord(&pm->m, rank, 2);
    pm->ep_rank = comm_mesh_coord(&pm->m, rank, 3);
    pm->pp_rank = comm_mesh_coord(&pm->m, rank, 4);
    return 0;
}

int mesh_rank_at(const ParallelMesh *pm, int tp_rank, int cp_rank, int dp_rank, int ep_rank, int pp_rank) {
    return tp_rank + pm->tp * (cp_rank + pm->cp * (dp_rank + pm->dp * (ep_rank + pm->ep * pp_rank)));
}

int mesh_pp_peer(const ParallelMesh *pm, int delta) {
    int s = pm->pp_rank + delta;
    if (s < 0 || s >= pm->pp) return -1;
    return mesh_rank_at(pm, pm->tp_rank, pm->cp_rank, pm->dp_rank, pm->ep_rank, s);
}

static int valid_axis_set(unsigned axis_set) {
    return axis_set == MESH_EMBED || (axis_set >> MESH_AXES) == 0;
}

int mesh_group_size(const ParallelMesh *pm, unsigned axis_set) {
    if (axis_set == MESH_EMBED) return pm->pp > 1 ? 2 : 1;
    int n = 1;
    for (int i = 0; i < MESH_AXES; i++)
        if (axis_set >> i & 1) n *= pm->m.size[i];
    return n;
}

int mesh_group_ranks(const ParallelMesh *pm, unsigned axis_set, int rank, int *ranks) {
    if (!valid_axis_set(axis_set)) return myr_error("mesh: axis set 0x%x is not a set of mesh axes", axis_set);
    if (rank < 0 || rank >= pm->world) return myr_error("mesh: rank %d is outside 0..%d", rank, pm->world - 1);
    if (axis_set != MESH_EMBED) return comm_mesh_group_ranks(&pm->m, rank, axis_set, ranks);
    int stage = comm_mesh_coord(&pm->m, rank, 4);
    if (stage != 0 && stage != pm->pp - 1) return 0;
    int block = pm->world / pm->pp; /* ranks per stage: the pp axis is the slowest */
    int within = rank % block;
    ranks[0] = within;
    if (pm->pp == 1) return 1;
    ranks[1] = within + (pm->pp - 1) * block;
    return 2;
}

int mesh_build_groups(const ParallelMesh *pm, Comm *world, MeshGroups *out) {
    memset(out, 0, sizeof *out);
    if (!world) return myr_error("mesh: no world group (call comm_init first)");
    if (comm_size(world) != pm->world)
        return myr_error("mesh: the layout has %d ranks but %d processes were launched", pm->world, comm_size(world));
    Comm **slot[MESH_AXES] = {&out->tp, &out->cp, &out->dp, &out->ep, &out->pp};
    for (int i = 0; i < MESH_AXES; i++)
        if (comm_group_by_axes(world, &pm->m, 1u << i, slot[i]) < 0) return -1;
    int members[2];
    int n = mesh_group_ranks(pm, MESH_EMBED, comm_rank(world), members);
    if (n > 0 && comm_group_from_ranks(world, members, n, "embed", &out->embed) < 0) return -1;
    return 0;
}

int mesh_free_groups(MeshGroups *g) {
    Comm **all[] = {&g->tp, &g->cp, &g->dp, &g->ep, &g->pp, &g->embed};
    int rc = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (*all[i]) {
            if (comm_group_free(*all[i]) < 0) rc = -1;
            *all[i] = NULL;
        }
    return rc;
}

static void print_groups(const ParallelMesh *pm, unsigned axis_set, FILE *out) {
    int n = mesh_group_size(pm, axis_set);
    int *ranks = malloc(sizeof(int) * (size_t)n);
    char *seen = calloc((size_t)pm->world, 1);
    if (!ranks || !seen) {
        free(ranks), free(seen);
        return;
    }
    int groups = 0;
    for (int r = 0; r < pm->world; r++) {
        int k = mesh_group_ranks(pm, axis_set, r, ranks);
        if (k > 0 && !seen[ranks[0]]) groups++;
        if (k > 0) seen[ranks[0]] = 1;
    }
    fprintf(out, "%s: %d group%s of %d:", mesh_axis_name(axis_set), groups, groups == 1 ? "" : "s", n);
    memset(seen, 0, (size_t)pm->world);
    for (int r = 0; r < pm->world; r++) {
        int k = mesh_group_ranks(pm, axis_set, r, ranks);
        if (k <= 0 || seen[ranks[0]]) continue;
        seen[ranks[0]] = 1;
        fputs(" [", out);
        for (int i = 0; i < k; i++) fprintf(out, "%s%d", i ? " " : "", ranks[i]);
        fputc(']', out);
    }
    fputc('\n', out);
    free(ranks), free(seen);
}

void mesh_print(const ParallelMesh *pm, FILE *out) {
    fprintf(out, "mesh: world %d = tp %d x cp %d x dp %d x ep %d x pp %d\n", pm->world, pm->tp, pm->cp, pm->dp,
            pm->ep, pm->pp);
    fprintf(out, "rank order: tp fastest, then cp, dp, ep, pp "
                 "(rank = tp_rank + tp*(cp_rank + cp*(dp_rank + dp*(ep_rank + ep*pp_rank))))\n");
    fprintf(out, "%6s %4s %4s %4s %4s %4s\n", "rank", "tp", "cp", "dp", "ep", "pp");
    for (int r = 0; r < pm->world; r++)
        fprintf(out, "%6d %4d %4d %4d %4d %4d\n", r, comm_mesh_coord(&pm->m, r, 0), comm_mesh_coord(&pm->m, r, 1),
                comm_mesh_coord(&pm->m, r, 2), comm_mesh_coord(&pm->m, r, 3), comm_mesh_coord(&pm->m, r, 4));
    const unsigned sets[] = {MESH_TP, MESH_CP, MESH_DP, MESH_EP, MESH_PP, MESH_EMBED};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++) print_groups(pm, sets[i], out);
}
