/* doctor_run.c: who measures what, when, for `myriad doctor` (collective over the world).
 *
 * Topology: every rank names its host (MYRIAD_HOST, else SLURMD_NODENAME, else gethostname) and its kernel
 * (/proc/sys/kernel/random/boot_id): emulated hosts (network namespaces) share one kernel, and
 * so share its cores and memory.
 * Noise: ranks sharing a kernel take turns for the compute checks, hosts sharing a kernel take
 * turns for the intra-host all-reduce, and when hosts share a kernel the host pairs are tested
 * one at a time (otherwise concurrently, in the rounds of a round-robin tournament, every host
 * in at most one pair per round). Ranks waiting for their turn sleep in a polled barrier
 * instead of spinning, so they do not steal the cores being measured. Each repetition runs
 * every check once, so a burst of outside load hits one repetition of everything rather than
 * every repetition of one check; each figure is the best of its repetitions.
 * Pairs: each host meets at most `peers` others (the first rounds of the tournament), so the
 * pair checks cost O(hosts), not O(hosts^2). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/kernels.h"
#include "ops/doctor_run.h"
#include "util/error.h"

#define COMPUTE_ROUNDS 4 /* turns of the compute checks per repetition */

static void must(int rc) {
    if (rc < 0) myr_die_last();
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* A barrier that sleeps while it waits: idle ranks must leave the cores to the measured ones. */
static void quiet_barrier(Comm *c) {
    CommRequest *req;
    must(comm_ibarrier(c, &req));
    for (int done = 0;;) {
        must(comm_test(&req, &done));
        if (done) return;
        nanosleep(&(struct timespec){0, 200000}, NULL);
    }
}

static void read_id(const char *env, const char *file, char *out, size_t n) {
    const char *v = env ? getenv(env) : NULL;
    memset(out, 0, n);
    if (v && *v) {
        snprintf(out, n, "%s", v);
        return;
    }
    FILE *f = file ? fopen(file, "r") : NULL;
    if (f) {
        if (!fgets(out, (int)n, f)) out[0] = 0;
        fclose(f);
        out[strcspn(out, "\n")] = 0;
    }
    if (!out[0] && gethostname(out, n - 1)) snprintf(out, n, "localhost");
}

/* Index of every rank's string in the list of distinct strings (first appearance order). */
static int distinct(const char (*names)[DOCTOR_HOST_MAX], int n, int *index, int *first) {
    int k = 0;
    for (int i = 0; i < n; i++) {
        index[i] = -1;
        for (int j = 0; j < k && index[i] < 0; j++)
            if (!strcmp(names[first[j]], names[i])) index[i] = j;
        if (index[i] < 0) first[k] = i, index[i] = k++;
    }
    return k;
}

/* Round-robin tournament (circle method): pairs of round r over h hosts; returns how many. */
static int tournament_round(int h, int r, int (*pairs)[2]) {
    int m = h % 2 ? h + 1 : h, k = 0; /* odd: a dummy host m-1 gives a bye */
    for (int i = 0; i < m / 2; i++) {
        int a = i == 0 ? m - 1 : (r + i) % (m - 1), b = (r - i + m - 1) % (m - 1);
        if (i == 0) b = r % (m - 1);
        if (a >= h || b >= h || a == b) continue;
        pairs[k][0] = a < b ? a : b, pairs[k][1] = a < b ? b : a;
        k++;
    }
    return k;
}

/* A figure from its repetitions v[0..n) (0 when none is positive): the best one, the largest rate
 * or the smallest latency. Outside load only ever slows a measurement down, so the best
 * repetition is the one closest to what the hardware can do (STREAM reports its best time for the
 * same reason); how much luck there is in a best is the analysis' noise factor. */
static double best_of(const float *v, int n, int higher_better) {
    double b = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > 0 && (b == 0 || (higher_better ? v[i] > b : v[i] < b))) b = v[i];
    return b;
}

