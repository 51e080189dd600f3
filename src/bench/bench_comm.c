/* bench_comm.c: `myriad bench comm`: bandwidth and correctness of every collective, printed
 * like nccl-tests (size, count, type, redop, root, time, algbw, busbw, #wrong; out-of-place and
 * in-place). Run it under a launcher: `myriad run -n 4 -- bench comm ...`.
 *
 * Bus bandwidth uses nccl-tests' factors (doc/PERFORMANCE.md in NVIDIA/nccl-tests): all-reduce
 * 2(n-1)/n; reduce-scatter, all-gather, all-to-all (n-1)/n; broadcast and send/recv 1. "size" is
 * the full buffer as in nccl-tests: the reduce-scatter input, the all-gather output, one rank's
 * all-to-all buffer. Time is the slowest rank's mean over -n iterations after -w warm-up ones
 * (with --trials K: the median of K such means, algorithms taking turns).
 * Every row is checked: after timing, fresh known inputs go through the collective once and each
 * element is compared with a reference computed locally from every rank's inputs (#wrong is the
 * total over ranks). With several --algo values the all-reduce tables are followed by a
 * comparison against the first algorithm, measured in the same run.
 * With --device cpu|cuda, or --comm nccl, the buffers are device memory and every call goes
 * through src/parallel/device_comm.h, the trainer's path (NCCL, or MPI direct or staged), timed
 * until the device has finished. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "comm/comm.h"
#include "comm/comm_opts.h"
#include "kernels/kernels.h"
#include "parallel/device_comm.h"
#include "util/error.h"

typedef enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_TO_ALL, BROADCAST, SEND_RECV, NCOLL } Coll;
static const char *coll_names[NCOLL] = {"all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "sendrecv"};

static double bus_factor(Coll c, int n) {
    switch (c) {
    case ALL_REDUCE: return 2.0 * (n - 1) / n;
    case REDUCE_SCATTER:
    case ALL_GATHER:
    case ALL_TO_ALL: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

typedef struct {
    size_t minb, maxb;
    double factor;
    int iters, warmup, root, trials;
    CommDtype dt;
    CommOp ops[3];
    int nops;
    unsigned colls; /* bit per Coll */
    CommAlgo algos[3];
    int nalgos;
    const char *device; /* device buffers through device_comm.h (NULL: host buffers, comm.h) */
} Opts;

static int me, np;
static int on_device, nccl; /* buffers in device memory; moved by NCCL */
static const char *const devices[] = {"cpu", "cuda", NULL};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int parse_bytes(void *dst, const char *v) {
    char *end;
    double x = strtod(v, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
    if (end == v || *end || !(x >= 1) || x * mul > 16.0 * 1024 * 1024 * 1024)
        return myr_error("a byte count such as 8, 64K, 32M (1 B .. 16 GiB) was expected, got '%s'", v);
    *(size_t *)dst = (size_t)(x * mul);
    return 0;
}

static int parse_dtype(void *dst, const char *v) {
    CommDtype *dt = dst;
    if (!strcmp(v, "float") || !strcmp(v, "fp32") || !strcmp(v, "f32")) *dt = COMM_F32;
    else if (!strcmp(v, "bfloat16") || !strcmp(v, "bf16")) *dt = COMM_BF16;
    else return myr_error("--dtype expects float or bfloat16, got '%s'", v);
    return 0;
}

static int parse_op(void *dst, const char *v) {
    Opts *o = dst;
    o->nops = 1;
    if (!strcmp(v, "all")) o->nops = 3, o->ops[0] = COMM_SUM, o->ops[1] = COMM_AVG, o->ops[2] = COMM_MAX;
    else if (!strcmp(v, "sum")) o->ops[0] = COMM_SUM;
    else if (!strcmp(v, "avg")) o->ops[0] = COMM_AVG;
    else if (!strcmp(v, "max")) o->ops[0] = COMM_MAX;
    else return myr_error("--op expects sum, avg, max or all, got '%s'", v);
    return 0;
}

static int parse_colls(void *dst, const char *v) {
    Opts *o = dst;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", v);
    o->colls = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        int found = !strcmp(t, "all");
        if (found) o->colls = (1u << NCOLL) - 1;
        for (int c = 0; c < NCOLL; c++)
            if (!strcmp(t, coll_names[c])) o->colls |= 1u << c, found = 1;
        if (!found)
            return myr_error("--coll: unknown collective '%s' (all_reduce, reduce_scatter, all_gather, all_to_all, "
                             "broadcast, sendrecv, all)", t);
    }
    if (!o->colls) return myr_error("--coll needs at least one collective");
    return 0;
}

