/* bench_calibrate.c: `myriad bench calibrate`: measures this machine the way `myriad train` will
 * load it and writes a hardware and a cluster file for `myriad sim` (configs/hardware and
 * configs/clusters formats). Run it with the ranks and threads of the training run it should
 * predict (`myriad run -n R -- bench calibrate --threads t ...`): every rank measures at once, so
 * the rates include the contention of R ranks sharing the cores and memory.
 *   GEMM rates by shape: myriad's gemm() on the forward, input-gradient and weight-gradient
 *     products of every linear layer of the model (fused QKV, projection, MLP, lm_head) for each
 *     --tokens rows count and --tp sharding, timed inside a replayed step of --layers layers (the
 *     trainer's order and buffers, so each product meets the cache as in training), stored in the
 *     simulator's (M, N, K) convention;
 *   attention: myriad's attention forward + backward at the first shape, as a fraction of the
 *     peak GEMM rate (attn_eff); with --cp N the blockwise kernels of ring attention instead, the
 *     block pairs one cp rank computes of a --seq sequence cut into 2N load-balanced chunks
 *     (the exchange between them is the MPI figures' part);
 *   cross-entropy: myriad's fused softmax cross-entropy (loss and gradient) on the first --tokens
 *     rows of --vocab logits, per logit (ce_ns_per_logit);
 *   memory bandwidth: a STREAM triad over 3 x 64 MiB with the rank's threads;
 *   kernel overhead: an empty parallel loop;
 *   MPI: all-reduce and send/recv latency and bandwidth among the ranks (small and large
 *     messages; alpha from the small, bandwidth from the difference).
 * Each figure is the median of --reps timed windows after one warm-up call, then the median over
 * ranks. A window repeats the call for at least --window seconds (default 0.25): on a shared
 * machine a single short call fits inside one scheduler time slice and sees the core alone, while
 * a training step of seconds sees the share of the cores it gets; windows of a few time slices
 * measure that share too. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "comm/comm.h"
#include "kernels/cpu/cpu_gemm.h"
#include "kernels/kernels.h"
#include "util/opts.h"
#include "util/error.h"

#define MAXROWS 64

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    int layers, hidden, heads, ffn, vocab, seq, threads, reps, cp;
    double window;
    int tokens[8], ntokens, tps[4], ntps, group;
    const char *out, *name;
} Opts;

static int parse_list(const char *flag, const char *v, int *out, int max) {
    int n = 0;
    const char *p = v;
    while (*p && n < max) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1) myr_die("%s expects positive integers separated by commas, got '%s'", flag, v);
        out[n++] = (int)x;
        p = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') myr_die("%s expects positive integers separated by commas, got '%s'", flag, v);
    }
    return n;
}

static int opt_out(void *dst, const char *v) { /* a prefix that looks like a flag is a forgotten value */
    if (!*v || v[0] == '-') return myr_error("--out expects a path prefix (e.g. --out cal), got '%s'", v);
    *(const char **)dst = v;
    return 0;
}

static int opt_tokens_list(void *dst, const char *v) {
    Opts *o = dst;
    o->ntokens = parse_list("--tokens", v, o->tokens, 8);
    return 0;
}

static int opt_tp_list(void *dst, const char *v) {
    Opts *o = dst;
    o->ntps = parse_list("--tp", v, o->tps, 4);
    return 0;
}

static double g_window = 0.25;
/* Several ranks: the ranks of a run wait for each other at every collective and transfer, so a
 * step advances at the pace of the slowest rank, not the typical one. On a shared CPU the ranks
 * lose the processor at different moments (time-slicing), and a per-rank median hides that. So
 * each timing window starts on all ranks together (a barrier) and counts at the slowest rank's
 * time per call over that window. One rank: no effect. */
static Comm *g_lockstep;

static void lockstep_start(void) {
    if (g_lockstep && comm_barrier(g_lockstep)) myr_die_last();
}

static double lockstep_slowest(double per_call) {
    if (!g_lockstep) return per_call;
    float mine = (float)per_call, worst;
    if (comm_all_reduce(g_lockstep, &mine, &worst, 1, COMM_F32, COMM_MAX)) myr_die_last();
    return worst;
}

/* Median seconds per call of `call`, each window repeating it for at least g_window seconds
 * (with several ranks: the slowest rank's, see g_lockstep). */