/* Everything one rank knows about the run. */
typedef struct {
    const DoctorPlan *p;
    Comm *w, *local, **pair_group; /* world; my host's ranks; per pair, its group if I am in it */
    int me, np, H, myhost, shared;
    char (*names)[DOCTOR_HOST_MAX];
    int *host_of, *first; /* host of each rank; each host's first (leader) rank */
    int my_turn, nturns;  /* compute checks: my turn among the ranks of my machine */
    int host_turn, nhost_turns; /* intra-host all-reduce: my host's turn among the hosts of its machine */
    int *host_ranks, nlocal;
    int (*pairs)[2], npairs, *slot_start, nslots, nrounds; /* pairs in slots run one after another */
    int gemm_n;           /* the plan's, or the device's default */
    size_t triad_bytes;
    int on_device;        /* the host cannot touch device memory: GEMM and copy through the backend */
    real *ga, *gb, *gc;   /* host GEMM operands (CPU) */
    void *da, *db, *dc;   /* device GEMM operands, the run's dtype */
    void *ca, *cb;        /* device copy buffers, triad_bytes / 2 each */
    double *ta, *tb, *tc;
    size_t tn;
    float *msg, *smp; /* samples [subject][repetition], each written by one rank, summed at the end */
    size_t off[CHK_N], total;
    int per[CHK_N]; /* samples per subject */
    double phase[3];
} Run;

/* Hosts and machines of every rank, and the turns that follow from them. */
static void topology(Run *x) {
    char mine[2][DOCTOR_HOST_MAX];
    /* emulated hosts share one kernel hostname: MYRIAD_HOST (namespace tests), Slurm's node name */
    read_id(getenv("MYRIAD_HOST") && *getenv("MYRIAD_HOST") ? "MYRIAD_HOST" : "SLURMD_NODENAME", NULL, mine[0], DOCTOR_HOST_MAX);
    read_id(NULL, "/proc/sys/kernel/random/boot_id", mine[1], DOCTOR_HOST_MAX);
    int np = x->np;
    char(*ids)[2][DOCTOR_HOST_MAX] = malloc((size_t)np * sizeof *ids);
    must(comm_all_gather(x->w, mine, ids, sizeof mine / sizeof(float), COMM_F32));
    char(*boots)[DOCTOR_HOST_MAX] = malloc((size_t)np * sizeof *boots);
    x->names = malloc((size_t)np * sizeof *x->names);
    for (int r = 0; r < np; r++) memcpy(x->names[r], ids[r][0], DOCTOR_HOST_MAX), memcpy(boots[r], ids[r][1], DOCTOR_HOST_MAX);
    free(ids);
    int *kernel_of = calloc((size_t)np, sizeof *kernel_of), *kfirst = malloc((size_t)np * sizeof *kfirst);
    x->host_of = calloc((size_t)np, sizeof *x->host_of), x->first = malloc((size_t)np * sizeof *x->first);
    x->H = distinct((const char(*)[DOCTOR_HOST_MAX])x->names, np, x->host_of, x->first);
    int K = distinct((const char(*)[DOCTOR_HOST_MAX])boots, np, kernel_of, kfirst);
    x->myhost = x->host_of[x->me];
    x->shared = x->H > K; /* some hosts share a kernel: emulated hosts */
    int *cnt = calloc((size_t)K, sizeof *cnt), *hcnt = calloc((size_t)K, sizeof *hcnt);
    x->nturns = x->nhost_turns = 1;
    for (int r = 0; r < np; r++) {
        int t = cnt[kernel_of[r]]++;
        if (r == x->me) x->my_turn = t;
        if (t + 1 > x->nturns) x->nturns = t + 1;
    }
    for (int h = 0; h < x->H; h++) {
        int t = hcnt[kernel_of[x->first[h]]]++;
        if (h == x->myhost) x->host_turn = t;
        if (t + 1 > x->nhost_turns) x->nhost_turns = t + 1;
    }
    if (x->p->concurrent) x->my_turn = x->host_turn = 0, x->nturns = x->nhost_turns = 1;
    x->host_ranks = malloc((size_t)np * sizeof *x->host_ranks);
    for (int r = 0; r < np; r++)
        if (x->host_of[r] == x->myhost) x->host_ranks[x->nlocal++] = r;
    free(cnt), free(hcnt), free(boots), free(kernel_of), free(kfirst);
}

/* Rounds of the tournament, at most `peers` of them; a slot per round, or per pair when hosts
 * share a machine. Then the groups: my host's ranks, and every pair I am in (created in pair
 * order everywhere, so creations never wait on each other in a cycle). */
