/* fuzz_tokenizer.c: a seeded fuzzer for the tokenizer (src/tokenizer/), built with
 * AddressSanitizer + UBSan by tests/test_fuzz.sh.
 *   1. N mutated tokenizer.json files (five small seeds covering GPT-2, Llama 2 with a
 *      normalizer, Metaspace, Llama 3's Split + ByteLevel, and Digits / split behaviors, with
 *      lstrip / rstrip / single_word / normalized added tokens), each loaded from an exact-size
 *      buffer. Rejected: a one-line message. Accepted: a short text is encoded and decoded, and
 *      every id must lie in the vocabulary and decode.
 *   2. N random inputs (random bytes, and mixes of added tokens, spaces, line breaks, UTF-8 and
 *      invalid bytes) encoded by each seed tokenizer: ids in range, decode succeeds, GPT-2's
 *      decode gives back the text (after U+FFFD replacement), and a document cut after a '\n'
 *      encodes to the same ids in two pieces whenever the encoder accepts the cut (always, for
 *      GPT-2 and Llama 3, whose patterns end a pre-token there).
 * Usage: fuzz_tokenizer [inputs] [seed] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
static size_t below(size_t n) { return n ? (size_t)(rnd() % n) : 0; }

#define FAIL(...) (fprintf(stderr, "fuzz invariant broken: " __VA_ARGS__), fputc('\n', stderr), abort())

/* ---------- seeds ---------- */

static void cat(ByteBuf *b, const char *s) { bytebuf_append(b, s, strlen(s)); }

/* A JSON string literal for raw UTF-8 bytes (escapes quotes, backslashes, controls). */
static void jstr(ByteBuf *b, const uint8_t *s, size_t n) {
    cat(b, "\"");
    for (size_t i = 0; i < n; i++) {
        char e[8];
        if (s[i] == '"' || s[i] == '\\') snprintf(e, sizeof e, "\\%c", s[i]);
        else if (s[i] < 0x20) snprintf(e, sizeof e, "\\u%04x", s[i]);
        else {
            bytebuf_append(b, s + i, 1);
            continue;
        }
        cat(b, e);
    }
    cat(b, "\"");
}

static const char *const words[] = {"th", "the", "he", "in", "an", "er", "on", "re", "ing", "at", "en", "12", "123"};

/* A byte-level vocabulary (all 256 byte characters, a few merged words) and its merges. */
static void byte_level_model(ByteBuf *b, int ignore_merges) {
    cat(b, "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"fuse_unk\":false,\"byte_fallback\":false");
    if (ignore_merges) cat(b, ",\"ignore_merges\":true");
    cat(b, ",\"vocab\":{");
    int id = 0;
    for (int c = 0; c < 256; c++) {
        uint8_t u[4];
        int n = utf8_encode(byte_level_char((uint8_t)c), u);
        if (id) cat(b, ",");
        jstr(b, u, (size_t)n);
        char v[16];
        snprintf(v, sizeof v, ":%d", id++);
        cat(b, v);
    }
    const char *extra[] = {"th", "he", "the", "in", "ing", "\xc4\xa0t", "\xc4\xa0the", "12", "123", "\xc4\x8a\xc4\x8a"};
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++) {
        char v[64];
        snprintf(v, sizeof v, ",\"%s\":%d", extra[i], id++);
        cat(b, v);
    }
    cat(b, "},\"merges\":[\"t h\",\"h e\",\"th e\",\"i n\",\"in g\",\"\xc4\xa0 t\",[\"\xc4\xa0t\",\"he\"],\"1 2\",\"12 3\","
           "\"\xc4\x8a \xc4\x8a\"]}");
}

static char *seed_gpt2(void) {
    ByteBuf b = {0};
    cat(&b, "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":266,\"content\":\"<|endoftext|>\",\"single_word\":false,"
            "\"lstrip\":false,\"rstrip\":false,\"normalized\":true,\"special\":true}],\"normalizer\":null,"
            "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
            "\"post_processor\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"ByteLevel\"},");
    byte_level_model(&b, 0);
    cat(&b, "}");
    bytebuf_append(&b, "", 1);
    return (char *)b.p;
}

