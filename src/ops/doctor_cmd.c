/* doctor_cmd.c: `myriad doctor`: options, then measure (doctor_run.c), judge (doctor_analyze.c)
 * and report (doctor_report.c) on rank 0. Run it over the hosts of a job:
 * `myriad run -n N --hosts FILE -- doctor`, or let `myriad run --preflight` run it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "io/atomic_file.h"
#include "ops/doctor.h"
#include "ops/doctor_run.h"
#include "util/args.h"
#include "util/error.h"

typedef struct {
    DoctorPlan plan;
    double threshold[CHK_N], noise_k;
    const char *baseline_path, *out_path;
    int json, strict, raw;
} DoctorOpts;

static void usage(FILE *out) {
    fprintf(out,
            "usage: myriad run -n N --hosts FILE -- doctor [options]   (or mpirun ... myriad doctor)\n"
            "Pre-flight health check of the job's hosts: per rank GEMM rate and memory bandwidth (triad),\n"
            "per host pair p2p latency and bandwidth, all-reduce bus bandwidth inside hosts and across\n"
            "host pairs. A host more than a threshold worse than the median of its cohort (or than the\n"
            "baseline) is flagged with the reason. See docs/OPERATIONS.md.\n"
            "  --json                print the JSON document instead of the table\n"
            "  --out FILE            also write the JSON document to FILE (rank 0's file system)\n"
            "  --baseline FILE       compare with the medians of an earlier `doctor --json` (healthy hosts)\n"
            "  --threshold F         flag a host more than F worse, for every check (default 0.10; 10%% works)\n"
            "  --threshold-CHECK F   the same for one check: gemm, triad, p2p_bw, p2p_lat, allreduce_intra,\n"
            "                        allreduce_inter\n"
            "  --skip LIST           checks not to run (comma-separated names as above)\n"
            "  --noise-k K           raise a check's limit to noise^K when its repetitions scatter, noise being\n"
            "                        best/median repetition of its noisiest sample (default 2; 0: thresholds only)\n"
            "  --reps R              repetitions of every check; figures are the best one (default 10)\n"
            "  --gemm-n N            GEMM size N x N x N (default 384)\n"
            "  --triad-mb M          triad arrays, all three together, MiB (default 48)\n"
            "  --msg-bytes B         p2p message and all-reduce size (default 1048576)\n"
            "  --peers K             each host is paired with at most K others (default 8)\n"
            "  --concurrent          ranks sharing a machine measure at once (default: they take turns)\n"
            "  --strict              exit with status 3 when a host is flagged\n"
            "  --raw                 add every repetition's figure to the JSON (\"samples\")\n"
            "%s",
            comm_flags_help());
}

static double parse_threshold(const char *flag, const char *v) {
    size_t n = strlen(v);
    int pct = n && v[n - 1] == '%';
    char buf[32];
    snprintf(buf, sizeof buf, "%.*s", (int)(pct ? n - 1 : n), v);
    double x = args_double(flag, buf);
    if (pct) x /= 100;
    if (!(x > 0 && x < 1))
        myr_die("%s expects a fraction between 0 and 1 (0.10) or a percentage (10%%), got '%s'", flag, v);
    return x;
}

static void parse(DoctorOpts *o, CommOptions *co, int argc, char **argv) {
    *o = (DoctorOpts){.plan = {.reps = 10, .gemm_n = 384, .triad_bytes = 48u << 20, .msg_bytes = 1u << 20, .peers = 8}};
    for (int c = 0; c < CHK_N; c++) o->threshold[c] = DOCTOR_DEFAULT_THRESHOLD;
    o->noise_k = DOCTOR_DEFAULT_NOISE_K;
    double all = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) usage(stdout), exit(0);
        else if (!strcmp(f, "--json")) o->json = 1;
        else if (!strcmp(f, "--strict")) o->strict = 1;
        else if (!strcmp(f, "--raw")) o->raw = 1;
        else if (!strcmp(f, "--concurrent")) o->plan.concurrent = 1;
        else if (!strcmp(f, "--out")) o->out_path = args_value(argc, argv, &i);
        else if (!strcmp(f, "--baseline")) o->baseline_path = args_value(argc, argv, &i);
        else if (!strcmp(f, "--threshold")) all = parse_threshold(f, args_value(argc, argv, &i));
        else if (!strncmp(f, "--threshold-", 12)) {
            int c = doctor_check_by_name(f + 12);
            if (c < 0)
                myr_die("doctor: unknown check in '%s'; checks: gemm, triad, p2p_bw, p2p_lat, allreduce_intra, "
                        "allreduce_inter", f);
            o->threshold[c] = -parse_threshold(f, args_value(argc, argv, &i)); /* negative: set explicitly */
        } else if (!strcmp(f, "--skip")) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", args_value(argc, argv, &i));
            for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
                int c = doctor_check_by_name(t);
                if (c < 0)
                    myr_die("doctor: --skip: unknown check '%s'; checks: gemm, triad, p2p_bw, p2p_lat, allreduce_intra, "
                            "allreduce_inter", t);
                o->plan.skip[c] = 1;
            }
        } else if (!strcmp(f, "--noise-k")) {
            o->noise_k = args_next_double(argc, argv, &i);
            if (!(o->noise_k >= 0 && o->noise_k <= 100)) myr_die("doctor: --noise-k must be 0..100 (0: thresholds only)");
        } else if (!strcmp(f, "--reps")) o->plan.reps = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--gemm-n")) o->plan.gemm_n = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--triad-mb")) o->plan.triad_bytes = (size_t)(args_next_double(argc, argv, &i) * (1 << 20));
        else if (!strcmp(f, "--msg-bytes")) o->plan.msg_bytes = (size_t)args_next_i64(argc, argv, &i);
        else if (!strcmp(f, "--peers")) o->plan.peers = args_next_int(argc, argv, &i);
        else if (!comm_parse_flag(co, argc, argv, &i)) myr_die("doctor: unknown option '%s' (see myriad doctor --help)", f);
    }
    for (int c = 0; c < CHK_N; c++) /* a per-check flag wins over --threshold, wherever it came */
        o->threshold[c] = o->threshold[c] < 0 ? -o->threshold[c] : all > 0 ? all : o->threshold[c];
    if (o->plan.reps < 1 || o->plan.reps > 99) myr_die("doctor: --reps must be 1..99, got %d", o->plan.reps);
    if (o->plan.gemm_n < 16 || o->plan.gemm_n > 8192) myr_die("doctor: --gemm-n must be 16..8192, got %d", o->plan.gemm_n);
    if (o->plan.triad_bytes < 3 * 8 * 1024 || o->plan.triad_bytes > (size_t)64 << 30)
        myr_die("doctor: --triad-mb must be between 0.03 and 65536");
    if (o->plan.msg_bytes < 4 || o->plan.msg_bytes > (size_t)1 << 30)
        myr_die("doctor: --msg-bytes must be 4 .. 1073741824, got %zu", o->plan.msg_bytes);
    if (o->plan.peers < 1) myr_die("doctor: --peers must be >= 1, got %d", o->plan.peers);
}

