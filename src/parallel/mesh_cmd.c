/* mesh_cmd.c: `myriad mesh`: print the process mesh of a layout (every rank's coordinates and
 * every group's members) without launching anything, to check a layout before a run. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "parallel/mesh.h"
#include "util/args.h"
#include "util/error.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: myriad mesh [--world N] [--tp N] [--pp N] [--dp N] [--cp N] [--ep N]\n"
            "Print the process mesh: rank order (tp fastest, then cp, dp, ep, pp), each rank's\n"
            "coordinates and the members of every group (tp, cp, dp, ep, pp, embed).\n"
            "Sizes default to 1; --dp defaults to world / (tp*cp*ep*pp) and --world to the product.\n"
            "example: myriad mesh --world 16 --tp 2 --pp 2 --dp 4\n");
}

int cmd_mesh(int argc, char **argv) {
    int world = 0, tp = 1, cp = 1, ep = 1, dp = 0, pp = 1, world_set = 0, dp_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--world")) world = args_next_int(argc, argv, &i), world_set = 1;
        else if (!strcmp(a, "--tp")) tp = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--pp")) pp = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--dp")) dp = args_next_int(argc, argv, &i), dp_set = 1;
        else if (!strcmp(a, "--cp")) cp = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--ep")) ep = args_next_int(argc, argv, &i);
        else myr_die("mesh: unknown option '%s' (see myriad mesh --help)", a);
    }
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
