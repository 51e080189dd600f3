/* test_comm.c: the comm layer against sequential references.
 *
 * Run directly (no launcher): unit tests of the pure parts (bf16 rounding, mesh arithmetic).
 * Run under mpirun (tests/test_comm.sh does, at 2, 3, 4 and 8 ranks): every collective is
 * checked against a reference each rank computes locally from the known inputs of every rank
 * (gen_* below), for odd counts, in-place and out-of-place, fp32 and bf16, blocking and
 * nonblocking. Flags: --comm-algo/--ranks-per-node/--comm-timeout (as the CLI), and
 * --hang stop|late|p2p: the last rank stops (SIGSTOP) or never joins a collective (or never
 * sends what the others receive); the others must time out naming it (the shell test checks
 * the message and the exit code).
 * Under MPI, rank 0 prints one ok/FAIL line per case, a case failing if it failed on any rank. */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm/comm.h"
#include "mpi_test.h"
#include "test.h"
#include "util/clock.h"
#include "util/error.h"

/* ------------------------------------------------------------------ unit tests (no MPI) */

static void test_bf16_rounding(void) {
    CHECK(comm_f32_to_bf16(1.0f) == 0x3F80, "1.0");
    CHECK(comm_f32_to_bf16(-2.5f) == 0xC020, "-2.5");
    CHECK(comm_f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80, "tie rounds to even (down)");
    CHECK(comm_f32_to_bf16(1.0f + 0x1p-7f + 0x1p-8f) == 0x3F82, "tie rounds to even (up)");
    CHECK(comm_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-12f) == 0x3F81, "above the tie rounds up");
    CHECK(comm_f32_to_bf16(INFINITY) == 0x7F80, "inf");
    CHECK(comm_f32_to_bf16(3.4e38f) == 0x7F80, "overflow rounds to inf");
    float nan = comm_bf16_to_f32(comm_f32_to_bf16(NAN));
    CHECK(nan != nan, "NaN stays NaN");
    CHECK(comm_bf16_to_f32(0x3FC0) == 1.5f, "0x3FC0 is 1.5");
}

static void test_mesh_coordinates(void) {
    /* tp fastest, then dp, then pp: world 12 = 2 x 3 x 2 */
    CommMesh m;
    const char *names[] = {"tp", "dp", "pp"};
    int sizes[] = {2, 3, 2};
    CHECK(comm_mesh_init(&m, 3, names, sizes) == 0, "%s", myr_last_error());
    CHECK(m.world == 12 && m.stride[0] == 1 && m.stride[1] == 2 && m.stride[2] == 6, "strides");
    CHECK(comm_mesh_coord(&m, 7, 0) == 1 && comm_mesh_coord(&m, 7, 1) == 0 && comm_mesh_coord(&m, 7, 2) == 1,
          "coords of rank 7");
    int r[12];
    int n = comm_mesh_group_ranks(&m, 7, 1u << 1, r);
    CHECK(n == 3 && r[0] == 7 && r[1] == 9 && r[2] == 11, "dp group of 7: %d: %d %d %d", n, r[0], r[1], r[2]);
    n = comm_mesh_group_ranks(&m, 7, 1u << 0, r);
    CHECK(n == 2 && r[0] == 6 && r[1] == 7, "tp group of 7");
    n = comm_mesh_group_ranks(&m, 7, 1u << 2, r);
    CHECK(n == 2 && r[0] == 1 && r[1] == 7, "pp group of 7");
    n = comm_mesh_group_ranks(&m, 7, 3u, r);
    CHECK(n == 6 && r[0] == 6 && r[1] == 7 && r[2] == 8 && r[5] == 11, "tp+dp group of 7");
    n = comm_mesh_group_ranks(&m, 7, 0u, r);
    CHECK(n == 1 && r[0] == 7, "empty mask: self");
    CHECK(comm_mesh_axis(&m, "dp") == 1 && comm_mesh_axis(&m, "ep") == -1, "axis lookup");
}

static void test_mesh_strides(void) {
    CommMesh m;
    const char *names[] = {"a", "b"};
    int sizes[] = {2, 3};
    int good[] = {3, 1}, bad[] = {1, 1};
    CHECK(comm_mesh_init_strided(&m, 2, names, sizes, good) == 0, "%s", myr_last_error());
    CHECK(comm_mesh_coord(&m, 4, 0) == 1 && comm_mesh_coord(&m, 4, 1) == 1, "rank 4 = 1*3 + 1");
    int r[6];
    int n = comm_mesh_group_ranks(&m, 4, 1u << 0, r);
    CHECK(n == 2 && r[0] == 1 && r[1] == 4, "group along a");
    CHECK(comm_mesh_init_strided(&m, 2, names, sizes, bad) == -1, "overlapping strides rejected");
    CHECK(strstr(myr_last_error(), "one-to-one") != NULL, "message: %s", myr_last_error());
    int zero[] = {2, 0};
    CHECK(comm_mesh_init(&m, 2, names, zero) == -1, "size 0 rejected");
    const char *dup[] = {"a", "a"};
    CHECK(comm_mesh_init(&m, 2, dup, sizes) == -1, "duplicate axis rejected");
}