static int parse_algos(void *dst, const char *v) {
    Opts *o = dst;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", v);
    o->nalgos = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (o->nalgos == 3) return myr_error("--algo: at most three algorithms");
        CommAlgo a = !strcmp(t, "mpi") ? COMM_ALGO_MPI : !strcmp(t, "hier") ? COMM_ALGO_HIER
                   : !strcmp(t, "auto") ? COMM_ALGO_AUTO : (CommAlgo)-1;
        if ((int)a < 0) return myr_error("--algo expects mpi, hier or auto (comma-separated), got '%s'", t);
        o->algos[o->nalgos++] = a;
    }
    if (!o->nalgos) return myr_error("--algo needs at least one algorithm");
    return 0;
}

static int parse_device(void *dst, const char *v) {
    for (int i = 0; devices[i]; i++)
        if (!strcmp(v, devices[i])) return *(const char **)dst = devices[i], 0;
    return myr_error("--device expects cpu or cuda, got '%s'", v);
}

static void parse(Opts *o, CommOptions *co, int argc, char **argv) {
    *o = (Opts){.minb = 8, .maxb = 1 << 20, .factor = 2, .iters = 20, .warmup = 5, .trials = 1, .dt = COMM_F32,
                .ops = {COMM_SUM}, .nops = 1, .colls = 1u << ALL_REDUCE, .algos = {COMM_ALGO_AUTO}, .nalgos = 1};
    int comm_algo_given = 0;
    const Opt rows[] = {
        OPT_ALIAS(OPT_CALL("--minbytes", "B", &o->minb, parse_bytes, "smallest size (default 8; suffixes K, M, G)"), "-b"),
        OPT_ALIAS(OPT_CALL("--maxbytes", "B", &o->maxb, parse_bytes, "largest size (default 1M)"), "-e"),
        OPT_ALIAS(OPT_DOUBLE("--stepfactor", "F", &o->factor, 1, 1e6, "size multiplier between rows, > 1 (default 2)"), "-f"),
        OPT_ALIAS(OPT_INT("--iters", "N", &o->iters, 1, 1 << 24, "timed iterations per row (default 20)"), "-n"),
        OPT_ALIAS(OPT_INT("--warmup_iters", "N", &o->warmup, 0, 1 << 24, "untimed iterations first (default 5)"), "-w"),
        OPT_INT("--trials", "K", &o->trials, 1, 99,
                "time each row K times (algorithms alternating), report the median"),
        OPT_ALIAS(OPT_CALL("--op", "OP", o, parse_op, "sum | avg | max | all (default sum)"), "-o"),
        OPT_ALIAS(OPT_CALL("--dtype", "T", &o->dt, parse_dtype, "float | bfloat16 (default float)"), "-d"),
        OPT_ALIAS(OPT_INT("--root", "R", &o->root, 0, 1 << 24, "broadcast root (default 0)"), "-r"),
        OPT_ALIAS(OPT_CALL("--coll", "LIST", o, parse_colls,
                           "comma list of all_reduce, reduce_scatter, all_gather, all_to_all,\n"
                           "broadcast, sendrecv, or all (default all_reduce)"), "-c"),
        OPT_CALL("--algo", "LIST", o, parse_algos,
                 "all-reduce algorithms to compare: mpi, hier, auto (default auto);\n"
                 "with several, the first is the baseline of a comparison table"),
        OPT_CALL("--device", "cpu|cuda", &o->device, parse_device,
                 "buffers in this device's memory, moved as the trainer moves them\n"
                 "(device_comm.h; default with --comm nccl: cuda where usable, else cpu)"),
        COMM_OPTS(co),
        OPT_END};
    OptCommand cmd = {.name = "bench comm", .usage = "usage: myriad run -n N -- bench comm [options]", .rows = rows};
    opts_parse(&cmd, argc, argv);
    /* --comm-algo (the transport's choice) also names the benchmark's one algorithm */
    for (int i = 1; i < argc; i++) comm_algo_given |= !strcmp(argv[i], "--comm-algo");
    if (comm_algo_given) o->algos[0] = co->algo, o->nalgos = 1;
    if (o->minb > o->maxb) myr_die("bench comm: -b %zu is larger than -e %zu; the smallest size must come first", o->minb, o->maxb);
    if (!(o->factor > 1)) myr_die("bench comm: -f must be > 1 (got %g)", o->factor);
}

