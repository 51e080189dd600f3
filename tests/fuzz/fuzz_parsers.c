/* fuzz_parsers.c: a seeded mutation fuzzer for the three parsers that read untrusted bytes:
 * safetensors headers (st_parse), config.json (hf_config_parse) and llm.c shard headers
 * (shards_parse_header). Built with AddressSanitizer + UBSan by tests/test_fuzz.sh.
 * Inputs start from valid seeds and get 1-4 stacked mutations: bit flips, byte sets,
 * truncation, insertion, deletion, length-field tweaks, JSON-token splicing and crossover.
 * Every input lives in its own exact-size heap buffer so any over-read is caught. Besides "no
 * crash", accepted inputs must satisfy the parser's promises and rejected ones must leave a
 * one-line message. Usage: fuzz_parsers [inputs_per_parser] [seed] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/shards.h"
#include "model/hf_config.h"
#include "io/safetensors.h"
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

/* ---------- a growable byte buffer ---------- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void buf_reserve(Buf *b, size_t n) {
    if (n <= b->cap) return;
    b->cap = n * 2 + 64;
    b->p = realloc(b->p, b->cap);
    if (!b->p) abort();
}
static void buf_set(Buf *b, const void *p, size_t n) {
    buf_reserve(b, n);
    memcpy(b->p, p, n);
    b->n = n;
}
static void buf_insert(Buf *b, size_t at, const void *p, size_t n) {
    buf_reserve(b, b->n + n);
    memmove(b->p + at + n, b->p + at, b->n - at);
    memcpy(b->p + at, p, n);
    b->n += n;
}
static void buf_erase(Buf *b, size_t at, size_t n) {
    memmove(b->p + at, b->p + at + n, b->n - at - n);
    b->n -= n;
}

/* ---------- seeds ---------- */

static const char *const st_headers[] = {
    "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"b\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[24,32]},\"c\":{\"dtype\":\"BF16\",\"shape\":[],"
    "\"data_offsets\":[32,34]},\"d\":{\"dtype\":\"F64\",\"shape\":[1,1],\"data_offsets\":[34,42]}}",
    "{\"w\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]},\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],"
    "\"data_offsets\":[24,24]},\"m\":{\"dtype\":\"BOOL\",\"shape\":[2,2,2],\"data_offsets\":[24,32]},"
    "\"u\":{\"dtype\":\"U8\",\"shape\":[10],\"data_offsets\":[32,42]}}",
    "{\"transformer.wte.weight\":{\"dtype\":\"F32\",\"shape\":[5,2],\"data_offsets\":[2,42]},\"__metadata__\":{}}",
    "{}",
};
static const char *const configs[] = {
    "{\"activation_function\": \"gelu_new\", \"architectures\": [\"GPT2LMHeadModel\"], \"layer_norm_epsilon\": 1e-05,"
    " \"model_type\": \"gpt2\", \"n_ctx\": 1024, \"n_embd\": 768, \"n_head\": 12, \"n_inner\": null, \"n_layer\": 12,"
    " \"n_positions\": 1024, \"vocab_size\": 50257, \"tie_word_embeddings\": true}",
    "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_act\": \"silu\", \"hidden_size\": 2048,"
    " \"intermediate_size\": 5632, \"max_position_embeddings\": 2048, \"model_type\": \"llama\","
    " \"num_attention_heads\": 32, \"num_hidden_layers\": 22, \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-05,"
    " \"rope_scaling\": null, \"rope_theta\": 10000.0, \"tie_word_embeddings\": false, \"vocab_size\": 32000}",
    "{\"model_type\":\"llama\",\"num_hidden_layers\":2,\"hidden_size\":16,\"num_attention_heads\":4,"
    "\"intermediate_size\":40,\"vocab_size\":50,\"max_position_embeddings\":32}",
};

