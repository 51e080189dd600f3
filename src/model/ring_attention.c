/* ring_attention.c: causal attention over a sequence split across the context-parallel group.
 *
 * Layout (load balance, as Megatron-core): a sequence of T_g tokens is cut into 2P chunks; rank r
 * keeps chunks r and 2P-1-r, so every rank holds one early and one late chunk and does the same
 * causal work. Forward: the rank's K/V (the kv heads only, so GQA moves KV/H of the bytes) go
 * around the ring in P steps; at each step the block that arrived is sent on while this rank
 * folds it into its queries' running output with the online-softmax merge (per-block
 * log-sum-exp), each block pair masked by where its chunks lie: causal on the diagonal, full for
 * an earlier key chunk, skipped for a later one. Backward: the K/V go round again; beside them
 * travels the block's dK/dV accumulator, to which every rank adds its queries' share, and after P
 * hops each accumulator is back home, complete. dQ stays local. */
#include "model/ring_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/error.h"

struct RingScratch {
    int B, T, H, KV, hd;
    act *kv[2];      /* K/V blocks [B*T, 2 KV hd]: the one computed on, the one arriving */
    real *dkv[2];    /* their dK/dV accumulators (fp32) */
    real *out;       /* fp32 running output [B*T, H hd], then dQ */
    real *delta;     /* [B, H, T] */
    real *neg_inf;   /* [B, H, T] of -INFINITY: the empty running lse */
    act *pack;       /* [B*T, max(H hd, 2 KV hd)]: fp32 results rounded before unpacking into qkv rows */
    int32_t *lo;     /* [B*T] device: each row's document start (packed documents) */
};

/* the ring of this forward: the cp group, or one rank (packed documents without cp) */
static int ring_size(const Model *m) { return cp_splits(m) ? m->cp.size : 1; }
static int ring_rank(const Model *m) { return cp_splits(m) ? m->cp.rank : 0; }

int cp_splits(const Model *m) { return m->cp.size > 1 && !m->cp.whole; }
int ring_used(const Model *m) { return cp_splits(m) || m->doc_mask; }

int cp_chunk_pos0(const Model *m, int T, int a) { return cp_global_chunk(ring_size(m), ring_rank(m), a) * (T / 2); }

void ring_prepare(Model *m, const int32_t *x, int B, int T) {
    ContextParallel *cp = &m->cp;
    size_t n = (size_t)B * T;
    if (cp->pos_n < n) {
        free(cp->pos), free(cp->lo);
        cp->pos = malloc(n * sizeof(int32_t)), cp->lo = malloc(n * sizeof(int32_t));
        if (!cp->pos || !cp->lo) myr_die("out of memory for %zu positions", n);
        cp->pos_n = n;
    }
    int P = ring_size(m), S = T / 2, Tg = T * P;
    for (int b = 0; b < B; b++)
        for (int a = 0; a < 2; a++) {
            int g0 = cp_chunk_pos0(m, T, a), lo = 0;
            if (m->doc_mask) /* the latest document start at or before the chunk */
                for (int t = g0; t >= 0; t--)
                    if (x[(size_t)b * Tg + t] == m->doc_sep) { lo = t; break; }
            for (int i = 0; i < S; i++) {
                int g = g0 + i;
                if (m->doc_mask && x[(size_t)b * Tg + g] == m->doc_sep) lo = g;
                size_t j = (size_t)b * T + (size_t)a * S + i;
                cp->lo[j] = lo;
                cp->pos[j] = g - lo;
            }
        }
}

int cp_position_run(const Model *m, int j, int row1, int *pos0) {
    const int32_t *pos = m->cp.pos;
    int e = j + 1;
    while (e < row1 && pos[e] == pos[e - 1] + 1) e++;
    *pos0 = pos[j];
    return e - j;
}

const int32_t *cp_local_tokens(Model *m, const int32_t *x, int B, int T, int slot) {
    ContextParallel *cp = &m->cp;
    size_t n = (size_t)B * T;
    if (cp->host_n < n) {
        free(cp->host_tokens);
        cp->host_tokens = malloc(2 * n * sizeof(int32_t));
        if (!cp->host_tokens) myr_die("out of memory for %zu tokens", 2 * n);
        cp->host_n = n;
    }
    int32_t *dst = cp->host_tokens + (size_t)slot * cp->host_n;
    int S = T / 2, Tg = T * cp->size;
    for (int b = 0; b < B; b++)
        for (int a = 0; a < 2; a++)
            memcpy(dst + (size_t)b * T + (size_t)a * S, x + (size_t)b * Tg + (size_t)cp_global_chunk(cp->size, cp->rank, a) * S,
                   (size_t)S * sizeof(int32_t));
    return dst;
}

