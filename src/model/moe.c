/* moe.c: the mixture-of-experts block (see moe.h and docs/MOE.md).
 *
 * Routing is defined per sequence, so the single process and every layout route, drop and
 * balance the same tokens (context parallelism, which splits a sequence, gathers the sequence's
 * choices and router sums over the cp group first): capacity C = ceil(cf * T * k / E) per
 * (sequence, expert), choices considered slot-major (every token's first choice in position
 * order, then every second choice, ...), and the load-balancing loss E * sum_e f_e * P_e per
 * sequence, averaged over the sequences. This rank's kept assignments travel in one fixed order
 * (by expert, then token, then slot): the send buffer of the all-to-all; each expert's rank
 * receives them grouped by source rank and runs its experts over rows ordered by (source rank,
 * token), so results match the single process up to float summation order. */
#include "model/moe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"
#include "model/ring_attention.h"
#include "util/error.h"

struct MoeActs {
    int N, B, T;
    real *probs;    /* [N, E] softmax of the router logits (device) */
    int32_t *topk;  /* [N, k] (device) */
    real *gates;    /* [N, k] (device) */
    /* host copies for the routing decisions, which run on the host */
    real *probs_h, *gates_h;
    int32_t *topk_h;
    real *fsel;     /* [B, E] share of the sequence's choices that picked e (aux loss; host) */
    double aux_grad; /* d loss / d aux of one sequence's term: grad_scale * coef / B */
    /* this rank's kept assignments in send order (host, and device copies for the kernels) */
    int A;
    int32_t *tok, *tok_d;   /* [A] token row */
    int32_t *slot, *slot_d; /* [A] n * k + j */
    real *gate;     /* [A] (device) */
    int *send_rows, *recv_rows; /* [ep] */
    /* rows this rank's experts process, expert-major then source rank */
    int R;
    int32_t *perm, *perm_d; /* [R] received row of expert-major row r */
    int *ex_start, *ex_rows; /* [local experts] */
    act *xin, *fc, *fc_act, *yback; /* [R, C], [R, F1], [R, F], [A, C] */
    act *sfc, *sact; /* shared experts [N, F1s], [N, Fs] */
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void moe_acts_free(struct MoeActs *s) {
    if (!s) return;
    free(s->topk_h), free(s->probs_h), free(s->gates_h), free(s->fsel), free(s->tok), free(s->slot);
    free(s->send_rows), free(s->recv_rows), free(s->perm), free(s->ex_start), free(s->ex_rows);
    void *bufs[] = {s->probs, s->topk, s->gates, s->tok_d, s->slot_d, s->gate, s->perm_d,
                    s->xin,   s->fc,   s->fc_act, s->yback, s->sfc,    s->sact};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(bufs[i]);
    free(s);
}

void moe_stats_reset(Model *m) {
    MoeStats *st = &m->moe_stats;
    if (st->tokens) memset(st->tokens, 0, (size_t)m->cfg.layers * m->cfg.experts * sizeof(int64_t));
    st->dropped = st->assigned = st->forwards = 0;
    st->aux_sum = 0;
    st->a2a_bytes = st->a2a_s = st->a2a_wait_s = 0;
}

/* device buffers of at least one element (empty expert batches are common) */
static real *alloc(size_t n) { return dev_alloc(n ? n : 1); }
static act *alloc_act(size_t n) { return dev_alloc_act(n ? n : 1); }

/* A host array of n int32 copied to a new device buffer. */
static int32_t *to_device_i32(const int32_t *host, size_t n) {
    int32_t *d = dev_alloc_bytes((n ? n : 1) * sizeof(int32_t));
    host_to_dev(d, host, n * sizeof(int32_t));
    return d;
}

/* Rows to every rank of the ep group and back: send_rows[r] rows of `width` 32-bit words to rank
 * r (packed in rank order), recv_rows[r] from r; device buffers (token rows) or host (counts). */
static void exchange(Model *m, const void *send, const int *send_rows, void *recv, const int *recv_rows, size_t width,
                     int device) {
    int P = m->ep.size;
    if (P == 1) {
        size_t bytes = (size_t)send_rows[0] * width * 4;
        if (device) dev_to_dev(recv, send, bytes);
        else memcpy(recv, send, bytes);
        return;
    }
    size_t *sc = malloc((size_t)P * sizeof(size_t)), *rc = malloc((size_t)P * sizeof(size_t));
    double bytes = 0;
    for (int r = 0; r < P; r++) {
        sc[r] = (size_t)send_rows[r] * width;
        rc[r] = (size_t)recv_rows[r] * width;
        if (r != m->ep.rank) bytes += 4.0 * sc[r];
    }
    double t0 = now_s();
    if (m->ep.barrier) {
        m->ep.barrier(m->ep.ctx);
        double t1 = now_s();
        if (!m->moe_recomputing) m->moe_stats.a2a_wait_s += t1 - t0;
        t0 = t1;
    }
    m->ep.all_to_all_v(m->ep.ctx, send, sc, recv, rc, device);
    if (!m->moe_recomputing) {
        m->moe_stats.a2a_s += now_s() - t0;
        m->moe_stats.a2a_bytes += bytes;
    }
    free(sc);
    free(rc);
}

/* One MLP (an expert, or the shared experts) over n rows: inner size F on this rank. The output
 * (act, or fp32 when out_f32) bias is added by tensor-parallel rank 0 only, since the outputs are
 * summed over the group. */
static void mlp_forward(const Model *m, const act *x, int n, const act *fc_w, const real *fc_b, const act *out_w,
                        const real *out_b, int F, act *fc, act *fc_act, void *out, int out_f32) {
    int C = m->cfg.hidden, gpt2 = m->cfg.arch == ARCH_GPT2, F1 = gpt2 ? F : 2 * F;
    if (n == 0) return;
    matmul_forward(fc, 0, x, fc_w, fc_b, n, C, F1);
    if (gpt2) gelu_forward(fc_act, fc, (size_t)n * F);
    else swiglu_forward(fc_act, fc, n, F);
    matmul_forward(out, out_f32, fc_act, out_w, m->tp.rank == 0 ? out_b : NULL, n, F, C);
}

/* Its backward: dx (act, or fp32 when dx_f32; = or += when accumulate) from dout; gradients
 * accumulate. Every tensor-parallel rank adds the output bias's gradient (dout is the same on
 * all of them). */
static void mlp_backward(const Model *m, const act *x, int n, const act *fc_w, const act *out_w, real *g_fc_w,
                         real *g_fc_b, real *g_out_w, real *g_out_b, int F, const act *fc, const act *fc_act,
                         const act *dout, void *dx, int dx_f32, int accumulate) {
    int C = m->cfg.hidden, gpt2 = m->cfg.arch == ARCH_GPT2, F1 = gpt2 ? F : 2 * F;
    if (n == 0) return;
    act *dact = alloc_act((size_t)n * F), *dfc = alloc_act((size_t)n * F1);
    matmul_backward(dact, 0, g_out_w, g_out_b, dout, fc_act, out_w, n, F, C, 0);
    if (gpt2) gelu_backward(dfc, fc, dact, (size_t)n * F);
    else swiglu_backward(dfc, fc, dact, n, F);
    matmul_backward(dx, dx_f32, g_fc_w, g_fc_b, dfc, x, fc_w, n, C, F1, accumulate);
    dev_free(dact);
    dev_free(dfc);
}

/* Local row i (of T per sequence on this cp rank) -> its position in the whole sequence: the
 * first T / 2 rows are chunk cp_global_chunk(P, r, 0), the rest chunk cp_global_chunk(P, r, 1). */
static int seq_pos(int P, int r, int T, int i) {
    int a = i >= T / 2;
    return P > 1 ? cp_global_chunk(P, r, a) * (T / 2) + i - a * (T / 2) : i;
}

/* The routing statistics of whole sequences. Under context parallelism this rank holds two chunks
 * of each of its B sequences; the capacity order (every first choice in position order, then every
 * second choice, ...) and the aux loss's f_e and P_e are the whole sequence's, so the cp group's
 * choices [B, T, k] (32-bit, P x) and per-sequence sums of router probabilities [B, E] are
 * gathered. *topk_seq becomes [B, Tg, k] in position order (topk_h itself when nothing is split),
 * psum [B, E] the sums over all Tg positions (cp ranks added in rank order). Returns Tg. */
static int whole_sequences(Model *m, const struct MoeActs *s, int B, int T, int32_t **topk_seq, double *psum) {
    const ModelConfig *c = &m->cfg;
    int E = c->experts, k = c->top_k, P = cp_splits(m) ? m->cp.size : 1, Tg = T * P;
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++) {
            double p = 0;
            for (int t = 0; t < T; t++) p += s->probs_h[(size_t)(b * T + t) * E + e];
            psum[(size_t)b * E + e] = p;
        }
    *topk_seq = s->topk_h;
    if (P == 1) return T;
    size_t nk = (size_t)B * T * k;
    int32_t *all = malloc((size_t)P * nk * sizeof(int32_t)), *seq = malloc((size_t)P * nk * sizeof(int32_t));
    double *pall = malloc((size_t)P * B * E * sizeof(double));
    if (!all || !seq || !pall) myr_die("out of memory for the MoE routing of %d x %d tokens", B, Tg);
    m->cp.all_gather(m->cp.ctx, s->topk_h, all, nk * sizeof(int32_t));
    m->cp.all_gather(m->cp.ctx, psum, pall, (size_t)B * E * sizeof(double));
    for (int r = 0; r < P; r++)
        for (int b = 0; b < B; b++)
            for (int i = 0; i < T; i++)
                memcpy(seq + ((size_t)b * Tg + seq_pos(P, r, T, i)) * k, all + (size_t)r * nk + ((size_t)b * T + i) * k,
                       (size_t)k * sizeof(int32_t));
    for (int q = 0; q < B * E; q++) {
        double p = 0;
        for (int r = 0; r < P; r++) p += pall[(size_t)r * B * E + q];
        psum[q] = p;
    }
    free(all), free(pall);
    *topk_seq = seq;
    return Tg;
}

