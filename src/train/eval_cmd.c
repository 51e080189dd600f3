/* eval_cmd.c: `myriad eval --init DIR --data PATH --batch B --seq T [--batches K]`:
 * prints {"loss": x, "tokens": n} for batches 0..K-1 in --no-shuffle order; with --sample N
 * also a sampled continuation, decoded by the model's tokenizer. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "kernels/kernels.h"
#include "model/hf_weights.h"
#include "train/evaluate.h"
#include "train/samples.h"
#include "util/args.h"
#include "util/error.h"

int cmd_eval(int argc, char **argv) {
    const char *init = NULL, *data = NULL, *tok_given = NULL;
    int B = 0, T = 0, K = 0, threads = 0, sample = 0;
    long long seed = 1337;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            printf("usage: myriad eval --init DIR --data PATH --batch B --seq T [--batches K] [--threads N]\n"
                   "                   [--sample N [--seed S]] [--tokenizer T.json]\n"
                   "  Mean cross-entropy of the model in DIR (config.json + model.safetensors) over batches\n"
                   "  0..K-1 of PATH in --no-shuffle order (default: every whole batch); prints one JSON line.\n"
                   "  --sample N then prints N sampled tokens after a prompt from PATH, decoded by the\n"
                   "  tokenizer (--tokenizer, else tokenizer.json in DIR or beside PATH).\n");
            return 0;
        } else if (!strcmp(f, "--init")) init = args_value(argc, argv, &i);
        else if (!strcmp(f, "--data")) data = args_value(argc, argv, &i);
        else if (!strcmp(f, "--batch")) B = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--seq")) T = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--batches")) K = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--threads")) threads = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--sample")) sample = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--seed")) seed = args_next_i64(argc, argv, &i);
        else if (!strcmp(f, "--tokenizer")) tok_given = args_value(argc, argv, &i);
        else myr_die("eval: unknown option '%s' (see myriad eval --help)", f);
    }
    if (!init || !data) myr_die("eval: --init DIR and --data PATH are required");
    if (B <= 0 || T <= 0) myr_die("eval: --batch B and --seq T must be positive");
    if (K < 0) myr_die("eval: --batches must be >= 0");
    kernels_set_threads(threads > 0 ? threads : kernels_threads());
    Model m;
    if (hf_load(init, &m)) myr_die_last();
    if (T > m.cfg.max_seq) myr_die("--seq %d exceeds the model's %d positions", T, m.cfg.max_seq);
    if (sample < 0) myr_die("eval: --sample must be >= 0");
    const char *tok_path = samples_find_tokenizer(tok_given, init, data);
    Tokenizer *tok = NULL;
    if (samples_load_tokenizer(tok_path, m.cfg.vocab, &tok)) myr_die_last();
    TokenData *d;
    if (tokens_open(data, &d)) myr_die_last();
    double loss;
    uint64_t tokens;
    if (evaluate_loss(&m, d, B, T, K, 0, B, &loss, &tokens)) myr_die_last();
    printf("{\"loss\": %.9g, \"tokens\": %llu}\n", loss, (unsigned long long)tokens);
    if (sample > 0) samples_print(&m, d, sample, (uint64_t)seed, tok);
    tokenizer_free(tok);
    tokens_close(d);
    model_destroy(&m);
    return 0;
}
