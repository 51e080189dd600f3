/* main.c: bin/myriad entry point; dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"

typedef struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} Command;

static const Command commands[] = {
    {"train", cmd_train, "train a transformer (single process, or under mpirun)"},
    {"eval", cmd_eval, "evaluate a saved model on token shards"},
    {"data", cmd_data, "prepare token shards from text (data prepare)"},
    {"tokenize", cmd_tokenize, "text -> token ids with a Hugging Face tokenizer.json"},
    {"detokenize", cmd_detokenize, "token ids -> text with a Hugging Face tokenizer.json"},
    {"sim", cmd_sim, "simulate a training step on a cluster: time, memory, MFU, days (sim validate FILE)"},
    {"plan", cmd_plan, "rank parallel layouts of a model on a cluster by days to train"},
    {"bench", cmd_bench, "benchmarks (bench comm: collectives, nccl-tests style; bench sgemm: matmul peak)"},
    {"mesh", cmd_mesh, "print the process mesh of a layout: rank order and every group's members"},
    {"run", cmd_run, "launch N ranks through mpirun or srun; with --max-restarts etc. supervise, detect failures, restart"},
    {"sched", cmd_sched, "cluster scheduler: simulate policies on traces, place jobs (sched simulate|place)"},
    {"doctor", cmd_doctor, "pre-flight health check of a job's hosts: GEMM, memory, p2p, all-reduce (run under myriad run)"},
    {"report", cmd_report, "one self-contained HTML report of a run: loss, throughput, ranks, failures, goodput"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: myriad <command> [options]   (myriad <command> --help for its options; myriad --version)\n\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
}

#ifndef MYRIAD_VERSION
#define MYRIAD_VERSION "0.1.0"
#endif
#ifndef MYRIAD_COMMIT
#define MYRIAD_COMMIT "unknown"
#endif

int main(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version"))) {
        printf("myriad %s (commit %s)\n", MYRIAD_VERSION, MYRIAD_COMMIT);
        return 0;
    }
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "myriad: unknown command '%s' (see myriad --help)\n", argv[1]);
    usage(stderr);
    return 2;
}