#define TIMED(reps, call, out)                                                   \
    do {                                                                         \
        double t_[32];                                                           \
        int n_ = 0;                                                              \
        call;                                                                    \
        for (int r_ = 0; r_ < (reps) && n_ < 32; r_++) {                         \
            lockstep_start();                                                    \
            double t0_ = now_s(), dt_;                                           \
            long k_ = 0;                                                         \
            do { call; k_++; dt_ = now_s() - t0_; } while (dt_ < g_window);      \
            t_[n_++] = lockstep_slowest(dt_ / k_);                               \
        }                                                                        \
        out = median(t_, n_);                                                    \
    } while (0)

/* The GEMMs of a training step, replayed in myriad train's order on buffers laid out as the
 * trainer has them: per layer, the four linear layers (fused QKV, attention output, MLP up, MLP
 * down), each with its own weight, weight gradient, input, output and their gradients; then the
 * lm_head. Forward: out = in W^T, layer by layer; backward, last layer first: din = dout W, then
 * dW += dout^T in (src/kernels/cpu/cpu_matmul.c). Each product then finds in the cache what it
 * finds in a real step: its forward input just written, its weight last touched a step ago, its
 * backward dout just written, its saved input cold. Timing each shape alone instead, with the
 * same operands over and over, runs it from the cache and overstates its rate (by 15-25% on
 * this development machine: docs/SIMULATOR.md, "Own runs"). */
typedef struct {
    int in, out;                    /* features in and out (the weight is out x in) */
    real *w, *dw, *x, *y, *dy, *dx; /* this layer's own */
} Linear;

enum { LAYER_LINEARS = 4, ROLES = 5 }; /* QKV, attention output, MLP up, MLP down; lm_head */

typedef struct {
    double secs[ROLES][3]; /* forward, input gradient, weight gradient */
    long calls[ROLES][3];
} ReplayTimes;

static void timed_gemm(int ta, int tb, int M, int N, int K, const real *A, int lda, const real *B, int ldb,
                       int accumulate, real *C, int ldc, double *secs, long *calls) {
    double t0 = now_s();
    gemm(ta, tb, M, N, K, A, lda, B, ldb, accumulate, C, ldc);
    *secs += now_s() - t0;
    ++*calls;
}

static void linear_forward(Linear *q, int N, ReplayTimes *rt, int role) {
    timed_gemm(0, 1, N, q->out, q->in, q->x, q->in, q->w, q->in, 0, q->y, q->out, &rt->secs[role][0],
               &rt->calls[role][0]);
}

static void linear_backward(Linear *q, int N, ReplayTimes *rt, int role) {
    timed_gemm(0, 0, N, q->in, q->out, q->dy, q->out, q->w, q->in, 0, q->dx, q->in, &rt->secs[role][1],
               &rt->calls[role][1]);
    timed_gemm(1, 0, q->out, q->in, N, q->dy, q->out, q->x, q->in, 1, q->dw, q->in, &rt->secs[role][2],
               &rt->calls[role][2]);
}

/* One step's GEMMs: lin[l * LAYER_LINEARS + k] for layer l, lin[L * LAYER_LINEARS] the lm_head. */
static void replay_step(Linear *lin, int L, int N, ReplayTimes *rt) {
    Linear *head = &lin[L * LAYER_LINEARS];
    for (int l = 0; l < L; l++)
        for (int k = 0; k < LAYER_LINEARS; k++) linear_forward(&lin[l * LAYER_LINEARS + k], N, rt, k);
    linear_forward(head, N, rt, ROLES - 1);
    linear_backward(head, N, rt, ROLES - 1);
    for (int l = L - 1; l >= 0; l--)
        for (int k = LAYER_LINEARS - 1; k >= 0; k--) linear_backward(&lin[l * LAYER_LINEARS + k], N, rt, k);
}

/* Floats a linear layer holds in the replay: weight and its gradient, input, output and theirs. */
static size_t linear_floats(int in, int out, int N) {
    return 2 * ((size_t)in * out + (size_t)N * (in + out));
}

static real *filled(size_t n, int salt) {
    real *p = dev_alloc(n);
    for (size_t i = 0; i < n; i++) p[i] = (real)((i * 7 + salt) % 101 * 0.01 - 0.5);
    return p;
}

/* Rates (GFLOP/s) of the 15 products of a layer with N rows and tp-sharded widths, timed inside
 * replayed steps of L layers: each window runs whole steps; a product's time is its share of the
 * window, per call; with several ranks, the slowest rank's (lockstep). Rows in the simulator's
 * (M, N, K) convention: forward (N, OC, IC), input gradient (N, IC, OC), weight gradient (IC, OC, N). */