/* ------------------------------------------------------------------ MPI harness */

static int me, np;
static const char *algo_label = "mpi";
static CommAlgo algo = COMM_ALGO_MPI;
static int rounds_bf16 = 1; /* bf16 roundings per all-reduce result: 1 flat, 2 hierarchical */

/* the case's name carries the rank count and the algorithm under test */
static const char *case_suffix(void) {
    static char buf[64];
    snprintf(buf, sizeof buf, "_np%d_%s", np, algo_label);
    return buf;
}
#define MRUN(fn) MPI_RUN(fn, case_suffix())

/* Inputs. fp32: multiples of 1/8 below 13, so every sum of them is exact in fp32 and the
 * reference is exact. bf16: irregular values (already bf16), so results really round. */
static float gen_f32(int rank, size_t i, int seed) {
    return (float)((int)((rank * 131u + i * 17u + seed * 7u) % 199u) - 99) / 8.0f;
}
static float gen_bf16(int rank, size_t i, int seed) {
    /* integer hash -> irregular value in (-3.8, 3.8); no libm call, whose vectorised variants
     * may round differently in the reference and in fill() */
    uint32_t h = (uint32_t)rank * 2654435761u ^ ((uint32_t)i * 40503u + (uint32_t)seed * 97u);
    h ^= h >> 13, h *= 0x5bd1e995u, h ^= h >> 15;
    return comm_bf16_to_f32(comm_f32_to_bf16((float)((int)(h % 60001u) - 30000) * (1.0f / 7919.0f)));
}
static float gen(CommDtype dt, int rank, size_t i, int seed) {
    return dt == COMM_BF16 ? gen_bf16(rank, i, seed) : gen_f32(rank, i, seed);
}

static void fill(void *buf, CommDtype dt, int rank, size_t off, size_t n, int seed) {
    for (size_t k = 0; k < n; k++) {
        float v = gen(dt, rank, off + k, seed);
        if (dt == COMM_BF16) ((uint16_t *)buf)[k] = comm_f32_to_bf16(v);
        else ((float *)buf)[k] = v;
    }
}

static double get(const void *buf, CommDtype dt, size_t k) {
    return dt == COMM_BF16 ? comm_bf16_to_f32(((const uint16_t *)buf)[k]) : ((const float *)buf)[k];
}

/* Reference reduction over the `nranks` inputs of element i; *scale = sum |x| (for tolerances). */
static double ref_reduce(CommDtype dt, CommOp op, int nranks, size_t i, int seed, double *scale) {
    double acc = op == COMM_MAX ? -INFINITY : 0, s = 0;
    for (int r = 0; r < nranks; r++) {
        double v = gen(dt, r, i, seed);
        s += fabs(v);
        acc = op == COMM_MAX ? fmax(acc, v) : acc + v;
    }
    if (op == COMM_AVG) acc /= nranks, s /= nranks;
    *scale = s;
    return acc;
}

/* Tolerance of a reduced element: exact fp32 sums (up to the 1/n scaling); bf16 rounds the
 * result `rounds` times, each within 2^-8 relative (8-bit significand, round to nearest),
 * bounded by the sum of magnitudes, plus fp32 accumulation error. */
static double tolerance(CommDtype dt, CommOp op, double scale, int rounds) {
    if (op == COMM_MAX) return 0;
    if (dt == COMM_F32) return 2e-7 * scale + 1e-30;
    return (rounds * 0x1p-8 + np * 0x1p-22) * scale + 1e-30;
}

static size_t wrong_count;
static void expect(const void *got, CommDtype dt, size_t k, double want, double tol, const char *what) {
    double g = get(got, dt, k);
    if (fabs(g - want) <= tol) return;
    if (wrong_count++ == 0) fprintf(stderr, "  rank %d: %s element %zu: got %.9g want %.9g (tol %.3g)\n", me, what, k, g, want, tol);
}
#define EXPECT_NONE_WRONG(what) do { CHECK(wrong_count == 0, "%s: %zu wrong elements", what, wrong_count); wrong_count = 0; } while (0)