/* ---------------------------------------------------------------- inputs and references */

/* fp32 inputs are multiples of 1/8 below 13 in magnitude: their sums are exact in fp32, so
 * fp32 results must match exactly (AVG: up to the final scaling). bf16 inputs are irregular. */
static float gen(CommDtype dt, int rank, size_t i) {
    uint32_t h = (uint32_t)rank * 2654435761u ^ (uint32_t)i * 40503u;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    if (dt == COMM_F32) return (float)((int)(h % 199u) - 99) / 8.0f;
    return comm_bf16_to_f32(comm_f32_to_bf16((float)((int)(h % 60001u) - 30000) * (1.0f / 7919.0f)));
}

static void put(void *buf, CommDtype dt, size_t k, float v) {
    if (dt == COMM_BF16) ((uint16_t *)buf)[k] = comm_f32_to_bf16(v);
    else ((float *)buf)[k] = v;
}

static double get(const void *buf, CommDtype dt, size_t k) {
    return dt == COMM_BF16 ? comm_bf16_to_f32(((const uint16_t *)buf)[k]) : ((const float *)buf)[k];
}

/* Is reduced element k (global index i) right? bf16 rounds once per level (2 for hier). */
static int reduced_ok(const void *out, CommDtype dt, CommOp op, size_t k, size_t i, int rounds) {
    double acc = op == COMM_MAX ? -INFINITY : 0, scale = 0;
    for (int r = 0; r < np; r++) {
        double v = gen(dt, r, i);
        scale += fabs(v);
        acc = op == COMM_MAX ? fmax(acc, v) : acc + v;
    }
    if (op == COMM_AVG) acc /= np, scale /= np;
    double tol = op == COMM_MAX ? 0 : dt == COMM_F32 ? 2e-7 * scale : (rounds * 0x1p-8 + np * 0x1p-22) * scale;
    return fabs(get(out, dt, k) - acc) <= tol + 1e-30;
}

/* ---------------------------------------------------------------- one collective call */

typedef struct {
    Coll coll;
    CommOp op;
    CommDtype dt;
    int root, inplace;
    size_t count;  /* per-rank elements: all-reduce/broadcast/sendrecv buffer, RS output, AG input, A2A block */
    char *a, *b;   /* buffers of maxbytes each (+ a block): host memory, or device memory (on_device) */
    char *ha, *hb; /* their host copies when on the device (else a, b themselves) */
    size_t cap;    /* bytes of each */
} Call;

/* The same collective on device buffers through device_comm.h. */
static int dcall(const Call *c) {
    Comm *w = comm_world();
    size_t esz = comm_dtype_size(c->dt);
    switch (c->coll) {
    case ALL_REDUCE: return dcomm_all_reduce(w, c->a, c->inplace ? c->a : c->b, c->count, c->dt, c->op);
    case REDUCE_SCATTER:
        return dcomm_reduce_scatter(w, c->a, c->inplace ? c->a + me * c->count * esz : c->b, c->count, c->dt, c->op);
    case ALL_GATHER: return dcomm_all_gather(w, c->inplace ? c->b + me * c->count * esz : c->a, c->b, c->count, c->dt);
    case ALL_TO_ALL: return dcomm_all_to_all(w, c->a, c->inplace ? c->a : c->b, c->count, c->dt);
    case BROADCAST: return dcomm_broadcast(w, c->a, c->inplace ? c->a : c->b, c->count, c->dt, c->root);
    case SEND_RECV: {
        DevRequest *s, *r;
        if (dcomm_group_start() || dcomm_irecv(w, c->b, c->count, c->dt, (me + np - 1) % np, &r) ||
            dcomm_isend(w, c->a, c->count, c->dt, (me + 1) % np, &s) || dcomm_group_end())
            return -1;
        return dcomm_wait(&s) < 0 || dcomm_wait(&r) < 0 ? -1 : 0;
    }
    default: return -1;
    }
}

