/* sched_cmd.c: `myriad sched simulate | place`: the scheduler's command line. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "sched/place.h"
#include "sched/sim.h"
#include "sched/trace.h"
#include "util/args.h"
#include "util/error.h"

static const char *simulate_usage =
    "usage: myriad sched simulate --policy P (--trace FILE | --synthetic) [options]\n"
    "  --policy P        fifo | backfill | gang-binpack-topo | best | a policy JSON file\n"
    "  --cluster C       cluster JSON, openb node CSV (*.csv) or gen:NODESxGPUS\n"
    "                    (default with --synthetic: gen:(GPUS/8)x8, leaves of 32 nodes, spines of 8 leaves)\n"
    "  --trace FILE      openb v2023 pod CSV (../shared/traces/openb/openb_pod_list_*.csv)\n"
    "  --load X          rescale trace arrivals to offered load X: arrival rate x mean GPU-seconds per job / GPUs,\n"
    "                    each run counted up to the arrival window (traces without times: default 0.9)\n"
    "  --resample N      replay N pods drawn with replacement from the trace (Poisson arrivals; set --load)\n"
    "  --skip-bad        report malformed trace rows and skip them (default: the first one is fatal)\n"
    "  --synthetic       generate a large-model workload instead of --trace:\n"
    "     --gpus N --jobs N --load X --seed S [--frac F (share of 1-GPU jobs asking a GPU fraction)]\n"
    "     [--queues Q] [--max-gang G]\n"
    "  --mtbf-days D     node mean time between failures (default 250 with --synthetic, else off; 0 = off)\n"
    "  --repair-h H      hours to repair a failed node (4)\n"
    "  --checkpoint-s S  jobs checkpoint every S s; work since the last checkpoint is lost on a stop (1800)\n"
    "  --hot-spares N    override the policy's hot spare nodes\n"
    "  --json            print one JSON object instead of the table\n";

static int usage_error(const char *usage, const char *fmt, const char *arg) {
    fprintf(stderr, "myriad sched: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return 2;
}

static int cmd_simulate(int argc, char **argv) {
    const char *cluster_spec = NULL, *trace = NULL, *policy_spec = NULL;
    bool synthetic = false, json = false, skip_bad = false;
    int gpus = 0, njobs = 10000, resample = 0, seed = 1, queues = 4, spares = -1, max_gang = 4096;
    double load = -1, mtbf_days = -1, repair_h = 4, ckpt = 1800, frac = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(simulate_usage, stdout); return 0; }
        else if (!strcmp(a, "--cluster")) cluster_spec = args_value(argc, argv, &i);
        else if (!strcmp(a, "--trace")) trace = args_value(argc, argv, &i);
        else if (!strcmp(a, "--policy")) policy_spec = args_value(argc, argv, &i);
        else if (!strcmp(a, "--synthetic")) synthetic = true;
        else if (!strcmp(a, "--json")) json = true;
        else if (!strcmp(a, "--skip-bad")) skip_bad = true;
        else if (!strcmp(a, "--gpus")) gpus = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--jobs")) njobs = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--seed")) seed = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--resample")) resample = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--queues")) queues = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--max-gang")) max_gang = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--hot-spares")) spares = args_next_int(argc, argv, &i);
        else if (!strcmp(a, "--load")) load = args_next_double(argc, argv, &i);
        else if (!strcmp(a, "--mtbf-days")) mtbf_days = args_next_double(argc, argv, &i);
        else if (!strcmp(a, "--repair-h")) repair_h = args_next_double(argc, argv, &i);
        else if (!strcmp(a, "--checkpoint-s")) ckpt = args_next_double(argc, argv, &i);
        else if (!strcmp(a, "--frac")) frac = args_next_double(argc, argv, &i);
        else return usage_error(simulate_usage, "unknown option '%s'", a);
    }
    if (!policy_spec) return usage_error(simulate_usage, "%s", "--policy is required");
    if (!!trace == synthetic) return usage_error(simulate_usage, "%s", "give exactly one of --trace FILE or --synthetic");
    if (synthetic && gpus <= 0 && !cluster_spec) return usage_error(simulate_usage, "%s", "--synthetic needs --gpus N (or --cluster)");
    if (!synthetic && !cluster_spec) return usage_error(simulate_usage, "%s", "--trace needs --cluster");
    if (load != -1 && !(load > 0)) myr_die("--load must be > 0 (got %g)", load);
    if (njobs < 1) myr_die("--jobs must be >= 1 (got %d)", njobs);
    if (queues < 1 || queues > SCHED_MAX_QUEUES) myr_die("--queues must be 1..%d", SCHED_MAX_QUEUES);
    if (frac < 0 || frac > 1) myr_die("--frac must be in [0, 1]");
    if (repair_h < 0 || ckpt < 0) myr_die("--repair-h and --checkpoint-s must be >= 0");

    Policy pol;
    if (policy_load(&pol, policy_spec)) myr_die_last();
    if (spares >= 0) pol.hot_spares = spares;
    Cluster c;
    char genspec[64];
    if (!cluster_spec) {
        if (gpus % 8) myr_die("--gpus %d is not a multiple of 8 (nodes have 8 GPUs; or give --cluster)", gpus);
        snprintf(genspec, sizeof genspec, "gen:%dx8", gpus / 8);
        cluster_spec = genspec;
    }
    if (cluster_load(&c, cluster_spec)) myr_die_last();
    if (pol.hot_spares >= c.nnodes) myr_die("hot_spares %d leaves no node to run jobs (cluster has %d)", pol.hot_spares, c.nnodes);

    JobSet js = {0};
    char workload[256];
    if (synthetic) {
        if (pol.nqueues < queues && pol.nqueues == 1) { /* give the synthetic queues equal weights */
            pol.nqueues = queues;
            for (int q = 0; q < queues; q++) snprintf(pol.queue_names[q], sizeof pol.queue_names[0], "q%d", q), pol.queue_weight[q] = 1;
        }
        SynthOptions so = {.jobs = njobs, .load = load > 0 ? load : 0.8, .seed = (uint64_t)seed, .max_gpus = max_gang,
                           .frac_share = frac, .nqueues = pol.nqueues};
        if (synth_generate(&js, &c, &so)) myr_die_last();
        snprintf(workload, sizeof workload, "synthetic %d jobs on %ld GPUs, load %.2f, seed %d", njobs, c.total_gpus, so.load, seed);
        if (mtbf_days < 0) mtbf_days = 250;
    } else {
        TraceOptions to = {.skip_bad = skip_bad, .seed = (uint64_t)seed};
        if (trace_load_openb(&js, trace, &c, &to)) myr_die("%s (use --skip-bad to skip malformed rows)", myr_last_error());
        if (resample < 0) myr_die("--resample must be >= 0");
        if (resample > 0) {
            JobSet all = js;
            memset(&js, 0, sizeof js);
            if (trace_resample(&js, &all, resample, (uint64_t)seed)) myr_die_last();
            jobset_free(&all);
            if (load <= 0) load = 0.9;
        }
        double before = trace_offered_load(&js, &c);
        if (to.synthesized_times && load <= 0) load = 0.9;
        if (load > 0 && trace_set_load(&js, &c, load)) myr_die_last();
        const char *base = strrchr(trace, '/');
        snprintf(workload, sizeof workload, "%s (%d jobs%s%s, offered load %.3f -> %.3f)", base ? base + 1 : trace, js.n,
                 resample ? " resampled" : "", to.synthesized_times ? ", times synthesised" : "", before,
                 trace_offered_load(&js, &c));
        if (mtbf_days < 0) mtbf_days = 0;
    }
    /* admission: reject (with the reason) what can never run here */
    int rejected = 0;
    for (int i = 0; i < js.n; i++) {
        Job *j = &js.jobs[i];
        if (j->state != JOB_REJECTED) job_validate(j, &c, pol.hot_spares);
        if (j->state == JOB_REJECTED) {
            if (rejected < 5) fprintf(stderr, "myriad: job %s rejected: %s\n", j->name, j->reason);
            rejected++;
        }
    }
    if (rejected > 5) fprintf(stderr, "myriad: ... %d jobs rejected in all\n", rejected);

    SimConfig cfg;
    sim_config_default(&cfg);
    cfg.mtbf_node_s = mtbf_days * 86400;
    cfg.repair_s = repair_h * 3600;
    cfg.checkpoint_s = ckpt;
    cfg.seed = (uint64_t)seed;
    Metrics m;
    if (sim_run(&c, &js, &pol, &cfg, &m)) myr_die_last();
    if (json) metrics_print_json(stdout, &m, pol.name, workload);
    else {
        char desc[256];
        metrics_print_table(stdout, &m, pol.name, workload);
        printf("  policy         %s\n", policy_describe(&pol, desc, sizeof desc));
    }
    jobset_free(&js);
    cluster_free(&c);
    return 0;
}

int cmd_sched(int argc, char **argv) {
    static const char *usage = "usage: myriad sched <simulate|place> [options]   (myriad sched <sub> --help)\n"
                               "  simulate   trace-driven or synthetic simulation of a scheduling policy\n"
                               "  place      place one job and write an mpirun hostfile/rankfile, Slurm topology.conf\n"
                               "             and Volcano HyperNode YAML for the cluster\n";
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "simulate")) return cmd_simulate(argc - 1, argv + 1);
    if (!strcmp(argv[1], "place")) return cmd_sched_place(argc - 1, argv + 1);
    fprintf(stderr, "myriad sched: unknown subcommand '%s'\n%s", argv[1], usage);
    return 2;
}