static int replay_rows(const Opts *o, int N, int tp, double rows[][4], int at) {
    int C = o->hidden, F = o->ffn, V = o->vocab;
    int shape[ROLES][2] = {{C, 3 * C / tp}, {C / tp, C}, {C, F / tp}, {F / tp, C}, {C, V / tp}};
    /* as many layers as asked, but no more than 1 GiB of buffers with the lm_head's (a few layers
     * already take the weights out of any cache) */
    size_t per_layer = 0, head = linear_floats(shape[ROLES - 1][0], shape[ROLES - 1][1], N);
    for (int k = 0; k < LAYER_LINEARS; k++) per_layer += linear_floats(shape[k][0], shape[k][1], N);
    int L = o->layers;
    while (L > 1 && ((size_t)L * per_layer + head) * sizeof(real) > ((size_t)1 << 30)) L--;
    int n = L * LAYER_LINEARS + 1;
    Linear *lin = calloc((size_t)n, sizeof *lin);
    for (int i = 0; i < n; i++) {
        int k = i < L * LAYER_LINEARS ? i % LAYER_LINEARS : ROLES - 1;
        Linear *q = &lin[i];
        q->in = shape[k][0]; q->out = shape[k][1];
        size_t wn = (size_t)q->in * q->out;
        q->w = filled(wn, i); q->dw = filled(wn, i + 1); q->x = filled((size_t)N * q->in, i + 2);
        q->y = filled((size_t)N * q->out, i + 3); q->dy = filled((size_t)N * q->out, i + 4);
        q->dx = filled((size_t)N * q->in, i + 5);
    }
    ReplayTimes warm;           /* one untimed step first: page faults, thread start-up */
    memset(&warm, 0, sizeof warm);
    replay_step(lin, L, N, &warm);
    double per_call[ROLES][3][32];
    int reps = o->reps < 32 ? o->reps : 32;
    for (int r = 0; r < reps; r++) {
        ReplayTimes rt;
        memset(&rt, 0, sizeof rt);
        lockstep_start();
        double t0 = now_s();
        do replay_step(lin, L, N, &rt);
        while (now_s() - t0 < g_window);
        for (int k = 0; k < ROLES; k++)
            for (int j = 0; j < 3; j++) per_call[k][j][r] = lockstep_slowest(rt.secs[k][j] / rt.calls[k][j]);
    }
    for (int k = 0; k < ROLES; k++) { /* bench_calibrate refused more shapes than rows fit */
        int IC = shape[k][0], OC = shape[k][1];
        double f = 2.0 * N * IC * OC;
        double mnk[3][3] = {{N, OC, IC}, {N, IC, OC}, {IC, OC, N}};
        for (int j = 0; j < 3; j++, at++) {
            rows[at][0] = mnk[j][0]; rows[at][1] = mnk[j][1]; rows[at][2] = mnk[j][2];
            rows[at][3] = f / median(per_call[k][j], reps) / 1e9;
        }
    }
    for (int i = 0; i < n; i++) {
        dev_free(lin[i].w); dev_free(lin[i].dw); dev_free(lin[i].x);
        dev_free(lin[i].y); dev_free(lin[i].dy); dev_free(lin[i].dx);
    }
    free(lin);
    return at;
}

static void triad(real *a, const real *b, const real *c, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) a[i] = b[i] + (real)0.5 * c[i];
}

/* STREAM triad a = b + s c over 3 x 64 MiB with the rank's threads: bytes moved per second. */
static double triad_bw(int reps) {
    size_t n = (size_t)16 << 20;
    real *a = dev_alloc(n), *b = dev_alloc(n), *c = dev_alloc(n);
    for (size_t i = 0; i < n; i++) { b[i] = 1; c[i] = 2; a[i] = 0; }
    double t;
    TIMED(reps, triad(a, b, c, n), t);
    double bw = 3.0 * n * sizeof(real) / t;
    dev_free(a); dev_free(b); dev_free(c);
    return bw;
}

/* Median seconds of an empty parallel loop: the fixed cost of one kernel. */
static double kernel_overhead(int reps) {
    double t[64];
    int k = 0;
    volatile real sink = 0;
    real x[64] = {0};
    for (int r = 0; r < 64 && r <= reps * 8; r++) {
        double t0 = now_s();
#pragma omp parallel for schedule(static)
        for (int i = 0; i < 64; i++) x[i] += 1;
        t[k++] = now_s() - t0;
    }
    sink = x[0];
    (void)sink;
    return median(t, k);
}