static int call(const Call *c) {
    Comm *w = comm_world();
    size_t esz = comm_dtype_size(c->dt);
    if (on_device) return dcall(c);
    switch (c->coll) {
    case ALL_REDUCE: return comm_all_reduce(w, c->a, c->inplace ? c->a : c->b, c->count, c->dt, c->op);
    case REDUCE_SCATTER:
        return comm_reduce_scatter(w, c->a, c->inplace ? c->a + me * c->count * esz : c->b, c->count, c->dt, c->op);
    case ALL_GATHER: return comm_all_gather(w, c->inplace ? c->b + me * c->count * esz : c->a, c->b, c->count, c->dt);
    case ALL_TO_ALL: return comm_all_to_all(w, c->a, c->inplace ? c->a : c->b, c->count, c->dt);
    case BROADCAST: return comm_broadcast(w, c->a, c->inplace ? c->a : c->b, c->count, c->dt, c->root);
    case SEND_RECV: {
        CommRequest *s, *r;
        if (comm_irecv(w, c->b, c->count, c->dt, (me + np - 1) % np, &r) < 0) return -1;
        if (comm_isend(w, c->a, c->count, c->dt, (me + 1) % np, &s) < 0) return -1;
        return comm_wait(&s) < 0 || comm_wait(&r) < 0 ? -1 : 0;
    }
    default: return -1;
    }
}

/* Fill fresh inputs, run once, count wrong elements of the result on this rank. */
static long check(const Call *dc, int rounds) {
    Call hc = *dc, *c = &hc; /* inputs and results are read and written on the host copies */
    hc.a = dc->ha, hc.b = dc->hb;
    size_t esz = comm_dtype_size(c->dt), n = c->count;
    long wrong = 0;
    switch (c->coll) {
    case ALL_REDUCE:
        for (size_t k = 0; k < n; k++) put(c->a, c->dt, k, gen(c->dt, me, k));
        break;
    case REDUCE_SCATTER:
        for (size_t k = 0; k < n * np; k++) put(c->a, c->dt, k, gen(c->dt, me, k));
        break;
    case ALL_GATHER:
        for (size_t k = 0; k < n; k++) put(c->inplace ? c->b + me * n * esz : c->a, c->dt, k, gen(c->dt, me, k));
        break;
    case ALL_TO_ALL:
        for (size_t k = 0; k < n * np; k++) put(c->a, c->dt, k, gen(c->dt, me, k));
        break;
    case BROADCAST:
    case SEND_RECV:
        for (size_t k = 0; k < n; k++) put(c->a, c->dt, k, gen(c->dt, me, k));
        break;
    default: break;
    }
    if (on_device) {
        host_to_dev(dc->a, dc->ha, dc->cap), host_to_dev(dc->b, dc->hb, dc->cap);
        if (call(dc) < 0) myr_die_last();
        dev_to_host(dc->ha, dc->a, dc->cap), dev_to_host(dc->hb, dc->b, dc->cap);
    } else if (call(c) < 0) {
        myr_die_last();
    }
    const char *out;
    switch (c->coll) {
    case ALL_REDUCE:
        out = c->inplace ? c->a : c->b;
        for (size_t k = 0; k < n; k++) wrong += !reduced_ok(out, c->dt, c->op, k, k, rounds);
        break;
    case REDUCE_SCATTER:
        out = c->inplace ? c->a + me * n * esz : c->b;
        for (size_t k = 0; k < n; k++) wrong += !reduced_ok(out, c->dt, c->op, k, me * n + k, nccl ? np : 1);
        break;
    case ALL_GATHER:
        for (int r = 0; r < np; r++)
            for (size_t k = 0; k < n; k++) wrong += get(c->b, c->dt, r * n + k) != gen(c->dt, r, k);
        break;
    case ALL_TO_ALL:
        out = c->inplace ? c->a : c->b;
        for (int r = 0; r < np; r++)
            for (size_t k = 0; k < n; k++) wrong += get(out, c->dt, r * n + k) != gen(c->dt, r, me * n + k);
        break;
    case BROADCAST:
        out = c->inplace ? c->a : c->b;
        for (size_t k = 0; k < n; k++) wrong += get(out, c->dt, k) != gen(c->dt, c->root, k);
        break;
    case SEND_RECV:
        for (size_t k = 0; k < n; k++) wrong += get(c->b, c->dt, k) != gen(c->dt, (me + np - 1) % np, k);
        break;
    default: break;
    }
    return wrong;
}

