/* doctor_run.c: who measures what, when, for `myriad doctor` (collective over the world).
 *
 * Topology: every rank names its host (MYRIAD_HOST, else gethostname) and its kernel
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

/* The best of the positive values of v[0..n): the largest rate or the smallest latency (0 when
 * none). Outside load only ever slows a measurement down, so the best repetition is the one
 * closest to what the hardware can do (STREAM reports its best rate for the same reason). */
static double best_pos(const float *v, int n, int higher_better) {
    double b = 0;
    for (int i = 0; i < n; i++)
        if (v[i] > 0 && (b == 0 || (higher_better ? v[i] > b : v[i] < b))) b = v[i];
    return b;
}

int doctor_run(const DoctorPlan *p, DoctorResults *res, DoctorSetup *setup) {
    double t0 = now_s();
    Comm *w = comm_world();
    int me = comm_rank(w), np = comm_size(w), R = p->reps;
    /* ---- topology */
    char mine[2][DOCTOR_HOST_MAX];
    read_id("MYRIAD_HOST", NULL, mine[0], DOCTOR_HOST_MAX);
    read_id(NULL, "/proc/sys/kernel/random/boot_id", mine[1], DOCTOR_HOST_MAX);
    char(*ids)[2][DOCTOR_HOST_MAX] = malloc((size_t)np * sizeof *ids);
    must(comm_all_gather(w, mine, ids, sizeof mine / sizeof(float), COMM_F32));
    char(*names)[DOCTOR_HOST_MAX] = malloc((size_t)np * sizeof *names), (*boots)[DOCTOR_HOST_MAX] = malloc((size_t)np * sizeof *boots);
    for (int r = 0; r < np; r++) memcpy(names[r], ids[r][0], DOCTOR_HOST_MAX), memcpy(boots[r], ids[r][1], DOCTOR_HOST_MAX);
    free(ids);
    int *host_of = calloc((size_t)np, sizeof *host_of), *kernel_of = calloc((size_t)np, sizeof *kernel_of);
    int *first = malloc((size_t)np * sizeof *first), *kfirst = malloc((size_t)np * sizeof *kfirst);
    int H = distinct((const char(*)[DOCTOR_HOST_MAX])names, np, host_of, first);
    int K = distinct((const char(*)[DOCTOR_HOST_MAX])boots, np, kernel_of, kfirst);
    int myhost = host_of[me];
    /* turns: my index among the ranks of my kernel; my host's index among the hosts of its kernel */
    int my_turn = 0, nturns = 1, host_turn_mine = 0, nhost_turns = 1;
    int *host_turn = calloc((size_t)H, sizeof *host_turn);
    {
        int *cnt = calloc((size_t)K, sizeof *cnt), *hcnt = calloc((size_t)K, sizeof *hcnt);
        for (int r = 0; r < np; r++) {
            int t = cnt[kernel_of[r]]++;
            if (r == me) my_turn = t;
            if (t + 1 > nturns) nturns = t + 1;
        }
        for (int h = 0; h < H; h++) {
            host_turn[h] = hcnt[kernel_of[first[h]]]++;
            if (host_turn[h] + 1 > nhost_turns) nhost_turns = host_turn[h] + 1;
        }
        free(cnt), free(hcnt);
    }
    int shared = H > K; /* some hosts share a kernel: emulated hosts */
    if (p->concurrent) my_turn = 0, nturns = 1, nhost_turns = 1, memset(host_turn, 0, (size_t)H * sizeof *host_turn);
    host_turn_mine = host_turn[myhost];
    int *host_ranks = malloc((size_t)np * sizeof *host_ranks), nlocal = 0;
    for (int r = 0; r < np; r++)
        if (host_of[r] == myhost) host_ranks[nlocal++] = r;
    /* ---- pair schedule: rounds of the tournament, at most p->peers of them; one pair per slot
     * when hosts share a kernel */
    int m = H % 2 ? H + 1 : H, nrounds = H > 1 ? m - 1 : 0;
    if (nrounds > p->peers) nrounds = p->peers;
    int (*pairs)[2] = malloc((size_t)(H * (nrounds + 1) / 2 + 1) * sizeof *pairs);
    int *slot_start = malloc((size_t)(H * (nrounds + 1) + 2) * sizeof *slot_start), npairs = 0, nslots = 0;
    for (int r = 0; r < nrounds; r++) {
        int (*rp)[2] = pairs + npairs;
        int k = tournament_round(H, r, rp);
        if (shared && !p->concurrent)
            for (int i = 0; i < k; i++) slot_start[nslots++] = npairs + i;
        else slot_start[nslots++] = npairs;
        npairs += k;
    }
    slot_start[nslots] = npairs;
    /* ---- groups: my host's ranks; every pair of hosts I am in (created in pair order everywhere) */
    Comm *local = NULL, **pair_group = calloc((size_t)npairs + 1, sizeof *pair_group);
    if (nlocal > 1) must(comm_group_from_ranks(w, host_ranks, nlocal, "doctor-host", &local));
    int *members = malloc((size_t)np * sizeof *members);
    for (int i = 0; i < npairs; i++) {
        if (pairs[i][0] != myhost && pairs[i][1] != myhost) continue;
        int n = 0;
        for (int side = 0; side < 2; side++)
            for (int r = 0; r < np; r++)
                if (host_of[r] == pairs[i][side]) members[n++] = r;
        must(comm_group_from_ranks(w, members, n, "doctor-pair", &pair_group[i]));
    }
    /* ---- buffers */
    int gn = p->gemm_n;
    real *ga = dev_alloc((size_t)gn * gn), *gb = dev_alloc((size_t)gn * gn), *gc = dev_alloc((size_t)gn * gn);
    for (size_t i = 0; i < (size_t)gn * gn; i++) ga[i] = (real)((i % 7) * 0.01), gb[i] = (real)((i % 5) * 0.02);
    size_t tn = p->triad_bytes / 24;
    double *ta = malloc(tn * sizeof *ta), *tb = malloc(tn * sizeof *tb), *tc = malloc(tn * sizeof *tc);
    float *msg = calloc(p->msg_bytes / sizeof(float) + 2, sizeof(float));
    if (!ta || !tb || !tc || !msg) myr_die("doctor: cannot allocate the triad arrays (%zu bytes); lower --triad-mb", p->triad_bytes);
    for (size_t i = 0; i < tn; i++) ta[i] = 0, tb[i] = 1, tc[i] = 2; /* first touch by this rank */
    /* ---- samples: [subject][repetition], summed over ranks at the end (each written by one rank).
     * Compute checks take COMPUTE_ROUNDS turns per repetition: they are short, and more of them
     * spread each rank's samples over the same stretch of time as everyone else's. */
    int CR = R * COMPUTE_ROUNDS;
    size_t off_gemm = 0, off_triad = off_gemm + (size_t)np * CR, off_intra = off_triad + (size_t)np * CR,
           off_lat = off_intra + (size_t)H * R, off_bw = off_lat + (size_t)npairs * R, off_inter = off_bw + (size_t)npairs * R,
           total = off_inter + (size_t)npairs * R;
    float *smp = calloc(total + 1, sizeof *smp);
    double phase[3] = {0, 0, 0}, tp;
    for (int rep = 0; rep < R; rep++) {
        tp = now_s();
        for (int cr = rep * COMPUTE_ROUNDS; cr < (rep + 1) * COMPUTE_ROUNDS; cr++)
            for (int t = 0; t < nturns; t++) {
                if (my_turn == t) {
                    smp[off_gemm + (size_t)me * CR + cr] = (float)doctor_gemm_gflops(ga, gb, gc, gn, 2);
                    smp[off_triad + (size_t)me * CR + cr] = (float)doctor_triad_gbs(ta, tb, tc, tn, 2);
                }
                quiet_barrier(w);
            }
        phase[0] += now_s() - tp, tp = now_s();
        for (int t = 0; t < nhost_turns; t++) {
            if (local && host_turn_mine == t) {
                quiet_barrier(local);
                float v = (float)doctor_allreduce_busbw(local, msg, p->msg_bytes);
                if (me == host_ranks[0]) smp[off_intra + (size_t)myhost * R + rep] = v;
            }
            quiet_barrier(w);
        }
        phase[1] += now_s() - tp, tp = now_s();
        for (int s = 0; s < nslots; s++) {
            for (int i = slot_start[s]; i < slot_start[s + 1]; i++) {
                if (!pair_group[i]) continue;
                int la = first[pairs[i][0]], lb = first[pairs[i][1]]; /* the hosts' leaders */
                if (me == la || me == lb) {
                    double lat, bw;
                    doctor_p2p(w, me, me == la ? lb : la, p->msg_bytes, msg, &lat, &bw);
                    if (me == la) smp[off_lat + (size_t)i * R + rep] = (float)lat, smp[off_bw + (size_t)i * R + rep] = (float)bw;
                }
                quiet_barrier(pair_group[i]);
                float v = (float)doctor_allreduce_busbw(pair_group[i], msg, p->msg_bytes);
                if (me == la) smp[off_inter + (size_t)i * R + rep] = v;
            }
            quiet_barrier(w);
        }
        phase[2] += now_s() - tp;
    }
    must(comm_all_reduce(w, smp, smp, total, COMM_F32, COMM_SUM));
    /* ---- results (every rank builds them; rank 0 reports) */
    memset(res, 0, sizeof *res);
    res->nhosts = H, res->nranks = np;
    res->hosts = malloc((size_t)H * sizeof *res->hosts);
    for (int h = 0; h < H; h++) memcpy(res->hosts[h], names[first[h]], DOCTOR_HOST_MAX);
    res->rank_host = malloc((size_t)np * sizeof *res->rank_host);
    memcpy(res->rank_host, host_of, (size_t)np * sizeof *host_of);
    struct {
        DoctorCheck c;
        size_t off;
        int n, m; /* subjects, samples each */
    } layout[] = {{CHK_GEMM, off_gemm, np, CR},       {CHK_TRIAD, off_triad, np, CR}, {CHK_AR_INTRA, off_intra, H, R},
                  {CHK_P2P_LAT, off_lat, npairs, R}, {CHK_P2P_BW, off_bw, npairs, R}, {CHK_AR_INTER, off_inter, npairs, R}};
    for (size_t l = 0; l < sizeof layout / sizeof layout[0]; l++) {
        DoctorCheck c = layout[l].c;
        int m = layout[l].m;
        res->samples[c] = malloc((size_t)(layout[l].n + 1) * sizeof(DoctorSample));
        res->nraw[c] = m;
        res->raw[c] = malloc(((size_t)layout[l].n * m + 1) * sizeof(float));
        for (int i = 0; i < layout[l].n; i++) {
            const float *v_all = smp + layout[l].off + (size_t)i * m;
            double v = best_pos(v_all, m, doctor_check_info(c)->higher_better);
            if (c == CHK_AR_INTRA && v == 0) continue; /* a host with one rank has no intra-host figure */
            DoctorSample *s = &res->samples[c][res->nsamples[c]++];
            s->a = doctor_check_info(c)->scope == SCOPE_PAIR ? pairs[i][0] : i;
            s->b = doctor_check_info(c)->scope == SCOPE_PAIR ? pairs[i][1] : -1;
            s->value = v;
            memcpy(res->raw[c] + (size_t)(res->nsamples[c] - 1) * m, v_all, (size_t)m * sizeof(float));
        }
    }
    *setup = (DoctorSetup){.reps = R, .gemm_n = (size_t)gn, .triad_bytes = p->triad_bytes, .msg_bytes = p->msg_bytes,
                           .peers = nrounds, .concurrent = p->concurrent, .shared_kernels = shared, .seconds = now_s() - t0,
                           .phase_s = {phase[0], phase[1], phase[2]}};
    /* ---- clean up */
    for (int i = 0; i < npairs; i++)
        if (pair_group[i]) must(comm_group_free(pair_group[i]));
    if (local) must(comm_group_free(local));
    dev_free(ga), dev_free(gb), dev_free(gc);
    free(ta), free(tb), free(tc), free(msg), free(smp), free(pairs), free(slot_start), free(pair_group), free(members);
    free(names), free(boots), free(host_of), free(kernel_of), free(first), free(kfirst), free(host_turn), free(host_ranks);
    return 0;
}

void doctor_results_free(DoctorResults *r) {
    for (int c = 0; c < CHK_N; c++) free(r->samples[c]), free(r->raw[c]);
    free(r->hosts), free(r->rank_host);
    memset(r, 0, sizeof *r);
}
