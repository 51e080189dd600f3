/* evaluate.c: validation loss over token shards, and sampling. */
#include "train/evaluate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data/loader.h"
#include "kernels/kernels.h"
#include "util/error.h"
#include "util/rng.h"

int check_tokens(const int32_t *tokens, int n, int vocab, const char *what, uint64_t batch) {
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return myr_error("%s batch %llu holds token %d but the model's vocab is %d (the data was tokenized "
                             "for another vocabulary; see `myriad data info`)",
                             what, (unsigned long long)batch, tokens[i], vocab);
    return 0;
}

int evaluate_loss(Model *m, const TokenData *d, int B, int T, int K, int row0, int rows, double *loss,
                  uint64_t *tokens) {
    BatchLoader l;
    if (loader_init(&l, d, B, T, 0, 0)) return -1;
    if (K <= 0 || (uint64_t)K > l.windows) K = (int)l.windows;
    int32_t *x = malloc((size_t)rows * T * sizeof(int32_t)), *y = malloc((size_t)rows * T * sizeof(int32_t));
    double sum = 0;
    int rc = 0;
    for (int k = 0; k < K && !rc; k++) {
        rc = loader_batch(&l, (uint64_t)k, row0, rows, x, y);
        if (!rc) rc = check_tokens(x, rows * T, m->cfg.vocab, "validation", k);
        if (!rc) rc = check_tokens(y, rows * T, m->cfg.vocab, "validation", k);
        /* the cross-entropy alone: an MoE model's load-balancing term is a training device */
        if (!rc) sum += model_forward(m, x, y, rows, T, 0) - m->cfg.aux_loss_coef * m->moe_aux;
    }
    free(x);
    free(y);
    loader_free(&l);
    if (rc) return -1;
    *loss = sum / K;
    *tokens = (uint64_t)K * rows * T;
    return 0;
}

int sample_draw(const float *z, int V, Rng *rng, double *p) {
    double maxv = z[0], sum = 0;
    for (int v = 1; v < V; v++) maxv = fmax(maxv, z[v]);
    for (int v = 0; v < V; v++) sum += p[v] = exp((z[v] - maxv) / 0.8);
    double u = rng_uniform(rng) * sum, acc = 0;
    for (int v = 0; v < V; v++) {
        acc += p[v];
        if (u <= acc) return v;
    }
    return V - 1;
}

void sample_tokens(Model *m, const int32_t *prompt, int prompt_len, int n, uint64_t seed, int32_t *out) {
    /* One fixed window of T positions: causal attention makes the logits at position p depend
     * only on tokens 0..p, so the unused tail can hold anything and no buffers are resized. */
    int T = m->cfg.max_seq < 256 ? m->cfg.max_seq : 256, V = m->cfg.vocab;
    int32_t *ctx = calloc((size_t)T, sizeof(int32_t));
    int len = prompt_len < T ? prompt_len : T;
    memcpy(ctx, prompt + (prompt_len - len), (size_t)len * sizeof(int32_t));
    Rng rng = {seed};
    double *p = malloc((size_t)V * sizeof(double));
    float *z = malloc((size_t)V * sizeof(float));
    for (int i = 0; i < n; i++) {
        if (len == T) { /* slide the window by half so the context stays long */
            memmove(ctx, ctx + T / 2, (size_t)(T - T / 2) * sizeof(int32_t));
            len = T - T / 2;
        }
        model_forward(m, ctx, NULL, 1, T, 0);
        /* rows are vocab_rows apart; the padded vocabulary's columns past V are never drawn */
        act_to_host_f32(z, act_at(m->a.logits, (size_t)(len - 1) * m->vocab_rows), (size_t)V);
        int tok = sample_draw(z, V, &rng, p);
        ctx[len++] = tok;
        out[i] = tok;
    }
    free(p);
    free(z);
    free(ctx);
}