static const size_t counts[] = {1, 7, 1001};
static const CommDtype dts[] = {COMM_F32, COMM_BF16};
static const CommOp ops[] = {COMM_SUM, COMM_AVG, COMM_MAX};

/* ------------------------------------------------------------------ collective cases */

static void test_all_reduce(void) {
    int seed = 1;
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 3; o++)
            for (int c = 0; c < 3; c++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    CommDtype dt = dts[d];
                    size_t n = counts[c], esz = comm_dtype_size(dt);
                    char *send = malloc(n * esz), *recv = malloc(n * esz);
                    fill(send, dt, me, 0, n, ++seed);
                    char *out = inplace ? send : recv;
                    int rc = comm_all_reduce(comm_world(), send, out, n, dt, ops[o]);
                    CHECK(rc == 0, "%s", myr_last_error());
                    char what[96];
                    snprintf(what, sizeof what, "all_reduce %s %s n=%zu %s", comm_dtype_name(dt), comm_op_name(ops[o]), n,
                             inplace ? "in-place" : "out-of-place");
                    for (size_t k = 0; k < n; k++) {
                        double s, want = ref_reduce(dt, ops[o], np, k, seed, &s);
                        expect(out, dt, k, want, tolerance(dt, ops[o], s, rounds_bf16), what);
                    }
                    EXPECT_NONE_WRONG(what);
                    free(send), free(recv);
                }
}

/* fp32 accumulation of bf16: rank 0 holds 256, the others 1. The exact sum 255 + n is rounded
 * once to bf16; rounding after every addition would stay at 256 (256 + 1 ties to 256). */
static void test_all_reduce_bf16_accumulates_in_fp32(void) {
    uint16_t x[5];
    for (int k = 0; k < 5; k++) x[k] = comm_f32_to_bf16(me == 0 ? 256.0f : 1.0f);
    CHECK(comm_all_reduce(comm_world(), x, x, 5, COMM_BF16, COMM_SUM) == 0, "%s", myr_last_error());
    uint16_t want = comm_f32_to_bf16(255.0f + np);
    for (int k = 0; k < 5; k++) CHECK(x[k] == want, "element %d: got %g want %g", k, comm_bf16_to_f32(x[k]), comm_bf16_to_f32(want));
}

static void test_all_reduce_nonblocking_overlap(void) {
    /* several reductions in flight at once, progressed while "computing", waited in reverse */
    enum { K = 4 };
    size_t n[K] = {3, 1001, 64, 5};
    float *buf[K];
    CommRequest *req[K];
    for (int j = 0; j < K; j++) {
        buf[j] = malloc(n[j] * sizeof(float));
        fill(buf[j], COMM_F32, me, 0, n[j], 100 + j);
        CHECK(comm_iall_reduce(comm_world(), buf[j], buf[j], n[j], COMM_F32, COMM_SUM, &req[j]) == 0, "%s",
              myr_last_error());
    }
    CHECK(comm_pending() == K, "pending %d", comm_pending());
    volatile double work = 0;
    for (int step = 0; step < 50; step++) {
        for (int i = 0; i < 1000; i++) work += i * 1e-9;
        CHECK(comm_progress() == 0, "%s", myr_last_error());
    }
    for (int j = K - 1; j >= 0; j--) {
        CHECK(comm_wait(&req[j]) == 0, "%s", myr_last_error());
        CHECK(req[j] == NULL, "wait clears the handle");
        for (size_t k = 0; k < n[j]; k++) {
            double s, want = ref_reduce(COMM_F32, COMM_SUM, np, k, 100 + j, &s);
            expect(buf[j], COMM_F32, k, want, tolerance(COMM_F32, COMM_SUM, s, 1), "iall_reduce");
        }
        EXPECT_NONE_WRONG("iall_reduce");
        free(buf[j]);
    }
    CHECK(comm_pending() == 0, "pending %d after waits", comm_pending());
    /* a multi-stage request (bf16) first: the broadcast and all-gather behind it wait their
     * turn to post, and all three must still be right */
    uint16_t ar[301], bc[33];
    float ag_in[3], ag[3 * 64];
    CommRequest *q[3];
    fill(ar, COMM_BF16, me, 0, 301, 200);
    fill(bc, COMM_BF16, me, 0, 33, 201);
    fill(ag_in, COMM_F32, me, 0, 3, 202);
    CHECK(comm_iall_reduce(comm_world(), ar, ar, 301, COMM_BF16, COMM_SUM, &q[0]) == 0, "%s", myr_last_error());
    CHECK(comm_ibroadcast(comm_world(), bc, bc, 33, COMM_BF16, np - 1, &q[1]) == 0, "%s", myr_last_error());
    CHECK(comm_iall_gather(comm_world(), ag_in, ag, 3, COMM_F32, &q[2]) == 0, "%s", myr_last_error());
    /* the newest is only tested, never waited: testing must move the older ones along too */
    for (int done = 0; !done;) CHECK(comm_test(&q[2], &done) == 0, "%s", myr_last_error());
    for (int j = 1; j >= 0; j--) CHECK(comm_wait(&q[j]) == 0, "%s", myr_last_error());
    for (size_t k = 0; k < 301; k++) {
        double sc, want = ref_reduce(COMM_BF16, COMM_SUM, np, k, 200, &sc);
        expect(ar, COMM_BF16, k, want, tolerance(COMM_BF16, COMM_SUM, sc, rounds_bf16), "queued bf16 all_reduce");
    }
    for (size_t k = 0; k < 33; k++) expect(bc, COMM_BF16, k, gen_bf16(np - 1, k, 201), 0, "queued broadcast");
    for (int r = 0; r < np; r++)
        for (size_t k = 0; k < 3; k++) expect(ag, COMM_F32, r * 3 + k, gen_f32(r, k, 202), 0, "queued all_gather");
    EXPECT_NONE_WRONG("requests queued behind a multi-stage one");
    /* comm_test until done */
    float v = (float)me, *pv = &v;
    CommRequest *r;
    CHECK(comm_iall_reduce(comm_world(), pv, pv, 1, COMM_F32, COMM_MAX, &r) == 0, "%s", myr_last_error());
    int done = 0;
    while (!done) CHECK(comm_test(&r, &done) == 0, "%s", myr_last_error());
    CHECK(v == np - 1, "max of ranks: %g", v);
}

