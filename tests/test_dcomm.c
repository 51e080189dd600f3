/* test_dcomm.c: collectives on device buffers (src/parallel/device_comm.h) through the transport
 * the environment selects, against references each rank computes from every rank's known inputs.
 * tests/test_dcomm.sh runs it under mpirun:
 *   - MPI staged (MYRIAD_DEVICE_GUARD=1), MPI direct on the plain CPU backend, and MPI direct
 *     under MYRIAD_DEVICE_GUARD=strict with MYRIAD_MPI_CUDA_AWARE=1 (the CUDA-aware path: MPI is
 *     handed device memory; the comm layer's averaging, bf16 sums and copies run as kernels),
 *     flat and hierarchical;
 *   - NCCL (--comm nccl with MYRIAD_NCCL_LIB=build/tests/libnccl-emu.so), under the strict guard;
 *     there also the ordering the emulation enforces: a result read before dcomm_wait is still
 *     the old bytes, and NCCL work queued on a stream that has not waited for the compute stream
 *     is refused.
 * Every case: counts 1, 7 and 1001 (odd, uneven chunks), in place and out of place, fp32 (exact:
 * inputs are multiples of 1/8) and bf16 (within the roundings of the transport), sum/avg/max,
 * reduce-scatter, all-gather, all-to-all(v) with empty blocks, broadcast, nonblocking requests in
 * flight together, send/recv in a group, a subgroup of the world.
 * Modes for the shell test (--mode M): plant-read (host code reads a device buffer: must fault
 * under the strict guard), plant-comm (the comm layer given device buffers but host arithmetic,
 * the bug the CUDA-aware path had: must fault), stop-wait / stop-run (the last rank stops before
 * a nonblocking / blocking all-reduce: the others must fail naming it within --comm-timeout),
 * async-wait / async-run (the emulation breaks a connection: NCCL's asynchronous error must end
 * the run long before the timeout).
 * Run alone (no launcher) it checks the same on a world of one. */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "comm/nccl_lib.h"
#include "kernels/kernels.h"
#include "mpi_test.h"
#include "parallel/device_comm.h"
#include "test.h"
#include "util/error.h"

static int me, np;
static Comm *world;
static const char *suffix = "";

/* fp32 inputs are multiples of 1/8: sums exact in any order */
static float gen(int rank, size_t i, int salt) {
    uint32_t h = (uint32_t)(rank + 1) * 2654435761u ^ (uint32_t)(i + 977 * salt) * 40503u;
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    return (float)((int)(h % 199u) - 99) / 8.0f;
}

static size_t esz(CommDtype dt) { return comm_dtype_size(dt); }

/* host values -> a new device buffer of `n` elements of dt */
static void *to_dev(const float *v, size_t n, CommDtype dt) {
    void *d = dev_alloc_bytes(n * esz(dt) + 4);
    if (dt == COMM_BF16) {
        uint16_t *h = malloc(n * 2 + 2);
        comm_f32_to_bf16_array(v, h, n);
        host_to_dev(d, h, n * 2);
        free(h);
    } else {
        host_to_dev(d, v, n * 4);
    }
    return d;
}

static void from_dev(float *v, const void *d, size_t n, CommDtype dt) {
    if (dt == COMM_BF16) {
        uint16_t *h = malloc(n * 2 + 2);
        dev_to_host(h, d, n * 2);
        comm_bf16_to_f32_array(h, v, n);
        free(h);
    } else {
        dev_to_host(v, d, n * 4);
    }
}

static float bf(float x) { return comm_bf16_to_f32(comm_f32_to_bf16(x)); }

/* The reduction of element i over every rank's input (bf16 inputs rounded first). */
static double reference(size_t i, int salt, CommDtype dt, CommOp op, double *scale) {
    double acc = op == COMM_MAX ? -1e300 : 0, s = 0;
    for (int r = 0; r < np; r++) {
        double v = dt == COMM_BF16 ? bf(gen(r, i, salt)) : gen(r, i, salt);
        s += fabs(v);
        acc = op == COMM_MAX ? (v > acc ? v : acc) : acc + v;
    }
    if (op == COMM_AVG) acc /= np, s /= np;
    *scale = s;
    return acc;
}