/* Routing of the sequences: top-k, capacity, the aux loss and the assignments in send order.
 * Decisions and statistics are those of whole sequences (whole_sequences), so every cp rank of a
 * sequence agrees with the single process on which of its own tokens are kept, and all of them
 * compute the same aux loss. Its gradient (moe_backward) is E f_e / T per local token with the
 * local T: like the cross-entropy's 1 / T, the mean over the cp ranks makes it the whole
 * sequence's E f_e / Tg. */
static double route(Model *m, int l, struct MoeActs *s, int B, int T) {
    const ModelConfig *c = &m->cfg;
    int E = c->experts, k = c->top_k, N = B * T;
    int cps = cp_splits(m) ? m->cp.size : 1, cr = cps > 1 ? m->cp.rank : 0;
    double *psum = malloc((size_t)B * E * sizeof(double));
    int32_t *gk;
    int Tg = whole_sequences(m, s, B, T, &gk, psum), cap = model_expert_capacity(c, Tg);
    char *kept = calloc((size_t)N * k, 1), *kept_seq = calloc((size_t)Tg * k, 1);
    int *used = malloc((size_t)E * sizeof(int)), *chosen = malloc((size_t)E * sizeof(int));
    int *count = calloc((size_t)E, sizeof(int)), *pos = malloc((size_t)E * sizeof(int));
    double aux = 0;
    for (int b = 0; b < B; b++) {
        memset(used, 0, (size_t)E * sizeof(int));
        memset(chosen, 0, (size_t)E * sizeof(int));
        for (int j = 0; j < k; j++)
            for (int t = 0; t < Tg; t++) {
                int e = gk[((size_t)b * Tg + t) * k + j];
                chosen[e]++;
                kept_seq[(size_t)t * k + j] = used[e] < cap;
                if (used[e] < cap) used[e]++;
            }
        for (int i = 0; i < T; i++) /* this rank's rows of sequence b */
            for (int j = 0; j < k; j++) {
                size_t q = (size_t)(b * T + i) * k + j;
                if (!kept_seq[(size_t)seq_pos(cps, cr, T, i) * k + j]) continue;
                kept[q] = 1;
                count[s->topk_h[q]]++;
            }
        double seq = 0;
        for (int e = 0; e < E; e++) {
            s->fsel[(size_t)b * E + e] = (real)((double)chosen[e] / ((double)Tg * k));
            seq += (double)chosen[e] / ((double)Tg * k) * (psum[(size_t)b * E + e] / Tg);
        }
        aux += E * seq;
    }
    if (gk != s->topk_h) free(gk);
    free(psum), free(kept_seq);
    /* assignments grouped by expert (counting sort), tokens and slots ascending inside */
    s->A = 0;
    for (int e = 0; e < E; e++) pos[e] = s->A, s->A += count[e];
    s->tok = malloc((size_t)(s->A ? s->A : 1) * sizeof(int32_t));
    s->slot = malloc((size_t)(s->A ? s->A : 1) * sizeof(int32_t));
    real *gate = malloc((size_t)(s->A ? s->A : 1) * sizeof(real));
    for (int n = 0; n < N; n++)
        for (int j = 0; j < k; j++) {
            size_t q = (size_t)n * k + j;
            if (!kept[q]) continue;
            int a = pos[s->topk_h[q]]++;
            s->tok[a] = n, s->slot[a] = (int32_t)q, gate[a] = s->gates_h[q];
        }
    s->gate = alloc((size_t)s->A);
    host_to_dev(s->gate, gate, (size_t)s->A * sizeof(real));
    free(gate);
    s->tok_d = to_device_i32(s->tok, (size_t)s->A);
    s->slot_d = to_device_i32(s->slot, (size_t)s->A);
    int P = m->ep.size, El = E / P;
    s->send_rows = calloc((size_t)P, sizeof(int));
    for (int e = 0; e < E; e++) s->send_rows[e / El] += count[e];
    if (!m->moe_recomputing) {
        MoeStats *st = &m->moe_stats;
        for (int e = 0; e < E; e++) st->tokens[(size_t)l * E + e] += count[e];
        st->assigned += (int64_t)N * k;
        st->dropped += (int64_t)N * k - s->A;
        if (m->moe_routing) /* layer, global sequence, position, slot, expert, kept */
            for (int n = 0; n < N; n++)
                for (int j = 0; j < k; j++)
                    fprintf(m->moe_routing, "%d %d %d %d %d %d\n", l, m->moe_seq_base + n / T,
                            seq_pos(cps, cr, T, n % T), j, s->topk_h[(size_t)n * k + j], kept[(size_t)n * k + j]);
    }
    /* the counts per expert go to the experts' ranks first (expert order = rank order) */
    int32_t *send_cnt = malloc((size_t)E * sizeof(int32_t)), *recv_cnt = malloc((size_t)E * sizeof(int32_t));
    for (int e = 0; e < E; e++) send_cnt[e] = count[e];
    int *per = calloc((size_t)P, sizeof(int));
    for (int r = 0; r < P; r++) per[r] = 1;
    exchange(m, send_cnt, per, recv_cnt, per, (size_t)El, 0); /* El words to each rank */
    s->recv_rows = calloc((size_t)P, sizeof(int));
    s->R = 0;
    for (int r = 0; r < P; r++)
        for (int le = 0; le < El; le++) s->recv_rows[r] += recv_cnt[r * El + le], s->R += recv_cnt[r * El + le];
    /* expert-major order of the received rows */
    s->perm = malloc((size_t)(s->R ? s->R : 1) * sizeof(int32_t));
    s->ex_start = calloc((size_t)El, sizeof(int));
    s->ex_rows = calloc((size_t)El, sizeof(int));
    int r_out = 0;
    for (int le = 0; le < El; le++) {
        s->ex_start[le] = r_out;
        int src_off = 0;
        for (int r = 0; r < P; r++) {
            int before = 0;
            for (int q = 0; q < le; q++) before += recv_cnt[r * El + q];
            for (int i = 0; i < recv_cnt[r * El + le]; i++) s->perm[r_out++] = src_off + before + i;
            src_off += s->recv_rows[r];
        }
        s->ex_rows[le] = r_out - s->ex_start[le];
    }
    s->perm_d = to_device_i32(s->perm, (size_t)s->R);
    free(kept), free(used), free(chosen), free(count), free(pos), free(send_cnt), free(recv_cnt), free(per);
    return aux / B;
}