/* Seconds of myriad's attention forward + backward for b sequences of T tokens and H heads. */
static double time_attention(int b, int T, int H, int hd, int reps) {
    size_t qkv = (size_t)b * T * 3 * H * hd, att = (size_t)b * H * T * T, y = (size_t)b * T * H * hd;
    real *q = dev_alloc(qkv), *dq = dev_alloc(qkv), *A = dev_alloc(att), *o = dev_alloc(y), *dout = dev_alloc(y);
    for (size_t i = 0; i < qkv; i++) q[i] = (real)((i % 97) * 0.001);
    for (size_t i = 0; i < y; i++) dout[i] = (real)((i % 89) * 0.001);
    double t;
    TIMED(reps,
          (attention_forward((act *)o, A, (const act *)q, b, T, H, H, hd),
           attention_backward((act *)dq, (const act *)dout, (const act *)q, (const act *)o, A, b, T, H, H, hd)),
          t);
    dev_free(q); dev_free(dq); dev_free(A); dev_free(o); dev_free(dout);
    return t;
}

/* The buffers of one cp rank's ring attention (time_ring_attention). */
typedef struct {
    int b, T, N, H, hd, S;
    const act *qkv, *kv, *dout;
    real *out, *lse, *delta, *dq, *dkv, *neg_inf;
} RingBench;

/* Block pair (local chunk a = global chunk qc, key chunk c) of a RingBench; 0 when skipped. */
static int ring_bench_pair(const RingBench *r, int a, int c, AttnBlock *blk) {
    int qc = a ? 2 * r->N - 1 : 0, S = r->S, H = r->H, hd = r->hd, QKV = 3 * H * hd, W = 2 * H * hd, Y = H * hd;
    if (c > qc) return 0;
    *blk = (AttnBlock){r->b, S, S, H, H, hd, c == qc, QKV, W, Y, (size_t)2 * S * QKV, (size_t)r->T * W,
                       (size_t)2 * S * Y, (size_t)H * 2 * S, (size_t)2 * S, NULL, 0, 0};
    return 1;
}

/* One forward + backward of the rank's blocks, in the ring's order of work. */
static void ring_bench_pass(const RingBench *r) {
    int S = r->S, H = r->H, hd = r->hd, QKV = 3 * H * hd, W = 2 * H * hd, Y = H * hd;
    AttnBlock blk;
    /* each forward starts from no keys seen, as the trainer's (-inf copied in) */
    dev_to_dev(r->lse, r->neg_inf, (size_t)r->b * H * 2 * S * sizeof(real));
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 2 * r->N; c++)
            if (ring_bench_pair(r, a, c, &blk))
                attention_block_forward(r->out + (size_t)a * S * Y, r->lse + (size_t)a * S, act_at(r->qkv, (size_t)a * S * QKV),
                                        act_at(r->kv, (size_t)c * S * W), act_at(r->kv, (size_t)c * S * W + Y), &blk);
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 2 * r->N; c++)
            if (ring_bench_pair(r, a, c, &blk))
                attention_block_backward(r->dq + (size_t)a * S * Y, r->dkv + (size_t)c * S * W,
                                         r->dkv + (size_t)c * S * W + Y, act_at(r->dout, (size_t)a * S * Y),
                                         act_at(r->qkv, (size_t)a * S * QKV), act_at(r->kv, (size_t)c * S * W),
                                         act_at(r->kv, (size_t)c * S * W + Y), r->lse + (size_t)a * S,
                                         r->delta + (size_t)a * S, &blk);
}

/* Seconds of the attention one cp rank of N computes for b sequences of T tokens (ring attention,
 * src/model/ring_attention.c): rank 0's local chunks 0 and 2N-1 (every rank has the same causal
 * work) against each chunk c of the sequence it meets in the ring: the same chunk causal, an
 * earlier one full, a later one skipped; forward folds each block into the running output and
 * log-sum-exp, backward runs every pair again into dQ and the dK/dV accumulators. MHA (the
 * calibrated shapes' heads); the exchanges are the MPI figures' part. */