static int close_to(double got, double want, double scale, CommDtype dt, CommOp op) {
    /* bf16: one rounding per rank at most (NCCL rounds each partial sum), plus the final one */
    double tol = op == COMM_MAX ? 0 : dt == COMM_F32 ? 1e-6 * scale : (np + 1) * 0x1p-8 * scale;
    return fabs(got - want) <= tol + 1e-30;
}

static const size_t counts[] = {1, 7, 1001};
static const CommOp ops[] = {COMM_SUM, COMM_AVG, COMM_MAX};
static const CommDtype dts[] = {COMM_F32, COMM_BF16};

static void test_all_reduce(void) {
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 3; o++)
            for (int c = 0; c < 3; c++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    CommDtype dt = dts[d];
                    size_t n = counts[c];
                    float *in = malloc(n * 4), *out = malloc(n * 4);
                    for (size_t i = 0; i < n; i++) in[i] = gen(me, i, c);
                    void *s = to_dev(in, n, dt), *r = inplace ? s : dev_alloc_bytes(n * esz(dt));
                    CHECK(dcomm_all_reduce(world, s, r, n, dt, ops[o]) == 0, "%s", myr_last_error());
                    from_dev(out, r, n, dt);
                    int bad = 0;
                    for (size_t i = 0; i < n; i++) {
                        double sc, want = reference(i, c, dt, ops[o], &sc);
                        bad += !close_to(out[i], want, sc, dt, ops[o]);
                    }
                    CHECK(!bad, "%s %s n=%zu inplace=%d: %d wrong", comm_dtype_name(dt), comm_op_name(ops[o]), n,
                          inplace, bad);
                    if (r != s) dev_free(r);
                    dev_free(s), free(in), free(out);
                }
}

static void test_reduce_scatter(void) {
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 2; o++) /* sum, avg */
            for (int c = 0; c < 3; c++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    CommDtype dt = dts[d];
                    size_t n = counts[c], total = n * np;
                    float *in = malloc(total * 4), *out = malloc(n * 4);
                    for (size_t i = 0; i < total; i++) in[i] = gen(me, i, c);
                    char *s = to_dev(in, total, dt);
                    char *r = inplace ? s + me * n * esz(dt) : dev_alloc_bytes(n * esz(dt));
                    CHECK(dcomm_reduce_scatter(world, s, r, n, dt, ops[o]) == 0, "%s", myr_last_error());
                    from_dev(out, r, n, dt);
                    int bad = 0;
                    for (size_t k = 0; k < n; k++) {
                        double sc, want = reference(me * n + k, c, dt, ops[o], &sc);
                        bad += !close_to(out[k], want, sc, dt, ops[o]);
                    }
                    CHECK(!bad, "%s %s n=%zu inplace=%d: %d wrong", comm_dtype_name(dt), comm_op_name(ops[o]), n,
                          inplace, bad);
                    if (!inplace) dev_free(r);
                    dev_free(s), free(in), free(out);
                }
}

