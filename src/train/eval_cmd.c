/* eval_cmd.c: `myriad eval --init DIR --data PATH --batch B --seq T [--batches K]`:
 * prints {"loss": x, "tokens": n} for batches 0..K-1 in --no-shuffle order. */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "kernels/kernels.h"
#include "model/hf_weights.h"
#include "train/evaluate.h"
#include "util/args.h"
#include "util/error.h"

int cmd_eval(int argc, char **argv) {
    const char *init = NULL, *data = NULL;
    int B = 0, T = 0, K = 0, threads = 0;
    KernelOptions ko = {NULL, -1, kernels_local_rank(), 0};
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (!strcmp(f, "--help") || !strcmp(f, "-h")) {
            printf("usage: myriad eval --init DIR --data PATH --batch B --seq T [--batches K] [--threads N]\n"
                   "                   [--device cpu|cuda] [--dtype fp32|bf16]\n"
                   "  Mean cross-entropy of the model in DIR (config.json + model.safetensors) over batches\n"
                   "  0..K-1 of PATH in --no-shuffle order (default: every whole batch); prints one JSON line.\n");
            return 0;
        } else if (!strcmp(f, "--init")) init = args_value(argc, argv, &i);
        else if (!strcmp(f, "--data")) data = args_value(argc, argv, &i);
        else if (!strcmp(f, "--batch")) B = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--seq")) T = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--batches")) K = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--threads")) threads = args_next_int(argc, argv, &i);
        else if (!strcmp(f, "--device")) ko.device = args_value(argc, argv, &i);
        else if (!strcmp(f, "--dtype")) {
            const char *v = args_value(argc, argv, &i);
            Dtype dt;
            if (dtype_parse(v, &dt)) myr_die("unknown --dtype '%s' (use fp32 or bf16)", v);
            ko.dtype = (int)dt;
        }
        else myr_die("eval: unknown option '%s' (see myriad eval --help)", f);
    }
    if (!init || !data) myr_die("eval: --init DIR and --data PATH are required");
    if (B <= 0 || T <= 0) myr_die("eval: --batch B and --seq T must be positive");
    if (K < 0) myr_die("eval: --batches must be >= 0");
    if (kernels_select(&ko)) myr_die_last();
    kernels_set_threads(threads > 0 ? threads : kernels_threads());
    Model m;
    if (hf_load(init, &m)) myr_die_last();
    if (T > m.cfg.max_seq) myr_die("--seq %d exceeds the model's %d positions", T, m.cfg.max_seq);
    TokenData *d;
    if (tokens_open(data, &d)) myr_die_last();
    double loss;
    uint64_t tokens;
    if (evaluate_loss(&m, d, B, T, K, 0, B, &loss, &tokens)) myr_die_last();
    printf("{\"loss\": %.9g, \"tokens\": %llu}\n", loss, (unsigned long long)tokens);
    tokens_close(d);
    model_destroy(&m);
    return 0;
}