static double time_ring_attention(int b, int T, int N, int H, int hd, int reps) {
    int S = T / (2 * N), QKV = 3 * H * hd, W = 2 * H * hd, Y = H * hd;
    size_t rows = (size_t)b * 2 * S, L = (size_t)b * H * 2 * S, kvn = (size_t)b * T * W;
    /* fp32 buffers written in place, as time_attention's (calibrate runs the CPU fp32 backend) */
    real *qkv = dev_alloc(rows * QKV), *kv = dev_alloc(kvn), *dout = dev_alloc(rows * Y);
    RingBench r = {b, T, N, H, hd, S, (const act *)qkv, (const act *)kv, (const act *)dout, dev_alloc(rows * Y),
                   dev_alloc(L), dev_alloc(L), dev_alloc(rows * Y), dev_alloc(kvn), dev_alloc(L)};
    for (size_t i = 0; i < rows * QKV; i++) qkv[i] = (real)((i % 97) * 0.001);
    for (size_t i = 0; i < kvn; i++) kv[i] = (real)((i % 83) * 0.001);
    for (size_t i = 0; i < rows * Y; i++) dout[i] = (real)((i % 89) * 0.001);
    for (size_t i = 0; i < L; i++) r.neg_inf[i] = -INFINITY, r.delta[i] = 0;
    double t;
    TIMED(reps, ring_bench_pass(&r), t);
    dev_free(qkv); dev_free(kv); dev_free(dout);
    dev_free(r.out); dev_free(r.lse); dev_free(r.delta); dev_free(r.dq); dev_free(r.dkv); dev_free(r.neg_inf);
    return t;
}

/* Nanoseconds per logit of myriad's fused softmax cross-entropy (loss and gradient in one pass, as
 * myriad train runs it) on N rows of V logits. On a CPU its exponentials, not its bytes, set the
 * pace (~6x the memory-bound estimate on the development machine), so the simulator takes this
 * figure instead (ce_ns_per_logit). */
static double time_cross_entropy(int N, int V, int reps) {
    act *logits = dev_alloc_act((size_t)N * V);
    real *losses = dev_alloc((size_t)N);
    int32_t *targets = malloc((size_t)N * sizeof *targets);
    real *init = filled((size_t)N * V, 3);
    host_to_dev(logits, init, (size_t)N * V * act_size()); /* calibrate runs fp32: act is real */
    for (int i = 0; i < N; i++) targets[i] = (int32_t)((i * 37) % V);
    double t;
    /* the gradient overwrites the logits: later calls see small values, the same work */
    TIMED(reps, cross_entropy_forward_backward(logits, losses, targets, N, V, V, 1, 1.0), t);
    dev_free(logits); dev_free(losses); dev_free(init); free(targets);
    return t * 1e9 / ((double)N * V);
}

/* Median seconds of a collective, the slowest rank's (max over the world): kind 0 an all-reduce
 * within `grp` (every group at once), kind 1 send/recv between world ranks (0,1), (2,3), ... */
static double time_coll(Comm *w, Comm *grp, int kind, size_t count, int reps, real *buf, real *out) {
    int me = comm_rank(w), np = comm_size(w);
    double t[32];
    int k = 0;
    for (int r = 0; r <= reps && k < 32; r++) {
        comm_barrier(w);
        double t0 = now_s();
        if (kind == 0) {
            if (comm_all_reduce(grp, buf, out, count, COMM_F32, COMM_SUM)) myr_die_last();
        } else { /* send/recv between pairs (0,1), (2,3), ... */
            int peer = me ^ 1;
            if (peer < np) {
                if (me & 1) { if (comm_recv(w, out, count, COMM_F32, peer) || comm_send(w, buf, count, COMM_F32, peer)) myr_die_last(); }
                else if (comm_send(w, buf, count, COMM_F32, peer) || comm_recv(w, out, count, COMM_F32, peer)) myr_die_last();
            }
        }
        float dt = (float)(now_s() - t0), worst;
        if (comm_all_reduce(w, &dt, &worst, 1, COMM_F32, COMM_MAX)) myr_die_last();
        if (r > 0) t[k++] = kind == 0 ? worst : worst / 2; /* a round trip is two transfers */
    }
    return median(t, k);
}