static void test_all_gather_and_broadcast(void) {
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 3; c++)
            for (int inplace = 0; inplace < 2; inplace++) {
                CommDtype dt = dts[d];
                size_t n = counts[c], total = n * np;
                float *in = malloc(n * 4), *out = malloc(total * 4);
                for (size_t i = 0; i < n; i++) in[i] = gen(me, i, c);
                char *r = dev_alloc_bytes(total * esz(dt)), *s;
                if (inplace) {
                    s = r + me * n * esz(dt);
                    void *t = to_dev(in, n, dt);
                    dev_to_dev(s, t, n * esz(dt));
                    dev_free(t);
                } else {
                    s = to_dev(in, n, dt);
                }
                CHECK(dcomm_all_gather(world, s, r, n, dt) == 0, "%s", myr_last_error());
                from_dev(out, r, total, dt);
                int bad = 0;
                for (int q = 0; q < np; q++)
                    for (size_t k = 0; k < n; k++) {
                        float v = gen(q, k, c);
                        bad += out[q * n + k] != (dt == COMM_BF16 ? bf(v) : v);
                    }
                CHECK(!bad, "all_gather %s n=%zu inplace=%d: %d wrong", comm_dtype_name(dt), n, inplace, bad);
                /* broadcast from the last rank, of the gathered buffer */
                char *b = inplace ? r : dev_alloc_bytes(total * esz(dt));
                if (!inplace && me == np - 1) dev_to_dev(b, r, total * esz(dt));
                float *mine = malloc(total * 4);
                for (size_t i = 0; i < total; i++) mine[i] = gen(me, i, 5);
                void *src = to_dev(mine, total, dt);
                CHECK(dcomm_broadcast(world, inplace ? NULL : src, inplace ? src : b, total, dt, np - 1) == 0, "%s",
                      myr_last_error());
                from_dev(out, inplace ? src : b, total, dt);
                bad = 0;
                for (size_t i = 0; i < total; i++) {
                    float v = gen(np - 1, i, 5);
                    bad += out[i] != (dt == COMM_BF16 ? bf(v) : v);
                }
                CHECK(!bad, "broadcast %s n=%zu inplace=%d: %d wrong", comm_dtype_name(dt), total, inplace, bad);
                if (!inplace) dev_free(b), dev_free(s);
                dev_free(src), dev_free(r), free(mine), free(in), free(out);
            }
}

/* all-to-all-v: rank r sends (r + q) % 3 elements to rank q (some blocks empty), at gaps. */
static void test_all_to_all(void) {
    size_t *sc = calloc(np, sizeof *sc), *sd = calloc(np, sizeof *sd), *rc = calloc(np, sizeof *rc),
           *rd = calloc(np, sizeof *rd), so = 0, ro = 0;
    for (int q = 0; q < np; q++) {
        sc[q] = (size_t)(me + q) % 3, sd[q] = so, so += sc[q] + 1;
        rc[q] = (size_t)(q + me) % 3, rd[q] = ro, ro += rc[q] + 2;
    }
    float *in = malloc((so + 1) * 4), *out = malloc((ro + 1) * 4);
    for (size_t i = 0; i < so; i++) in[i] = gen(me, i, 9);
    void *s = to_dev(in, so, COMM_F32), *r = dev_alloc_bytes((ro + 1) * 4);
    CHECK(dcomm_all_to_all_v(world, s, sc, sd, r, rc, rd, COMM_F32) == 0, "%s", myr_last_error());
    from_dev(out, r, ro, COMM_F32);
    int bad = 0;
    for (int q = 0; q < np; q++) {
        size_t their_off = 0; /* where rank q's block for me starts in q's send buffer */
        for (int k = 0; k < me; k++) their_off += (size_t)(q + k) % 3 + 1;
        for (size_t k = 0; k < rc[q]; k++) bad += out[rd[q] + k] != gen(q, their_off + k, 9);
    }
    CHECK(!bad, "all_to_all_v: %d wrong", bad);
    dev_free(s), dev_free(r), free(in), free(out), free(sc), free(sd), free(rc), free(rd);
    /* all-to-all, in place, bf16 */
    size_t n = 5;
    float *a = malloc(n * np * 4), *b = malloc(n * np * 4);
    for (size_t i = 0; i < n * np; i++) a[i] = gen(me, i, 11);
    void *d = to_dev(a, n * np, COMM_BF16);
    CHECK(dcomm_all_to_all(world, d, d, n, COMM_BF16) == 0, "%s", myr_last_error());
    from_dev(b, d, n * np, COMM_BF16);
    bad = 0;
    for (int q = 0; q < np; q++)
        for (size_t k = 0; k < n; k++) bad += b[q * n + k] != bf(gen(q, me * n + k, 11));
    CHECK(!bad, "all_to_all in place: %d wrong", bad);
    dev_free(d), free(a), free(b);
}

