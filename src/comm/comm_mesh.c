/* comm_mesh.c: the device mesh: rank <-> coordinates on named axes (tp, cp, ep, dp, pp, ...)
 * and the process group along any set of axes. Pure arithmetic plus comm_group_from_ranks, so
 * it works over any backend. Convention (issue 4): axes listed fastest first, tp, then dp, then
 * pp, so tensor-parallel peers are neighbouring ranks (same node). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"
#include "util/error.h"

static int mesh_fill(CommMesh *m, int naxes, const char *const *names, const int *sizes) {
    if (naxes < 1 || naxes > COMM_MESH_MAX_AXES)
        return myr_error("comm mesh: %d axes; need 1..%d", naxes, COMM_MESH_MAX_AXES);
    memset(m, 0, sizeof *m);
    m->naxes = naxes;
    long long world = 1;
    for (int i = 0; i < naxes; i++) {
        if (sizes[i] < 1) return myr_error("comm mesh: axis '%s' has size %d; need >= 1", names[i], sizes[i]);
        if (!names[i][0] || strlen(names[i]) >= sizeof m->name[i])
            return myr_error("comm mesh: axis name '%s' must be 1..%zu characters", names[i], sizeof m->name[i] - 1);
        for (int j = 0; j < i; j++)
            if (!strcmp(names[i], names[j])) return myr_error("comm mesh: axis '%s' appears twice", names[i]);
        snprintf(m->name[i], sizeof m->name[i], "%s", names[i]);
        m->size[i] = sizes[i];
        world *= sizes[i];
        if (world > 1 << 30) return myr_error("comm mesh: world of more than 2^30 ranks");
    }
    m->world = (int)world;
    return 0;
}

int comm_mesh_init(CommMesh *m, int naxes, const char *const *names, const int *sizes) {
    if (mesh_fill(m, naxes, names, sizes) < 0) return -1;
    int stride = 1;
    for (int i = 0; i < naxes; i++) m->stride[i] = stride, stride *= m->size[i];
    return 0;
}

int comm_mesh_coord(const CommMesh *m, int rank, int axis) { return rank / m->stride[axis] % m->size[axis]; }

int comm_mesh_init_strided(CommMesh *m, int naxes, const char *const *names, const int *sizes, const int *strides) {
    if (mesh_fill(m, naxes, names, sizes) < 0) return -1;
    for (int i = 0; i < naxes; i++) {
        if (strides[i] < 1) return myr_error("comm mesh: axis '%s' has stride %d; need >= 1", names[i], strides[i]);
        m->stride[i] = strides[i];
    }
    /* decoding each rank and encoding it back must give the rank: then rank <-> coordinates is a bijection */
    for (int r = 0; r < m->world; r++) {
        long long back = 0;
        for (int i = 0; i < naxes; i++) back += (long long)comm_mesh_coord(m, r, i) * m->stride[i];
        if (back != r)
            return myr_error("comm mesh: strides do not map ranks 0..%d one-to-one onto coordinates (rank %d); "
                             "use mixed-radix strides such as 1, size0, size0*size1", m->world - 1, r);
    }
    return 0;
}

int comm_mesh_axis(const CommMesh *m, const char *name) {
    for (int i = 0; i < m->naxes; i++)
        if (!strcmp(m->name[i], name)) return i;
    return -1;
}

int comm_mesh_group_ranks(const CommMesh *m, int rank, unsigned axes_mask, int *ranks) {
    int base = rank, n = 1;
    for (int i = 0; i < m->naxes; i++)
        if (axes_mask >> i & 1) base -= comm_mesh_coord(m, rank, i) * m->stride[i], n *= m->size[i];
    for (int idx = 0; idx < n; idx++) {
        int rest = idx, r = base;
        for (int i = 0; i < m->naxes; i++) {
            if (!(axes_mask >> i & 1)) continue;
            r += rest % m->size[i] * m->stride[i];
            rest /= m->size[i];
        }
        ranks[idx] = r;
    }
    return n;
}

int comm_group_by_axes(Comm *world, const CommMesh *m, unsigned axes_mask, Comm **out) {
    *out = NULL;
    if (!world) return myr_error("comm: group_by_axes before comm_init");
    if (comm_size(world) != m->world)
        return myr_error("comm: the mesh has %d ranks but the world has %d; the axis sizes must multiply to the "
                         "world size", m->world, comm_size(world));
    if (axes_mask >> m->naxes)
        return myr_error("comm: axes mask 0x%x names axes beyond the mesh's %d", axes_mask, m->naxes);
    char name[32] = "";
    size_t len = 0;
    for (int i = 0; i < m->naxes; i++)
        if (axes_mask >> i & 1) len += snprintf(name + len, len < sizeof name ? sizeof name - len : 0, "%s%s",
                                                len ? "+" : "", m->name[i]);
    if (!axes_mask) snprintf(name, sizeof name, "self");
    int *ranks = malloc(sizeof(int) * m->world);
    if (!ranks) return myr_error("comm: out of memory");
    int n = comm_mesh_group_ranks(m, comm_rank(world), axes_mask, ranks);
    int rc = comm_group_from_ranks(world, ranks, n, name, out);
    free(ranks);
    return rc;
}