size_t ring_attention_scratch_bytes(int B, int T, int H, int KV, int hd) {
    size_t N = (size_t)B * T, W = (size_t)2 * KV * hd, Y = (size_t)H * hd, P = Y > W ? Y : W;
    return 2 * N * W * act_size() + 2 * N * W * sizeof(real) + N * Y * sizeof(real) + 2 * (size_t)B * H * T * sizeof(real) +
           N * P * act_size();
}

void ring_attention_free(Model *m) {
    struct RingScratch *s = m->cp.scratch;
    if (!s) return;
    for (int i = 0; i < 2; i++) dev_free(s->kv[i]), dev_free(s->dkv[i]);
    dev_free(s->out), dev_free(s->delta), dev_free(s->neg_inf), dev_free(s->pack), dev_free(s->lo);
    free(s);
    m->cp.scratch = NULL;
    free(m->cp.host_tokens), free(m->cp.pos), free(m->cp.lo);
    m->cp.host_tokens = m->cp.pos = m->cp.lo = NULL;
    m->cp.host_n = m->cp.pos_n = 0;
}

static struct RingScratch *scratch_for(Model *m, int B, int T, int H, int KV, int hd) {
    struct RingScratch *s = m->cp.scratch;
    if (s && s->B == B && s->T == T && s->H == H && s->KV == KV && s->hd == hd) return s;
    if (s) { /* keep the host tokens: only the device buffers change size */
        for (int i = 0; i < 2; i++) dev_free(s->kv[i]), dev_free(s->dkv[i]);
        dev_free(s->out), dev_free(s->delta), dev_free(s->neg_inf), dev_free(s->pack), dev_free(s->lo);
    } else {
        s = calloc(1, sizeof *s);
        m->cp.scratch = s;
    }
    size_t N = (size_t)B * T, W = (size_t)2 * KV * hd, Y = (size_t)H * hd, L = (size_t)B * H * T;
    memset(s, 0, sizeof *s);
    s->B = B, s->T = T, s->H = H, s->KV = KV, s->hd = hd;
    for (int i = 0; i < 2; i++) s->kv[i] = dev_alloc_act(N * W), s->dkv[i] = dev_alloc(N * W);
    s->out = dev_alloc(N * Y);
    s->delta = dev_alloc(L);
    s->neg_inf = dev_alloc(L);
    s->pack = dev_alloc_act(N * (Y > W ? Y : W));
    s->lo = dev_alloc_bytes(N * sizeof(int32_t));
    real *h = malloc(L * sizeof(real));
    for (size_t i = 0; i < L; i++) h[i] = -INFINITY;
    host_to_dev(s->neg_inf, h, L * sizeof(real));
    free(h);
    return s;
}

/* the block pair (my local query chunk a, key chunk c of the block that came from rank j) */
static int block_pair(const Model *m, int j, int a, int c, int B, int T, int H, int KV, int hd, AttnBlock *blk) {
    int P = ring_size(m), qc = cp_global_chunk(P, ring_rank(m), a), kc = cp_global_chunk(P, j, c);
    if (kc > qc) return 0; /* keys entirely after the queries: masked out */
    int QKV = (H + 2 * KV) * hd, W = 2 * KV * hd, Y = H * hd, S = T / 2;
    *blk = (AttnBlock){B, S, S, H, KV, hd, kc == qc, QKV, W, Y,
                       (size_t)T * QKV, (size_t)T * W, (size_t)T * Y, (size_t)H * T, (size_t)T, NULL, 0, 0};
    if (m->doc_mask) { /* the document masks follow the chunks: keys at kc's positions, rows' starts */
        blk->q_lo = m->cp.scratch->lo + (size_t)a * S;
        blk->lo_bs = (size_t)T;
        blk->k_pos0 = kc * S;
    }
    return 1;
}

/* k/v columns of the qkv rows packed into a block [N, 2 KV hd] */
static void pack_kv(act *dst, const act *qkv, int N, int H, int KV, int hd) {
    size_t A = act_size(), QKV = (size_t)(H + 2 * KV) * hd, W = (size_t)2 * KV * hd;
    dev_copy_rows(dst, W * A, act_at(qkv, (size_t)H * hd), QKV * A, W * A, N);
}

