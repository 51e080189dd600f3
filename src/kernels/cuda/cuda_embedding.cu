/* cuda_embedding.cu: token and position embeddings, their vocabulary-parallel forms, and the
 * deterministic backward. The token gradient is a scatter-add with repeated rows; instead of
 * atomics the rows are stably sorted by token (cuda_sort.cuh) and one block per distinct token
 * adds that token's rows to its gradient row in row order, starting from the value already
 * there — the same sequence of fp32 additions as the CPU backend, so the bits match it too. */
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/cuda_sort.cuh"

template <typename T>
__global__ void embedding_forward_kernel(T *out, const int32_t *tokens, const float *tok, const float *pos, int N,
                                         int T_, int C) {
    size_t total = (size_t)N * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i / C), c = (int)(i % C);
        float v = tok[(size_t)tokens[n] * C + c];
        if (pos) v += pos[(size_t)(n % T_) * C + c];
        out[i] = from_f32<T>(v);
    }
}

extern "C" void cuda_embedding_forward(void *out, int out_dt, const int32_t *tokens, const float *tok, const float *pos,
                                       int N, int T, int C) {
    size_t n = (size_t)N * C;
    if (n)
        DT_SWITCH(out_dt, TO,
                  MYR_LAUNCH(embedding_forward_kernel<TO>, grid_for(n, 256), 256, 0, (TO *)out, tokens, tok, pos, N, T, C));
}

/* keys for the sort: the token's row in this table, or `sentinel` for rows of other ranks */
__global__ void shard_keys_kernel(uint32_t *keys, const int32_t *tokens, int lo, int vocab_n, int N) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N; i += gridDim.x * blockDim.x) {
        int t = tokens[i] - lo;
        keys[i] = t >= 0 && t < vocab_n ? (uint32_t)t : (uint32_t)vocab_n;
    }
}

/* One block per sorted position; the block at the start of a segment of equal keys adds the
 * segment's rows, in row order, to table row `key` (keys >= limit are skipped). */
template <typename T>
__global__ void segment_add_rows_kernel(float *table, const T *dout, SortedRows s, int n, int C, uint32_t limit) {
    int i = blockIdx.x;
    if (!segment_start(s.keys, i) || s.keys[i] >= limit) return;
    int end = segment_end(s.keys, i, n);
    float *dst = table + (size_t)s.keys[i] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = dst[c];
        for (int j = i; j < end; j++) acc += to_f32(dout[(size_t)s.rows[j] * C + c]);
        dst[c] = acc;
    }
}

/* dpos[t] += dout rows with (row0 + n) % T == t, in row order (one thread per element of dpos) */
template <typename T>
__global__ void position_backward_kernel(float *dpos, const T *dout, int row0, int N, int T_, int C) {
    size_t total = (size_t)T_ * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int t = (int)(i / C), c = (int)(i % C);
        int first = ((t - row0) % T_ + T_) % T_;
        float acc = dpos[i];
        for (int n = first; n < N; n += T_) acc += to_f32(dout[(size_t)n * C + c]);
        dpos[i] = acc;
    }
}

static void token_backward(float *dtable, const void *dout, int dt, const int32_t *tokens, int lo, int vocab_n,
                           int N, int C) {
    if (N <= 0 || C <= 0) return;
    size_t key_bytes = ((size_t)N * 4 + 255) / 256 * 256;
    char *work = (char *)cuda_scratch(key_bytes + sort_work_bytes(N));
    uint32_t *keys = (uint32_t *)work;
    MYR_LAUNCH(shard_keys_kernel, grid_for(N, 256), 256, 0, keys, tokens, lo, vocab_n, N);
    SortedRows s = sort_rows_by_key(keys, N, work + key_bytes);
    DT_SWITCH(dt, T,
              MYR_LAUNCH(segment_add_rows_kernel<T>, N, 128, 0, dtable, (const T *)dout, s, N, C, (uint32_t)vocab_n));
}

extern "C" void cuda_position_backward(float *dpos, const void *dout, int dout_dt, int row0, int N, int T, int C) {
    size_t n = (size_t)T * C;
    if (n && N > 0)
        DT_SWITCH(dout_dt, TD,
                  MYR_LAUNCH(position_backward_kernel<TD>, grid_for(n, 256), 256, 0, dpos, (const TD *)dout, row0, N, T, C));
}

extern "C" void cuda_embedding_backward(float *dtok, float *dpos, const void *dout, int dout_dt, const int32_t *tokens,
                                        int N, int T, int C) {
    /* every token is in range: the whole table is this rank's (vocab_n = 2^31 - 1 bounds nothing) */
    token_backward(dtok, dout, dout_dt, tokens, 0, 0x7fffffff, N, C);
    if (dpos) cuda_position_backward(dpos, dout, dout_dt, 0, N, T, C);
}

template <typename T>
__global__ void embedding_shard_forward_kernel(T *out, const int32_t *tokens, const float *tab, int lo, int vocab_n,
                                               int N, int C) {
    size_t total = (size_t)N * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i / C), c = (int)(i % C), t = tokens[n] - lo;
        out[i] = from_f32<T>(t >= 0 && t < vocab_n ? tab[(size_t)t * C + c] : 0.0f);
    }
}

extern "C" void cuda_embedding_shard_forward(void *out, int out_dt, const int32_t *tokens, const float *tok_shard,
                                             int vocab_lo, int vocab_n, int N, int C) {
    size_t n = (size_t)N * C;
    if (n)
        DT_SWITCH(out_dt, TO,
                  MYR_LAUNCH(embedding_shard_forward_kernel<TO>, grid_for(n, 256), 256, 0, (TO *)out, tokens, tok_shard,
                             vocab_lo, vocab_n, N, C));
}

extern "C" void cuda_embedding_shard_backward(float *dtok_shard, const void *dout, int dout_dt, const int32_t *tokens,
                                              int vocab_lo, int vocab_n, int N, int C) {
    token_backward(dtok_shard, dout, dout_dt, tokens, vocab_lo, vocab_n, N, C);
}

template <typename T> __global__ void position_forward_add_kernel(T *out, const float *pos, int row0, int N, int T_, int C) {
    size_t total = (size_t)N * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        int n = (int)(i / C), c = (int)(i % C);
        out[i] = from_f32<T>(to_f32(out[i]) + pos[(size_t)((row0 + n) % T_) * C + c]);
    }
}

extern "C" void cuda_position_forward_add(void *out, int out_dt, const float *pos, int row0, int N, int T, int C) {
    size_t n = (size_t)N * C;
    if (n)
        DT_SWITCH(out_dt, TO,
                  MYR_LAUNCH(position_forward_add_kernel<TO>, grid_for(n, 256), 256, 0, (TO *)out, pos, row0, N, T, C));
}