void moe_forward(Model *m, int l, const act *x, real *out, int B, int T) {
    const ModelConfig *c = &m->cfg;
    int N = B * T, C = c->hidden, E = c->experts, k = c->top_k, gpt2 = c->arch == ARCH_GPT2;
    int P = m->ep.size, El = E / P, e_lo = m->ep.rank * El, tp = m->tp.size;
    int Fe = model_expert_ffn(c) / tp, F1e = gpt2 ? Fe : 2 * Fe, Fs = c->shared_experts * Fe, F1s = gpt2 ? Fs : 2 * Fs;
    size_t words = (size_t)C * act_size() / 4; /* a token row in 32-bit words (C * act_size() is a multiple of 4) */
    const LayerTensors *w = &m->p.layer[l];
    struct MoeActs **slot = &m->a.moe[l];
    moe_acts_free(*slot);
    struct MoeActs *s = *slot = calloc(1, sizeof *s);
    s->N = N, s->B = B, s->T = T;
    s->aux_grad = m->moe_grad_scale * c->aux_loss_coef / B;
    s->probs = alloc((size_t)N * E);
    s->topk = dev_alloc_bytes((size_t)N * k * sizeof(int32_t));
    s->gates = alloc((size_t)N * k);
    s->fsel = malloc((size_t)B * E * sizeof(real));
    matmul_forward(s->probs, 1, x, MODEL_WT(m, layer[l].router_w), NULL, N, C, E);
    moe_router_topk(s->probs, s->topk, s->gates, N, E, k);
    /* the routing decisions (capacity, order, the aux loss) run on the host */
    s->probs_h = malloc((size_t)N * E * sizeof(real));
    s->gates_h = malloc((size_t)N * k * sizeof(real));
    s->topk_h = malloc((size_t)N * k * sizeof(int32_t));
    dev_to_host(s->probs_h, s->probs, (size_t)N * E * sizeof(real));
    dev_to_host(s->gates_h, s->gates, (size_t)N * k * sizeof(real));
    dev_to_host(s->topk_h, s->topk, (size_t)N * k * sizeof(int32_t));
    double aux = route(m, l, s, B, T);
    if (!m->moe_recomputing) {
        m->moe_aux += aux;
        m->moe_stats.aux_sum += aux;
    }
    /* dispatch: rows to the experts' ranks, regrouped by expert */
    act *xsend = alloc_act((size_t)s->A * C), *xrecv = alloc_act((size_t)s->R * C);
    moe_gather_rows(xsend, x, s->tok_d, NULL, s->A, C);
    exchange(m, xsend, s->send_rows, xrecv, s->recv_rows, words, 1);
    s->xin = alloc_act((size_t)s->R * C);
    moe_gather_rows(s->xin, xrecv, s->perm_d, NULL, s->R, C);
    s->fc = alloc_act((size_t)s->R * F1e);
    s->fc_act = alloc_act((size_t)s->R * Fe);
    act *eout = alloc_act((size_t)s->R * C);
    for (int le = 0; le < El; le++) {
        int e = e_lo + le, r0 = s->ex_start[le];
        mlp_forward(m, act_at(s->xin, (size_t)r0 * C), s->ex_rows[le], MODEL_WT(m, layer[l].ex_fc_w[e]),
                    w->ex_fc_b[e], MODEL_WT(m, layer[l].ex_out_w[e]), w->ex_out_b[e], Fe,
                    act_at(s->fc, (size_t)r0 * F1e), act_at(s->fc_act, (size_t)r0 * Fe),
                    act_at(eout, (size_t)r0 * C), 0);
    }
    /* and back to the tokens' ranks, in send order */
    moe_scatter_rows(xrecv, eout, s->perm_d, s->R, C);
    s->yback = alloc_act((size_t)s->A * C);
    exchange(m, xrecv, s->recv_rows, s->yback, s->send_rows, words, 1);
    /* combine: shared experts, then the routed outputs weighted by their gates */
    if (Fs > 0) {
        s->sfc = alloc_act((size_t)N * F1s);
        s->sact = alloc_act((size_t)N * Fs);
        mlp_forward(m, x, N, MODEL_WT(m, layer[l].shared_fc_w), w->shared_fc_b, MODEL_WT(m, layer[l].shared_out_w),
                    w->shared_out_b, Fs, s->sfc, s->sact, out, 1);
    } else {
        dev_zero(out, (size_t)N * C);
    }
    moe_combine(out, s->yback, s->tok_d, s->gate, s->A, C);
    dev_free(xsend);
    dev_free(xrecv);
    dev_free(eout);
}

