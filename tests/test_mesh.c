/* test_mesh.c: the process mesh (src/parallel/mesh.c) against hand-written tables.
 * Alone: every group of world 16 = tp 2 x dp 4 x pp 2 (and a few other layouts) equals a table
 * written out by hand from the documented rule rank = tp_rank + tp*(dp_rank + dp*pp_rank), and
 * bad layouts fail with their one-line reasons.
 * Under mpirun -np 8 (tests/test_mesh.sh): the comm groups mesh_build_groups creates for
 * tp 2 x dp 2 x pp 2 hold exactly the hand-listed world ranks (each group all-gathers its
 * members' world ranks). Rank 0 prints the ok/FAIL lines. */
#include <stdlib.h>
#include <string.h>

#include "parallel/mesh.h"
#include "mpi_test.h"
#include "test.h"
#include "util/error.h"

/* Check that, for every rank r, mesh_group_ranks(axis, r) is the hand-listed group containing r,
 * members in the listed order. groups: ngroups rows of `size` ranks. */
static void check_groups(const ParallelMesh *pm, unsigned axis, const int *groups, int ngroups, int size) {
    int got[64];
    for (int r = 0; r < pm->world; r++) {
        const int *want = NULL;
        for (int g = 0; g < ngroups; g++)
            for (int i = 0; i < size; i++)
                if (groups[g * size + i] == r) want = groups + g * size;
        int n = mesh_group_ranks(pm, axis, r, got);
        if (!want) { /* no group listed: r must be in none (embedding group of a middle stage) */
            CHECK(n == 0, "%s: rank %d should be in no group, got %d members", mesh_axis_name(axis), r, n);
            continue;
        }
        CHECK(n == size, "%s group of rank %d: %d members, want %d", mesh_axis_name(axis), r, n, size);
        CHECK(mesh_group_size(pm, axis) == size, "%s: group size", mesh_axis_name(axis));
        for (int i = 0; i < size && n == size; i++)
            CHECK(got[i] == want[i], "%s group of rank %d: member %d is %d, want %d", mesh_axis_name(axis), r, i,
                  got[i], want[i]);
    }
}

/* world 16 = tp 2 x dp 4 x pp 2, written out by hand:
 *   rank:    0 1 2 3 4 5 6 7 | 8 9 10 11 12 13 14 15
 *   tp_rank: 0 1 0 1 0 1 0 1 | 0 1  0  1  0  1  0  1
 *   dp_rank: 0 0 1 1 2 2 3 3 | 0 0  1  1  2  2  3  3
 *   pp_rank: 0 0 0 0 0 0 0 0 | 1 1  1  1  1  1  1  1   */
static const int W16_TP[8][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}};
static const int W16_DP[4][4] = {{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}};
static const int W16_PP[8][2] = {{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}};
static const int W16_TPDP[2][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}};
static const int W16_SELF[16][1] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7},
                                    {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};

static void test_world16_tp2_dp4_pp2(void) {
    ParallelMesh pm;
    CHECK(mesh_init(&pm, 16, 0, 2, 1, 1, 4, 2) == 0, "%s", myr_last_error());
    check_groups(&pm, MESH_TP, &W16_TP[0][0], 8, 2);
    check_groups(&pm, MESH_DP, &W16_DP[0][0], 4, 4);
    check_groups(&pm, MESH_PP, &W16_PP[0][0], 8, 2);
    check_groups(&pm, MESH_EMBED, &W16_PP[0][0], 8, 2); /* pp 2: every rank is first or last stage */
    check_groups(&pm, MESH_TP | MESH_DP, &W16_TPDP[0][0], 2, 8);
    check_groups(&pm, MESH_CP, &W16_SELF[0][0], 16, 1);
    check_groups(&pm, MESH_EP, &W16_SELF[0][0], 16, 1);
    /* coordinates of a few ranks, from the table above */
    const int coords[][4] = {{0, 0, 0, 0}, {5, 1, 2, 0}, {10, 0, 1, 1}, {15, 1, 3, 1}, {12, 0, 2, 1}};
    for (size_t i = 0; i < sizeof coords / sizeof coords[0]; i++) {
        CHECK(mesh_init(&pm, 16, coords[i][0], 2, 1, 1, 4, 2) == 0, "init");
        CHECK(pm.tp_rank == coords[i][1] && pm.dp_rank == coords[i][2] && pm.pp_rank == coords[i][3],
              "rank %d: tp %d dp %d pp %d", coords[i][0], pm.tp_rank, pm.dp_rank, pm.pp_rank);
        CHECK(mesh_rank_at(&pm, pm.tp_rank, 0, pm.dp_rank, 0, pm.pp_rank) == coords[i][0], "rank_at");
    }
    CHECK(mesh_init(&pm, 16, 5, 2, 1, 1, 4, 2) == 0, "init");
    CHECK(mesh_pp_peer(&pm, 1) == 13 && mesh_pp_peer(&pm, -1) == -1, "pp peers of 5: %d %d", mesh_pp_peer(&pm, 1),
          mesh_pp_peer(&pm, -1));
}

