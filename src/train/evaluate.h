/* evaluate.h: validation loss and text sampling for a trained model. */
#ifndef MYRIAD_TRAIN_EVALUATE_H
#define MYRIAD_TRAIN_EVALUATE_H

#include <stdint.h>

#include "data/shards.h"
#include "model/model.h"
#include "util/rng.h"

/* Mean cross-entropy over rows [row0, row0 + rows) of batches k = 0..K-1 in --no-shuffle order
 * (K capped at the number of whole windows; K <= 0 means all of them); a data-parallel caller
 * passes its slice and averages over ranks. *tokens gets the number of predicted tokens.
 * -1 + reason if the data is too short or holds a token outside the vocabulary. */
int evaluate_loss(Model *m, const TokenData *d, int B, int T, int K, int row0, int rows, double *loss,
                  uint64_t *tokens);
/* Check that every token is inside the model's vocabulary (-1 + reason naming the batch). */
int check_tokens(const int32_t *tokens, int n, int vocab, const char *what, uint64_t batch);
/* Sample n tokens after `prompt` (temperature 0.8, deterministic in seed) into out. */
void sample_tokens(Model *m, const int32_t *prompt, int prompt_len, int n, uint64_t seed, int32_t *out);
/* One token drawn from the logits z[V] at temperature 0.8 with rng (p: V doubles of scratch). */
int sample_draw(const float *z, int V, Rng *rng, double *p);

#endif