void moe_backward(Model *m, int l, const act *x, const act *dy, real *dx) {
    const ModelConfig *c = &m->cfg;
    struct MoeActs *s = m->a.moe[l];
    if (!s) myr_die("internal: MoE backward of layer %d without its forward", l);
    int N = s->N, B = s->B, T = s->T, C = c->hidden, E = c->experts, k = c->top_k, gpt2 = c->arch == ARCH_GPT2;
    int P = m->ep.size, El = E / P, e_lo = m->ep.rank * El, tp = m->tp.size;
    int Fe = model_expert_ffn(c) / tp, F1e = gpt2 ? Fe : 2 * Fe, Fs = c->shared_experts * Fe;
    size_t words = (size_t)C * act_size() / 4;
    LayerTensors *g = &m->g.layer[l];
    if (Fs > 0)
        mlp_backward(m, x, N, MODEL_WT(m, layer[l].shared_fc_w), MODEL_WT(m, layer[l].shared_out_w), g->shared_fc_w,
                     g->shared_fc_b, g->shared_out_w, g->shared_out_b, Fs, s->sfc, s->sact, dy, dx, 1, 0);
    else dev_zero(dx, (size_t)N * C);
    /* d gate = <dy, expert output> (complete only after summing the tensor-parallel partials) */
    real *dgate = alloc((size_t)s->A);
    moe_row_dot(dgate, dy, s->tok_d, s->yback, s->A, C);
    if (tp > 1) m->tp.sum(m->tp.ctx, dgate, (size_t)s->A);
    /* d expert output = gate * dy, to the experts' ranks */
    act *dsend = alloc_act((size_t)s->A * C), *drecv = alloc_act((size_t)s->R * C), *dein = alloc_act((size_t)s->R * C);
    moe_gather_rows(dsend, dy, s->tok_d, s->gate, s->A, C);
    exchange(m, dsend, s->send_rows, drecv, s->recv_rows, words, 1);
    moe_gather_rows(dein, drecv, s->perm_d, NULL, s->R, C);
    act *dxin = alloc_act((size_t)s->R * C);
    for (int le = 0; le < El; le++) {
        int e = e_lo + le, r0 = s->ex_start[le];
        mlp_backward(m, act_at(s->xin, (size_t)r0 * C), s->ex_rows[le], MODEL_WT(m, layer[l].ex_fc_w[e]),
                     MODEL_WT(m, layer[l].ex_out_w[e]), g->ex_fc_w[e], g->ex_fc_b[e], g->ex_out_w[e], g->ex_out_b[e],
                     Fe, act_at(s->fc, (size_t)r0 * F1e), act_at(s->fc_act, (size_t)r0 * Fe),
                     act_at(dein, (size_t)r0 * C), act_at(dxin, (size_t)r0 * C), 0, 0);
    }
    /* input gradients back to the tokens' ranks, summed into their rows in send order */
    moe_scatter_rows(drecv, dxin, s->perm_d, s->R, C);
    exchange(m, drecv, s->recv_rows, dsend, s->send_rows, words, 1);
    moe_combine(dx, dsend, s->tok_d, NULL, s->A, C);
    /* router: gates and the load-balancing loss (d aux / d P_e = E f_e, and P_e = mean_t p[t, e];
     * f_e the whole sequence's, T this rank's rows: see route) */
    real *dgates = alloc((size_t)N * k), *daux = alloc((size_t)B * E), *dlogits = alloc((size_t)N * E);
    moe_scatter_scalars(dgates, dgate, s->slot_d, s->A);
    real *daux_h = malloc((size_t)B * E * sizeof(real));
    for (int i = 0; i < B * E; i++) daux_h[i] = (real)(s->aux_grad * E * s->fsel[i] / T);
    host_to_dev(daux, daux_h, (size_t)B * E * sizeof(real));
    free(daux_h);
    moe_router_backward(dlogits, s->probs, s->topk, s->gates, dgates, daux, N, T, E, k);
    /* the router's GEMM reads its output gradient as act (rounded in bf16 runs) */
    act *dlogits_act = (act *)dlogits;
    if (m->lowp) {
        dlogits_act = alloc_act((size_t)N * E);
        act_from_f32(dlogits_act, dlogits, (size_t)N * E);
    }
    /* the router is replicated over tensor parallelism: one rank adds its input gradient */
    real *dx_router = m->tp.rank == 0 ? dx : alloc((size_t)N * C);
    matmul_backward(dx_router, 1, g->router_w, NULL, dlogits_act, x, MODEL_WT(m, layer[l].router_w), N, C, E,
                    m->tp.rank == 0);
    if (dx_router != dx) dev_free(dx_router);
    if ((void *)dlogits_act != (void *)dlogits) dev_free(dlogits_act);
    dev_free(dgate), dev_free(dsend), dev_free(drecv), dev_free(dein), dev_free(dxin);
    dev_free(dgates), dev_free(daux), dev_free(dlogits);
}

/* The host copy of the router's softmax (the routing decisions read it there). */
const real *moe_router_probs(const Model *m, int l) {
    return m->a.moe && m->a.moe[l] ? m->a.moe[l]->probs_h : NULL;
}