/* The time inside comm_progress and comm_test counts as waiting (comm_wait_cpu_seconds), as in
 * comm_wait: a poll runs the collectives' stages, their reductions and copies, which are
 * communication, not the caller's compute; counted as compute they made the ranks that sum more
 * (a tree's inner ranks) look slower to the straggler detector. With nothing in flight a poll
 * reads no clock and counts nothing. */
static void test_polls_count_as_waiting(void) {
    size_t n = (size_t)1 << 20; /* 4 MiB: its stages do real summing */
    float *buf = malloc(n * sizeof *buf);
    fill(buf, COMM_F32, me, 0, n, 300);
    double before = comm_wait_cpu_seconds();
    CHECK(comm_progress() == 0 && comm_wait_cpu_seconds() == before, "nothing in flight: a poll counts nothing");
    CommRequest *r;
    CHECK(comm_iall_reduce(comm_world(), buf, buf, n, COMM_F32, COMM_SUM, &r) == 0, "%s", myr_last_error());
    double spent = 0; /* this thread's CPU time inside the polls, by the caller's own clock */
    for (int done = 0, i = 0; !done; i++) {
        double c0 = clock_thread_cpu_s();
        int rc = i % 2 ? comm_test(&r, &done) : comm_progress();
        spent += clock_thread_cpu_s() - c0;
        CHECK(rc == 0, "%s", myr_last_error());
    }
    double counted = comm_wait_cpu_seconds() - before;
    /* counted is inside spent; below it by a clock read per poll (~0.5 us, polls of a few us: 0.7 of
     * spent seen), so a quarter is a floor that only an uncounted poll falls under (0) */
    CHECK(spent > 0 && counted > 0.25 * spent && counted <= spent * 1.0001 + 1e-6,
          "polls' CPU time %.6f s counted as waiting: %.6f s", spent, counted);
    for (size_t k = 0; k < n; k += 4099) {
        double sc, want = ref_reduce(COMM_F32, COMM_SUM, np, k, 300, &sc);
        expect(buf, COMM_F32, k, want, tolerance(COMM_F32, COMM_SUM, sc, 1), "polled all_reduce");
    }
    EXPECT_NONE_WRONG("polled all_reduce");
    free(buf);
}