static char *seed_llama3(void) {
    ByteBuf b = {0};
    cat(&b, "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":266,\"content\":\"<|begin_of_text|>\",\"special\":true,"
            "\"normalized\":false},{\"id\":267,\"content\":\"<mask>\",\"lstrip\":true,\"special\":true},"
            "{\"id\":269,\"content\":\"cat\","
            "\"single_word\":true,\"special\":false}],\"normalizer\":null,"
            "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
            "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+"
            "[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
            "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]},"
            "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|begin_of_text|>\","
            "\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<|begin_of_text|>\":"
            "{\"id\":\"<|begin_of_text|>\",\"ids\":[266],\"tokens\":[\"<|begin_of_text|>\"]}}},"
            "\"decoder\":{\"type\":\"ByteLevel\"},");
    byte_level_model(&b, 1);
    cat(&b, "}");
    bytebuf_append(&b, "", 1);
    return (char *)b.p;
}

/* Llama 2 style: characters, byte fallback, unk, a Prepend/Replace normalizer or Metaspace. */
static char *seed_spm(int metaspace) {
    ByteBuf b = {0};
    cat(&b, "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true,\"normalized\":false},"
            "{\"id\":1,\"content\":\"<s>\",\"special\":true,\"normalized\":false},{\"id\":2,\"content\":\"</s>\","
            "\"special\":true,\"normalized\":false},{\"id\":300,\"content\":\"<pad>\",\"special\":false,"
            "\"normalized\":true}],");
    if (metaspace)
        cat(&b, "\"normalizer\":null,\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\","
                "\"prepend_scheme\":\"first\",\"split\":true},\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
                "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"first\"},"
                "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},");
    else
        cat(&b, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
                "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xe2\x96\x81\"}]},\"pre_tokenizer\":null,"
                "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},"
                "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \","
                "\"start\":1,\"stop\":0}]},");
    cat(&b, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
            "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1]}}},"
            "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":true,\"vocab\":{"
            "\"<unk>\":0,\"<s>\":1,\"</s>\":2");
    int id = 3;
    for (int c = 0; c < 256; c++) {
        char v[32];
        snprintf(v, sizeof v, ",\"<0x%02X>\":%d", c, id++);
        cat(&b, v);
    }
    const char *chars = "abcdefghijklmnopqrstuvwxyz0123456789.,";
    for (const char *c = chars; *c; c++) {
        char v[32];
        snprintf(v, sizeof v, ",\"%c\":%d", *c, id++);
        cat(&b, v);
    }
    char v[64];
    snprintf(v, sizeof v, ",\"\xe2\x96\x81\":%d,\"\xe2\x96\x81t\":%d,\"\xe2\x96\x81th\":%d", id, id + 1, id + 2);
    cat(&b, v);
    id += 3;
    for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
        snprintf(v, sizeof v, ",\"%s\":%d", words[i], id++);
        cat(&b, v);
    }
    cat(&b, "},\"merges\":[[\"\xe2\x96\x81\",\"t\"],[\"\xe2\x96\x81t\",\"h\"],\"t h\",\"th e\",\"h e\",\"i n\",\"a n\",\"e r\","
            "\"o n\",\"r e\",\"in g\",\"a t\",\"e n\",\"1 2\",\"12 3\"]}}");
    bytebuf_append(&b, "", 1);
    return (char *)b.p;
}

