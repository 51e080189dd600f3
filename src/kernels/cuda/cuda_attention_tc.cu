/* cuda_attention_tc.cu: causal grouped-query attention on the tensor cores (bf16 storage, head
 * size 64 or 128, sm_80 and newer; mma.sync m16n8k16 with fp32 accumulation, cuda_mma.cuh),
 * flash style: T x T is never stored.
 *
 * Forward: a block of 4 warps owns 64 query rows of one (batch, head); each warp 16 rows, its Q
 * fragments in registers. Key/value tiles of 64 rows pass through shared memory; per tile the
 * warp forms S = Q K^T, keeps a running max and sum per row (in log2 units: exp2 of scores
 * pre-multiplied by scale * log2 e), rescales its O accumulator, and adds P V with P rounded to
 * bf16 in registers (the score fragment of S is the A fragment of P V: no trip through memory).
 * The causal mask is applied only on the diagonal tile; blocks with the most tiles start first.
 * It writes O and each row's log-sum-exp (natural log) for the backward.
 *
 * Backward, deterministic (no atomics), given D = rowsum(dO * O) (cuda_attention.cu):
 *   dK, dV: a block owns 64 keys of one (batch, kv head); for every query head of the group and
 *     every query tile from the diagonal on, it recomputes P^T = exp(K Q^T - lse) and
 *     dP^T = V dO^T, forms dS^T = P^T (dP^T - D) and adds P^T dO to dV and dS^T Q to dK.
 *   dQ: a block owns 64 queries of one head; for every key tile up to the diagonal it recomputes
 *     P and dP = dO V^T and adds dS K to dQ.
 * Each output element is summed by one thread in a fixed order. The usual FlashAttention-2
 * backward folds dQ into the first kernel with floating-point atomics (fewer FLOPs, results that
 * vary run to run); this one spends two more tile products per tile pair to stay deterministic.
 * Tiles stream through two shared-memory buffers with cp.async: the next tile loads while this
 * one is multiplied. Shared-memory rows are padded by 16 bytes so ldmatrix reads hit 8 distinct
 * bank groups. */
#include "kernels/cuda/cuda_attention.cuh"
#include "kernels/cuda/cuda_mma.cuh"

enum { TC_THREADS = 128, BM = 64 }; /* 4 warps x 16 rows */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f

/* Starts copying ROWS rows of HD bf16 (row r at src + r * src_stride) into dst (rows of HD + 8),
 * 16 bytes per thread and step, asynchronously (cp.async: the caller commits, waits and syncs);
 * rows at or past `valid` become zeros. */
template <int HD, int ROWS>
__device__ __forceinline__ void tile_load(bf16 *dst, const bf16 *src, size_t src_stride, int valid) {
    constexpr int CH = HD / 8, LDS = HD + 8;
    for (int i = threadIdx.x; i < ROWS * CH; i += TC_THREADS) {
        int r = i / CH, c = i % CH;
        cp_async_16(dst + r * LDS + c * 8, r < valid ? src + (size_t)r * src_stride + c * 8 : src, r < valid);
    }
}

/* ldmatrix address patterns, for lane l (matrix i = l / 8 gets rows from lanes 8i..8i+7):
 * A 16x16 at (row0, col0): matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15) in a0..a3 order */
__device__ __forceinline__ const bf16 *a_frag_row(const bf16 *s, int lds, int row0, int col0, int lane) {
    return s + (row0 + (lane & 15)) * lds + col0 + (lane >> 4) * 8;
}
/* B for two n-tiles from a row-major [n][k] tile (the rows are the n index: keys of K for
 * S = Q K^T): b0, b1 of n-tile 0 (rows 0-7), then b0, b1 of n-tile 1 (rows 8-15) */
