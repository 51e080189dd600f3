/* samples.c: see samples.h. */
#include "train/samples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/atomic_file.h"
#include "train/evaluate.h"
#include "util/error.h"

static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

const char *samples_find_tokenizer(const char *given, const char *init_dir, const char *data) {
    static char path[4200];
    if (given) return given;
    const char *dirs[2] = {init_dir, data};
    for (int i = 0; i < 2; i++) {
        struct stat st;
        if (!dirs[i]) continue;
        if (stat(dirs[i], &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/tokenizer.json", dirs[i]);
        else { /* a shard file or a glob: its directory */
            const char *slash = strrchr(dirs[i], '/');
            int n = slash ? (int)(slash - dirs[i]) : 1;
            snprintf(path, sizeof path, "%.*s/tokenizer.json", n, slash ? dirs[i] : ".");
        }
        if (is_file(path)) return path;
    }
    return NULL;
}

int samples_load_tokenizer(const char *path, int model_vocab, int for_eval, Tokenizer **out) {
    *out = NULL;
    if (!path) return 0;
    if (tokenizer_load(path, out)) return -1;
    int32_t n = tokenizer_vocab_size(*out);
    if (n > model_vocab) {
        tokenizer_free(*out);
        *out = NULL;
        if (for_eval)
            return myr_error("tokenizer %s has %d ids but the model's vocabulary is %d: it is not this model's "
                             "tokenizer (give the model's own with --tokenizer, or evaluate a model trained with --vocab "
                             "%d or more)", path, n, model_vocab, n);
        return myr_error("tokenizer %s has %d ids but the model's vocabulary is %d: its embedding cannot hold them "
                         "(give --vocab %d or more, e.g. --preset gpt2-124m for GPT-2's 50257)", path, n, model_vocab, n);
    }
    return 0;
}

static void print_bytes(const int32_t *prompt, int plen, const int32_t *out, int n) {
    for (int i = 0; i < plen; i++) putchar(prompt[i]);
    int bold = isatty(STDOUT_FILENO); /* the generated part in bold on a terminal; plain in a file */
    if (bold) printf("\033[1m");
    for (int i = 0; i < n; i++) putchar(out[i] >= 32 || out[i] == '\n' || out[i] == '\t' ? out[i] : '?');
    printf("%s\n---\n", bold ? "\033[0m" : "");
}

static void sample_one_model(void *ctx, const int32_t *prompt, int plen, int n, uint64_t seed, int32_t *out) {
    sample_tokens(ctx, prompt, plen, n, seed, out);
}

void samples_print(Model *m, const TokenData *source, int n, uint64_t seed, const Tokenizer *tok) {
    samples_print_with(sample_one_model, m, 1, m->cfg.vocab, source, n, seed, tok);
}

void samples_print_with(SampleFn fn, void *ctx, int print, int vocab, const TokenData *source, int n, uint64_t seed,
                        const Tokenizer *tok) {
    if (!tok && vocab != 256) {
        if (print)
            fprintf(stderr, "(--sample prints text with a tokenizer: give --tokenizer T.json, or keep tokenizer.json "
                            "beside --init or --data)\n");
        return;
    }
    int32_t prompt[64];
    int plen = tokens_count(source) < 64 ? (int)tokens_count(source) : 64;
    if (tokens_read(source, 0, (uint64_t)plen, prompt)) return;
    int32_t *all = malloc((size_t)(plen + n) * sizeof(int32_t));
    if (!all) return;
    memcpy(all, prompt, (size_t)plen * sizeof(int32_t));
    fn(ctx, prompt, plen, n, seed, all + plen);
    if (!print) {
        free(all);
        return;
    }
    printf("--- sample (prompt: the first %d tokens of the validation data) ---\n", plen);
    if (!tok) print_bytes(prompt, plen, all + plen, n);
    else {
        /* decode prompt and prompt + sample: a character may straddle the two */
        ByteBuf a = {0}, b = {0};
        if (!tok_decode(tok, all, (size_t)plen, TOK_DECODE_LENIENT, &a) &&
            !tok_decode(tok, all, (size_t)(plen + n), TOK_DECODE_LENIENT, &b)) {
            size_t k = a.n <= b.n && !memcmp(a.p, b.p, a.n) ? a.n : 0;
            fwrite(b.p, 1, k, stdout);
            int bold = isatty(STDOUT_FILENO);
            if (bold) printf("\033[1m");
            fwrite(b.p + k, 1, b.n - k, stdout);
            printf("%s\n---\n", bold ? "\033[0m" : "");
        }
        bytebuf_free(&a);
        bytebuf_free(&b);
    }
    free(all);
}

int samples_save_tokenizer(const char *path, const char *dir) {
    char to[4200];
    snprintf(to, sizeof to, "%s/tokenizer.json", dir);
    return atomic_copy(path, to);
}
