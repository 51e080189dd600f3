/* samples.h: what train and eval print as text: sampled continuations of the validation data,
 * decoded by the model's own tokenizer (tokenizer.json) or, without one, as bytes for the
 * byte-level vocabulary; and where that tokenizer is found. */
#ifndef MYRIAD_TRAIN_SAMPLES_H
#define MYRIAD_TRAIN_SAMPLES_H

#include "data/shards.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

/* The tokenizer for a run: `given` (--tokenizer; must exist), else DIR/tokenizer.json of the
 * --init directory, else of the --data directory (data prepare copies it there). NULL if none.
 * The result is a static buffer or `given`. */
const char *samples_find_tokenizer(const char *given, const char *init_dir, const char *data);

/* Load it and check it against the model: more ids than the model's vocabulary is an error
 * naming both (the embedding could not hold them). NULL path: *out = NULL, returns 0. */
/* training: the fix named is a larger --vocab; eval (a trained model, no --vocab): the model's own
 * tokenizer, or a model trained with a larger vocabulary */
int samples_load_tokenizer(const char *path, int model_vocab, int for_eval, Tokenizer **out);

/* Print n sampled tokens after a prompt taken from the start of `source`, decoded by `tok`
 * (NULL: the byte-level vocabulary, or a note that no tokenizer is known). */
void samples_print(Model *m, const TokenData *source, int n, uint64_t seed, const Tokenizer *tok);
/* The same with any sampler (the distributed one: train_sample.c): every rank calls it, those
 * with print = 0 sample along and print nothing. */
typedef void (*SampleFn)(void *ctx, const int32_t *prompt, int prompt_len, int n, uint64_t seed, int32_t *out);
void samples_print_with(SampleFn fn, void *ctx, int print, int vocab, const TokenData *source, int n, uint64_t seed,
                        const Tokenizer *tok);

/* Copy the tokenizer.json into a saved model directory (atomically). */
int samples_save_tokenizer(const char *path, const char *dir);

#endif