__device__ __forceinline__ const bf16 *b_frag_nk(const bf16 *s, int lds, int n0, int k0, int lane) {
    return s + (n0 + (lane & 7) + ((lane >> 4) << 3)) * lds + k0 + ((lane >> 3) & 1) * 8;
}
/* B for two n-tiles from a row-major [k][n] tile (rows are the k index: keys of V for P V),
 * read transposed: b0, b1 of n-tile 0 (cols 0-7), then of n-tile 1 (cols 8-15) */
__device__ __forceinline__ const bf16 *b_frag_kn(const bf16 *s, int lds, int k0, int n0, int lane) {
    return s + (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * lds + n0 + (lane >> 4) * 8;
}
/* the C fragments of n-tiles 2kk and 2kk+1 (16 x 16 of a row block) as the A fragment of k-slice kk */
__device__ __forceinline__ void c_to_a(uint32_t a[4], const float c0[4], const float c1[4]) {
    a[0] = pack_bf16(c0[0], c0[1]);
    a[1] = pack_bf16(c0[2], c0[3]);
    a[2] = pack_bf16(c1[0], c1[1]);
    a[3] = pack_bf16(c1[2], c1[3]);
}

template <int HD>
__global__ void __launch_bounds__(TC_THREADS)
    attn_fwd_tc(bf16 *out, float *lse, const bf16 *qkv, int T, int H, int KV, float scale_log2) {
    constexpr int LDS = HD + 8, KS = HD / 16, NT = HD / 8;
    MYR_DYNAMIC_SMEM(bf16, smem);
    bf16 *sQ = smem, *sKV = sQ + BM * LDS; /* then K, V of buffer 0, K, V of buffer 1 */
    const int ntiles = (T + BM - 1) / BM, qt = ntiles - 1 - blockIdx.x;
    const int bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int stride = (H + 2 * KV) * HD, q0 = qt * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int row0 = q0 + warp * 16 + gq; /* this thread's rows: row0 and row0 + 8 */
    const bf16 *base = qkv + (size_t)b * T * stride;
    /* key/value tile kt goes to buffer kt & 1 while the other is in use */
    auto issue = [&](int kt) {
        bf16 *k = sKV + (kt & 1) * 2 * BM * LDS;
        tile_load<HD, BM>(k, base + (size_t)kt * BM * stride + (H + g) * HD, stride, T - kt * BM);
        tile_load<HD, BM>(k + BM * LDS, base + (size_t)kt * BM * stride + (H + KV + g) * HD, stride, T - kt * BM);
    };
    tile_load<HD, BM>(sQ, base + (size_t)q0 * stride + h * HD, stride, T - q0);
    issue(0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++) ldsm_x4(qf[ks], a_frag_row(sQ, LDS, warp * 16, ks * 16, lane));

    float o[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
    float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.0f, 0.0f};

    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * BM;
        if (kt < qt) issue(kt + 1);
        cp_async_commit();
        cp_async_wait<1>(); /* tile kt has landed (the next may still be in flight) */
        __syncthreads();
        const bf16 *sK = sKV + (kt & 1) * 2 * BM * LDS, *sV = sK + BM * LDS;
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int np = 0; np < 4; np++) {
                uint32_t kf[4];
                ldsm_x4(kf, b_frag_nk(sK, LDS, np * 16, ks * 16, lane));
                mma_bf16_x2(s[2 * np], s[2 * np + 1], qf[ks], kf);
            }
        const bool diagonal = kt == qt;
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float x = s[j][e] * scale_log2;
                if (diagonal && k0 + 8 * j + 2 * tq + (e & 1) > row0 + (e >> 1) * 8) x = -INFINITY;
                s[j][e] = x;
            }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 8; j++) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float mnew = fmaxf(mrow[r], mx); /* finite: key 0 is visible to every row */
            const float alpha = exp2f(mrow[r] - mnew);
            mrow[r] = mnew;
            lrow[r] *= alpha;
#pragma unroll
            for (int j = 0; j < NT; j++) o[j][2 * r] *= alpha, o[j][2 * r + 1] *= alpha;