static const char *const json_tokens[] = {
    "{", "}", "[", "]", "\"", ",", ":", " ", "null", "true", "false", "-0", "0", "1", "-1", "1e400", "-1e400",
    "2147483648", "4294967296", "9007199254740993", "18446744073709551616", "1.5", "0.0", "1e-45", "\"\"",
    "\"\\u0000\"", "\"\\n\"", "\"\\ud800\"", "[]", "{}", "[0,0]", "[0,4]", "[1]", "[-1]", "[1,1,1,1,1,1,1,1,1]",
    "\"dtype\"", "\"F32\"", "\"F16\"", "\"BF16\"", "\"F64\"", "\"I8\"", "\"F8_E4M3\"", "\"shape\"",
    "\"data_offsets\"", "\"__metadata__\"", "\"model_type\"", "\"gpt2\"", "\"llama\"", "\"bert\"", "\"n_embd\"",
    "\"n_head\"", "\"hidden_size\"", "\"num_key_value_heads\"", "\"rope_scaling\"", "\"n_inner\"",
    "\"tie_word_embeddings\"", "\"head_dim\"", "{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}",
    "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},",
};
enum { N_JSON_TOKENS = sizeof json_tokens / sizeof json_tokens[0] };

static const uint8_t interesting_bytes[] = {0, 1, 0x7f, 0x80, 0xff, '"', '{', '}', '[', ']', ',', ':',
                                            '-', '0', '9', 'e', '.', '\\', ' ', '\n'};

/* ---------- mutations ---------- */

/* Byte-level mutations that apply to any input. */
static void mutate_bytes(Buf *b) {
    switch (below(6)) {
    case 0: if (b->n) b->p[below(b->n)] ^= (uint8_t)(1u << below(8)); break;                      /* bit flip */
    case 1: if (b->n) b->p[below(b->n)] = interesting_bytes[below(sizeof interesting_bytes)]; break; /* byte set */
    case 2: b->n = below(b->n + 1); break;                                                          /* truncate */
    case 3: {                                                                                       /* insert */
        uint8_t ins[16];
        size_t n = 1 + below(sizeof ins);
        for (size_t i = 0; i < n; i++) ins[i] = (uint8_t)rnd();
        buf_insert(b, below(b->n + 1), ins, n);
        break;
    }
    case 4: if (b->n) { size_t at = below(b->n); buf_erase(b, at, below(b->n - at) % 32 + (at < b->n)); } break;
    case 5: if (b->n > 1) { /* duplicate a chunk somewhere else */
            size_t at = below(b->n), n = 1 + below(b->n - at < 64 ? b->n - at : 64);
            uint8_t tmp[64];
            memcpy(tmp, b->p + at, n);
            buf_insert(b, below(b->n + 1), tmp, n);
        }
        break;
    }
}

/* JSON-aware mutations: splice tokens, replace numbers, cross over with another seed. */
static void mutate_json(Buf *b, const char *const *seeds, int n_seeds) {
    switch (below(4)) {
    case 0: { /* insert a token */
        const char *t = json_tokens[below(N_JSON_TOKENS)];
        buf_insert(b, below(b->n + 1), t, strlen(t));
        break;
    }
    case 1: { /* replace a span with a token */
        const char *t = json_tokens[below(N_JSON_TOKENS)];
        size_t at = below(b->n + 1), n = below(b->n - at + 1) % 12;
        buf_erase(b, at, n);
        buf_insert(b, at, t, strlen(t));
        break;
    }
    case 2: { /* replace a run of digits with another number */
        if (!b->n) break;
        size_t at = below(b->n);
        while (at < b->n && !(b->p[at] >= '0' && b->p[at] <= '9')) at++;
        size_t end = at;
        while (end < b->n && ((b->p[end] >= '0' && b->p[end] <= '9') || b->p[end] == '.')) end++;
        static const char *const nums[] = {"0", "-1", "1", "3", "8", "65535", "2147483647", "2147483648", "1e9",
                                           "1.5", "1e400", "9007199254740993", "-0", "1e-400"};
        const char *t = nums[below(sizeof nums / sizeof nums[0])];
        buf_erase(b, at, end - at);
        buf_insert(b, at, t, strlen(t));
        break;
    }
    case 3: { /* crossover: splice a random piece of another seed */
        const char *s = seeds[below(n_seeds)];
        size_t len = strlen(s), from = below(len), n = below(len - from + 1) % 80;
        size_t at = below(b->n + 1), cut = below(b->n - at + 1) % 80;
        buf_erase(b, at, cut);
        buf_insert(b, at, s + from, n);
        break;
    }
    }
}