static void write_files(const Opts *o, double rows[][4], int nrows, double peak, double bw, double kus, double attn_eff, double ce_ns,
                        int np, double ar_alpha, double ar_bw, double p2p_alpha, double p2p_bw) {
    char path[1024];
    snprintf(path, sizeof path, "%s.hw.json", o->out);
    FILE *f = fopen(path, "w");
    if (!f) myr_die("cannot write %s", path);
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
    double ram_gib = (double)pages * psz / (1024.0 * 1024.0 * 1024.0) / np;
    fprintf(f, "{\n  \"name\": \"%s\",\n  \"peak_tflops\": {\"fp32\": %.6g, \"tf32\": 0, \"bf16\": %.6g, \"fp16\": 0, \"fp8\": 0},\n",
            o->name, peak / 1e12, peak / 1e12);
    fprintf(f, "  \"hbm_gib\": %.3g, \"hbm_tbps\": %.6g, \"hbm_eff\": 1.0,\n", ram_gib, bw / 1e12);
    fprintf(f, "  \"scaleup_gbps\": %.6g, \"nics\": 1, \"nic_gbps\": 0, \"tdp_w\": 0,\n", ar_bw > 0 ? ar_bw / 1e9 : 1.0);
    fprintf(f, "  \"sms\": %d, \"gemm_eff\": 1.0, \"attn_eff\": %.4f, \"kernel_us\": %.3f, \"ce_ns_per_logit\": %.4f, "
               "\"sustained\": 1.0,\n", o->threads, attn_eff, kus * 1e6, ce_ns);
    fprintf(f, "  \"gemm_table\": [\n");
    for (int i = 0; i < nrows; i++)
        fprintf(f, "    [%g, %g, %g, %.4g]%s\n", rows[i][0], rows[i][1], rows[i][2], rows[i][3], i + 1 < nrows ? "," : "");
    fprintf(f, "  ],\n  \"measured\": {\"ranks\": %d, \"threads_per_rank\": %d, \"load\": \"", np, o->threads);
    FILE *la = fopen("/proc/loadavg", "r");
    char l[64] = "";
    if (la) { if (fgets(l, sizeof l, la)) l[strcspn(l, "\n")] = 0; fclose(la); }
    fprintf(f, "%s\", \"triad_gbps\": %.4g, \"allreduce_alpha_us\": %.4g, \"allreduce_gbps\": %.4g, "
               "\"p2p_alpha_us\": %.4g, \"p2p_gbps\": %.4g},\n", l, bw / 1e9, ar_alpha * 1e6, ar_bw / 1e9, p2p_alpha * 1e6,
            p2p_bw / 1e9);
    fprintf(f, "  \"sources\": [\"myriad bench calibrate on %d rank(s) x %d thread(s): medians of %d runs (each "
               "window started on all ranks together and timed at the slowest rank), then over ranks; gemm_table in GFLOP/s (M, N, K as the simulator asks for them); peak = the best row\"]\n}\n",
            np, o->threads, o->reps);
    fclose(f);
    snprintf(path, sizeof path, "%s.cluster.json", o->out);
    f = fopen(path, "w");
    if (!f) myr_die("cannot write %s", path);
    /* one node of np ranks: the ranks' MPI transfers are the scale-up domain */
    fprintf(f, "{\n  \"name\": \"%s-mpi\",\n  \"gpu\": \"%s\",\n  \"gpus\": %d,\n  \"gpus_per_node\": %d,\n"
               "  \"scaleup_domain\": %d,\n  \"scaleup_gbps\": %.6g,\n  \"scaleup_latency_us\": %.4g,\n"
               "  \"scaleup_eff\": 1.0,\n  \"fabric\": \"infiniband\",\n  \"tiers\": [{\"name\": \"none\", \"radix\": 64}],\n"
               "  \"sources\": [\"myriad bench calibrate: MPI among %d ranks on this machine; bandwidth from the all-reduce of "
               "large messages within groups of %d ranks, all groups at once (ring formula, 2 (n-1)/n S per rank), "
               "latency from small ones\"]\n}\n",
            o->name, o->name, np, np, np, ar_bw > 0 ? ar_bw / 1e9 : 1.0, (ar_alpha > 0 ? ar_alpha : 1e-6) * 1e6, np,
            o->group ? o->group : np);
    fclose(f);
}

