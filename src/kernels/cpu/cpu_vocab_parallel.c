/* cpu_vocab_parallel.c: the per-rank pieces of vocabulary-parallel embedding and
 * cross-entropy (tensor parallelism), plus position-embedding and bias helpers used when the
 * fused single-process kernels cannot be (the sums must happen between them). Row-parallel
 * loops; sums over columns in column order, so results do not depend on the thread count. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_reduce.h"
#include "kernels/cpu/cpu_kernels.h"

void cpu_embedding_shard_forward(real *out, const int32_t *tokens, const real *tok_shard, int vocab_lo, int vocab_n,
                             int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        int t = tokens[n] - vocab_lo;
        real *y = out + (size_t)n * C;
        if (t >= 0 && t < vocab_n) memcpy(y, tok_shard + (size_t)t * C, (size_t)C * sizeof(real));
        else memset(y, 0, (size_t)C * sizeof(real));
    }
}

void cpu_embedding_shard_backward(real *dtok_shard, const real *dout, const int32_t *tokens, int vocab_lo, int vocab_n,
                              int N, int C) {
    enum { COLS = 64 };
    int blocks = (C + COLS - 1) / COLS;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < blocks; blk++) {
        int c0 = blk * COLS, c1 = c0 + COLS < C ? c0 + COLS : C;
        for (int n = 0; n < N; n++) {
            int t = tokens[n] - vocab_lo;
            if (t < 0 || t >= vocab_n) continue;
            const real *dy = dout + (size_t)n * C;
            real *dt = dtok_shard + (size_t)t * C;
            for (int c = c0; c < c1; c++) dt[c] += dy[c];
        }
    }
}

void cpu_position_forward_add(real *out, const real *pos, int row0, int N, int T, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *y = out + (size_t)n * C;
        const real *p = pos + (size_t)((row0 + n) % T) * C;
#pragma omp simd
        for (int c = 0; c < C; c++) y[c] += p[c];
    }
}

void cpu_position_backward(real *dpos, const real *dout, int row0, int N, int T, int C) {
    /* rows sharing a position are added in row order; each position is one thread's */
#pragma omp parallel for schedule(static)
    for (int t = 0; t < T; t++) {
        real *dp = dpos + (size_t)t * C;
        int first = ((t - row0) % T + T) % T; /* first local row n with (row0 + n) % T == t */
        for (int n = first; n < N; n += T) {
            const real *dy = dout + (size_t)n * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dp[c] += dy[c];
        }
    }
}

void cpu_bias_add(real *out, const real *bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *y = out + (size_t)n * C;
#pragma omp simd
        for (int c = 0; c < C; c++) y[c] += bias[c];
    }
}

/* Rows are ld apart; columns [0, V) are this rank's tokens, [V, ld) padding (never read). */
void cpu_vocab_shard_row_max(const real *logits, int N, int V, int ld, double *max) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *z = logits + (size_t)n * ld;
        real m = -INFINITY;
        for (int v = 0; v < V; v++)
            if (z[v] > m) m = z[v];
        max[n] = m;
    }
}

void cpu_vocab_shard_row_sumexp(const real *logits, int N, int V, int ld, const double *max, double *sum) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        const real *z = logits + (size_t)n * ld;
        real m = (real)max[n];
        double s = 0;
        for (int v = 0; v < V; v++) s += exp((double)(z[v] - m));
        sum[n] = s;
    }
}

void cpu_vocab_shard_target_logit(const real *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld,
                                  double *out) {
    for (int n = 0; n < N; n++) {
        int t = targets[n] - vocab_lo;
        out[n] = t >= 0 && t < V ? (double)logits[(size_t)n * ld + t] : 0.0;
    }
}

void cpu_vocab_shard_grad(real *logits, const int32_t *targets, int vocab_lo, int N, int V, int ld, const double *max,
                          const double *sum, double scale) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++) {
        real *z = logits + (size_t)n * ld;
        real m = (real)max[n], inv = (real)(1.0 / sum[n]), s = (real)scale;
        for (int v = 0; v < V; v++) z[v] = R_EXP(z[v] - m) * inv * s;
        int t = targets[n] - vocab_lo;
        if (t >= 0 && t < V) z[t] -= s;
        for (int v = V; v < ld; v++) z[v] = 0;
    }
}

void cpu_bias_backward(real *dbias, const real *dout, int N, int C) { column_sums_accumulate(dbias, dout, N, C); }

double cpu_vocab_shard_losses(real *losses, const double *max, const double *sum, const double *target, int N) {
    double total = 0;
    for (int n = 0; n < N; n++) {
        double loss = log(sum[n]) - (target[n] - max[n]);
        losses[n] = (real)loss;
        total += (real)loss; /* as the fused kernel: sum the per-row losses as stored */
    }
    return total / N;
}