static void test_reduce_scatter(void) {
    static const size_t rcounts[] = {1, 5, 333};
    int seed = 40;
    for (int d = 0; d < 2; d++)
        for (int o = 0; o < 3; o++)
            for (int c = 0; c < 3; c++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    CommDtype dt = dts[d];
                    size_t rc = rcounts[c], esz = comm_dtype_size(dt), total = rc * np;
                    char *send = malloc(total * esz), *recv = malloc(rc * esz);
                    fill(send, dt, me, 0, total, ++seed);
                    char *out = inplace ? send + me * rc * esz : recv;
                    CHECK(comm_reduce_scatter(comm_world(), send, out, rc, dt, ops[o]) == 0, "%s", myr_last_error());
                    char what[96];
                    snprintf(what, sizeof what, "reduce_scatter %s %s n=%zu %s", comm_dtype_name(dt), comm_op_name(ops[o]),
                             rc, inplace ? "in-place" : "out-of-place");
                    for (size_t k = 0; k < rc; k++) {
                        double s, want = ref_reduce(dt, ops[o], np, me * rc + k, seed, &s);
                        expect(out, dt, k, want, tolerance(dt, ops[o], s, 1), what);
                    }
                    EXPECT_NONE_WRONG(what);
                    free(send), free(recv);
                }
}

static void test_all_gather(void) {
    static const size_t scounts[] = {1, 3, 257};
    int seed = 70;
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 3; c++)
            for (int inplace = 0; inplace < 2; inplace++) {
                CommDtype dt = dts[d];
                size_t sc = scounts[c], esz = comm_dtype_size(dt);
                char *send = malloc(sc * esz), *recv = malloc(sc * np * esz);
                memset(recv, 0xff, sc * np * esz);
                char *src = inplace ? recv + me * sc * esz : send;
                fill(src, dt, me, 0, sc, ++seed);
                CHECK(comm_all_gather(comm_world(), src, recv, sc, dt) == 0, "%s", myr_last_error());
                for (int r = 0; r < np; r++)
                    for (size_t k = 0; k < sc; k++) expect(recv, dt, r * sc + k, gen(dt, r, k, seed), 0, "all_gather");
                EXPECT_NONE_WRONG(inplace ? "all_gather in-place" : "all_gather");
                free(send), free(recv);
            }
}

static void test_all_to_all(void) {
    /* rank r's block j (destined to j) holds gen(r, j*cnt + k); rank j receives it as block r */
    static const size_t cnts[] = {1, 13};
    int seed = 90;
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 2; c++)
            for (int inplace = 0; inplace < 2; inplace++) {
                CommDtype dt = dts[d];
                size_t cnt = cnts[c], esz = comm_dtype_size(dt);
                char *send = malloc(cnt * np * esz), *recv = malloc(cnt * np * esz);
                fill(send, dt, me, 0, cnt * np, ++seed);
                char *out = inplace ? send : recv;
                CHECK(comm_all_to_all(comm_world(), send, out, cnt, dt) == 0, "%s", myr_last_error());
                for (int r = 0; r < np; r++)
                    for (size_t k = 0; k < cnt; k++) expect(out, dt, r * cnt + k, gen(dt, r, me * cnt + k, seed), 0, "all_to_all");
                EXPECT_NONE_WRONG(inplace ? "all_to_all in-place" : "all_to_all");
                free(send), free(recv);
            }
}

/* all-to-all-v: rank i sends (i + 2j) % 4 elements to rank j (zeros included), packed with a
 * gap of one element between blocks; element k of that block is gen(i, 1000*j + k). */
static size_t a2av_count(int from, int to) { return (size_t)((from + 2 * to) % 4); }
static void test_all_to_all_v(void) {
    for (int d = 0; d < 2; d++) {
        CommDtype dt = dts[d];
        size_t esz = comm_dtype_size(dt);
        size_t sc[64], sd[64], rcn[64], rd[64], soff = 0, roff = 0;
        for (int j = 0; j < np; j++) {
            sc[j] = a2av_count(me, j), sd[j] = soff, soff += sc[j] + 1;
            rcn[j] = a2av_count(j, me), rd[j] = roff, roff += rcn[j] + 1;
        }
        char *send = malloc(soff * esz + 1), *recv = malloc(roff * esz + 1);
        for (int j = 0; j < np; j++) fill(send + sd[j] * esz, dt, me, 1000 * j, sc[j], 7);
        CHECK(comm_all_to_all_v(comm_world(), send, sc, sd, recv, rcn, rd, dt) == 0, "%s", myr_last_error());
        for (int j = 0; j < np; j++)
            for (size_t k = 0; k < rcn[j]; k++) expect(recv, dt, rd[j] + k, gen(dt, j, 1000 * me + k, 7), 0, "all_to_all_v");
        EXPECT_NONE_WRONG("all_to_all_v");
        free(send), free(recv);
    }
}