/* ---------- targets ---------- */

static uint64_t accepted[3], rejected[3];

static void check_message(const char *what) {
    const char *m = myr_last_error();
    if (!m[0] || strchr(m, '\n')) FAIL("%s: rejection message is not one line: '%s'", what, m);
}

/* Run st_parse on an exact-size copy and check what it promises. */
static void run_safetensors(const Buf *in) {
    uint8_t *p = malloc(in->n ? in->n : 1);
    memcpy(p, in->p, in->n);
    StFile f;
    if (st_parse(p, in->n, &f) == 0) {
        accepted[0]++;
        if (f.data < p || f.data + f.data_size != p + in->n) FAIL("data section outside the buffer");
        for (int i = 0; i < f.n; i++) {
            const StTensor *t = &f.tensors[i];
            if (t->begin > t->end || t->end > f.data_size) FAIL("tensor %d range outside the data", i);
            if ((uint64_t)st_numel(t) * st_dtype_size(t->dtype) != t->end - t->begin) FAIL("tensor %d size", i);
            if (st_find(&f, t->name) != t) FAIL("st_find");
            if (t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64) {
                int64_t n = st_numel(t);
                float *dst = malloc(n ? (size_t)n * sizeof *dst : 1);
                if (st_read_f32(&f, t, dst, n)) FAIL("read of accepted tensor failed: %s", myr_last_error());
                free(dst);
            }
        }
        st_close(&f);
    } else {
        rejected[0]++;
        check_message("safetensors");
    }
    free(p);
}

static void run_config(const Buf *in) {
    char *p = malloc(in->n ? in->n : 1); /* not NUL-terminated, on purpose */
    memcpy(p, in->p, in->n);
    ModelConfig c;
    if (hf_config_parse(p, in->n, "fuzz.json", &c) == 0) {
        accepted[1]++;
        if (model_config_validate(&c)) FAIL("accepted config does not validate: %s", myr_last_error());
    } else {
        rejected[1]++;
        check_message("config");
    }
    free(p);
}

static void run_shard(const Buf *in) {
    uint8_t *p = malloc(in->n ? in->n : 1);
    memcpy(p, in->p, in->n);
    int width;
    uint64_t count;
    if (shards_parse_header(p, in->n, "fuzz.bin", &width, &count) == 0) {
        accepted[2]++;
        if ((width != 2 && width != 4) || SHARD_HEADER_BYTES + count * width != in->n) FAIL("shard size promise");
        uint64_t sum = 0; /* touch every token the header promises */
        for (uint64_t i = 0; i < count * width; i++) sum += p[SHARD_HEADER_BYTES + i];
        (void)sum;
    } else {
        rejected[2]++;
        check_message("shard");
    }
    free(p);
}

/* ---------- input generators ---------- */