static void write_out(const char *path, const char *json) {
    AtomicFile a;
    if (atomic_open(&a, path) || atomic_write(&a, json, strlen(json)) || atomic_write(&a, "\n", 1) || atomic_commit(&a))
        myr_die("doctor: --out %s: %s", path, myr_last_error());
}

int cmd_doctor(int argc, char **argv) {
    DoctorOpts o;
    CommOptions co = comm_default_options();
    parse(&o, &co, argc, argv);
    if (comm_init(&argc, &argv, &co) < 0) myr_die_last();
    Comm *w = comm_world();
    int me = comm_rank(w);
    double baseline[CHK_N] = {0};
    /* rank 0 reads the baseline before anything is measured; every rank learns whether it could */
    float ok = 1;
    if (me == 0 && o.baseline_path && doctor_load_baseline(o.baseline_path, baseline) < 0) ok = 0;
    if (comm_broadcast(w, &ok, &ok, 1, COMM_F32, 0) < 0) myr_die_last();
    if (!ok) {
        if (me == 0) myr_die_last();
        comm_finalize();
        return 1;
    }
    DoctorResults res;
    DoctorSetup setup;
    doctor_run(&o.plan, &res, &setup);
    setup.raw = o.raw;
    setup.skip = o.plan.skip;
    int flagged = 0;
    if (me == 0) {
        memcpy(res.threshold, o.threshold, sizeof res.threshold);
        memcpy(res.baseline, baseline, sizeof res.baseline);
        res.noise_k = o.noise_k;
        DoctorVerdict v;
        if (doctor_analyze(&res, &v) < 0) myr_die_last();
        char *json = doctor_json(&res, &v, &setup);
        if (o.out_path) write_out(o.out_path, json);
        if (o.json) printf("%s\n", json), fflush(stdout);
        else doctor_print_table(&res, &v, &setup);
        flagged = v.nflags > 0;
        free(json);
        doctor_verdict_free(&v);
    }
    doctor_results_free(&res);
    float f = (float)flagged;
    if (comm_broadcast(w, &f, &f, 1, COMM_F32, 0) < 0) myr_die_last();
    if (comm_finalize() < 0) myr_die_last();
    return o.strict && f > 0 ? 3 : 0;
}