static void pairs_and_groups(Run *x) {
    int H = x->H, m = H % 2 ? H + 1 : H;
    x->nrounds = H > 1 ? m - 1 : 0;
    if (x->nrounds > x->p->peers) x->nrounds = x->p->peers;
    x->pairs = malloc((size_t)(H * (x->nrounds + 1) / 2 + 1) * sizeof *x->pairs);
    x->slot_start = malloc((size_t)(H * (x->nrounds + 1) + 2) * sizeof *x->slot_start);
    for (int r = 0; r < x->nrounds; r++) {
        int k = tournament_round(H, r, x->pairs + x->npairs);
        if (x->shared && !x->p->concurrent)
            for (int i = 0; i < k; i++) x->slot_start[x->nslots++] = x->npairs + i;
        else x->slot_start[x->nslots++] = x->npairs;
        x->npairs += k;
    }
    x->slot_start[x->nslots] = x->npairs;
    if (x->nlocal > 1) must(comm_group_from_ranks(x->w, x->host_ranks, x->nlocal, "doctor-host", &x->local));
    x->pair_group = calloc((size_t)x->npairs + 1, sizeof *x->pair_group);
    int *members = malloc((size_t)x->np * sizeof *members);
    for (int i = 0; i < x->npairs; i++) {
        if (x->pairs[i][0] != x->myhost && x->pairs[i][1] != x->myhost) continue;
        int n = 0;
        for (int side = 0; side < 2; side++)
            for (int r = 0; r < x->np; r++)
                if (x->host_of[r] == x->pairs[i][side]) members[n++] = r;
        must(comm_group_from_ranks(x->w, members, n, "doctor-pair", &x->pair_group[i]));
    }
    free(members);
}

/* Device GEMM operands: values in [-1, 1) (a GPU's GEMM is faster on zeros, which would hide a slow
 * one), made on the host in fp32 and converted to the run's dtype on the device. */
static void *device_operand(size_t n, unsigned seed) {
    float *h = malloc(n * sizeof(float));
    if (!h) myr_die("doctor: cannot allocate %zu bytes for the GEMM operands; lower --gemm-n", n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = (float)((seed >> 8) / 8388608.0 - 1.0);
    }
    real *f = dev_alloc(n);
    host_to_dev(f, h, n * sizeof(float));
    act *d = dev_alloc_act(n);
    act_from_f32(d, f, n);
    dev_free(f);
    free(h);
    return d;
}

static void buffers(Run *x) {
    const DoctorPlan *p = x->p;
    size_t gn = (size_t)x->gemm_n;
    if (x->on_device) {
        if (!p->skip[CHK_GEMM]) x->da = device_operand(gn * gn, 1), x->db = device_operand(gn * gn, 2), x->dc = dev_alloc_act(gn * gn);
        if (!p->skip[CHK_TRIAD]) x->ca = dev_alloc_bytes(x->triad_bytes / 2), x->cb = dev_alloc_bytes(x->triad_bytes / 2);
    } else if (!p->skip[CHK_GEMM]) {
        x->ga = dev_alloc(gn * gn), x->gb = dev_alloc(gn * gn), x->gc = dev_alloc(gn * gn);
        for (size_t i = 0; i < gn * gn; i++) x->ga[i] = (real)((i % 7) * 0.01), x->gb[i] = (real)((i % 5) * 0.02);
    }
    x->tn = p->skip[CHK_TRIAD] || x->on_device ? 1 : x->triad_bytes / 24; /* skipped: no 48 MiB to allocate and touch */
    x->ta = malloc(x->tn * sizeof(double)), x->tb = malloc(x->tn * sizeof(double)), x->tc = malloc(x->tn * sizeof(double));
    x->msg = calloc((p->msg_bytes / sizeof(float) + 2) * DOCTOR_P2P_WINDOW, sizeof(float)); /* p2p: a window */
    if (!x->ta || !x->tb || !x->tc || !x->msg)
        myr_die("doctor: cannot allocate the triad arrays (%zu bytes); lower --triad-mb", x->triad_bytes);
    for (size_t i = 0; i < x->tn; i++) x->ta[i] = 0, x->tb[i] = 1, x->tc[i] = 2; /* first touch by this rank */
    /* compute checks take COMPUTE_ROUNDS turns per repetition: they are short, and more of them
     * spread each rank's samples over the same stretch of time as everyone else's */
    int R = p->reps, subjects[CHK_N] = {[CHK_GEMM] = x->np, [CHK_TRIAD] = x->np, [CHK_AR_INTRA] = x->H,
                                       [CHK_P2P_LAT] = x->npairs, [CHK_P2P_BW] = x->npairs, [CHK_AR_INTER] = x->npairs};
    for (int c = 0; c < CHK_N; c++) {
        x->per[c] = c == CHK_GEMM || c == CHK_TRIAD ? R * COMPUTE_ROUNDS : R;
        x->off[c] = x->total;
        x->total += (size_t)subjects[c] * x->per[c];
    }
    x->smp = calloc(x->total + 1, sizeof *x->smp);
}

