/* bench_cmd.c: `myriad bench <what>`: the table of sub-benchmarks. Each sub-benchmark is a
 * function taking the arguments after its name; add a row to `benches` to add one. */
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} Bench;

static const Bench benches[] = {
    {"comm", bench_comm, "collective bandwidth and correctness, nccl-tests style (run under mpirun)"},
    {"sgemm", bench_sgemm, "fp32 GEMM rate of myriad's kernel and BLAS at training-step and square shapes"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: myriad bench <");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++) fprintf(out, "%s%s", i ? "|" : "", benches[i].name);
    fprintf(out, "> [options]   (myriad bench <benchmark> --help)\n\nbenchmarks:\n");
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        fprintf(out, "  %-8s %s\n", benches[i].name, benches[i].summary);
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof benches / sizeof benches[0]; i++)
        if (!strcmp(argv[1], benches[i].name)) return benches[i].run(argc - 1, argv + 1);
    fprintf(stderr, "myriad: bench: unknown benchmark '%s' (see myriad bench --help)\n", argv[1]);
    usage(stderr);
    return 2;
}