/* world 8 = tp 2 x pp 4: stages {0,1} {2,3} {4,5} {6,7}; embedding groups tie stage 0 to stage 3
 * and middle stages (ranks 2..5) are in none. */
static void test_embedding_group_pp4(void) {
    ParallelMesh pm;
    CHECK(mesh_init(&pm, 8, 0, 2, 1, 1, 1, 4) == 0, "%s", myr_last_error());
    static const int PP[2][4] = {{0, 2, 4, 6}, {1, 3, 5, 7}};
    static const int EMBED[2][2] = {{0, 6}, {1, 7}};
    check_groups(&pm, MESH_PP, &PP[0][0], 2, 4);
    check_groups(&pm, MESH_EMBED, &EMBED[0][0], 2, 2);
    /* pp 1: the tie is local, the group is the rank itself */
    CHECK(mesh_init(&pm, 4, 0, 2, 1, 1, 2, 1) == 0, "%s", myr_last_error());
    static const int SELF4[4][1] = {{0}, {1}, {2}, {3}};
    check_groups(&pm, MESH_EMBED, &SELF4[0][0], 4, 1);
}

/* world 16 = tp 2 x cp 2 x dp 2 x pp 2: rank = tp + 2*(cp + 2*(dp + 2*pp)) */
static void test_cp_axis_order(void) {
    ParallelMesh pm;
    CHECK(mesh_init(&pm, 16, 0, 2, 2, 1, 2, 2) == 0, "%s", myr_last_error());
    static const int CP[8][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}};
    static const int DP[8][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}};
    static const int PP[8][2] = {{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}};
    check_groups(&pm, MESH_CP, &CP[0][0], 8, 2);
    check_groups(&pm, MESH_DP, &DP[0][0], 8, 2);
    check_groups(&pm, MESH_PP, &PP[0][0], 8, 2);
}

static void expect_error(int rc, const char *want) {
    CHECK(rc == -1, "expected a failure: %s", want);
    CHECK(!strcmp(myr_last_error(), want), "message\n   got: %s\n  want: %s", myr_last_error(), want);
}

static void test_bad_layouts(void) {
    ParallelMesh pm;
    expect_error(mesh_init(&pm, 4, 0, 2, 1, 1, 2, 2),
                 "tp 2 x pp 2 x dp 2 = 8 does not equal the world size 4 (launch 8 processes or change the layout)");
    expect_error(mesh_init(&pm, 12, 0, 2, 2, 1, 2, 2),
                 "tp 2 x pp 2 x dp 2 x cp 2 = 16 does not equal the world size 12 (launch 16 processes or change the layout)");
    expect_error(mesh_init(&pm, 8, 0, 0, 1, 1, 8, 1), "tp is 0; every parallel size must be at least 1");
    expect_error(mesh_init(&pm, 8, 0, 1, 1, 1, 8, -2), "pp is -2; every parallel size must be at least 1");
    expect_error(mesh_init(&pm, 8, 8, 2, 1, 1, 2, 2), "rank 8 is outside the world 0..7");
    CHECK(mesh_init(&pm, 8, 0, 2, 1, 1, 2, 2) == 0, "valid layout");
    int r[8];
    CHECK(mesh_group_ranks(&pm, MESH_EMBED | MESH_TP, 0, r) == -1, "embed mixed with axes is refused");
}

/* ------------------------------------------------------------------ under mpirun -np 8 */
#include <mpi.h>

static int me;

#define MRUN(fn) MPI_RUN(fn, "_np8")

/* The members of my group, as the group itself reports them: every member contributes its world
 * rank to an all-gather. */