/* Several nonblocking reductions in flight, completed by test and by wait in another order. */
static void test_nonblocking(void) {
    enum { K = 4 };
    size_t n = 333;
    void *buf[K];
    DevRequest *req[K];
    CommDtype dt[K] = {COMM_F32, COMM_BF16, COMM_F32, COMM_F32};
    for (int k = 0; k < K; k++) {
        size_t len = k == 2 ? n * np : n;
        float *v = malloc(len * 4);
        for (size_t i = 0; i < len; i++) v[i] = gen(me, i, 20 + k);
        buf[k] = to_dev(v, len, dt[k]);
        free(v);
    }
    CHECK(dcomm_iall_reduce(world, buf[0], n, dt[0], COMM_AVG, &req[0]) == 0, "%s", myr_last_error());
    CHECK(dcomm_iall_reduce(world, buf[1], n, dt[1], COMM_SUM, &req[1]) == 0, "%s", myr_last_error());
    CHECK(dcomm_ireduce_scatter(world, buf[2], n, dt[2], COMM_SUM, &req[2]) == 0, "%s", myr_last_error());
    CHECK(dcomm_iall_gather(world, buf[3], n / np, dt[3], &req[3]) == 0, "%s", myr_last_error());
    int done = 0;
    for (int spins = 0; spins < 1000000 && !done; spins++) CHECK(dcomm_test(&req[2], &done) == 0, "%s", myr_last_error());
    CHECK(done && !req[2], "test completes and frees");
    for (int k = K - 1; k >= 0; k--) CHECK(dcomm_wait(&req[k]) == 0, "%s", myr_last_error());
    float *out = malloc(n * np * 4);
    int bad = 0;
    from_dev(out, buf[0], n, dt[0]);
    for (size_t i = 0; i < n; i++) {
        double sc, want = reference(i, 20, dt[0], COMM_AVG, &sc);
        bad += !close_to(out[i], want, sc, dt[0], COMM_AVG);
    }
    from_dev(out, buf[1], n, dt[1]);
    for (size_t i = 0; i < n; i++) {
        double sc, want = reference(i, 21, dt[1], COMM_SUM, &sc);
        bad += !close_to(out[i], want, sc, dt[1], COMM_SUM);
    }
    from_dev(out, (char *)buf[2] + me * n * 4, n, dt[2]);
    for (size_t i = 0; i < n; i++) {
        double sc, want = reference(me * n + i, 22, dt[2], COMM_SUM, &sc);
        bad += !close_to(out[i], want, sc, dt[2], COMM_SUM);
    }
    size_t piece = n / np;
    from_dev(out, buf[3], piece * np, dt[3]);
    for (int q = 0; q < np; q++)
        for (size_t k = 0; k < piece; k++) bad += out[q * piece + k] != gen(q, q * piece + k, 23);
    CHECK(!bad, "%d wrong", bad);
    for (int k = 0; k < K; k++) dev_free(buf[k]);
    free(out);
}

/* A ring exchange: every rank sends to the next and receives from the previous, in one group. */
static void test_send_recv_group(void) {
    size_t n = 77;
    float *v = malloc(n * 4);
    for (size_t i = 0; i < n; i++) v[i] = gen(me, i, 30);
    void *s = to_dev(v, n, COMM_F32), *r = dev_alloc_bytes(n * 4);
    DevRequest *a, *b;
    CHECK(dcomm_group_start() == 0, "%s", myr_last_error());
    CHECK(dcomm_irecv(world, r, n, COMM_F32, (me + np - 1) % np, &a) == 0, "%s", myr_last_error());
    CHECK(dcomm_isend(world, s, n, COMM_F32, (me + 1) % np, &b) == 0, "%s", myr_last_error());
    CHECK(dcomm_group_end() == 0, "%s", myr_last_error());
    CHECK(dcomm_wait(&b) == 0 && dcomm_wait(&a) == 0, "%s", myr_last_error());
    from_dev(v, r, n, COMM_F32);
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += v[i] != gen((me + np - 1) % np, i, 30);
    CHECK(!bad, "%d wrong", bad);
    dev_free(s), dev_free(r), free(v);
}