#pragma unroll
            for (int j = 0; j < 8; j++) {
                float p0 = exp2f(s[j][2 * r] - mnew), p1 = exp2f(s[j][2 * r + 1] - mnew);
                s[j][2 * r] = p0;
                s[j][2 * r + 1] = p1;
                lrow[r] += p0 + p1;
            }
        }
#pragma unroll
        for (int kk = 0; kk < 4; kk++) {
            uint32_t pa[4];
            c_to_a(pa, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int jn = 0; jn < NT; jn += 2) {
                uint32_t vf[4];
                ldsm_x4_trans(vf, b_frag_kn(sV, LDS, kk * 16, jn * 8, lane));
                mma_bf16_x2(o[jn], o[jn + 1], pa, vf);
            }
        }
        __syncthreads(); /* every warp is done with this buffer before it is refilled */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float l = lrow[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        const int row = row0 + 8 * r;
        if (row >= T) continue;
        const float inv = 1.0f / l;
        bf16 *y = out + ((size_t)b * T + row) * (H * HD) + h * HD + 2 * tq;
#pragma unroll
        for (int jn = 0; jn < NT; jn++)
            *reinterpret_cast<uint32_t *>(y + jn * 8) = pack_bf16(o[jn][2 * r] * inv, o[jn][2 * r + 1] * inv);
        if (tq == 0) lse[(size_t)bh * T + row] = (mrow[r] + log2f(l)) * LN2;
    }
}

template <int HD, int BN>
__global__ void __launch_bounds__(TC_THREADS)
    attn_bwd_dq_tc(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse, const float *Dg, int T, int H,
                   int KV, float scale, float scale_log2) {
    constexpr int LDS = HD + 8, KS = HD / 16, NT = HD / 8, SN = BN / 8;
    MYR_DYNAMIC_SMEM(bf16, smem);
    bf16 *sQ = smem, *sdO = sQ + BM * LDS, *sKV = sdO + BM * LDS; /* K, V of buffer 0, then of buffer 1 */
    const int ntiles = (T + BM - 1) / BM, qt = ntiles - 1 - blockIdx.x;
    const int bh = blockIdx.y, b = bh / H, h = bh % H, g = h / (H / KV);
    const int stride = (H + 2 * KV) * HD, C = H * HD, q0 = qt * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int row0 = q0 + warp * 16 + gq;
    const bf16 *base = qkv + (size_t)b * T * stride;
    auto issue = [&](int i) { /* key/value tile i (BN rows from i * BN) into buffer i & 1 */
        bf16 *k = sKV + (i & 1) * 2 * BN * LDS;
        tile_load<HD, BN>(k, base + (size_t)i * BN * stride + (H + g) * HD, stride, T - i * BN);
        tile_load<HD, BN>(k + BN * LDS, base + (size_t)i * BN * stride + (H + KV + g) * HD, stride, T - i * BN);
    };
    tile_load<HD, BM>(sQ, base + (size_t)q0 * stride + h * HD, stride, T - q0);
    tile_load<HD, BM>(sdO, dout + ((size_t)b * T + q0) * C + h * HD, C, T - q0);
    issue(0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    uint32_t qf[KS][4], df[KS][4];
#pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        ldsm_x4(qf[ks], a_frag_row(sQ, LDS, warp * 16, ks * 16, lane));
        ldsm_x4(df[ks], a_frag_row(sdO, LDS, warp * 16, ks * 16, lane));
    }
    float lse2[2], Dr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int row = row0 + 8 * r;
        lse2[r] = row < T ? lse[(size_t)bh * T + row] * LOG2E : INFINITY; /* rows past the end: P = 0 */
        Dr[r] = row < T ? Dg[(size_t)bh * T + row] : 0.0f;
    }
    float dq[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++) dq[j][0] = dq[j][1] = dq[j][2] = dq[j][3] = 0.0f;
    const int kend = q0 + BM < T ? q0 + BM : T; /* keys [0, kend) are visible to some row */
    const int ntile_k = (kend + BN - 1) / BN;
    for (int i = 0; i < ntile_k; i++) {
        const int k0 = i * BN;
        if (i + 1 < ntile_k) issue(i + 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16 *sK = sKV + (i & 1) * 2 * BN * LDS, *sV = sK + BN * LDS;
        float s[SN][4], dp[SN][4];
#pragma unroll
        for (int j = 0; j < SN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) s[j][e] = dp[j][e] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KS; ks++)
#pragma unroll
            for (int np = 0; np < SN / 2; np++) {
                uint32_t kf[4], vf[4];
                ldsm_x4(kf, b_frag_nk(sK, LDS, np * 16, ks * 16, lane));
                mma_bf16_x2(s[2 * np], s[2 * np + 1], qf[ks], kf);
                ldsm_x4(vf, b_frag_nk(sV, LDS, np * 16, ks * 16, lane)); /* dP = dO V^T */
                mma_bf16_x2(dp[2 * np], dp[2 * np + 1], df[ks], vf);
            }
        const bool diagonal = k0 + BN > q0;
#pragma unroll
        for (int j = 0; j < SN; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                int r = e >> 1;
                float p = exp2f(s[j][e] * scale_log2 - lse2[r]);
                if (diagonal && k0 + 8 * j + 2 * tq + (e & 1) > row0 + 8 * r) p = 0.0f;
                s[j][e] = p * (dp[j][e] - Dr[r]); /* dS */
            }
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            uint32_t a[4];
            c_to_a(a, s[2 * kk], s[2 * kk + 1]);
#pragma unroll
            for (int jn = 0; jn < NT; jn += 2) {
                uint32_t kf[4];
                ldsm_x4_trans(kf, b_frag_kn(sK, LDS, kk * 16, jn * 8, lane)); /* dQ += dS K */
                mma_bf16_x2(dq[jn], dq[jn + 1], a, kf);
            }
        }
        __syncthreads(); /* the buffer is refilled next */
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = row0 + 8 * r;
        if (row >= T) continue;
        bf16 *dst = dqkv + ((size_t)b * T + row) * stride + h * HD + 2 * tq;