static void test_broadcast(void) {
    static const size_t cnts[] = {1, 999};
    for (int d = 0; d < 2; d++)
        for (int c = 0; c < 2; c++)
            for (int rt = 0; rt < 2; rt++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    CommDtype dt = dts[d];
                    int root = rt ? np - 1 : 0;
                    size_t n = cnts[c], esz = comm_dtype_size(dt);
                    char *send = malloc(n * esz), *recv = malloc(n * esz);
                    fill(send, dt, me, 0, n, 5); /* every rank fills; only the root's values may arrive */
                    memset(recv, 0, n * esz);
                    char *out = inplace ? send : recv;
                    CHECK(comm_broadcast(comm_world(), send, out, n, dt, root) == 0, "%s", myr_last_error());
                    for (size_t k = 0; k < n; k++) expect(out, dt, k, gen(dt, root, k, 5), 0, "broadcast");
                    EXPECT_NONE_WRONG("broadcast");
                    free(send), free(recv);
                }
}

static void test_send_recv(void) {
    /* ring, nonblocking: send to the right, receive from the left */
    enum { N = 17 };
    float out[N], in[N];
    fill(out, COMM_F32, me, 0, N, 3);
    CommRequest *s, *r;
    int right = (me + 1) % np, left = (me + np - 1) % np;
    CHECK(comm_irecv(comm_world(), in, N, COMM_F32, left, &r) == 0, "%s", myr_last_error());
    CHECK(comm_isend(comm_world(), out, N, COMM_F32, right, &s) == 0, "%s", myr_last_error());
    CHECK(comm_wait(&s) == 0 && comm_wait(&r) == 0, "%s", myr_last_error());
    for (int k = 0; k < N; k++) expect(in, COMM_F32, k, gen_f32(left, k, 3), 0, "ring recv");
    EXPECT_NONE_WRONG("ring");
    /* blocking, bf16, between the first and the last rank */
    uint16_t b[9];
    if (me == 0) {
        fill(b, COMM_BF16, 0, 0, 9, 4);
        CHECK(comm_send(comm_world(), b, 9, COMM_BF16, np - 1) == 0, "%s", myr_last_error());
    } else if (me == np - 1) {
        CHECK(comm_recv(comm_world(), b, 9, COMM_BF16, 0) == 0, "%s", myr_last_error());
        for (int k = 0; k < 9; k++) expect(b, COMM_BF16, k, gen_bf16(0, k, 4), 0, "bf16 recv");
        EXPECT_NONE_WRONG("bf16 send/recv");
    }
    CHECK(comm_barrier(comm_world()) == 0, "%s", myr_last_error());
}

/* Groups: every rank reduces its world rank inside its group; the sum must be the sum of the
 * members, computed here from the mesh formula written out by hand. */
static void test_groups_from_ranks(void) {
    /* odd ranks and even ranks, each listed in reverse order */
    int ranks[64], n = 0;
    for (int r = np - 1; r >= 0; r--)
        if (r % 2 == me % 2) ranks[n++] = r;
    Comm *g;
    CHECK(comm_group_from_ranks(comm_world(), ranks, n, me % 2 ? "odd" : "even", &g) == 0, "%s", myr_last_error());
    if (!g) return;
    CHECK(comm_size(g) == n, "size");
    CHECK(comm_world_rank_of(g, comm_rank(g)) == me, "rank order follows the list");
    CHECK(comm_world_rank_of(g, 0) == ranks[0], "first member");
    float v = (float)me, want = 0;
    for (int i = 0; i < n; i++) want += ranks[i];
    CHECK(comm_all_reduce(g, &v, &v, 1, COMM_F32, COMM_SUM) == 0, "%s", myr_last_error());
    CHECK(v == want, "group sum %g want %g", v, want);
    CHECK(comm_group_free(g) == 0, "%s", myr_last_error());
}

/* Whether every emulated node (ranks_per_node consecutive world ranks) holds the same number
 * of g's members, counted here from the world ranks independently of the comm layer. */
static int ranks_per_node = 1;
static int uniform_nodes(Comm *g) {
    int per[64] = {0};
    for (int i = 0; i < comm_size(g); i++) per[comm_world_rank_of(g, i) / ranks_per_node]++;
    int k = 0;
    for (int nd = 0; nd < 64; nd++)
        if (per[nd]) {
            if (k && per[nd] != k) return 0;
            k = per[nd];
        }
    return 1;
}

