/* comm_mpi.c: the MPI backend's setup: MPI_Init, the world group, groups from rank lists,
 * node discovery (shared-memory split, or emulated nodes of --ranks-per-node consecutive
 * ranks) and the per-group node / cross-node sub-communicators used by the hierarchical
 * all-reduce. The operations themselves are in comm_mpi_ops.c, the timeout's side channel in
 * comm_mpi_watch.c, and what all three share in comm_mpi_state.c. */
#include "comm/comm_mpi.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h> /* MPIX_Query_cuda_support, when this Open MPI has the CUDA extension */
#endif

static Comm *world;
static int my_node_id; /* node of this process: smallest world rank on it */
static int we_initialized_mpi;

void comm_set_attachment(Comm *c, void *p, void (*destroy)(void *p)) {
    c->attach = p;
    c->attach_destroy = destroy;
}
void *comm_attachment(const Comm *c) { return c->attach; }

/* Fill in membership, node layout and the helper communicators of a group whose `mpi`
 * communicator exists. Collective over the group. */
static int group_setup(Comm *c, const char *name) {
    char eb[MPI_MAX_ERROR_STRING];
    int rc;
    snprintf(c->name, sizeof c->name, "%s", name);
    MPI_Comm_set_errhandler(c->mpi, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->mpi, &c->rank);
    MPI_Comm_size(c->mpi, &c->size);
    c->world_ranks = malloc(sizeof(int) * c->size * 2);
    if (!c->world_ranks) return myr_error("comm: out of memory creating group '%s'", name);
    int *node_of = c->world_ranks + c->size;
    int wr;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    int mine[2] = {wr, my_node_id}, *all = malloc(sizeof(int) * 2 * c->size);
    if (!all) return myr_error("comm: out of memory creating group '%s'", name);
    rc = MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, c->mpi);
    if (rc != MPI_SUCCESS) {
        free(all);
        return comm_fail(c, "group setup", "%s", comm_mpi_errstr(rc, eb, sizeof eb));
    }
    for (int i = 0; i < c->size; i++) c->world_ranks[i] = all[2 * i], node_of[i] = all[2 * i + 1];
    free(all);
    /* node layout: count members per node; local rank = members of my node before me */
    c->nnodes = 0;
    c->local_size = -1;
    c->local_rank = 0;
    for (int i = 0; i < c->size; i++) {
        int first = 1, members = 0;
        for (int j = 0; j < c->size; j++) {
            if (node_of[j] != node_of[i]) continue;
            if (j < i) first = 0;
            members++;
        }
        if (first) {
            c->nnodes++;
            if (c->local_size == -1) c->local_size = members;
            else if (c->local_size != members) c->local_size = 0;
        }
        if (node_of[i] == my_node_id && i < c->rank) c->local_rank++;
    }
    if (c->local_size < 0) c->local_size = 0;
    rc = MPI_Comm_split(c->mpi, my_node_id, c->rank, &c->node);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(c->mpi, c->local_rank, c->rank, &c->cross);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(c->mpi, &c->monitor);
    if (rc != MPI_SUCCESS) return comm_fail(c, "group setup", "%s", comm_mpi_errstr(rc, eb, sizeof eb));
    MPI_Comm_set_errhandler(c->node, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->cross, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(c->monitor, MPI_ERRORS_RETURN);
    c->next = comm_groups;
    comm_groups = c;
    return 0;
}

int comm_init(int *argc, char ***argv, const CommOptions *opt) {
    if (world) return myr_error("comm: comm_init called twice");
    comm_opts = opt ? *opt : comm_default_options();
    if (comm_opts.timeout_s < 0) return myr_error("comm: timeout must be >= 0 (0 disables it)");
    if (comm_opts.ranks_per_node < 0) return myr_error("comm: --ranks-per-node must be >= 0");
    int inited = 0, provided;
    MPI_Initialized(&inited);
    if (!inited) {
        /* Only the thread that calls comm_* uses MPI; OpenMP workers never do. */
        if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return myr_error("comm: MPI_Init failed (is Open MPI installed and the launcher working?)");
        we_initialized_mpi = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int wr, ws;
    MPI_Comm_rank(MPI_COMM_WORLD, &wr);
    MPI_Comm_size(MPI_COMM_WORLD, &ws);
    if (comm_opts.ranks_per_node > 0) {
        if (ws % comm_opts.ranks_per_node)
            return myr_error("comm: --ranks-per-node %d does not divide the world size %d; pick a divisor",
                             comm_opts.ranks_per_node, ws);
        my_node_id = wr / comm_opts.ranks_per_node * comm_opts.ranks_per_node;
    } else {
        MPI_Comm shm;
        if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wr, MPI_INFO_NULL, &shm) != MPI_SUCCESS)
            return myr_error("comm: cannot split the world into shared-memory nodes");
        MPI_Allreduce(&wr, &my_node_id, 1, MPI_INT, MPI_MIN, shm);
        MPI_Comm_free(&shm);
    }
    Comm *c = calloc(1, sizeof *c);
    if (!c) return myr_error("comm: out of memory");
    if (MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi) != MPI_SUCCESS) {
        free(c);
        return myr_error("comm: cannot duplicate MPI_COMM_WORLD");
    }
    if (group_setup(c, "world") < 0) return -1;
    world = c;
    return 0;
}

