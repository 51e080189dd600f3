/* train_sample.c: --sample at the end of a run, on the distributed model as it trained (no rank
 * gathers the whole model). Every rank runs the same forward of the context: tensor-parallel
 * slices with their collectives, ZeRO-3 units gathered by the hooks as in training, pipeline
 * stages in turn (pipeline_forward_visit). On the last stage the vocabulary shards of the next
 * position's logits are gathered over tp and every rank there draws the same token (same
 * numbers, same seed); the pipeline group passes it back to the other stages. */
#include <stdlib.h>
#include <string.h>

#include "train/evaluate.h"
#include "train/samples.h"
#include "train/train_job.h"
#include "util/error.h"

typedef struct {
    TrainJob *j;
    int pos;  /* the context position whose logits decide the next token */
    int rows; /* rows of the forward (each a copy of the context) */
    float *z; /* [vocab] gathered logits (last stage) */
    float *piece; /* [tp x piece_n] */
    int piece_n;
} Sampler;

/* This rank's vocabulary slice of the logits at s->pos, gathered over tp into s->z. */
static void grab_logits(void *ctx, Model *m) {
    Sampler *s = ctx;
    TrainJob *j = s->j;
    float *mine = s->piece + (size_t)j->tp_rank * s->piece_n;
    memset(mine, 0, (size_t)s->piece_n * sizeof(float));
    /* the row's tokens only: a padded vocabulary's columns past vocab_local are never drawn */
    act_to_host_f32(mine, act_at(m->a.logits, (size_t)s->pos * m->vocab_rows), (size_t)m->vocab_local);
    if (j->tp > 1 && comm_all_gather(j->groups.tp, mine, s->piece, (size_t)s->piece_n, COMM_F32)) myr_die_last();
    int V = m->cfg.vocab;
    for (int r = 0; r < j->tp; r++) {
        int lo = (int)((int64_t)V * r / j->tp), hi = (int)((int64_t)V * (r + 1) / j->tp);
        memcpy(s->z + lo, s->piece + (size_t)r * s->piece_n, (size_t)(hi - lo) * sizeof(float));
    }
}

static void sample_distributed(void *ctx, const int32_t *prompt, int plen, int n, uint64_t seed, int32_t *out) {
    Sampler *s = ctx;
    TrainJob *j = s->j;
    int T = j->o.seq, V = j->cfg.vocab;
    int32_t *win = calloc((size_t)T, sizeof(int32_t)), *x = calloc((size_t)s->rows * T, sizeof(int32_t));
    int len = plen < T ? plen : T;
    memcpy(win, prompt + (plen - len), (size_t)len * sizeof(int32_t));
    Rng rng = {seed};
    double *p = malloc((size_t)V * sizeof(double));
    Model *last = j->pl ? NULL : &j->chunks[0];
    int last_stage = j->pp_rank == j->pp - 1; /* the owner of the last virtual stage */
    for (int i = 0; i < n; i++) {
        if (len == T) { /* slide the window by half so the context stays long (as sample_tokens) */
            memmove(win, win + T / 2, (size_t)(T - T / 2) * sizeof(int32_t));
            len = T - T / 2;
        }
        for (int r = 0; r < s->rows; r++) memcpy(x + (size_t)r * T, win, (size_t)T * sizeof(int32_t));
        s->pos = len - 1;
        if (last) {
            model_forward(last, x, NULL, s->rows, T, 0);
            grab_logits(s, last);
        } else {
            pipeline_forward_visit(j->pl, x, NULL, s->rows, grab_logits, s);
        }
        float tok = last_stage ? (float)sample_draw(s->z, V, &rng, p) : 0; /* exact in fp32 below 2^24 */
        if (j->pp > 1 && comm_broadcast(j->groups.pp, &tok, &tok, 1, COMM_F32, j->pp - 1)) myr_die_last();
        win[len++] = (int32_t)tok;
        out[i] = (int32_t)tok;
    }
    for (int c = 0; j->dp && c < j->vpp; c++) dp_release_gathered(&j->dp[c]);
    free(p);
    free(win);
    free(x);
}

void train_sample(TrainJob *j, int n) {
    Sampler s = {j, 0, 1, NULL, NULL, 0};
    /* sequence parallelism splits the rows x T tokens over tp: copies of the context keep that whole */
    if (j->o.sp && j->o.seq % j->tp) s.rows = j->micro;
    s.piece_n = (j->cfg.vocab + j->tp - 1) / j->tp;
    s.z = calloc((size_t)j->cfg.vocab, sizeof(float));
    s.piece = calloc((size_t)s.piece_n * j->tp, sizeof(float));
    /* context parallelism: every cp rank runs the whole context (they hold the same weights), so
     * the logits of any position are at hand and no ring is needed */
    for (int c = 0; c < j->vpp; c++) j->chunks[c].cp.whole = 1;
    samples_print_with(sample_distributed, &s, j->rank0, j->cfg.vocab, j->val ? j->val : j->train, n, j->o.seed, j->tok);
    for (int c = 0; c < j->vpp; c++) j->chunks[c].cp.whole = 0;
    free(s.z);
    free(s.piece);
}