/* Digits and every split behavior over a small character vocabulary. */
static char *seed_digits(void) {
    ByteBuf b = {0};
    static const char *const behaviors[] = {"Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous", "Isolated"};
    cat(&b, "{\"added_tokens\":[{\"id\":300,\"content\":\"<sep>\",\"rstrip\":true,\"special\":true},{\"id\":301,"
            "\"content\":\"  \",\"single_word\":true,\"normalized\":false}],"
            "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\",\"individual_digits\":true}");
    for (int i = 0; i < 5; i++) {
        char v[200];
        snprintf(v, sizeof v, ",{\"type\":\"Split\",\"pattern\":{\"%s\":\"%s\"},\"behavior\":\"%s\",\"invert\":%s}",
                 i % 2 ? "String" : "Regex", i % 2 ? " " : "[,.]", behaviors[i], i == 2 ? "true" : "false");
        cat(&b, v);
    }
    cat(&b, "]},\"model\":{\"type\":\"BPE\",\"vocab\":{\"<unk>\":0");
    int id = 1;
    for (int c = 32; c < 127; c++) {
        if (c == '"' || c == '\\') continue;
        char v[32];
        snprintf(v, sizeof v, ",\"%c\":%d", c, id++);
        cat(&b, v);
    }
    cat(&b, ",\"th\":200,\"the\":201},\"merges\":[\"t h\",\"th e\"],\"unk_token\":\"<unk>\"}}");
    bytebuf_append(&b, "", 1);
    return (char *)b.p;
}

/* ---------- mutations ---------- */

static const char *const tokens[] = {
    "{", "}", "[", "]", "\"", ",", ":", " ", "null", "true", "false", "0", "1", "-1", "65535", "16777216", "1e9",
    "\"\"", "\"\\u0000\"", "\"\\ud800\"", "\"\\n\"", "\"type\"", "\"BPE\"", "\"WordPiece\"", "\"Sequence\"",
    "\"Split\"", "\"ByteLevel\"", "\"Metaspace\"", "\"Digits\"", "\"Prepend\"", "\"Replace\"", "\"Strip\"",
    "\"ByteFallback\"", "\"Fuse\"", "\"TemplateProcessing\"", "\"Regex\"", "\"String\"", "\"(\"", "\"a*\"",
    "\"(?<=a)b\"", "\"\\\\\\\\\"", "\"[\"", "\"x{0,99999}\"", "\"behavior\"", "\"Isolated\"", "\"invert\"",
    "\"merges\"", "\"vocab\"", "\"added_tokens\"", "\"content\"", "\"lstrip\"", "\"rstrip\"", "\"single_word\"",
    "\"normalized\"", "\"special\"", "\"id\"", "\"ids\"", "\"unk_token\"", "\"byte_fallback\"", "\"fuse_unk\"",
    "\"ignore_merges\"", "\"dropout\"", "\"prepend_scheme\"", "\"first\"", "\"never\"", "\"replacement\"",
    "\"\xe2\x96\x81\"", "\"<0x0A>\"", "\"a b\"", "[\"a\",\"b\"]", "\"start\"", "\"stop\"", "\"continuing_subword_prefix\"",
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false}",
    "{\"id\":5,\"content\":\"ab\",\"lstrip\":true,\"rstrip\":true,\"single_word\":true,\"normalized\":true}",
};
enum { N_TOKENS = sizeof tokens / sizeof tokens[0] };

static void insert(ByteBuf *b, size_t at, const void *p, size_t n) {
    bytebuf_reserve(b, n);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, p, n);
    b->n += n;
}

static void erase(ByteBuf *b, size_t at, size_t n) {
    memmove(b->p + at, b->p + at + n, b->n - at - n);
    b->n -= n;
}

/* Values that keep the JSON well-formed: a string's contents or a number swapped for another,
 * so that most mutants get past the parser into the loader's own checks. */