/* Slowest rank's mean time per call, in seconds. */
static double timed(const Call *c, const Opts *o) {
    for (int i = 0; i < o->warmup; i++)
        if (call(c) < 0) myr_die_last();
    if (comm_barrier(comm_world()) < 0) myr_die_last();
    double t0 = now_s();
    for (int i = 0; i < o->iters; i++)
        if (call(c) < 0) myr_die_last();
    if (on_device) dev_sync(); /* until the device has done them (NCCL's blocking calls only queue) */
    float t = (float)((now_s() - t0) / o->iters);
    if (comm_all_reduce(comm_world(), &t, &t, 1, COMM_F32, COMM_MAX) < 0) myr_die_last();
    return t;
}

static long total_over_ranks(long v) {
    float f = (float)v; /* exact below 2^24 wrong values */
    if (comm_all_reduce(comm_world(), &f, &f, 1, COMM_F32, COMM_SUM) < 0) myr_die_last();
    return (long)f;
}

/* ---------------------------------------------------------------- tables */

#define MAX_ROWS 128

typedef struct {
    size_t size;
    double t[2];  /* out-of-place, in-place; seconds */
    long wrong[2];
    int has_inplace;
} Row;

static void header(Coll coll, CommAlgo algo) {
    if (me) return;
    Comm *w = comm_world();
    printf("#\n# Collective: %s   ranks: %d   nodes: %d", coll_names[coll], np, comm_node_count(w));
    if (comm_local_size(w)) printf(" (%d ranks each)", comm_local_size(w));
    if (nccl) printf("   transport: nccl");
    else if (coll == ALL_REDUCE) printf("   algo: %s", comm_algo_name(algo));
    printf("\n#\n");
    printf("#%72s%33s\n", "out-of-place", "in-place");
    printf("#%11s %13s %9s %7s %7s %9s %7s %7s %6s %9s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
           "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
    printf("#%11s %13s %9s %7s %7s %9s %7s %7s %6s %9s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
           "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

/* Per-rank element count for a buffer of `bytes` (0: too small for this collective). RS, AG
 * and A2A split the buffer into np blocks, as nccl-tests does. */
static size_t row_count(Coll coll, size_t bytes, size_t esz) {
    if (coll == REDUCE_SCATTER || coll == ALL_GATHER || coll == ALL_TO_ALL) return bytes / esz / np;
    return bytes / esz;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Time and check one row for each of `nalgos` all-reduce algorithms. With --trials K the
 * algorithms take turns K times and each time is the median of its K means, so a burst of
 * load from elsewhere on the machine hits every algorithm alike and is voted out. */
static void measure(Coll coll, const CommAlgo *algos, int nalgos, CommOp op, size_t count, const Opts *o, char *a,
                    char *b, char *ha, char *hb, size_t cap, Row *out /* [nalgos] */) {
    size_t esz = comm_dtype_size(o->dt);
    int blocks = coll == REDUCE_SCATTER || coll == ALL_GATHER || coll == ALL_TO_ALL;
    double t[3][2][99];
    for (int ai = 0; ai < nalgos; ai++)
        out[ai] = (Row){.size = count * esz * (blocks ? np : 1), .has_inplace = coll != SEND_RECV};
    for (int k = 0; k < o->trials; k++)
        for (int ai = 0; ai < nalgos; ai++) {
            comm_set_algo(algos[ai]);
            for (int ip = 0; ip < 1 + out[ai].has_inplace; ip++) {
                Call c = {.coll = coll, .op = op, .dt = o->dt, .root = o->root, .inplace = ip, .count = count, .a = a,
                          .b = b, .ha = ha, .hb = hb, .cap = cap};
                t[ai][ip][k] = timed(&c, o);
            }
        }
    for (int ai = 0; ai < nalgos; ai++) {
        comm_set_algo(algos[ai]);
        int rounds = coll == ALL_REDUCE && comm_allreduce_algo(comm_world(), count, o->dt) == COMM_ALGO_HIER ? 2 : 1;
        if (nccl) rounds = np; /* NCCL's bf16 rounds every partial sum */
        for (int ip = 0; ip < 1 + out[ai].has_inplace; ip++) {
            qsort(t[ai][ip], o->trials, sizeof(double), cmp_double);
            out[ai].t[ip] = t[ai][ip][o->trials / 2];
            Call c = {.coll = coll, .op = op, .dt = o->dt, .root = o->root, .inplace = ip, .count = count, .a = a,
                      .b = b, .ha = ha, .hb = hb, .cap = cap};
            out[ai].wrong[ip] = total_over_ranks(check(&c, rounds));
        }
    }
}

static void print_row(Coll coll, CommOp op, const Row *r, const Opts *o, double *bw_sum, int *bw_n) {
    size_t esz = comm_dtype_size(o->dt);
    double f = bus_factor(coll, np);
    int reduces = coll == ALL_REDUCE || coll == REDUCE_SCATTER;
    *bw_sum += r->size / r->t[0] / 1e9 * f;
    (*bw_n)++;
    if (me) return;
    printf(" %11zu %13zu %9s %7s %7d", r->size, r->size / esz, comm_dtype_name(o->dt), reduces ? comm_op_name(op) : "none",
           coll == BROADCAST ? o->root : -1);
    for (int ip = 0; ip < 2; ip++) {
        if (ip && !r->has_inplace) {
            printf(" %9s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
            break;
        }
        double algbw = r->size / r->t[ip] / 1e9;
        printf(" %9.2f %7.3f %7.3f %6ld", r->t[ip] * 1e6, algbw, algbw * f, r->wrong[ip]);
    }
    printf("\n");
}

int bench_comm(int argc, char **argv) {
    Opts o;
    CommOptions co = comm_default_options();
    parse(&o, &co, argc, argv);
    if (comm_init(&argc, &argv, &co) < 0) myr_die_last();
    Comm *w = comm_world();
    me = comm_rank(w), np = comm_size(w);
    if (o.root < 0 || o.root >= np) myr_die("--root %d is outside 0..%d", o.root, np - 1);
    if (o.device || co.transport == COMM_TRANSPORT_NCCL) { /* device buffers, the trainer's transport */
        KernelOptions ko = {o.device, DTYPE_F32, kernels_local_rank(), 0};
        if (!ko.device) ko.device = kernels_cuda_usable(NULL, 0) ? "cuda" : "cpu";
        if (kernels_select(&ko)) myr_die("bench comm: %s", myr_last_error());
        char desc[256];
        if (dcomm_setup(desc, sizeof desc)) myr_die_last();
        on_device = 1, nccl = dcomm_transport() == DCOMM_NCCL;
        if (me == 0) printf("# device buffers on %s, moved by %s\n", ko.device, desc);
        if (nccl && o.nalgos > 1) myr_die("bench comm: --algo compares MPI's all-reduce algorithms; not with --comm nccl");
    }
    size_t esz = comm_dtype_size(o.dt), cap = o.maxb + (size_t)np * esz + 64;
    char *ha = malloc(cap), *hb = malloc(cap), *a = ha, *b = hb;
    static Row rows[3][MAX_ROWS];
    if (!a || !b) myr_die("bench comm: cannot allocate 2 x %zu bytes; lower -e", cap);
    memset(a, 0, cap), memset(b, 0, cap);
    if (on_device) a = dev_alloc_bytes(cap), b = dev_alloc_bytes(cap);
    if (me == 0) {
        printf("# myriad bench comm: minBytes %zu maxBytes %zu step: %g(factor) warmup iters: %d iters: %d "
               "trials: %d (median) validation: 1 timeout: %g s\n", o.minb, o.maxb, o.factor, o.warmup, o.iters,
               o.trials, co.timeout_s);
        printf("# ranks %d, nodes %d%s\n", np, comm_node_count(w),
               co.ranks_per_node ? " (emulated with --ranks-per-node)" : " (shared-memory domains)");
        if (o.nalgos > 1)
            printf("# all-reduce algorithms are measured alternately, size by size, so load changes hit all alike\n");
    }
    long wrong = 0;
    double bw_sum = 0;
    int bw_n = 0;
    for (int coll = 0; coll < NCOLL; coll++) {
        if (!(o.colls >> coll & 1)) continue;
        int nalgos = coll == ALL_REDUCE ? o.nalgos : 1;
        int reduces = coll == ALL_REDUCE || coll == REDUCE_SCATTER;
        for (int oi = 0; oi < (reduces ? o.nops : 1); oi++) {
            int nrows = 0;
            for (double s = o.minb; s <= o.maxb * 1.0000001 && nrows < MAX_ROWS; s *= o.factor) {
                size_t count = row_count((Coll)coll, (size_t)s, esz);
                if (count == 0) continue;
                CommAlgo mpi_only = COMM_ALGO_MPI;
                Row r[3];
                measure((Coll)coll, coll == ALL_REDUCE ? o.algos : &mpi_only, nalgos, o.ops[oi], count, &o, a, b, ha, hb,
                        cap, r);
                for (int ai = 0; ai < nalgos; ai++) {
                    rows[ai][nrows] = r[ai];
                    wrong += r[ai].wrong[0] + r[ai].wrong[1];
                }
                nrows++;
            }
            for (int ai = 0; ai < nalgos; ai++) {
                header((Coll)coll, coll == ALL_REDUCE ? o.algos[ai] : COMM_ALGO_MPI);
                for (int k = 0; k < nrows; k++) print_row((Coll)coll, o.ops[oi], &rows[ai][k], &o, &bw_sum, &bw_n);
            }
            if (nalgos > 1 && me == 0) {
                printf("#\n# all_reduce %s, out-of-place: bus bandwidth relative to %s (same run)\n",
                       comm_op_name(o.ops[oi]), comm_algo_name(o.algos[0]));
                printf("#%11s", "size (B)");
                for (int ai = 0; ai < nalgos; ai++)
                    printf(" %8s(us) %8s(GB/s)", comm_algo_name(o.algos[ai]), comm_algo_name(o.algos[ai]));
                for (int ai = 1; ai < nalgos; ai++) printf(" %6s/%s", comm_algo_name(o.algos[ai]), comm_algo_name(o.algos[0]));
                printf("\n");
                double f = bus_factor(ALL_REDUCE, np);
                for (int k = 0; k < nrows; k++) {
                    printf(" %11zu", rows[0][k].size);
                    for (int ai = 0; ai < nalgos; ai++)
                        printf(" %12.2f %14.3f", rows[ai][k].t[0] * 1e6, rows[ai][k].size / rows[ai][k].t[0] / 1e9 * f);
                    for (int ai = 1; ai < nalgos; ai++) printf(" %10.2f", rows[0][k].t[0] / rows[ai][k].t[0]);
                    printf("\n");
                }
            }
            if (me == 0) fflush(stdout);
        }
    }
    if (me == 0) {
        printf("# Out of bounds values : %ld %s\n", wrong, wrong ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g\n#\n", bw_n ? bw_sum / bw_n : 0);
        fflush(stdout);
    }
    if (on_device) dev_free(a), dev_free(b);
    free(ha), free(hb);
    if (comm_finalize() < 0) myr_die_last();
    if (wrong) myr_die("bench comm: %ld wrong values (see #wrong)", wrong);
    return 0;
}