static float *sample(Run *x, DoctorCheck c, int subject, int k) { return &x->smp[x->off[c] + (size_t)subject * x->per[c] + k]; }

static void compute_checks(Run *x, int rep) {
    if (x->p->skip[CHK_GEMM] && x->p->skip[CHK_TRIAD]) return;
    for (int cr = rep * COMPUTE_ROUNDS; cr < (rep + 1) * COMPUTE_ROUNDS; cr++)
        for (int t = 0; t < x->nturns; t++) {
            if (x->my_turn == t && !x->p->skip[CHK_GEMM])
                *sample(x, CHK_GEMM, x->me, cr) =
                    (float)(x->on_device ? doctor_device_gemm_gflops(x->da, x->db, x->dc, x->gemm_n, 2)
                                         : doctor_gemm_gflops(x->ga, x->gb, x->gc, x->gemm_n, 2));
            if (x->my_turn == t && !x->p->skip[CHK_TRIAD])
                *sample(x, CHK_TRIAD, x->me, cr) =
                    (float)(x->on_device ? doctor_device_copy_gbs(x->cb, x->ca, x->triad_bytes / 2, 2)
                                         : doctor_triad_gbs(x->ta, x->tb, x->tc, x->tn, 2));
            quiet_barrier(x->w);
        }
}

static void intra_host_checks(Run *x, int rep) {
    if (x->p->skip[CHK_AR_INTRA]) return;
    for (int t = 0; t < x->nhost_turns; t++) {
        if (x->local && x->host_turn == t) {
            quiet_barrier(x->local);
            float v = (float)doctor_allreduce_busbw(x->local, x->msg, x->p->msg_bytes);
            if (x->me == x->host_ranks[0]) *sample(x, CHK_AR_INTRA, x->myhost, rep) = v;
        }
        quiet_barrier(x->w);
    }
}

static void pair_checks(Run *x, int rep) {
    for (int s = 0; s < x->nslots; s++) {
        for (int i = x->slot_start[s]; i < x->slot_start[s + 1]; i++) {
            if (!x->pair_group[i]) continue;
            int la = x->first[x->pairs[i][0]], lb = x->first[x->pairs[i][1]]; /* the hosts' leaders */
            if ((x->me == la || x->me == lb) && !(x->p->skip[CHK_P2P_LAT] && x->p->skip[CHK_P2P_BW])) {
                double lat, bw;
                doctor_p2p(x->w, x->me, x->me == la ? lb : la, x->p->msg_bytes, x->msg, &lat, &bw);
                if (x->me == la) *sample(x, CHK_P2P_LAT, i, rep) = (float)lat, *sample(x, CHK_P2P_BW, i, rep) = (float)bw;
            }
            if (x->p->skip[CHK_AR_INTER]) continue;
            quiet_barrier(x->pair_group[i]); /* the others sleep while the leaders ping */
            float v = (float)doctor_allreduce_busbw(x->pair_group[i], x->msg, x->p->msg_bytes);
            if (x->me == la) *sample(x, CHK_AR_INTER, i, rep) = v;
        }
        quiet_barrier(x->w);
    }
}