static const char *const strings[] = {
    "", "a", "t", "th", "the", " ", "  ", "\\n", "\\u2581", "\u2581", "<0x0A>", "<0xZZ>", "<0x+A>", "<unk>", "<s>",
    "BPE", "Sequence", "Split", "ByteLevel", "Metaspace", "Digits", "Prepend", "Replace", "Strip", "Fuse",
    "ByteFallback", "TemplateProcessing", "Isolated", "Removed", "MergedWithNext", "MergedWithPrevious", "Contiguous",
    "always", "first", "never", "A", "\\s+", "\\p{L}+|\\s", "(?=a)", "(?<=\\n)x", "x*", "[", "\\", "t h", "th e",
    "\u00e9", "\\ud83d\\ude00", "1.0", "2.0",
};
static const char *const numbers[] = {"0", "1", "2", "3", "255", "256", "266", "299", "300", "-1", "1.5", "1e3"};
/* large ids cost the loader id tables of their size: tried now and then */
static const char *const big_numbers[] = {"65535", "65536", "262143", "16777216", "4294967296"};

static void swap_value(ByteBuf *b) {
    if (!b->n) return;
    size_t at = below(b->n);
    if (below(2)) { /* a string */
        while (at < b->n && b->p[at] != '"') at++;
        if (at >= b->n) return;
        size_t end = at + 1;
        while (end < b->n && b->p[end] != '"') end += b->p[end] == '\\' ? 2 : 1;
        if (end >= b->n) return;
        const char *v = strings[below(sizeof strings / sizeof strings[0])];
        erase(b, at + 1, end - at - 1);
        insert(b, at + 1, v, strlen(v));
    } else { /* a number */
        while (at < b->n && !(b->p[at] >= '0' && b->p[at] <= '9')) at++;
        if (at >= b->n || (at > 0 && b->p[at - 1] != ':' && b->p[at - 1] != ',' && b->p[at - 1] != '[')) return;
        size_t end = at;
        while (end < b->n && b->p[end] >= '0' && b->p[end] <= '9') end++;
        const char *v = below(16) ? numbers[below(sizeof numbers / sizeof numbers[0])]
                                  : big_numbers[below(sizeof big_numbers / sizeof big_numbers[0])];
        erase(b, at, end - at);
        insert(b, at, v, strlen(v));
    }
}

static void mutate(ByteBuf *b, char *const *seeds, int n_seeds) {
    if (below(2)) {
        swap_value(b);
        return;
    }
    switch (below(8)) {
    case 0: if (b->n) b->p[below(b->n)] ^= (uint8_t)(1u << below(8)); break;
    case 1: if (b->n) b->p[below(b->n)] = "\"{}[],:\\ 0\n\xff\x80"[below(14)]; break;
    case 2: b->n = below(b->n + 1); break; /* truncate */
    case 3: if (b->n) { size_t at = below(b->n); erase(b, at, below(b->n - at + 1) % 40); } break;
    case 4: case 5: { /* a JSON token somewhere */
        const char *t = tokens[below(N_TOKENS)];
        size_t at = below(b->n + 1);
        if (below(2)) erase(b, at, below(b->n - at + 1) % 16);
        insert(b, at, t, strlen(t));
        break;
    }
    case 6: { /* crossover */
        const char *s = seeds[below(n_seeds)];
        size_t len = strlen(s), from = below(len), n = below(len - from + 1) % 200;
        size_t at = below(b->n + 1);
        erase(b, at, below(b->n - at + 1) % 200);
        insert(b, at, s + from, n);
        break;
    }
    case 7: { /* duplicate a span (repeated keys, merges, tokens) */
        if (!b->n) break;
        size_t at = below(b->n), n = 1 + below(b->n - at < 300 ? b->n - at : 300);
        uint8_t tmp[300];
        memcpy(tmp, b->p + at, n);
        insert(b, below(b->n + 1), tmp, n);
        break;
    }
    }
}

/* ---------- texts ---------- */