static void check_comm_members(Comm *g, const char *what, const int (*table)[2], int ngroups) {
    CHECK(g != NULL, "%s: no group", what);
    if (!g) return;
    float mine = (float)me, all[8];
    int n = comm_size(g);
    CHECK(comm_all_gather(g, &mine, all, 1, COMM_F32) == 0, "%s", myr_last_error());
    const int *want = NULL;
    for (int k = 0; k < ngroups; k++)
        if (table[k][0] == me || table[k][1] == me) want = table[k];
    CHECK(want && n == 2, "%s: rank %d has a group of %d", what, me, n);
    for (int i = 0; want && i < n && i < 2; i++)
        CHECK((int)all[i] == want[i], "%s group of world rank %d: member %d is %d, want %d", what, me, i, (int)all[i],
              want[i]);
}

/* world 8 = tp 2 x dp 2 x pp 2, by hand: rank = tp + 2*(dp + 2*pp) */
static void test_comm_groups_have_listed_members(void) {
    static const int TP[4][2] = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
    static const int DP[4][2] = {{0, 2}, {1, 3}, {4, 6}, {5, 7}};
    static const int PP[4][2] = {{0, 4}, {1, 5}, {2, 6}, {3, 7}};
    ParallelMesh pm;
    MeshGroups g;
    CHECK(mesh_init(&pm, 8, me, 2, 1, 1, 2, 2) == 0, "%s", myr_last_error());
    CHECK(mesh_build_groups(&pm, comm_world(), &g) == 0, "%s", myr_last_error());
    check_comm_members(g.tp, "tp", TP, 4);
    check_comm_members(g.dp, "dp", DP, 4);
    check_comm_members(g.pp, "pp", PP, 4);
    check_comm_members(g.embed, "embed", PP, 4);
    CHECK(g.cp && comm_size(g.cp) == 1 && g.ep && comm_size(g.ep) == 1, "cp and ep groups of one");
    CHECK(!strcmp(comm_name(g.tp), "tp") && !strcmp(comm_name(g.embed), "embed"), "group names");
    CHECK(mesh_free_groups(&g) == 0, "%s", myr_last_error());
}

/* world 8 = tp 2 x pp 4: embedding groups {0,6} {1,7}; ranks 2..5 get none */
static void test_embedding_comm_group_pp4(void) {
    static const int EMBED[2][2] = {{0, 6}, {1, 7}};
    ParallelMesh pm;
    MeshGroups g;
    CHECK(mesh_init(&pm, 8, me, 2, 1, 1, 1, 4) == 0, "%s", myr_last_error());
    CHECK(mesh_build_groups(&pm, comm_world(), &g) == 0, "%s", myr_last_error());
    if (pm.pp_rank == 0 || pm.pp_rank == 3) check_comm_members(g.embed, "embed", EMBED, 2);
    else CHECK(g.embed == NULL, "rank %d (stage %d) should have no embedding group", me, pm.pp_rank);
    CHECK(g.pp && comm_size(g.pp) == 4, "pp group of 4");
    CHECK(mesh_free_groups(&g) == 0, "%s", myr_last_error());
}

static void test_world_size_mismatch(void) {
    ParallelMesh pm;
    MeshGroups g;
    CHECK(mesh_init(&pm, 16, 0, 2, 1, 1, 4, 2) == 0, "%s", myr_last_error());
    CHECK(mesh_build_groups(&pm, comm_world(), &g) == -1, "16-rank layout on 8 processes");
    CHECK(strstr(myr_last_error(), "the layout has 16 ranks but 8 processes were launched") != NULL, "%s",
          myr_last_error());
}

int main(int argc, char **argv) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) {
        RUN(test_world16_tp2_dp4_pp2);
        RUN(test_embedding_group_pp4);
        RUN(test_cp_axis_order);
        RUN(test_bad_layouts);
        return TEST_SUMMARY();
    }
    CommOptions opt = comm_default_options();
    opt.timeout_s = 60;
    if (comm_init(&argc, &argv, &opt) < 0) myr_die_last();
    me = comm_rank(comm_world());
    if (comm_size(comm_world()) != 8) myr_die("test_mesh: run it on 8 ranks (mpirun -np 8)");
    MRUN(test_comm_groups_have_listed_members);
    MRUN(test_embedding_comm_group_pp4);
    MRUN(test_world_size_mismatch);
    if (comm_finalize() < 0) myr_die_last();
    return TEST_SUMMARY();
}