int bench_calibrate(int argc, char **argv) {
    Opts o = {0};
    o.layers = 4; o.hidden = 768; o.heads = 12; o.vocab = 50257; o.seq = 256; o.threads = 1; o.reps = 5; o.name = "cpu";
    o.cp = 1;
    o.tokens[0] = 1024; o.ntokens = 1; o.tps[0] = 1; o.ntps = 1;
    const Opt opt_rows[] = {
        OPT_CALL("--out", "PREFIX", &o.out, opt_out, "writes PREFIX.hw.json and PREFIX.cluster.json (required)"),
        OPT_STR("--name", "NAME", &o.name, "the GPU and cluster name in the files (default cpu)"),
        OPT_INT("--layers", "L", &o.layers, 1, 1 << 12, "layers of the replayed step (default 4; fewer if over 1 GiB)"),
        OPT_INT("--hidden", "C", &o.hidden, 1, 1 << 16, "model width of the GEMM shapes (default 768)"),
        OPT_INT("--heads", "H", &o.heads, 1, 1 << 12, "attention heads (default 12)"),
        OPT_INT("--ffn", "F", &o.ffn, 1, 1 << 20, "MLP width (default 4 x hidden)"),
        OPT_INT("--vocab", "V", &o.vocab, 1, 1 << 24, "vocabulary of the lm_head shapes (default 50257)"),
        OPT_INT("--seq", "T", &o.seq, 1, 1 << 20, "sequence length of the attention (default 256)"),
        OPT_INT("--cp", "N", &o.cp, 1, 1 << 10, "time ring attention's blocks of one of N cp ranks (default 1: whole)"),
        OPT_CALL("--tokens", "N[,N..]", &o, opt_tokens_list, "rows of the layer's GEMMs, one or more (default 1024)"),
        OPT_CALL("--tp", "P[,P..]", &o, opt_tp_list, "tensor-parallel shardings of the shapes (default 1)"),
        OPT_INT("--group", "G", &o.group, 2, 64, "ranks per all-reduce group, all groups at once (default all)"),
        OPT_INT("--threads", "t", &o.threads, 1, 1024, "compute threads per rank (default 1)"),
        OPT_INT("--reps", "R", &o.reps, 1, 31, "runs of each measurement; the median counts (default 5)"),
        OPT_POSITIVE("--window", "S", &o.window, 60, "seconds each timing repeats for (default 0.25)"),
        OPT_END};
    OptCommand cmd = {.name = "bench calibrate",
                      .usage = "usage: myriad bench calibrate --out PREFIX [options]\n"
                               "  Measures GEMM rates (the shapes of a GPT-2-style layer with N rows, sharded by each tp),\n"
                               "  attention, memory bandwidth and MPI collectives among the ranks it runs on; writes\n"
                               "  PREFIX.hw.json and PREFIX.cluster.json for myriad sim --gpu / --cluster. Run it under\n"
                               "  `myriad run -n R` with the ranks and --threads of the run to predict.",
                      .rows = opt_rows};
    opts_parse(&cmd, argc, argv);
    if (!o.out) myr_die("bench calibrate needs --out PREFIX (writes PREFIX.hw.json and PREFIX.cluster.json)");
    if (!o.ffn) o.ffn = 4 * o.hidden;
    if (o.window > 0) g_window = o.window;
    if (o.reps < 1 || o.reps > 31) myr_die("--reps expects 1 to 31");
    if (o.hidden % o.heads) myr_die("--hidden %d is not a multiple of --heads %d", o.hidden, o.heads);
    if (o.seq % (2 * o.cp))
        myr_die("--cp %d needs --seq divisible by 2 x cp = %d (ring attention's chunks); --seq is %d", o.cp, 2 * o.cp, o.seq);
    if (o.cp > 1 && !attention_block_supported(NULL, 0))
        myr_die("--cp: this backend has no blockwise (ring) attention kernels");
    if (o.ntokens * o.ntps * 3 * ROLES > MAXROWS)
        myr_die("--tokens x --tp asks for %d shapes of %d products; at most %d: run calibrate once per layout",
                o.ntokens * o.ntps, 3 * ROLES, MAXROWS / (3 * ROLES));
    CommOptions co = comm_default_options();
    if (comm_init(&argc, &argv, &co) < 0) myr_die_last();
    Comm *w = comm_world();
    int me = comm_rank(w), np = comm_size(w);
    if (np > 1) g_lockstep = w;
    if (o.group && (o.group > np || np % o.group))
        myr_die("--group %d does not divide the %d ranks: give a divisor of the rank count (or leave it out)", o.group, np);
    kernels_set_threads(o.threads);
    static double rows[MAXROWS][4];
    int n = 0;
    for (int ti = 0; ti < o.ntps; ti++)
        for (int ni = 0; ni < o.ntokens; ni++) n = replay_rows(&o, o.tokens[ni], o.tps[ti], rows, n);
    double peak = 0;
    for (int i = 0; i < n; i++) peak = fmax(peak, rows[i][3] * 1e9);
    /* attention at the first shape, as a fraction of the peak: causal forward 2 T^2 hd per head,
     * backward 2.5x (the simulator's convention); a cp rank's share is 1/N of it (--tokens are
     * then the rank's rows: T / N per sequence) */
    int hd = o.hidden / o.heads, local_seq = o.seq / o.cp;
    int bseq = o.tokens[0] / local_seq > 0 ? o.tokens[0] / local_seq : 1;
    double ta = o.cp > 1 ? time_ring_attention(bseq, o.seq, o.cp, o.heads, hd, o.reps)
                         : time_attention(bseq, o.seq, o.heads, hd, o.reps);
    double attn_flops = 3.5 * 4.0 * o.seq * (double)o.seq * hd * bseq * o.heads * 0.5 / o.cp;
    double attn_eff = fmin(1.0, attn_flops / ta / peak);
    double bw = triad_bw(o.reps), kus = kernel_overhead(o.reps);
    double ce_ns = time_cross_entropy(o.tokens[0], o.vocab, o.reps);
    /* the median over ranks of each figure */
    float mine[MAXROWS + 5], all[(MAXROWS + 5) * 64];
    int nv = n + 5;
    for (int i = 0; i < n; i++) mine[i] = (float)rows[i][3];
    mine[n] = (float)(peak / 1e9); mine[n + 1] = (float)attn_eff; mine[n + 2] = (float)(bw / 1e9); mine[n + 3] = (float)(kus * 1e6);
    mine[n + 4] = (float)ce_ns;
    if (np > 64) myr_die("bench calibrate: at most 64 ranks");
    if (comm_all_gather(w, mine, all, (size_t)nv, COMM_F32)) myr_die_last();
    double col[64];
    for (int i = 0; i < nv; i++) {
        for (int r = 0; r < np; r++) col[r] = all[(size_t)r * nv + i];
        mine[i] = (float)median(col, np);
    }
    for (int i = 0; i < n; i++) rows[i][3] = mine[i];
    peak = mine[n] * 1e9; attn_eff = mine[n + 1]; bw = mine[n + 2] * 1e9; kus = mine[n + 3] * 1e-6;
    ce_ns = mine[n + 4];
    double ar_alpha = 0, ar_bw = 0, p_alpha = 0, p_bw = 0;
    if (np > 1) {
        size_t small = 1024, large = (size_t)8 << 20; /* 4 KiB, 32 MiB of floats */
        real *buf = dev_alloc(large), *out = dev_alloc(large);
        for (size_t i = 0; i < large; i++) buf[i] = 1;
        /* the all-reduce within groups of --group consecutive ranks, all groups at once: the tp or
         * dp groups of the layout to predict (on a shared CPU, a 4-rank ring is not 2 pairs) */
        int gs = o.group > 0 ? o.group : np, lo = me / gs * gs, ranks[64];
        for (int i = 0; i < gs; i++) ranks[i] = lo + i;
        Comm *grp = w;
        if (gs < np && comm_group_from_ranks(w, ranks, gs, "calibrate", &grp)) myr_die_last();
        double ts = time_coll(w, grp, 0, small, o.reps, buf, out), tl = time_coll(w, grp, 0, large, o.reps, buf, out);
        if (grp != w) comm_group_free(grp);
        /* ring all-reduce: 2 (n-1) alpha + 2 (n-1)/n S / B */
        ar_alpha = ts / (2.0 * (gs - 1));
        ar_bw = 2.0 * (gs - 1) / gs * large * sizeof(real) / fmax(tl - ts, 1e-9);
        double ps = time_coll(w, w, 1, small, o.reps, buf, out), pl = time_coll(w, w, 1, large, o.reps, buf, out);
        p_alpha = ps;
        p_bw = large * sizeof(real) / fmax(pl - ps, 1e-9);
        dev_free(buf); dev_free(out);
    }
    if (me == 0) {
        write_files(&o, rows, n, peak, bw, kus, attn_eff, ce_ns, np, ar_alpha, ar_bw, p_alpha, p_bw);
        printf("calibrated %d rank(s) x %d thread(s): %d GEMM shapes, peak %.1f GFLOP/s, attention %.2f of peak, "
               "triad %.1f GB/s, kernel %.1f us, cross-entropy %.2f ns per logit", np, o.threads, n, peak / 1e9, attn_eff,
               bw / 1e9, kus * 1e6, ce_ns);
        if (np > 1) printf(", all-reduce %.1f us + %.2f GB/s, p2p %.1f us + %.2f GB/s", ar_alpha * 1e6, ar_bw / 1e9,
                           p_alpha * 1e6, p_bw / 1e9);
        printf("\nwrote %s.hw.json and %s.cluster.json\n", o.out, o.out);
    }
    if (comm_finalize() < 0) myr_die_last();
    return 0;
}