static const char *const frags[] = {
    " ", "  ", "\n", "\n\n", "\r\n", "\t", "the", " the", "The", "ing", "123456", "'s", "'T", ".", ",", "!!",
    "<|endoftext|>", "<|begin_of_text|>", "<s>", "</s>", "<unk>", "<pad>", " <mask>", "<sep>  ", "cat", "concat",
    "\xe2\x96\x81", "\xc3\xa9", "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xc2\xa0", "\xe3\x80\x80", "\x80", "\xff",
    "\xe4\xb8", "\xed\xa0\x80", "\x00", "a", "Z", "9",
};

static void make_text(ByteBuf *t) {
    t->n = 0;
    size_t target = below(4) ? below(120) : below(2000);
    if (below(5) == 0) {
        bytebuf_reserve(t, target);
        for (size_t i = 0; i < target; i++) t->p[t->n++] = (uint8_t)rnd();
        return;
    }
    while (t->n < target) {
        const char *f = frags[below(sizeof frags / sizeof frags[0])];
        bytebuf_append(t, f, f[0] ? strlen(f) : 1);
    }
}

/* ---------- checks ---------- */

static void check_ids(const Tokenizer *t, const IdBuf *ids, const char *what) {
    for (size_t i = 0; i < ids->n; i++)
        if (ids->p[i] < 0 || ids->p[i] >= tokenizer_vocab_size(t)) FAIL("%s: id %d outside [0, %d)", what, ids->p[i], tokenizer_vocab_size(t));
    ByteBuf out = {0};
    if (tok_decode(t, ids->p, ids->n, 0, &out)) FAIL("%s: decoding its own ids failed: %s", what, myr_last_error());
    if (!utf8_is_valid(out.p, out.n)) FAIL("%s: decoded text is not valid UTF-8", what);
    bytebuf_free(&out);
}

static uint64_t cut_tries, cut_taken;
static const ByteBuf *current_json; /* the mutant being tried, written out when a check fails */

static void dump(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
}

