/* cuda_attention.cu: causal grouped-query attention, flash style (the T x T matrix is never
 * stored: the forward keeps each row's log-sum-exp, the backward recomputes the probabilities),
 * with fp32 arithmetic on the CUDA cores: the kernels for fp32 mode, any head size up to 128, and
 * the reference the tensor-core kernels (cuda_attention_tc.cu) are checked against.
 *
 * A query (or key) row is owned by a group of TPR = ceil(hd / 32) threads, each holding 32 of its
 * dimensions in registers; dot products finish with a butterfly over the group. Key (or query)
 * rows are staged in shared memory in tiles of KT rows shared by the block. Every loop bound is
 * uniform across the block (masked positions contribute 0), so shuffles and barriers never
 * diverge.
 *
 * Backward, deterministic: D = rowsum(dO * O); one kernel gives dQ (query rows walk the keys up
 * to the diagonal), another dK and dV (key rows walk the queries from the diagonal, over every
 * query head of their kv head, in order). Each output is summed by one thread group in a fixed
 * order: no atomics. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_attention.cuh"
#include "kernels/cuda/cuda_common.cuh"

enum { THREADS = 128, KT = 32, KC = 8, DPT = 32, HD_MAX = 128 };

/* group-wide sum over the tpr lanes of one row (consecutive lanes; tpr is 1, 2 or 4) */
__device__ __forceinline__ float group_sum(float v, int tpr) {
    for (int o = tpr / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* the backward's two dot products of one row pair, each split over the row's tpr lanes:
 * *s = a . A and *p = b . B (A, B: rows of a staged tile, from dimension d0 on) */
__device__ __forceinline__ void row_dots2(float *s, float *p, const float (&a)[DPT], const float *A,
                                          const float (&b)[DPT], const float *B, int d0, int hd, int tpr) {
    float sdot = 0.0f, pdot = 0.0f;
#pragma unroll
    for (int d = 0; d < DPT; d++)
        if (d0 + d < hd) {
            sdot += a[d] * A[d0 + d];
            pdot += b[d] * B[d0 + d];
        }
    *s = group_sum(sdot, tpr);
    *p = group_sum(pdot, tpr);
}

/* loads `rows` rows of hd values (row r at src + r * stride) into tile[r * hd + d], zero past `valid` */
template <typename T>
__device__ __forceinline__ void stage_rows(float *tile, const T *src, size_t stride, int rows, int valid, int hd) {
    for (int i = threadIdx.x; i < rows * hd; i += blockDim.x) {
        int r = i / hd, d = i % hd;
        tile[i] = r < valid ? to_f32(src[(size_t)r * stride + d]) : 0.0f;
    }
}

template <typename T>
__global__ void __launch_bounds__(THREADS) attn_fwd_simple(int tpr, T *out, float *lse, const T *qkv, int T_, int H, int KV,
                                                           int hd, float scale) {
    MYR_SHARED(float[KT * HD_MAX], sk);
    MYR_SHARED(float[KT * HD_MAX], sv);
    const int rows_per_block = THREADS / tpr; /* tpr: threads per row, 1, 2 or 4 */
    int bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    int stride = (H + 2 * KV) * hd, C = H * hd;
    int q0 = blockIdx.x * rows_per_block, r = threadIdx.x / tpr, part = threadIdx.x % tpr;
    int t = q0 + r, d0 = part * DPT;
    int live = t < T_;
    const T *base = qkv + (size_t)b * T_ * stride;
    float q[DPT], o[DPT];
#pragma unroll
    for (int d = 0; d < DPT; d++) {
        q[d] = live && d0 + d < hd ? to_f32(base[(size_t)t * stride + h * hd + d0 + d]) : 0.0f;
        o[d] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;
    int last = (q0 + rows_per_block < T_ ? q0 + rows_per_block : T_) - 1; /* the block's last query */
    for (int k0 = 0; k0 <= last; k0 += KT) {
        int nk = T_ - k0 < KT ? T_ - k0 : KT;
        __syncthreads();
        stage_rows(sk, base + (size_t)k0 * stride + (H + g) * hd, stride, KT, nk, hd);
        stage_rows(sv, base + (size_t)k0 * stride + (H + KV + g) * hd, stride, KT, nk, hd);
        __syncthreads();
        /* KC keys at a time: their scores, one rescale of the running sums, their values */
#pragma unroll 1
        for (int j0 = 0; j0 < KT; j0 += KC) {
            float s[KC];
            float chunk_max = -INFINITY;
#pragma unroll
            for (int j = 0; j < KC; j++) {
                float dot = 0.0f;
#pragma unroll
                for (int d = 0; d < DPT; d++)
                    if (d0 + d < hd) dot += q[d] * sk[(j0 + j) * hd + d0 + d];
                dot = group_sum(dot, tpr) * scale;
                s[j] = live && k0 + j0 + j <= t ? dot : -INFINITY;
                chunk_max = fmaxf(chunk_max, s[j]);
            }
            float m_new = fmaxf(m, chunk_max);
            if (m_new == -INFINITY) continue; /* nothing visible yet (a row past the end) */
            float corr = expf(m - m_new);
            l *= corr;
#pragma unroll
            for (int d = 0; d < DPT; d++) o[d] *= corr;
#pragma unroll
            for (int j = 0; j < KC; j++) {
                float p = expf(s[j] - m_new);
                l += p;
#pragma unroll
                for (int d = 0; d < DPT; d++)
                    if (d0 + d < hd) o[d] += p * sv[(j0 + j) * hd + d0 + d];
            }
            m = m_new;
        }
    }
    if (!live) return;
    float inv = 1.0f / l;
    T *y = out + ((size_t)b * T_ + t) * C + h * hd + d0;
#pragma unroll
    for (int d = 0; d < DPT; d++)
        if (d0 + d < hd) y[d] = from_f32<T>(o[d] * inv);
    if (part == 0) lse[(size_t)bh * T_ + t] = m + logf(l);
}

/* D[b, h, t] = sum_d dO * O over the head's hd values: one warp per (row, head) */
template <typename T>
__global__ void attn_bwd_dot_kernel(float *D, const T *dout, const T *out, int B, int T_, int H, int hd) {
    size_t w = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (w >= (size_t)B * T_ * H) return;
    int h = (int)(w % H);
    size_t n = w / H; /* row b * T + t */
    const T *a = dout + n * H * hd + (size_t)h * hd, *o = out + n * H * hd + (size_t)h * hd;
    float s = 0;
    for (int d = lane; d < hd; d += 32) s += to_f32(a[d]) * to_f32(o[d]);
    s = warp_sum(s);
    int b = (int)(n / T_), t = (int)(n % T_);
    if (lane == 0) D[((size_t)b * H + h) * T_ + t] = s;
}

template <typename T>
__global__ void __launch_bounds__(THREADS) attn_bwd_dq_simple(int tpr, T *dqkv, const T *dout, const T *qkv, const float *lse,
                                                              const float *Dg, int T_, int H, int KV, int hd,
                                                              float scale) {
    MYR_SHARED(float[KT * HD_MAX], sk);
    MYR_SHARED(float[KT * HD_MAX], sv);
    const int rows_per_block = THREADS / tpr; /* tpr: threads per row, 1, 2 or 4 */
    int bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    int stride = (H + 2 * KV) * hd, C = H * hd;
    int q0 = blockIdx.x * rows_per_block, r = threadIdx.x / tpr, part = threadIdx.x % tpr;
    int t = q0 + r, d0 = part * DPT;
    int live = t < T_;
    const T *base = qkv + (size_t)b * T_ * stride;
    float q[DPT], dy[DPT], dq[DPT];
#pragma unroll
    for (int d = 0; d < DPT; d++) {
        int ok = live && d0 + d < hd;
        q[d] = ok ? to_f32(base[(size_t)t * stride + h * hd + d0 + d]) : 0.0f;
        dy[d] = ok ? to_f32(dout[((size_t)b * T_ + t) * C + h * hd + d0 + d]) : 0.0f;
        dq[d] = 0.0f;
    }
    float row_lse = live ? lse[(size_t)bh * T_ + t] : 0.0f, Dr = live ? Dg[(size_t)bh * T_ + t] : 0.0f;
    int last = (q0 + rows_per_block < T_ ? q0 + rows_per_block : T_) - 1;
    for (int k0 = 0; k0 <= last; k0 += KT) {
        int nk = T_ - k0 < KT ? T_ - k0 : KT;
        __syncthreads();
        stage_rows(sk, base + (size_t)k0 * stride + (H + g) * hd, stride, KT, nk, hd);
        stage_rows(sv, base + (size_t)k0 * stride + (H + KV + g) * hd, stride, KT, nk, hd);
        __syncthreads();
#pragma unroll 1
        for (int j = 0; j < KT; j++) {
            float sdot, pdot;
            row_dots2(&sdot, &pdot, q, sk + j * hd, dy, sv + j * hd, d0, hd, tpr);
            float p = live && k0 + j <= t ? expf(sdot * scale - row_lse) : 0.0f;
            float ds = p * (pdot - Dr) * scale;
#pragma unroll
            for (int d = 0; d < DPT; d++)
                if (d0 + d < hd) dq[d] += ds * sk[j * hd + d0 + d];
        }
    }
    if (!live) return;
    T *dst = dqkv + ((size_t)b * T_ + t) * stride + h * hd + d0;
#pragma unroll
    for (int d = 0; d < DPT; d++)
        if (d0 + d < hd) dst[d] = from_f32<T>(dq[d]);
}

template <typename T>
__global__ void __launch_bounds__(THREADS) attn_bwd_dkv_simple(int tpr, T *dqkv, const T *dout, const T *qkv, const float *lse,
                                                               const float *Dg, int T_, int H, int KV, int hd,
                                                               float scale) {
    MYR_SHARED(float[KT * HD_MAX], sq);
    MYR_SHARED(float[KT * HD_MAX], sdy);
    MYR_SHARED(float[KT], slse);
    MYR_SHARED(float[KT], sD);
    const int rows_per_block = THREADS / tpr; /* tpr: threads per row, 1, 2 or 4 */
    int bg = blockIdx.y, b = bg / KV, g = bg % KV, group = H / KV;
    int stride = (H + 2 * KV) * hd, C = H * hd;
    int s0 = blockIdx.x * rows_per_block, r = threadIdx.x / tpr, part = threadIdx.x % tpr;
    int s = s0 + r, d0 = part * DPT; /* this group's key */
    int live = s < T_;
    const T *base = qkv + (size_t)b * T_ * stride;
    float k[DPT], v[DPT], dk[DPT], dv[DPT];
#pragma unroll
    for (int d = 0; d < DPT; d++) {
        int ok = live && d0 + d < hd;
        k[d] = ok ? to_f32(base[(size_t)s * stride + (H + g) * hd + d0 + d]) : 0.0f;
        v[d] = ok ? to_f32(base[(size_t)s * stride + (H + KV + g) * hd + d0 + d]) : 0.0f;
        dk[d] = dv[d] = 0.0f;
    }
    for (int h = g * group; h < (g + 1) * group; h++) {
        size_t bh = (size_t)b * H + h;
        for (int t0 = s0; t0 < T_; t0 += KT) { /* queries before the block's first key see none of its keys */
            int nq = T_ - t0 < KT ? T_ - t0 : KT;
            __syncthreads();
            stage_rows(sq, base + (size_t)t0 * stride + h * hd, stride, KT, nq, hd);
            stage_rows(sdy, dout + ((size_t)b * T_ + t0) * C + h * hd, C, KT, nq, hd);
            for (int i = threadIdx.x; i < KT; i += blockDim.x) {
                slse[i] = i < nq ? lse[bh * T_ + t0 + i] : 0.0f;
                sD[i] = i < nq ? Dg[bh * T_ + t0 + i] : 0.0f;
            }
            __syncthreads();
#pragma unroll 1
            for (int j = 0; j < KT; j++) {
                float sdot, pdot;
                row_dots2(&sdot, &pdot, k, sq + j * hd, v, sdy + j * hd, d0, hd, tpr);
                int tq = t0 + j;
                float p = live && j < nq && tq >= s ? expf(sdot * scale - slse[j]) : 0.0f;
                float ds = p * (pdot - sD[j]) * scale;
#pragma unroll
                for (int d = 0; d < DPT; d++)
                    if (d0 + d < hd) {
                        dv[d] += p * sdy[j * hd + d0 + d];
                        dk[d] += ds * sq[j * hd + d0 + d];
                    }
            }
        }
    }
    if (!live) return;
    T *dkd = dqkv + ((size_t)b * T_ + s) * stride + (H + g) * hd + d0;
    T *dvd = dqkv + ((size_t)b * T_ + s) * stride + (H + KV + g) * hd + d0;
#pragma unroll
    for (int d = 0; d < DPT; d++)
        if (d0 + d < hd) {
            dkd[d] = from_f32<T>(dk[d]);
            dvd[d] = from_f32<T>(dv[d]);
        }
}

static void check_shape(const char *what, int B, int T, int H, int KV, int hd) {
    if (hd < 1 || hd > HD_MAX || KV < 1 || H % KV)
        myr_die("%s: head size %d (at most %d) or heads %d / kv heads %d (a multiple) not supported", what, hd, HD_MAX,
                H, KV);
}

/* threads per row: ceil(hd / 32), a power of two */
static int threads_per_row(int hd) { return hd <= 32 ? 1 : hd <= 64 ? 2 : 4; }

void attention_forward_simple(void *out, float *lse, const void *qkv, int B, int T, int H, int KV, int hd, int dt) {
    check_shape("attention", B, T, H, KV, hd);
    float scale = 1.0f / sqrtf((float)hd);
    int tpr = threads_per_row(hd);
    dim3 grid(ceil_div_u(T, THREADS / tpr), B * H);
    DT_SWITCH(dt, TT,
              MYR_LAUNCH(attn_fwd_simple<TT>, grid, THREADS, 0, tpr, (TT *)out, lse, (const TT *)qkv, T, H, KV, hd,
                         scale));
}

float *attention_backward_rowdots(const void *dout, const void *out, int B, int T, int H, int hd, int dt) {
    size_t rows = (size_t)B * T * H;
    float *D = (float *)cuda_scratch(rows * sizeof(float));
    DT_SWITCH(dt, TT,
              MYR_LAUNCH(attn_bwd_dot_kernel<TT>, ceil_div_u(rows, 8), 256, 0, D, (const TT *)dout, (const TT *)out, B,
                         T, H, hd));
    return D;
}

void attention_backward_simple(void *dqkv, const void *dout, const void *qkv, const float *lse, const float *D, int B,
                               int T, int H, int KV, int hd, int dt) {
    check_shape("attention backward", B, T, H, KV, hd);
    float scale = 1.0f / sqrtf((float)hd);
    int tpr = threads_per_row(hd);
    dim3 gq(ceil_div_u(T, THREADS / tpr), B * H), gk(ceil_div_u(T, THREADS / tpr), B * KV);
    DT_SWITCH(dt, TT, {
        MYR_LAUNCH(attn_bwd_dq_simple<TT>, gq, THREADS, 0, tpr, (TT *)dqkv, (const TT *)dout, (const TT *)qkv, lse, D,
                   T, H, KV, hd, scale);
        MYR_LAUNCH(attn_bwd_dkv_simple<TT>, gk, THREADS, 0, tpr, (TT *)dqkv, (const TT *)dout, (const TT *)qkv, lse, D,
                   T, H, KV, hd, scale);
    });
}

/* ---- the entry points: choose the implementation ---- */
extern "C" int cuda_attention_impl_for(int dt, int hd) {
    int choice = cuda_attention_choice();
    int tc_ok = attention_tc_supports(dt, hd);
    if (choice == CUDA_ATTN_SIMPLE || !tc_ok) return CUDA_ATTN_SIMPLE;
    return CUDA_ATTN_TC; /* auto picks the tensor cores whenever they apply */
}

/* the tensor-core kernels move 16-byte pieces of rows (cp.async, vector stores) */
static int aligned16(const void *a, const void *b, const void *c, const void *d) {
    return (((uintptr_t)a | (uintptr_t)b | (uintptr_t)c | (uintptr_t)d) & 15) == 0;
}

extern "C" void cuda_attention_forward(void *out, float *lse, const void *qkv, int B, int T, int H, int KV, int hd,
                                       int dt) {
    if (B <= 0 || T <= 0) return;
    if (cuda_attention_impl_for(dt, hd) == CUDA_ATTN_TC && aligned16(out, qkv, NULL, NULL))
        attention_forward_tc(out, lse, qkv, B, T, H, KV, hd);
    else attention_forward_simple(out, lse, qkv, B, T, H, KV, hd, dt);
}

extern "C" void cuda_attention_backward(void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse,
                                        int B, int T, int H, int KV, int hd, int dt) {
    if (B <= 0 || T <= 0) return;
    const float *D = attention_backward_rowdots(dout, out, B, T, H, hd, dt);
    if (cuda_attention_impl_for(dt, hd) == CUDA_ATTN_TC && aligned16(dqkv, dout, qkv, out))
        attention_backward_tc(dqkv, dout, qkv, lse, D, B, T, H, KV, hd);
    else attention_backward_simple(dqkv, dout, qkv, lse, D, B, T, H, KV, hd, dt);
}