static void make_safetensors(Buf *out, Buf *scratch) {
    const char *h = st_headers[below(sizeof st_headers / sizeof st_headers[0])];
    buf_set(scratch, h, strlen(h));
    int rounds = 1 + (int)below(4), raw = below(4) == 0; /* mostly mutate the header, keep the length right */
    for (int i = 0; i < rounds && !raw; i++) {
        if (below(3)) mutate_json(scratch, st_headers, sizeof st_headers / sizeof st_headers[0]);
        else mutate_bytes(scratch);
    }
    uint64_t hlen = scratch->n;
    size_t data = below(4) ? 42 : below(64);
    out->n = 0;
    buf_reserve(out, 8 + scratch->n + data);
    memcpy(out->p, &hlen, 8);
    memcpy(out->p + 8, scratch->p, scratch->n);
    for (size_t i = 0; i < data; i++) out->p[8 + scratch->n + i] = (uint8_t)rnd();
    out->n = 8 + scratch->n + data;
    if (raw || below(8) == 0) { /* now break the framing too */
        int n = 1 + (int)below(3);
        for (int i = 0; i < n; i++) {
            if (below(2)) {
                uint64_t v;
                memcpy(&v, out->p, 8);
                static const int64_t deltas[] = {-8, -1, 1, 7, 8, 1000};
                switch (below(4)) {
                case 0: v += (uint64_t)deltas[below(6)]; break;
                case 1: v = rnd(); break;
                case 2: v = below(out->n + 16); break;
                case 3: v = UINT64_MAX - below(16); break;
                }
                memcpy(out->p, &v, 8);
            } else {
                mutate_bytes(out);
                if (out->n < 8) break;
            }
        }
    }
}

static void make_config(Buf *out) {
    const char *s = configs[below(sizeof configs / sizeof configs[0])];
    buf_set(out, s, strlen(s));
    int rounds = 1 + (int)below(4);
    for (int i = 0; i < rounds; i++)
        if (below(3)) mutate_json(out, configs, sizeof configs / sizeof configs[0]);
        else mutate_bytes(out);
}

static void make_shard(Buf *out) {
    int v7 = (int)below(2);
    uint64_t n = below(4) ? below(64) : 0;
    size_t width = v7 ? 4 : 2;
    buf_reserve(out, SHARD_HEADER_BYTES + n * width);
    memset(out->p, 0, SHARD_HEADER_BYTES);
    int32_t h[3] = {v7 ? SHARD_MAGIC_V7 : SHARD_MAGIC_V1, v7 ? 7 : 1, (int32_t)n};
    memcpy(out->p, h, sizeof h);
    for (size_t i = 0; i < n * width; i++) out->p[SHARD_HEADER_BYTES + i] = (uint8_t)rnd();
    out->n = SHARD_HEADER_BYTES + n * width;
    int rounds = 1 + (int)below(4);
    for (int i = 0; i < rounds; i++) {
        if (below(2) && out->n >= 12) { /* header field tweak */
            static const int32_t vals[] = {0, 1, 7, -1, 2, 20240520, 20240801, 20240521, INT32_MAX, INT32_MIN,
                                           64, 65};
            int32_t v = below(3) ? vals[below(sizeof vals / sizeof vals[0])] : (int32_t)rnd();
            size_t field = below(3);
            if (field == 2 && below(2)) { /* count off by a little */
                int32_t c;
                memcpy(&c, out->p + 8, 4);
                v = (int32_t)((uint32_t)c + (uint32_t)below(5) - 2u);
            }
            memcpy(out->p + 4 * field, &v, 4);
        } else {
            mutate_bytes(out);
        }
    }
}

int main(int argc, char **argv) {
    long per_parser = argc > 1 ? atol(argv[1]) : 100000;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 20240520;
    printf("fuzz seed %" PRIu64 ", %ld inputs per parser\n", rng_state, per_parser);
    Buf in = {0}, scratch = {0};
    for (long i = 0; i < per_parser; i++) {
        make_safetensors(&in, &scratch);
        run_safetensors(&in);
        make_config(&in);
        run_config(&in);
        make_shard(&in);
        run_shard(&in);
    }
    const char *names[3] = {"safetensors", "config.json", "shard header"};
    uint64_t total = 0;
    for (int t = 0; t < 3; t++) {
        printf("fuzz %-12s %" PRIu64 " inputs: %" PRIu64 " accepted, %" PRIu64 " rejected\n", names[t],
               accepted[t] + rejected[t], accepted[t], rejected[t]);
        total += accepted[t] + rejected[t];
    }
    printf("fuzz total %" PRIu64 " inputs, no crash\n", total);
    free(in.p);
    free(scratch.p);
    return 0;
}
