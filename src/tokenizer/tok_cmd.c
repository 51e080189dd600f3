/* tok_cmd.c: `myriad tokenize` (text -> ids) and `myriad detokenize` (ids -> text), for
 * scripts and for checking a tokenizer.json by hand. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/opts.h"

static int read_all(const char *path, ByteBuf *out) {
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) return myr_error("cannot read %s: %s", path, strerror(errno));
    for (;;) {
        if (bytebuf_reserve(out, 1 << 16)) return myr_error("out of memory reading %s", path);
        size_t got = fread(out->p + out->n, 1, out->cap - out->n, f);
        out->n += got;
        if (!got) break;
    }
    int err = ferror(f);
    if (f != stdin) fclose(f);
    return err ? myr_error("reading %s failed", path) : 0;
}

enum { LINES = 1 << 8 }; /* detokenize --lines (beside the TOK_DECODE_* flags) */

typedef struct {
    const char **in;
    int n, max; /* inputs so far; at most max */
} Inputs;

static int add_input(void *ctx, const char *arg) {
    Inputs *x = ctx;
    if (x->n == x->max) return myr_error("give one input file (or - for standard input)");
    x->in[x->n++] = arg;
    return 0;
}

/* The --tokenizer row both commands share; detokenize adds its two switches. Returns how many
 * inputs were given ("-", standard input, when none). */
static int parse(int argc, char **argv, int detok, const char **tok, const char **in, int max_in, int *flags) {
    int skip_special = 0, lines = 0;
    *tok = NULL;
    const Opt rows[] = {
        OPT_STR("--tokenizer", "T.json", tok, "the tokenizer.json a model ships (required)"),
        OPT_SWITCH("--skip-special", &skip_special, "leave out special tokens"),
        OPT_SWITCH("--lines", &lines, "decode each line on its own (as `tokenize FILE...` writes them) and\n"
                                      "write the texts one after another"),
        OPT_END};
    const Opt tok_rows[] = {rows[0], OPT_END};
    Inputs x = {in, 0, max_in};
    OptCommand cmd = {
        .name = detok ? "detokenize" : "tokenize",
        .usage = detok ? "usage: myriad detokenize --tokenizer T.json [--skip-special] [--lines] [IDS_FILE|-]\n"
                         "  Writes the text of the token ids in IDS_FILE (default: standard input; ids separated by\n"
                         "  spaces, commas, newlines or brackets), as Hugging Face's decode(ids). An id outside the\n"
                         "  vocabulary is an error."
                       : "usage: myriad tokenize --tokenizer T.json [FILE|-]...\n"
                         "  Prints the token ids of the whole text of each FILE (default: standard input) on one line,\n"
                         "  separated by spaces, as Hugging Face's encode(text, add_special_tokens=False): no BOS/EOS;\n"
                         "  added tokens written in the text (<|endoftext|>, <s>, ...) are matched as Hugging Face\n"
                         "  matches them. Invalid UTF-8 is read as U+FFFD.",
        .rows = detok ? rows : tok_rows,
        .positional = add_input,
        .ctx = &x};
    opts_parse(&cmd, argc, argv);
    if (!*tok) myr_die("%s: --tokenizer T.json is required (the tokenizer.json a model ships)", cmd.name);
    *flags = (skip_special ? TOK_DECODE_SKIP_SPECIAL : 0) | (lines ? LINES : 0);
    if (!x.n) in[x.n++] = "-";
    return x.n;
}

int cmd_tokenize(int argc, char **argv) {
    const char *tok_path, **in = calloc((size_t)argc + 1, sizeof *in);
    int skip;
    if (!in) myr_die("out of memory");
    int n_in = parse(argc, argv, 0, &tok_path, in, argc + 1, &skip);
    Tokenizer *t;
    if (tokenizer_load(tok_path, &t)) myr_die_last();
    TokEncoder *e = tok_encoder_new(t);
    if (!e) myr_die("out of memory");
    ByteBuf text = {0}, out = {0};
    IdBuf ids = {0};
    for (int f = 0; f < n_in; f++) {
        text.n = ids.n = out.n = 0;
        if (read_all(in[f], &text)) myr_die_last();
        if (tok_encode(e, text.p, text.n, &ids)) myr_die_last();
        /* one buffered write: ids of a large file are many */
        if (bytebuf_reserve(&out, ids.n * 12 + 2)) myr_die("out of memory");
        for (size_t i = 0; i < ids.n; i++) {
            char digits[12];
            int k = 0;
            for (uint32_t v = (uint32_t)ids.p[i]; k == 0 || v; v /= 10) digits[k++] = (char)('0' + v % 10);
            if (i) out.p[out.n++] = ' ';
            while (k) out.p[out.n++] = (uint8_t)digits[--k];
        }
        out.p[out.n++] = '\n';
        if (fwrite(out.p, 1, out.n, stdout) != out.n) myr_die("writing the ids failed: %s", strerror(errno));
    }
    if (fflush(stdout)) myr_die("writing the ids failed: %s", strerror(errno));
    bytebuf_free(&out);
    idbuf_free(&ids);
    bytebuf_free(&text);
    tok_encoder_free(e);
    tokenizer_free(t);
    free(in);
    return 0;
}

int cmd_detokenize(int argc, char **argv) {
    const char *tok_path, *ins[2];
    int flags;
    parse(argc, argv, 1, &tok_path, ins, 1, &flags);
    const char *in = ins[0];
    Tokenizer *t;
    if (tokenizer_load(tok_path, &t)) myr_die_last();
    ByteBuf text = {0};
    if (read_all(in, &text)) myr_die_last();
    IdBuf ids = {0};
    ByteBuf out = {0};
    int lines = flags & LINES;
    for (size_t i = 0; i <= text.n;) {
        unsigned char c = i < text.n ? text.p[i] : '\n';
        if (c == '\n' && (lines || i == text.n)) { /* the end of a sequence */
            if ((ids.n || !lines || i < text.n) && tok_decode(t, ids.p, ids.n, flags & TOK_DECODE_SKIP_SPECIAL, &out))
                myr_die_last();
            ids.n = 0;
            if (i == text.n) break;
            i++;
            continue;
        }
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == ',' || c == '[' || c == ']') {
            i++;
            continue;
        }
        size_t j = i;
        long long v = 0;
        while (j < text.n && text.p[j] >= '0' && text.p[j] <= '9' && v <= INT32_MAX) v = v * 10 + (text.p[j++] - '0');
        int sep = j == text.n || strchr(" \n\r\t,[]", text.p[j]);
        if (j == i || !sep || v > INT32_MAX) {
            size_t e = i;
            while (e < text.n && e - i < 20 && !strchr(" \n\r\t,[]", text.p[e])) e++;
            myr_die("%s: \"%.*s\" (byte %zu) is not a token id (expected non-negative integers)", in, (int)(e - i),
                    (const char *)text.p + i, i);
        }
        if (idbuf_push(&ids, (int32_t)v)) myr_die("out of memory");
        i = j;
    }
    if (fwrite(out.p, 1, out.n, stdout) != out.n || fflush(stdout)) myr_die("writing the text failed: %s", strerror(errno));
    bytebuf_free(&out);
    idbuf_free(&ids);
    bytebuf_free(&text);
    tokenizer_free(t);
    return 0;
}