#pragma unroll
        for (int jn = 0; jn < NT; jn++)
            *reinterpret_cast<uint32_t *>(dst + jn * 8) = pack_bf16(dq[jn][2 * r] * scale, dq[jn][2 * r + 1] * scale);
    }
}

template <int HD, int BQ>
__global__ void __launch_bounds__(TC_THREADS)
    attn_bwd_dkv_tc(bf16 *dqkv, const bf16 *dout, const bf16 *qkv, const float *lse, const float *Dg, int T, int H,
                    int KV, float scale, float scale_log2) {
    constexpr int LDS = HD + 8, KS = HD / 16, NT = HD / 8, QN = BQ / 8;
    MYR_DYNAMIC_SMEM(bf16, smem);
    /* K, V; then per buffer (2): Q, dO (BQ rows each); then per buffer: lse (log2 units), D */
    bf16 *sK = smem, *sV = sK + BM * LDS, *sQD = sV + BM * LDS;
    float *sLD = reinterpret_cast<float *>(sQD + 4 * BQ * LDS);
    const int kt = blockIdx.x, bg = blockIdx.y, b = bg / KV, g = bg % KV, group = H / KV;
    const int stride = (H + 2 * KV) * HD, C = H * HD, k0 = kt * BM;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int key0 = k0 + warp * 16 + gq; /* this thread's keys: key0 and key0 + 8 */
    const bf16 *base = qkv + (size_t)b * T * stride;
    /* iteration i: query head g * group + i / nq, queries from k0 + (i % nq) * BQ (queries before
     * k0 see none of these keys) */
    const int nq = (T - k0 + BQ - 1) / BQ, iters = group * nq;
    auto issue = [&](int i) {
        const int h = g * group + i / nq, q0 = k0 + (i % nq) * BQ;
        const size_t bh = (size_t)b * H + h;
        bf16 *q = sQD + (i & 1) * 2 * BQ * LDS;
        float *l = sLD + (i & 1) * 2 * BQ;
        tile_load<HD, BQ>(q, base + (size_t)q0 * stride + h * HD, stride, T - q0);
        tile_load<HD, BQ>(q + BQ * LDS, dout + ((size_t)b * T + q0) * C + h * HD, C, T - q0);
        for (int j = threadIdx.x; j < BQ; j += TC_THREADS) {
            int t = q0 + j;
            l[j] = t < T ? lse[bh * T + t] * LOG2E : INFINITY; /* queries past the end: P = 0 */
            l[BQ + j] = t < T ? Dg[bh * T + t] : 0.0f;
        }
    };
    tile_load<HD, BM>(sK, base + (size_t)k0 * stride + (H + g) * HD, stride, T - k0);
    tile_load<HD, BM>(sV, base + (size_t)k0 * stride + (H + KV + g) * HD, stride, T - k0);
    issue(0);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    float dk[NT][4], dv[NT][4];
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[j][e] = dv[j][e] = 0.0f;

    for (int i = 0; i < iters; i++) {
        {
            const int q0 = k0 + (i % nq) * BQ;
            if (i + 1 < iters) issue(i + 1);
            cp_async_commit();
            cp_async_wait<1>();
            __syncthreads();
            const bf16 *sQ = sQD + (i & 1) * 2 * BQ * LDS, *sdO = sQ + BQ * LDS;
            const float *sL = sLD + (i & 1) * 2 * BQ, *sD = sL + BQ;
            float st[QN][4], dpt[QN][4]; /* S^T and dP^T: 16 keys x BQ queries per warp */
#pragma unroll
            for (int j = 0; j < QN; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) st[j][e] = dpt[j][e] = 0.0f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                uint32_t ka[4], va[4];
                ldsm_x4(ka, a_frag_row(sK, LDS, warp * 16, ks * 16, lane));
                ldsm_x4(va, a_frag_row(sV, LDS, warp * 16, ks * 16, lane));
#pragma unroll
                for (int np = 0; np < QN / 2; np++) {
                    uint32_t qb[4], ob[4];
                    ldsm_x4(qb, b_frag_nk(sQ, LDS, np * 16, ks * 16, lane));
                    mma_bf16_x2(st[2 * np], st[2 * np + 1], ka, qb);
                    ldsm_x4(ob, b_frag_nk(sdO, LDS, np * 16, ks * 16, lane));
                    mma_bf16_x2(dpt[2 * np], dpt[2 * np + 1], va, ob);
                }
            }
            const bool diagonal = q0 < k0 + BM;
#pragma unroll
            for (int j = 0; j < QN; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int ql = 8 * j + 2 * tq + (e & 1);
                    float p = exp2f(st[j][e] * scale_log2 - sL[ql]);
                    if (diagonal && q0 + ql < key0 + 8 * (e >> 1)) p = 0.0f;
                    st[j][e] = p;
                    dpt[j][e] = p * (dpt[j][e] - sD[ql]); /* dS^T */
                }
#pragma unroll
            for (int kk = 0; kk < BQ / 16; kk++) {
                uint32_t pa[4], sa[4];
                c_to_a(pa, st[2 * kk], st[2 * kk + 1]);
                c_to_a(sa, dpt[2 * kk], dpt[2 * kk + 1]);
#pragma unroll
                for (int jn = 0; jn < NT; jn += 2) {
                    uint32_t ob[4], qb[4];
                    ldsm_x4_trans(ob, b_frag_kn(sdO, LDS, kk * 16, jn * 8, lane)); /* dV += P^T dO */
                    mma_bf16_x2(dv[jn], dv[jn + 1], pa, ob);
                    ldsm_x4_trans(qb, b_frag_kn(sQ, LDS, kk * 16, jn * 8, lane)); /* dK += dS^T Q */
                    mma_bf16_x2(dk[jn], dk[jn + 1], sa, qb);
                }
            }
            __syncthreads(); /* the buffer is refilled next */
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int key = key0 + 8 * r;
        if (key >= T) continue;
        bf16 *dkd = dqkv + ((size_t)b * T + key) * stride + (H + g) * HD + 2 * tq;
        bf16 *dvd = dqkv + ((size_t)b * T + key) * stride + (H + KV + g) * HD + 2 * tq;
#pragma unroll
        for (int jn = 0; jn < NT; jn++) {
            *reinterpret_cast<uint32_t *>(dkd + jn * 8) = pack_bf16(dk[jn][2 * r] * scale, dk[jn][2 * r + 1] * scale);
            *reinterpret_cast<uint32_t *>(dvd + jn * 8) = pack_bf16(dv[jn][2 * r], dv[jn][2 * r + 1]);
        }
    }
}

