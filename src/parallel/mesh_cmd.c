/* mesh_cmd.c: `myriad mesh`: print the process mesh of a layout (every rank's coordinates and
 * every group's members) without launching anything, to check a layout before a run. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "parallel/mesh.h"
#include "util/opts.h"
#include "util/error.h"

int cmd_mesh(int argc, char **argv) {
    int world = 0, tp = 1, cp = 1, ep = 1, dp = 0, pp = 1, world_set = 0, dp_set = 0;
    const Opt rows[] = {
        OPT_GIVEN(OPT_INT("--world", "N", &world, 1, 1 << 30, "ranks (default: the product of the sizes)"), &world_set),
        OPT_INT("--tp", "N", &tp, 1, 1 << 30, "tensor-parallel size (default 1)"),
        OPT_INT("--pp", "N", &pp, 1, 1 << 30, "pipeline stages (default 1)"),
        OPT_GIVEN(OPT_INT("--dp", "N", &dp, 1, 1 << 30, "data-parallel size (default world / (tp*cp*ep*pp))"), &dp_set),
        OPT_INT("--cp", "N", &cp, 1, 1 << 30, "context-parallel size (default 1)"),
        OPT_INT("--ep", "N", &ep, 1, 1 << 30, "expert-parallel size (default 1)"),
        OPT_END};
    OptCommand cmd = {.name = "mesh",
                      .usage = "usage: myriad mesh [--world N] [--tp N] [--pp N] [--dp N] [--cp N] [--ep N]\n"
                               "Print the process mesh: rank order (tp fastest, then cp, dp, ep, pp), each rank's\n"
                               "coordinates and the members of every group (tp, cp, dp, ep, pp, embed).\n"
                               "example: myriad mesh --world 16 --tp 2 --pp 2 --dp 4",
                      .rows = rows};
    opts_parse(&cmd, argc, argv);
    if (world_set && world < 1) myr_die("--world is %d; it must be at least 1", world);
    long long others = (long long)tp * cp * ep * pp;
    if (!dp_set) dp = world_set && others > 0 && world % others == 0 ? (int)(world / others) : 1;
    if (!world_set) {
        long long product = others * dp;
        if (product > 1 << 30) myr_die("the layout has %lld ranks; at most 2^30", product);
        world = product < 1 ? 1 : (int)product; /* a size below 1: mesh_init names it */
    }
    ParallelMesh pm;
    if (mesh_init(&pm, world, 0, tp, cp, ep, dp, pp) < 0) myr_die_last();
    mesh_print(&pm, stdout);
    return 0;
}
