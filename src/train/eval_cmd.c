/* eval_cmd.c: `myriad eval --init DIR --data PATH --batch B --seq T [--batches K]`:
 * prints {"loss": x, "tokens": n} for batches 0..K-1 in --no-shuffle order. */
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
#include "train/train_options.h"
#include "util/opts.h"
#include "util/error.h"

int cmd_eval(int argc, char **argv) {
    const char *init = NULL, *data = NULL;
    int B = 0, T = 0, K = 0, threads = 0;
    const Opt rows[] = {
        OPT_STR("--init", "DIR", &init, "the model: DIR/config.json + DIR/model.safetensors (required)"),
        OPT_STR("--data", "PATH", &data, "llm.c token shards: a file, a directory or a glob (required)"),
        OPT_INT("--batch", "B", &B, 1, 2147483647, "sequences per batch (required)"),
        OPT_INT("--seq", "T", &T, 1, 1 << 24, "tokens per sequence (required)"),
        OPT_INT("--batches", "K", &K, 0, 2147483647, "batches 0..K-1 (default 0 = every whole batch)"),
        OPT_INT("--threads", "N", &threads, 1, 1024, "compute threads (default: all cores)"),
        OPT_END};
    OptCommand cmd = {.name = "eval",
                      .usage = "usage: myriad eval --init DIR --data PATH --batch B --seq T [--batches K] [--threads N]\n"
                               "  Mean cross-entropy of the model in DIR over batches 0..K-1 of PATH in --no-shuffle order;\n"
                               "  prints one JSON line {\"loss\": x, \"tokens\": n}. A model whose loss is not finite\n"
                               "  (a non-finite weight) prints \"loss\": null and exits with code 3.",
                      .rows = rows};
    opts_parse(&cmd, argc, argv);
    if (!init || !data) myr_die("eval: --init DIR and --data PATH are required");
    init = path_trim(strdup(init));
    data = path_trim(strdup(data));
    if (B <= 0 || T <= 0) myr_die("eval: --batch B and --seq T are required");
    kernels_set_threads(threads > 0 ? threads : kernels_threads());
    Model m;
    if (hf_load(init, &m)) myr_die_last();
    if (T > m.cfg.max_seq) myr_die("--seq %d exceeds the model's %d positions", T, m.cfg.max_seq);
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
    tokens_close(d);
    model_destroy(&m);
    return 0;
}