void ring_attention_forward(Model *m, act *out, real *lse, const act *qkv, int B, int T, int H, int KV, int hd) {
    struct RingScratch *s = scratch_for(m, B, T, H, KV, hd);
    ContextParallel *cp = &m->cp;
    int P = ring_size(m), me = ring_rank(m), N = B * T, S = T / 2;
    size_t W = (size_t)2 * KV * hd, Y = (size_t)H * hd, bytes = (size_t)N * W * act_size();
    if (m->doc_mask) host_to_dev(s->lo, cp->lo, (size_t)N * sizeof(int32_t));
    pack_kv(s->kv[0], qkv, N, H, KV, hd);
    dev_to_dev(lse, s->neg_inf, (size_t)B * H * T * sizeof(real));
    for (int step = 0; step < P; step++) {
        int cur = step & 1, j = (me - step + P) % P;
        if (step < P - 1) cp->ring_start(cp->ctx, 0, s->kv[cur], s->kv[!cur], bytes); /* overlaps the blocks below */
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 2; c++) {
                AttnBlock blk;
                if (!block_pair(m, j, a, c, B, T, H, KV, hd, &blk)) continue;
                const act *k = act_at(s->kv[cur], (size_t)c * S * W);
                attention_block_forward(s->out + (size_t)a * S * Y, lse + (size_t)a * S, act_at(qkv, (size_t)a * S * blk.q_rs),
                                        k, act_at(k, (size_t)KV * hd), &blk);
            }
        if (step < P - 1) cp->ring_wait(cp->ctx, 0);
    }
    act_from_f32(out, s->out, (size_t)N * Y);
}

void ring_attention_backward(Model *m, act *dqkv, const act *dout, const act *qkv, const act *out, const real *lse,
                             int B, int T, int H, int KV, int hd) {
    struct RingScratch *s = scratch_for(m, B, T, H, KV, hd);
    ContextParallel *cp = &m->cp;
    int P = ring_size(m), me = ring_rank(m), N = B * T, S = T / 2;
    if (m->doc_mask) host_to_dev(s->lo, cp->lo, (size_t)N * sizeof(int32_t));
    size_t A = act_size(), W = (size_t)2 * KV * hd, Y = (size_t)H * hd, QKV = (size_t)(H + 2 * KV) * hd;
    size_t kv_bytes = (size_t)N * W * A, dkv_bytes = (size_t)N * W * sizeof(real);
    AttnBlock whole = {B, T, T, H, KV, hd, 0, (int)QKV, (int)W, (int)Y,
                       (size_t)T * QKV, (size_t)T * W, (size_t)T * Y, (size_t)H * T, (size_t)T, NULL, 0, 0};
    attention_block_delta(s->delta, dout, out, &whole);
    pack_kv(s->kv[0], qkv, N, H, KV, hd);
    real *dq = s->out; /* the forward's fp32 output is not needed in backward */
    dev_zero(dq, (size_t)N * Y);
    dev_zero(s->dkv[0], (size_t)N * W);
    for (int step = 0; step < P; step++) {
        int cur = step & 1, j = (me - step + P) % P;
        if (step < P - 1) cp->ring_start(cp->ctx, 0, s->kv[cur], s->kv[!cur], kv_bytes);
        for (int a = 0; a < 2; a++)
            for (int c = 0; c < 2; c++) {
                AttnBlock blk;
                if (!block_pair(m, j, a, c, B, T, H, KV, hd, &blk)) continue;
                size_t ko = (size_t)c * S * W;
                const act *k = act_at(s->kv[cur], ko);
                attention_block_backward(dq + (size_t)a * S * Y, s->dkv[cur] + ko, s->dkv[cur] + ko + (size_t)KV * hd,
                                         act_at(dout, (size_t)a * S * Y), act_at(qkv, (size_t)a * S * QKV), k,
                                         act_at(k, (size_t)KV * hd), lse + (size_t)a * S, s->delta + (size_t)a * S, &blk);
            }
        if (step < P - 1) cp->ring_wait(cp->ctx, 0);
        /* the accumulator follows its block: after P hops it is home with every rank's share */
        if (P > 1) {
            cp->ring_start(cp->ctx, 1, s->dkv[cur], s->dkv[!cur], dkv_bytes);
            cp->ring_wait(cp->ctx, 1);
        }
    }
    const real *dkv = s->dkv[P > 1 ? P & 1 : 0];
    act_from_f32(s->pack, dq, (size_t)N * Y);
    dev_copy_rows(dqkv, QKV * A, s->pack, Y * A, Y * A, N);
    act_from_f32(s->pack, dkv, (size_t)N * W);
    dev_copy_rows(act_at(dqkv, Y), QKV * A, s->pack, W * A, W * A, N);
}
