/* eval_cmd.c: `myriad eval --init DIR --data PATH --batch B --seq T [--batches K]`:
 * prints {"loss": x, "tokens": n} for batches 0..K-1 in --no-shuffle order; with --sample N
 * also a sampled continuation, decoded by the model's tokenizer. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "io/path_check.h"
#include "kernels/kernels.h"
#include "model/hf_weights.h"
#include "train/evaluate.h"
#include "train/nonfinite.h"
#include "train/samples.h"
#include "train/train_options.h"
#include "util/opts.h"
#include "util/error.h"

static int parse_device(void *dst, const char *v) {
    if (strcmp(v, "cpu") && strcmp(v, "cuda")) return myr_error("unknown --device '%s' (use cpu or cuda)", v);
    ((KernelOptions *)dst)->device = v;
    return 0;
}

static int parse_dtype(void *dst, const char *v) {
    Dtype dt;
    if (dtype_parse(v, &dt)) return myr_error("unknown --dtype '%s' (use fp32 or bf16)", v);
    ((KernelOptions *)dst)->dtype = (int)dt;
    return 0;
}

int cmd_eval(int argc, char **argv) {
    const char *init = NULL, *data = NULL, *tok_given = NULL;
    int B = 0, T = 0, K = 0, threads = 0, sample = 0;
    long long seed = 1337;
    KernelOptions ko = {NULL, -1, kernels_local_rank(), 0};
    const Opt rows[] = {
        OPT_STR("--init", "DIR", &init, "the model: DIR/config.json + DIR/model.safetensors (required)"),
        OPT_STR("--data", "PATH", &data, "llm.c token shards: a file, a directory or a glob (required)"),
        OPT_INT("--batch", "B", &B, 1, 2147483647, "sequences per batch (required)"),
        OPT_INT("--seq", "T", &T, 1, 1 << 24, "tokens per sequence (required)"),
        OPT_INT("--batches", "K", &K, 0, 2147483647, "batches 0..K-1 (default 0 = every whole batch)"),
        OPT_INT("--threads", "N", &threads, 1, 1024, "compute threads (default: all cores)"),
        OPT_INT("--sample", "N", &sample, 0, 1 << 20,
                "then print N sampled tokens after a prompt from PATH, decoded by the tokenizer"),
        OPT_I64("--seed", "S", &seed, 0, 1e18, "the sample's seed (default 1337)"),
        OPT_STR("--tokenizer", "T.json", &tok_given,
                "the model's tokenizer (default: tokenizer.json in DIR, else beside PATH)"),
        OPT_CALL("--device", "cpu|cuda", &ko, parse_device, "where it runs (default: cuda when a GPU is visible, else cpu)"),
        OPT_CALL("--dtype", "fp32|bf16", &ko, parse_dtype, "activation precision (default: bf16 on cuda, fp32 on cpu)"),
        OPT_END};
    OptCommand cmd = {.name = "eval",
                      .usage = "usage: myriad eval --init DIR --data PATH --batch B --seq T [--batches K] [--threads N]\n"
                               "                   [--sample N [--seed S]] [--tokenizer T.json] [--device cpu|cuda] [--dtype fp32|bf16]\n"
                               "  Mean cross-entropy of the model in DIR over batches 0..K-1 of PATH in --no-shuffle order;\n"
                               "  prints one JSON line {\"loss\": x, \"tokens\": n}. A model whose loss is not finite\n"
                               "  (a non-finite weight) prints \"loss\": null and exits with code 3.",
                      .rows = rows};
    opts_parse(&cmd, argc, argv);
    if (!init || !data) myr_die("eval: --init DIR and --data PATH are required");
    init = path_trim(strdup(init));
    data = path_trim(strdup(data));
    if (B <= 0 || T <= 0) myr_die("eval: --batch B and --seq T are required");
    if (kernels_select(&ko)) myr_die_last();
    kernels_set_threads(threads > 0 ? threads : kernels_threads());
    Model m;
    if (hf_load_inference(init, &m)) myr_die_last(); /* the fp32 weights alone: no gradients */
    if (T > m.cfg.max_seq) myr_die("--seq %d exceeds the model's %d positions", T, m.cfg.max_seq);
    Tokenizer *tok = NULL;
    if (samples_load_tokenizer(samples_find_tokenizer(tok_given, init, data), m.cfg.vocab, 1, &tok)) myr_die_last();
    TokenData *d;
    if (tokens_open(data, &d)) myr_die_last();
    double loss;
    uint64_t tokens;
    if (evaluate_loss(&m, d, B, T, K, 0, B, &loss, &tokens)) myr_die_last();
    if (!isfinite(loss)) { /* valid JSON for scripts, and an exit code that says it failed */
        const char *where;
        size_t bad = model_count_nonfinite(&m, &where);
        printf("{\"loss\": null, \"tokens\": %llu}\n", (unsigned long long)tokens);
        fflush(stdout);
        if (bad)
            fprintf(stderr, "myriad: eval: the loss is %g: the model in %s holds %zu non-finite weights (the first in "
                    "%s); it cannot be evaluated\n", loss, init, bad, where);
        else
            fprintf(stderr, "myriad: eval: the loss is %g although every weight of %s is finite (overflow in the "
                    "forward pass)\n", loss, init);
        exit(TRAIN_EXIT_NONFINITE);
    }
    printf("{\"loss\": %.9g, \"tokens\": %llu}\n", loss, (unsigned long long)tokens);
    if (sample > 0) samples_print(&m, d, sample, (uint64_t)seed, tok);
    tokenizer_free(tok);
    tokens_close(d);
    model_destroy(&m);
    return 0;
}