/* The even world ranks as a group of their own (its own NCCL communicator). */
static void test_subgroup(void) {
    if (me % 2) return;
    int n = (np + 1) / 2, *ranks = malloc(n * sizeof *ranks);
    for (int i = 0; i < n; i++) ranks[i] = 2 * i;
    Comm *g;
    CHECK(comm_group_from_ranks(world, ranks, n, "evens", &g) == 0, "%s", myr_last_error());
    float v[3] = {(float)me, 1, -me};
    void *d = to_dev(v, 3, COMM_F32);
    CHECK(dcomm_all_reduce(g, d, d, 3, COMM_F32, COMM_SUM) == 0, "%s", myr_last_error());
    from_dev(v, d, 3, COMM_F32);
    float sum = 0;
    for (int i = 0; i < n; i++) sum += 2 * i;
    CHECK(v[0] == sum && v[1] == n && v[2] == -sum, "%g %g %g", v[0], v[1], v[2]);
    dev_free(d);
    CHECK(comm_group_free(g) == 0, "%s", myr_last_error());
    free(ranks);
}

/* NCCL's ordering, as the emulation enforces it (a GPU would race where these look for stale bytes). */
static void test_nccl_ordering(void) {
    size_t n = 64;
    float v[64], out[64];
    for (size_t i = 0; i < n; i++) v[i] = gen(me, i, 40);
    void *d = to_dev(v, n, COMM_F32);
    DevRequest *req;
    CHECK(dcomm_iall_reduce(world, d, n, COMM_F32, COMM_SUM, &req) == 0, "%s", myr_last_error());
    from_dev(out, d, n, COMM_F32); /* not ordered after the reduction: the old bytes */
    CHECK(!memcmp(out, v, sizeof v) || np == 1, "a read before dcomm_wait saw the reduced values");
    CHECK(dcomm_wait(&req) == 0, "%s", myr_last_error());
    from_dev(out, d, n, COMM_F32);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double sc, want = reference(i, 40, COMM_F32, COMM_SUM, &sc);
        bad += !close_to(out[i], want, sc, COMM_F32, COMM_SUM);
    }
    CHECK(!bad, "after dcomm_wait: %d wrong", bad);
    /* NCCL called on the communication stream without it waiting for the compute stream */
    struct {
        int32_t ok;
        NcclUniqueId id;
    } boot = {1, {{0}}};
    if (me == 0) CHECK(nccl.GetUniqueId(&boot.id) == NCCL_SUCCESS, "id");
    CHECK(comm_broadcast(world, &boot, &boot, sizeof boot / 2, COMM_BF16, 0) == 0, "%s", myr_last_error());
    NcclComm raw;
    CHECK(nccl.CommInitRank(&raw, np, boot.id, me) == NCCL_SUCCESS, "init");
    scale_inplace(d, 2, n); /* a kernel after the stream's last wait */
    NcclResult r = nccl.AllReduce(dev_transport_address(d), dev_transport_address(d), n, NCCL_FLOAT32, NCCL_SUM, raw,
                                  dev_stream_handle(STREAM_COMM));
    CHECK(r == NCCL_INVALID_USAGE, "an unordered ncclAllReduce was accepted (%d)", r);
    nccl.CommDestroy(raw);
    dev_free(d);
}

/* ---- modes the shell test runs for their failure ---- */