static void test_groups_by_mesh_axes(void) {
    /* tp fastest, then dp, then pp; sizes chosen to multiply to np */
    int tp = np % 2 == 0 ? 2 : 1, rest = np / tp, dp = rest % 2 == 0 && rest > 2 ? rest / 2 : rest, pp = rest / dp;
    const char *names[] = {"tp", "dp", "pp"};
    int sizes[] = {tp, dp, pp};
    CommMesh m;
    CHECK(comm_mesh_init(&m, 3, names, sizes) == 0, "%s", myr_last_error());
    CommMesh wrong;
    int wrong_sizes[] = {np + 1};
    Comm *none;
    CHECK(comm_mesh_init(&wrong, 1, names, wrong_sizes) == 0, "%s", myr_last_error());
    CHECK(comm_group_by_axes(comm_world(), &wrong, 1, &none) == -1 && strstr(myr_last_error(), "multiply to the world"),
          "a mesh of another size is refused: %s", myr_last_error());
    int my_tp = me % tp, my_dp = me / tp % dp, my_pp = me / (tp * dp);
    for (unsigned mask = 1; mask < 8; mask++) {
        Comm *g;
        CHECK(comm_group_by_axes(comm_world(), &m, mask, &g) == 0, "%s", myr_last_error());
        if (!g) continue;
        /* members by brute force: same coordinates on the axes outside the mask */
        double want = 0;
        int members = 0;
        for (int r = 0; r < np; r++) {
            int t = r % tp, d = r / tp % dp, p = r / (tp * dp);
            if ((mask & 1 || t == my_tp) && (mask & 2 || d == my_dp) && (mask & 4 || p == my_pp)) want += r, members++;
        }
        float v = (float)me;
        CHECK(comm_size(g) == members, "mask %u: size %d want %d", mask, comm_size(g), members);
        if (algo == COMM_ALGO_HIER && !uniform_nodes(g)) {
            /* forced hierarchical on a group with unequal members per node must refuse */
            CHECK(comm_all_reduce(g, &v, &v, 1, COMM_F32, COMM_SUM) == -1, "mask %u: uneven nodes accepted", mask);
            CHECK(comm_local_size(g) == 0, "mask %u: local size %d for uneven nodes", mask, comm_local_size(g));
        } else {
            CHECK(comm_all_reduce(g, &v, &v, 1, COMM_F32, COMM_SUM) == 0, "%s", myr_last_error());
            CHECK(v == want, "mask %u (%s): sum %g want %g", mask, comm_name(g), v, want);
        }
        comm_group_free(g);
    }
}

/* auto: hierarchical only across more than one node, more than one rank per node (same on
 * every node), and at least 256 KiB; forced choices are returned as given. */
static void test_algorithm_selection(void) {
    Comm *w = comm_world();
    int nodes = np / ranks_per_node, multi = nodes > 1 && ranks_per_node > 1 && np % ranks_per_node == 0;
    comm_set_algo(COMM_ALGO_AUTO);
    CHECK(comm_allreduce_algo(w, 1000, COMM_F32) == COMM_ALGO_MPI, "small buffers use MPI's algorithm");
    CHECK(comm_allreduce_algo(w, 65535, COMM_F32) == COMM_ALGO_MPI, "just below 256 KiB");
    CHECK(comm_allreduce_algo(w, 65536, COMM_F32) == (multi ? COMM_ALGO_HIER : COMM_ALGO_MPI),
          "256 KiB with %d nodes of %d", nodes, ranks_per_node);
    CHECK(comm_allreduce_algo(w, 131072, COMM_BF16) == (multi ? COMM_ALGO_HIER : COMM_ALGO_MPI), "bf16 counts bytes");
    comm_set_algo(COMM_ALGO_HIER);
    CHECK(comm_allreduce_algo(w, 1, COMM_F32) == COMM_ALGO_HIER, "forced hier");
    comm_set_algo(algo);
    CHECK(comm_allreduce_algo(w, 1, COMM_F32) == algo, "this run's algorithm is the one in use");
}

static void test_errors_name_op_group_rank(void) {
    float x = 0;
    CHECK(comm_broadcast(comm_world(), &x, &x, 1, COMM_F32, np) == -1, "root out of range accepted");
    const char *e = myr_last_error();
    CHECK(strstr(e, "broadcast") && strstr(e, "group 'world'") && strstr(e, "rank") && strstr(e, "root"), "message: %s", e);
    CHECK(comm_send(comm_world(), &x, 1, COMM_F32, -1) == -1, "peer -1 accepted");
    CHECK(strstr(myr_last_error(), "send") && strstr(myr_last_error(), "peer -1"), "message: %s", myr_last_error());
    int bad[] = {me, me};
    Comm *g;
    CHECK(comm_group_from_ranks(comm_world(), bad, 2, "dup", &g) == -1, "duplicate member accepted");
    CHECK(strstr(myr_last_error(), "twice") != NULL, "message: %s", myr_last_error());
}