/* Cut after a '\n' before [A-Za-z0-9]: the two pieces must give the whole text's ids. */
static void check_cut(const Tokenizer *t, TokEncoder *e, const ByteBuf *text, const IdBuf *whole, int must) {
    if (!tokenizer_can_cut(t, NULL)) return;
    size_t cands[64], n = 0;
    for (size_t c = 1; c < text->n && n < 64; c++) {
        uint8_t x = text->p[c];
        if (text->p[c - 1] == '\n' && ((x >= 'a' && x <= 'z') || (x >= 'A' && x <= 'Z') || (x >= '0' && x <= '9')))
            cands[n++] = c;
    }
    if (!n) return;
    size_t c = cands[below(n)], la = 1 + below(text->n - c);
    IdBuf ids = {0};
    cut_tries++;
    int rc = tok_encode_piece(e, text->p, c, la, 1, &ids);
    if (rc) {
        if (must) FAIL("a cut the encoder must accept was refused: %s", myr_last_error());
        idbuf_free(&ids);
        return;
    }
    cut_taken++;
    if (tok_encode_piece(e, text->p + c, text->n - c, 0, 0, &ids)) FAIL("second piece: %s", myr_last_error());
    if (ids.n != whole->n || memcmp(ids.p, whole->p, ids.n * sizeof *ids.p)) {
        /* keep the case for a reproduction: build/fuzz/failed.json (NULL: a seed) and failed.txt */
        if (current_json) dump("build/fuzz/failed.json", current_json->p, current_json->n);
        dump("build/fuzz/failed.txt", text->p, text->n);
        FAIL("pieces cut at %zu give other ids than the whole text (%zu vs %zu ids)", c, ids.n, whole->n);
    }
    idbuf_free(&ids);
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 100000;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 20240520;
    printf("fuzz seed %" PRIu64 ", %ld inputs per target\n", rng_state, n);
    char *seeds[5] = {seed_gpt2(), seed_llama3(), seed_spm(0), seed_spm(1), seed_digits()};
    const char *names[5] = {"gpt2", "llama3", "llama2", "metaspace", "digits"};
    Tokenizer *tok[5];
    TokEncoder *enc[5];
    for (int i = 0; i < 5; i++) {
        if (tokenizer_load_json(seeds[i], strlen(seeds[i]), names[i], &tok[i])) FAIL("seed %s: %s", names[i], myr_last_error());
        enc[i] = tok_encoder_new(tok[i]);
    }
    if (!tokenizer_can_cut(tok[0], NULL) || !tokenizer_can_cut(tok[1], NULL) || !tokenizer_can_cut(tok[2], NULL))
        FAIL("the GPT-2, Llama 3 and Llama 2 seeds must allow cuts");
    tok_regex_disable_jit(); /* the mutants: thousands of compiles (the seeds above keep their JIT) */
    ByteBuf json = {0}, text = {0};
    IdBuf ids = {0};
    uint64_t accepted = 0, rejected = 0;
    for (long i = 0; i < n; i++) {
        int s = (int)below(5);
        json.n = 0;
        bytebuf_append(&json, seeds[s], strlen(seeds[s]));
        int rounds = 1 + (int)below(4);
        for (int k = 0; k < rounds; k++) mutate(&json, seeds, 5);
        char *exact = malloc(json.n ? json.n : 1); /* exact size: any over-read is caught */
        memcpy(exact, json.p, json.n);
        Tokenizer *t;
        if (tokenizer_load_json(exact, json.n, "fuzz.json", &t) == 0) {
            accepted++;
            TokEncoder *e = tok_encoder_new(t);
            current_json = &json;
            make_text(&text);
            ids.n = 0;
            if (tok_encode(e, text.p, text.n, &ids)) FAIL("encode with an accepted tokenizer failed: %s", myr_last_error());
            check_ids(t, &ids, "mutated tokenizer");
            check_cut(t, e, &text, &ids, 0);
            current_json = NULL;
            tok_encoder_free(e);
            tokenizer_free(t);
        } else {
            rejected++;
            const char *m = myr_last_error();
            if (!m[0] || strchr(m, '\n')) FAIL("rejection message is not one line: '%s'", m);
        }
        free(exact);
    }
    printf("fuzz tokenizer.json %" PRIu64 " inputs: %" PRIu64 " accepted, %" PRIu64 " rejected (%.1f s)\n",
           accepted + rejected, accepted, rejected, (double)clock() / CLOCKS_PER_SEC);
    ByteBuf clean = {0}, back = {0};
    for (long i = 0; i < n; i++) {
        int s = (int)(i % 5);
        make_text(&text);
        uint8_t *exact = malloc(text.n ? text.n : 1);
        memcpy(exact, text.p, text.n);
        ids.n = 0;
        if (tok_encode(enc[s], exact, text.n, &ids)) FAIL("%s: encode failed: %s", names[s], myr_last_error());
        check_ids(tok[s], &ids, names[s]);
        if (s == 0) { /* GPT-2: bytes in, the same text out */
            clean.n = back.n = 0;
            utf8_sanitize(exact, text.n, &clean);
            if (tok_decode(tok[0], ids.p, ids.n, 0, &back) || back.n != clean.n || memcmp(back.p, clean.p, clean.n))
                FAIL("gpt2: decode(encode(x)) != x");
        }
        check_cut(tok[s], enc[s], &text, &ids, s <= 3);
        free(exact);
    }
    printf("fuzz encode %ld inputs over 5 tokenizers; %" PRIu64 " documents cut, %" PRIu64 " cuts accepted and equal "
           "to the whole (%.1f s)\n", n, cut_tries, cut_taken, (double)clock() / CLOCKS_PER_SEC);
    printf("fuzz tokenizer: no crash\n");
    for (int i = 0; i < 5; i++) {
        tok_encoder_free(enc[i]);
        tokenizer_free(tok[i]);
        free(seeds[i]);
    }
    bytebuf_free(&json);
    bytebuf_free(&text);
    bytebuf_free(&clean);
    bytebuf_free(&back);
    idbuf_free(&ids);
    return 0;
}
