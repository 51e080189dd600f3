/* test_loader.c: batch order. Hand-computed windows without shuffle (including wrap-around and
 * partial rows), shuffle determinism (same seed same order, different seed different order,
 * every epoch a permutation of all windows), the permutation against a Python implementation
 * of the documented algorithm, and identical batches whether the data is one shard or many. */
#include <stdint.h>
#include <string.h>

#include "data/loader.h"
#include "files.h"
#include "test.h"
#include "util/error.h"

static const char *dir;

/* A shard whose token i is i (so every token names its own position). */
static TokenData *numbered(const char *name, uint64_t first, uint64_t n) {
    int32_t *t = malloc((n + 1) * sizeof *t);
    for (uint64_t i = 0; i < n; i++) t[i] = (int32_t)(first + i);
    const char *p = path_in(dir, name);
    if (shard_write(p, t, n, 1)) fprintf(stderr, "%s\n", myr_last_error());
    free(t);
    TokenData *d = NULL;
    if (tokens_open(p, &d)) fprintf(stderr, "%s\n", myr_last_error());
    return d;
}

static int same(const int32_t *a, const int32_t *b, int n) { return !memcmp(a, b, n * sizeof *a); }

static void test_sequential_windows(void) {
    TokenData *d = numbered("n100.bin", 0, 100);
    BatchLoader l;
    CHECK(loader_init(&l, d, 2, 4, 0, 0) == 0, "%s", myr_last_error());
    CHECK(l.windows == 12, "W = floor(99 / 8) = 12, got %lu", (unsigned long)l.windows);
    int32_t x[8], y[8];
    CHECK(loader_batch(&l, 0, 0, 2, x, y) == 0, "batch 0");
    CHECK(same(x, (int32_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 8) && same(y, (int32_t[]){1, 2, 3, 4, 5, 6, 7, 8}, 8), "batch 0");
    CHECK(loader_batch(&l, 11, 0, 2, x, y) == 0, "batch 11");
    CHECK(same(x, (int32_t[]){88, 89, 90, 91, 92, 93, 94, 95}, 8) &&
              same(y, (int32_t[]){89, 90, 91, 92, 93, 94, 95, 96}, 8), "batch 11 (last full window)");
    CHECK(loader_batch(&l, 12, 0, 2, x, y) == 0, "batch 12");
    CHECK(same(x, (int32_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 8), "batch 12 wraps to window 0");
    CHECK(loader_batch(&l, 25, 0, 2, x, y) == 0, "batch 25");
    CHECK(same(x, (int32_t[]){8, 9, 10, 11, 12, 13, 14, 15}, 8) &&
              same(y, (int32_t[]){9, 10, 11, 12, 13, 14, 15, 16}, 8), "batch 25 = window 1");
    CHECK(loader_batch(&l, 3, 1, 1, x, y) == 0, "row 1 of batch 3");
    CHECK(same(x, (int32_t[]){28, 29, 30, 31}, 4) && same(y, (int32_t[]){29, 30, 31, 32}, 4), "row 1 of batch 3");
    CHECK(loader_batch(&l, 3, 1, 2, x, y) == -1 && one_line(myr_last_error()), "rows past B refused");
    CHECK(loader_batch(&l, 3, -1, 1, x, y) == -1, "negative row refused");
    CHECK(loader_window(&l, 1000000007) == 1000000007 % 12, "window of a far batch");
    loader_free(&l);
    tokens_close(d);
}

static void test_too_little_data(void) {
    TokenData *d = numbered("n9.bin", 0, 9);
    BatchLoader l;
    CHECK(loader_init(&l, d, 2, 4, 1, 5) == 0 && l.windows == 1, "exactly B*T+1 tokens is one window");
    int32_t x[8], y[8];
    CHECK(loader_batch(&l, 7, 0, 2, x, y) == 0 && x[0] == 0 && y[7] == 8, "the only window");
    loader_free(&l);
    CHECK(loader_init(&l, d, 2, 5, 0, 0) == -1 && strstr(myr_last_error(), "needs 11") && one_line(myr_last_error()),
          "%s", myr_last_error());
    CHECK(loader_init(&l, d, 0, 5, 0, 0) == -1, "B = 0 refused");
    tokens_close(d);
}

static void windows_of(BatchLoader *l, uint64_t from, uint64_t n, uint64_t *out) {
    for (uint64_t k = 0; k < n; k++) out[k] = loader_window(l, from + k);
}

static void test_shuffle_determinism(void) {
    TokenData *d = numbered("n1000.bin", 0, 1000);
    enum { B = 3, T = 5 };
    BatchLoader a, b, c;
    CHECK(loader_init(&a, d, B, T, 1, 1234) == 0 && loader_init(&b, d, B, T, 1, 1234) == 0 &&
              loader_init(&c, d, B, T, 1, 1235) == 0, "init");
    uint64_t W = a.windows; /* floor(999 / 15) = 66 */
    CHECK(W == 66, "W = %lu", (unsigned long)W);
    uint64_t wa[3 * 66], wb[3 * 66], wc[3 * 66];
    windows_of(&a, 0, 3 * W, wa);
    windows_of(&c, 0, 3 * W, wc);
    /* b visits the batches in a scrambled order: the answer must not depend on call order */
    for (uint64_t k = 0; k < 3 * W; k++) wb[(k * 7) % (3 * W)] = loader_window(&b, (k * 7) % (3 * W));
    CHECK(!memcmp(wa, wb, sizeof wa), "same seed, same order (regardless of call order)");
    CHECK(memcmp(wa, wc, W * sizeof *wa) != 0, "different seed, different order");
    for (int e = 0; e < 3; e++) {
        int seen[66] = {0}, ok = 1;
        for (uint64_t k = 0; k < W; k++) ok &= wa[e * W + k] < W && !seen[wa[e * W + k]]++;
        CHECK(ok, "epoch %d visits every window exactly once", e);
    }
    CHECK(memcmp(wa, wa + W, W * sizeof *wa) != 0, "epochs 0 and 1 differ");
    uint64_t identity = 0;
    for (uint64_t k = 0; k < W; k++) identity += wa[k] == k;
    CHECK(identity < W / 2, "epoch 0 is shuffled (%lu fixed points)", (unsigned long)identity);
    /* the batch contents are the chosen window's tokens */
    int32_t x[B * T], y[B * T];
    for (uint64_t k = 0; k < 2 * W; k += 5) {
        CHECK(loader_batch(&a, k, 0, B, x, y) == 0, "batch");
        int32_t base = (int32_t)(wa[k] * B * T);
        for (int i = 0; i < B * T; i++) CHECK(x[i] == base + i && y[i] == base + i + 1, "batch %lu token %d", (unsigned long)k, i);
    }
    loader_free(&a), loader_free(&b), loader_free(&c);
    tokens_close(d);
}

/* The permutation as an independent Python implementation of docs/FORMATS.md computes it. */
static void test_permutation_matches_python(void) {
    struct { uint64_t seed, epoch, n; } cases[] = {{1234, 0, 12}, {1234, 3, 12}, {0, 0, 1000}, {18446744073709551615ULL, 7, 257}};
    for (int c = 0; c < 4; c++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/py/data_oracle.py perm %llu %llu %llu",
                 (unsigned long long)cases[c].seed, (unsigned long long)cases[c].epoch, (unsigned long long)cases[c].n);
        FILE *p = popen(cmd, "r");
        uint64_t *want = malloc(cases[c].n * sizeof *want), *got = malloc(cases[c].n * sizeof *got);
        int read_all = 1;
        for (uint64_t i = 0; i < cases[c].n; i++) {
            unsigned long long v;
            read_all &= fscanf(p, "%llu", &v) == 1;
            want[i] = v;
        }
        CHECK(pclose(p) == 0 && read_all, "python ran");
        loader_permutation(cases[c].seed, cases[c].epoch, cases[c].n, got);
        CHECK(!memcmp(want, got, cases[c].n * sizeof *got), "case %d: permutation differs from the Python oracle", c);
        free(want), free(got);
    }
}

/* The same tokens cut into shards of different sizes give the same batches. */
static void test_batches_span_shards(void) {
    TokenData *one = numbered("span_all.bin", 0, 500);
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/span", dir);
    mkdir(sub, 0755);
    uint64_t cuts[] = {0, 7, 7, 130, 131, 400, 500}; /* includes an empty shard */
    for (int i = 0; i + 1 < 7; i++) {
        char name[64];
        snprintf(name, sizeof name, "span/%02d.bin", i);
        tokens_close(numbered(name, cuts[i], cuts[i + 1] - cuts[i]));
    }
    TokenData *many;
    CHECK(tokens_open(sub, &many) == 0 && tokens_count(many) == 500, "%s", myr_last_error());
    for (int shuffle = 0; shuffle <= 1; shuffle++) {
        BatchLoader a, b;
        loader_init(&a, one, 4, 9, shuffle, 99);
        loader_init(&b, many, 4, 9, shuffle, 99);
        int32_t xa[36], ya[36], xb[36], yb[36];
        for (uint64_t k = 0; k < 3 * a.windows; k++) {
            CHECK(loader_batch(&a, k, 1, 3, xa, ya) == 0 && loader_batch(&b, k, 1, 3, xb, yb) == 0, "batches");
            CHECK(same(xa, xb, 27) && same(ya, yb, 27), "batch %lu (shuffle %d) equal", (unsigned long)k, shuffle);
        }
        loader_free(&a), loader_free(&b);
    }
    tokens_close(one);
    tokens_close(many);
}

int main(void) {
    dir = tmpdir_make();
    RUN(test_sequential_windows);
    RUN(test_too_little_data);
    RUN(test_shuffle_determinism);
    if (python_has("numpy")) RUN(test_permutation_matches_python);
    else SKIP(test_permutation_matches_python, "/usr/bin/python3 not found");
    RUN(test_batches_span_shards);
    tmpdir_remove(dir);
    return TEST_SUMMARY();
}