/* ---- host side ---- */
int attention_tc_supports(int dt, int hd) { return dt == CUDA_BF16 && (hd == 64 || hd == 128) && cuda_cc_major() >= 8; }

template <typename K> static void allow_smem(K kernel, size_t bytes) {
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute((const void *)kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

template <int HD> static void forward(void *out, float *lse, const void *qkv, int B, int T, int H, int KV) {
    const size_t smem = (size_t)5 * BM * (HD + 8) * sizeof(bf16); /* Q, and K, V twice */
    allow_smem(attn_fwd_tc<HD>, smem);
    dim3 grid(ceil_div_u(T, BM), B * H);
    const float scale_log2 = LOG2E / sqrtf((float)HD);
    MYR_LAUNCH(attn_fwd_tc<HD>, grid, TC_THREADS, smem, (bf16 *)out, lse, (const bf16 *)qkv, T, H, KV, scale_log2);
}

template <int HD, int BN, int BQ>
static void backward(void *dqkv, const void *dout, const void *qkv, const float *lse, const float *D, int B, int T,
                     int H, int KV) {
    const float scale = 1.0f / sqrtf((float)HD), scale_log2 = scale * LOG2E;
    const size_t smem_dq = (size_t)(2 * BM + 4 * BN) * (HD + 8) * sizeof(bf16); /* Q, dO, and K, V twice */
    const size_t smem_dkv = (size_t)(2 * BM + 4 * BQ) * (HD + 8) * sizeof(bf16) + 4 * BQ * sizeof(float);
    allow_smem(attn_bwd_dq_tc<HD, BN>, smem_dq);
    allow_smem(attn_bwd_dkv_tc<HD, BQ>, smem_dkv);
    dim3 gq(ceil_div_u(T, BM), B * H), gk(ceil_div_u(T, BM), B * KV);
    MYR_LAUNCH((attn_bwd_dkv_tc<HD, BQ>), gk, TC_THREADS, smem_dkv, (bf16 *)dqkv, (const bf16 *)dout,
               (const bf16 *)qkv, lse, D, T, H, KV, scale, scale_log2);
    MYR_LAUNCH((attn_bwd_dq_tc<HD, BN>), gq, TC_THREADS, smem_dq, (bf16 *)dqkv, (const bf16 *)dout, (const bf16 *)qkv,
               lse, D, T, H, KV, scale, scale_log2);
}

void attention_forward_tc(void *out, float *lse, const void *qkv, int B, int T, int H, int KV, int hd) {
    if (hd == 64) forward<64>(out, lse, qkv, B, T, H, KV);
    else forward<128>(out, lse, qkv, B, T, H, KV);
}

void attention_backward_tc(void *dqkv, const void *dout, const void *qkv, const float *lse, const float *D, int B,
                           int T, int H, int KV, int hd) {
    /* tiles sized so the accumulators fit the registers: hd 128 halves the tile the scores use */
    if (hd == 64) backward<64, 64, 64>(dqkv, dout, qkv, lse, D, B, T, H, KV);
    else backward<128, 32, 32>(dqkv, dout, qkv, lse, D, B, T, H, KV);
}