/* With R ranks per emulated node, the group of ranks 0..R has R members on one node and 1 on
 * the other: the forced hierarchical algorithm must refuse, naming the reason. */
static void test_hier_needs_uniform_nodes(void) {
    int k = ranks_per_node + 1; /* a whole node plus one rank of the next */
    if (np < 2 * ranks_per_node || ranks_per_node < 2) return;
    if (me < k) {
        int ranks[64];
        for (int i = 0; i < k; i++) ranks[i] = i;
        Comm *g;
        CHECK(comm_group_from_ranks(comm_world(), ranks, k, "uneven", &g) == 0, "%s", myr_last_error());
        CHECK(comm_node_count(g) == 2 && comm_local_size(g) == 0, "nodes %d local %d", comm_node_count(g),
              comm_local_size(g));
        float v = 1;
        CHECK(comm_all_reduce(g, &v, &v, 1, COMM_F32, COMM_SUM) == -1, "uneven nodes accepted");
        CHECK(strstr(myr_last_error(), "same number") != NULL, "message: %s", myr_last_error());
        comm_group_free(g);
    }
}

static void hang(const char *mode) {
    Comm *w = comm_world();
    float v = 1;
    CHECK(comm_all_reduce(w, &v, &v, 1, COMM_F32, COMM_SUM) == 0, "%s", myr_last_error()); /* everybody once */
    if (me == np - 1) {
        if (!strcmp(mode, "stop")) raise(SIGSTOP);
        /* "late" and "p2p": computing between layers, calling comm_progress, never joining */
        for (int i = 0; i < 6000; i++) {
            comm_progress();
            usleep(10000);
        }
        exit(0);
    }
    if (!strcmp(mode, "p2p")) { /* a receive whose sender never sends */
        if (comm_recv(w, &v, 1, COMM_F32, np - 1) < 0) myr_die_last();
        fprintf(stderr, "rank %d: received from a rank that never sent\n", me);
        exit(0);
    }
    if (comm_all_reduce(w, &v, &v, 1, COMM_F32, COMM_SUM) < 0) myr_die_last();
    fprintf(stderr, "rank %d: the collective completed without the last rank\n", me);
    exit(0);
}

int main(int argc, char **argv) {
    if (!getenv("OMPI_COMM_WORLD_SIZE")) { /* not under a launcher: the pure parts */
        RUN(test_bf16_rounding);
        RUN(test_mesh_coordinates);
        RUN(test_mesh_strides);
        return TEST_SUMMARY();
    }
    CommOptions opt = comm_default_options();
    opt.algo = COMM_ALGO_MPI;
    const char *hang_mode = NULL;
    for (int i = 1; i < argc; i++) {
        if (comm_parse_flag(&opt, argc, argv, &i)) continue;
        if (!strcmp(argv[i], "--hang") && i + 1 < argc) hang_mode = argv[++i];
        else myr_die("test_comm: unknown flag '%s'", argv[i]);
    }
    if (comm_init(&argc, &argv, &opt) < 0) myr_die_last();
    me = comm_rank(comm_world());
    np = comm_size(comm_world());
    if (hang_mode) hang(hang_mode);
    algo = opt.algo;
    ranks_per_node = opt.ranks_per_node > 0 ? opt.ranks_per_node : np;
    if (algo == COMM_ALGO_HIER) algo_label = "hier", rounds_bf16 = 2;
    if (algo == COMM_ALGO_HIER && comm_local_size(comm_world()) < 2 && me == 0)
        fprintf(stderr, "warning: hierarchical run with one rank per node\n");
    MRUN(test_algorithm_selection);
    MRUN(test_all_reduce);
    MRUN(test_all_reduce_nonblocking_overlap);
    MRUN(test_polls_count_as_waiting);
    if (algo != COMM_ALGO_HIER) { /* (hierarchical rounds bf16 once per level by design) */
        MRUN(test_all_reduce_bf16_accumulates_in_fp32);
        MRUN(test_reduce_scatter);
        MRUN(test_all_gather);
        MRUN(test_all_to_all);
        MRUN(test_all_to_all_v);
        MRUN(test_broadcast);
        MRUN(test_send_recv);
        MRUN(test_groups_from_ranks);
        MRUN(test_groups_by_mesh_axes);
        MRUN(test_errors_name_op_group_rank);
    } else {
        MRUN(test_groups_by_mesh_axes); /* all-reduce inside subgroups that span nodes */
        MRUN(test_hier_needs_uniform_nodes);
    }
    if (comm_finalize() < 0) myr_die_last();
    return TEST_SUMMARY();
}