int comm_is_initialized(void) { return world != NULL; }
const CommOptions *comm_options(void) {
    static CommOptions defaults;
    if (!world) defaults = comm_default_options();
    return world ? &comm_opts : &defaults;
}
Comm *comm_world(void) { return world; }
int comm_rank(const Comm *c) { return c->rank; }
int comm_size(const Comm *c) { return c->size; }
const char *comm_name(const Comm *c) { return c->name; }
int comm_world_rank_of(const Comm *c, int rank) { return rank >= 0 && rank < c->size ? c->world_ranks[rank] : -1; }
int comm_node_count(const Comm *c) { return c->nnodes; }
int comm_local_size(const Comm *c) { return c->local_size; }

int comm_group_from_ranks(Comm *parent, const int *ranks, int n, const char *name, Comm **out) {
    *out = NULL;
    if (!parent) return myr_error("comm: group '%s': no parent group (call comm_init first)", name);
    if (n <= 0 || n > parent->size)
        return comm_fail(parent, "group_from_ranks", "group '%s' has %d ranks; need 1..%d", name, n, parent->size);
    int in_group = 0;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= parent->size)
            return comm_fail(parent, "group_from_ranks", "group '%s' lists rank %d, outside 0..%d", name,
                             ranks[i], parent->size - 1);
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i])
                return comm_fail(parent, "group_from_ranks", "group '%s' lists rank %d twice", name, ranks[i]);
        if (ranks[i] == parent->rank) in_group = 1;
    }
    if (!in_group)
        return comm_fail(parent, "group_from_ranks",
                         "this rank is not in group '%s'; only members may call comm_group_from_ranks", name);
    MPI_Group pg, g;
    char eb[MPI_MAX_ERROR_STRING];
    MPI_Comm_group(parent->mpi, &pg);
    MPI_Group_incl(pg, n, ranks, &g);
    Comm *c = calloc(1, sizeof *c);
    if (!c) return myr_error("comm: out of memory");
    /* MPI_Comm_create_group is collective over the members only, as promised above. */
    int rc = MPI_Comm_create_group(parent->mpi, g, 7001, &c->mpi);
    MPI_Group_free(&g);
    MPI_Group_free(&pg);
    if (rc != MPI_SUCCESS) {
        free(c);
        return comm_fail(parent, "group_from_ranks", "creating '%s': %s", name, comm_mpi_errstr(rc, eb, sizeof eb));
    }
    if (group_setup(c, name) < 0) return -1;
    *out = c;
    return 0;
}

static void group_destroy(Comm *c) {
    if (c->attach && c->attach_destroy) c->attach_destroy(c->attach); /* before its MPI goes */
    c->attach = NULL;
    for (Comm **p = &comm_groups; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    MPI_Comm_free(&c->monitor);
    MPI_Comm_free(&c->node);
    MPI_Comm_free(&c->cross);
    MPI_Comm_free(&c->mpi);
    free(c->world_ranks);
    free(c);
}

int comm_group_free(Comm *c) {
    if (!c) return 0;
    if (c == world) return myr_error("comm: the world group is freed by comm_finalize");
    /* wait until every member is done with the group so no late arrival query is lost */
    if (comm_barrier(c) < 0) return -1;
    group_destroy(c);
    return 0;
}

int comm_finalize(void) {
    if (!world) return 0;
    if (comm_pending())
        return myr_error("comm: finalize with %d operation(s) still in flight; wait for them first", comm_pending());
    int rc = comm_barrier(world);
    comm_watch_cleanup();
    while (comm_groups) group_destroy(comm_groups);
    world = NULL;
    if (we_initialized_mpi) MPI_Finalize();
    we_initialized_mpi = 0;
    return rc;
}

void comm_abort(int code) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int comm_cuda_aware(void) {
    const char *e = getenv("MYRIAD_MPI_CUDA_AWARE");
    if (e && !strcmp(e, "0")) return 0;
    if (e && !strcmp(e, "1")) return 1; /* claimed (the CPU rehearsal under the strict guard) */
    int init = 0;
    MPI_Initialized(&init);
    if (!init) return 0;
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    /* ask the library at run time: the one loaded may be CUDA-aware even if these headers' is not */
    return MPIX_Query_cuda_support() == 1;
#else
    return 0;
#endif
}