/* Every rank's samples summed into every rank; figures are the best repetitions. */
static void collect(Run *x, DoctorResults *res) {
    must(comm_all_reduce(x->w, x->smp, x->smp, x->total, COMM_F32, COMM_SUM));
    memset(res, 0, sizeof *res);
    res->nhosts = x->H, res->nranks = x->np;
    res->hosts = malloc((size_t)x->H * sizeof *res->hosts);
    for (int h = 0; h < x->H; h++) memcpy(res->hosts[h], x->names[x->first[h]], DOCTOR_HOST_MAX);
    res->rank_host = malloc((size_t)x->np * sizeof *res->rank_host);
    memcpy(res->rank_host, x->host_of, (size_t)x->np * sizeof *x->host_of);
    for (int c = 0; c < CHK_N; c++) {
        const DoctorCheckInfo *ci = doctor_check_info((DoctorCheck)c);
        int n = ci->scope == SCOPE_RANK ? x->np : ci->scope == SCOPE_HOST ? x->H : x->npairs, m = x->per[c];
        res->samples[c] = malloc((size_t)(n + 1) * sizeof(DoctorSample));
        res->raw[c] = malloc(((size_t)n * m + 1) * sizeof(float));
        res->nraw[c] = m;
        for (int i = 0; i < n; i++) {
            const float *all = sample(x, (DoctorCheck)c, i, 0);
            double v = best_of(all, m, ci->higher_better);
            if (v == 0) continue; /* skipped, or a host with one rank (no intra-host figure) */
            int k = res->nsamples[c]++;
            res->samples[c][k] = (DoctorSample){ci->scope == SCOPE_PAIR ? x->pairs[i][0] : i,
                                                ci->scope == SCOPE_PAIR ? x->pairs[i][1] : -1, v};
            memcpy(res->raw[c] + (size_t)k * m, all, (size_t)m * sizeof(float));
        }
    }
}

static void run_free(Run *x) {
    for (int i = 0; i < x->npairs; i++)
        if (x->pair_group[i]) must(comm_group_free(x->pair_group[i]));
    if (x->local) must(comm_group_free(x->local));
    dev_free(x->ga), dev_free(x->gb), dev_free(x->gc), dev_free(x->da), dev_free(x->db), dev_free(x->dc);
    dev_free(x->ca), dev_free(x->cb);
    free(x->ta), free(x->tb), free(x->tc), free(x->msg), free(x->smp), free(x->pairs), free(x->slot_start);
    free(x->pair_group), free(x->names), free(x->host_of), free(x->first), free(x->host_ranks);
}

int doctor_run(const DoctorPlan *p, DoctorResults *res, DoctorSetup *setup) {
    double t0 = now_s();
    Run x = {.p = p, .w = comm_world()};
    x.me = comm_rank(x.w), x.np = comm_size(x.w);
    int gpu = !strcmp(kernels_device(), "cuda");
    x.on_device = !dev_host_accessible();
    x.gemm_n = p->gemm_n ? p->gemm_n : gpu ? DOCTOR_GEMM_N_GPU : DOCTOR_GEMM_N_CPU;
    x.triad_bytes = p->triad_bytes ? p->triad_bytes : (size_t)(gpu ? DOCTOR_TRIAD_MB_GPU : DOCTOR_TRIAD_MB_CPU) << 20;
    topology(&x);
    pairs_and_groups(&x);
    buffers(&x);
    for (int rep = 0; rep < p->reps; rep++) {
        double t = now_s();
        compute_checks(&x, rep);
        x.phase[0] += now_s() - t, t = now_s();
        intra_host_checks(&x, rep);
        x.phase[1] += now_s() - t, t = now_s();
        pair_checks(&x, rep);
        x.phase[2] += now_s() - t;
    }
    collect(&x, res);
    *setup = (DoctorSetup){.reps = p->reps, .gemm_n = (size_t)x.gemm_n, .triad_bytes = x.triad_bytes,
                           .msg_bytes = p->msg_bytes, .peers = x.nrounds, .concurrent = p->concurrent,
                           .shared_kernels = x.shared, .seconds = now_s() - t0,
                           .phase_s = {x.phase[0], x.phase[1], x.phase[2]}};
    DeviceInfo d;
    snprintf(setup->device, sizeof setup->device, "%s", kernels_device());
    snprintf(setup->dtype, sizeof setup->dtype, "%s", doctor_gemm_dtype());
    snprintf(setup->memory, sizeof setup->memory, "%s", doctor_memory_check());
    /* the driver's name may be longer than the report's field: cut it, on purpose */
    snprintf(setup->device_name, sizeof setup->device_name, "%.*s", (int)sizeof setup->device_name - 1,
             kernels_device_info(&d) ? "unknown" : d.name);
    run_free(&x);
    return 0;
}

void doctor_results_free(DoctorResults *r) {
    for (int c = 0; c < CHK_N; c++) free(r->samples[c]), free(r->raw[c]);
    free(r->hosts), free(r->rank_host);
    memset(r, 0, sizeof *r);
}