static void host_scale(float *x, size_t n, float s) { /* the comm layer's old host loop */
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

static int run_mode(const char *mode) {
    size_t n = 256;
    float v[256];
    for (size_t i = 0; i < n; i++) v[i] = gen(me, i, 50);
    void *d = to_dev(v, n, COMM_F32);
    if (!strcmp(mode, "plant-read")) {
        volatile float x = ((float *)d)[3]; /* host code reading device memory */
        printf("planted read returned %g: the guard did not stop it\n", (double)x);
        return 1;
    }
    if (!strcmp(mode, "plant-comm")) { /* MPI may read the buffer, the comm layer's arithmetic must not */
        CommDeviceOps ops = {dev_alloc_bytes, dev_free, dev_to_dev, host_scale, NULL,
                             (const void *(*)(const void *))dev_transport_address};
        comm_device_buffers(&ops);
        int rc = comm_all_reduce(world, d, d, n, COMM_F32, COMM_AVG);
        printf("planted host averaging returned %d: the guard did not stop it\n", rc);
        return 1;
    }
    if (!strcmp(mode, "async-wait") || !strcmp(mode, "async-run")) { /* the emulation breaks the 2nd call */
        CHECK(dcomm_all_reduce(world, d, d, n, COMM_F32, COMM_SUM) == 0, "warm-up: %s", myr_last_error());
        int rc;
        if (!strcmp(mode, "async-wait")) {
            DevRequest *req;
            rc = dcomm_iall_reduce(world, d, n, COMM_F32, COMM_SUM, &req);
            if (!rc) rc = dcomm_wait(&req);
        } else {
            rc = dcomm_all_reduce(world, d, d, n, COMM_F32, COMM_SUM);
            from_dev(v, d, n, COMM_F32);
        }
        if (rc) myr_die_last();
        printf("the broken reduction completed\n");
        return 1;
    }
    if (!strncmp(mode, "stop-", 5)) {
        CHECK(dcomm_all_reduce(world, d, d, n, COMM_F32, COMM_SUM) == 0, "warm-up: %s", myr_last_error());
        if (me == np - 1) raise(SIGSTOP);
        int rc;
        if (!strcmp(mode, "stop-wait")) {
            DevRequest *req;
            rc = dcomm_iall_reduce(world, d, n, COMM_F32, COMM_SUM, &req);
            if (!rc) rc = dcomm_wait(&req);
        } else {
            rc = dcomm_all_reduce(world, d, d, n, COMM_F32, COMM_SUM);
            from_dev(v, d, n, COMM_F32); /* behind the hung reduction */
        }
        if (rc) myr_die_last();
        printf("the reduction completed without the stopped rank\n");
        return 1;
    }
    fprintf(stderr, "unknown --mode %s\n", mode);
    return 2;
}

int main(int argc, char **argv) {
    CommOptions co = comm_default_options();
    const char *mode = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mode") && i + 1 < argc) mode = argv[++i];
        else if (!comm_parse_flag(&co, argc, argv, &i)) {
            fprintf(stderr, "unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (comm_init(&argc, &argv, &co)) myr_die_last();
    world = comm_world();
    me = comm_rank(world), np = comm_size(world);
    KernelOptions ko = {"cpu", DTYPE_F32, 0, 0};
    if (kernels_select(&ko)) myr_die_last();
    char desc[256], sfx[64];
    if (dcomm_setup(desc, sizeof desc)) myr_die_last();
    const char *t[] = {"staged", "direct", "nccl"};
    snprintf(sfx, sizeof sfx, "_np%d_%s%s", np, t[dcomm_transport()],
             comm_allreduce_algo(world, 1 << 20, COMM_F32) == COMM_ALGO_HIER ? "_hier" : "");
    suffix = sfx;
    if (me == 0) fprintf(stderr, "# transport: %s\n", desc);
    if (mode) return run_mode(mode);
    MPI_RUN(test_all_reduce, suffix);
    MPI_RUN(test_reduce_scatter, suffix);
    MPI_RUN(test_all_gather_and_broadcast, suffix);
    MPI_RUN(test_all_to_all, suffix);
    MPI_RUN(test_nonblocking, suffix);
    MPI_RUN(test_send_recv_group, suffix);
    MPI_RUN(test_subgroup, suffix);
    if (dcomm_transport() == DCOMM_NCCL) MPI_RUN(test_nccl_ordering, suffix);
    if (comm_finalize()) myr_die_last();
    return TEST_SUMMARY();
}
