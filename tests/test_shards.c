/* test_shards.c: llm.c token shards: header bytes, v1/v7 round trips, files written by numpy the
 * way llm.c does, --data specs (file, directory, glob; sorted), reads spanning shards, and every
 * error (truncated, wrong magic, bad version, extra bytes, missing, empty match) as one line. */
#include <stdint.h>
#include <string.h>

#include "data/shards.h"
#include "files.h"
#include "test.h"
#include "util/error.h"

static const char *dir;

static void test_header_bytes(void) {
    int32_t toks[5] = {0, 1, 255, 256, 65535};
    const char *p = path_in(dir, "h.bin");
    CHECK(shard_write(p, toks, 5, 1) == 0, "%s", myr_last_error());
    size_t n;
    unsigned char *b = file_read(p, &n);
    CHECK(n == 1024 + 10, "size %zu", n);
    int32_t h[256];
    memcpy(h, b, 1024);
    CHECK(h[0] == 20240520 && h[1] == 1 && h[2] == 5, "header %d %d %d", h[0], h[1], h[2]);
    int zero = 1;
    for (int i = 3; i < 256; i++) zero &= h[i] == 0;
    CHECK(zero, "rest of the header is zero");
    /* little-endian uint16 tokens, by hand */
    unsigned char want[10] = {0, 0, 1, 0, 255, 0, 0, 1, 255, 255};
    CHECK(!memcmp(b + 1024, want, 10), "token bytes");
    free(b);
    int32_t big[2] = {70000, 2147483647};
    p = path_in(dir, "h7.bin");
    CHECK(shard_write(p, big, 2, 7) == 0, "%s", myr_last_error());
    b = file_read(p, &n);
    memcpy(h, b, 12);
    CHECK(n == 1024 + 8 && h[0] == 20240801 && h[1] == 7 && h[2] == 2, "v7 header");
    uint32_t t[2];
    memcpy(t, b + 1024, 8);
    CHECK(t[0] == 70000 && t[1] == 2147483647u, "v7 tokens");
    free(b);
}

static void test_roundtrip_and_width_limits(void) {
    enum { N = 5000 };
    int32_t *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    for (int i = 0; i < N; i++) in[i] = (i * 40503) % 65536;
    for (int v = 1; v <= 7; v += 6) {
        const char *p = path_in(dir, "rt.bin");
        CHECK(shard_write(p, in, N, v) == 0, "write v%d", v);
        TokenData *d;
        CHECK(tokens_open(p, &d) == 0, "%s", myr_last_error());
        if (!d) continue;
        CHECK(tokens_count(d) == N && tokens_shard_version(d, 0) == v, "count/version");
        CHECK(tokens_read(d, 0, N, out) == 0 && !memcmp(in, out, N * sizeof *in), "v%d round trip", v);
        tokens_close(d);
    }
    /* a token that does not fit uint16 is refused and the existing shard kept */
    size_t n0, n1;
    unsigned char *before = file_read(path_in(dir, "rt.bin"), &n0);
    in[4321] = 65536;
    CHECK(shard_write(path_in(dir, "rt.bin"), in, N, 1) == -1 && strstr(myr_last_error(), "65536") &&
              strstr(myr_last_error(), "--version 7") && one_line(myr_last_error()), "%s", myr_last_error());
    unsigned char *after = file_read(path_in(dir, "rt.bin"), &n1);
    CHECK(before && after && n0 == n1 && !memcmp(before, after, n0), "old shard untouched");
    CHECK(!file_exists(path_in(dir, "rt.bin.tmp")), "no temporary left");
    in[4321] = -1;
    CHECK(shard_write(path_in(dir, "rt.bin"), in, N, 7) == -1 && one_line(myr_last_error()), "negative refused");
    CHECK(shard_write(path_in(dir, "rt.bin"), in, N, 3) == -1 && strstr(myr_last_error(), "version 3"), "bad version");
    free(before), free(after), free(in), free(out);
}

static int32_t oracle_token(uint64_t i, int version) {
    uint64_t m = version == 1 ? 65536 : 2147483647;
    return (int32_t)((i * 7919 + 13) % m);
}

/* numpy writes shards the way llm.c's scripts do; we read the exact token sequence. */
static void test_reads_numpy_shards(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 tests/py/data_oracle.py shard %s/np_a.bin 1 3000 && "
             "/usr/bin/python3 tests/py/data_oracle.py shard %s/np_b.bin 7 100000", dir, dir);
    CHECK(system(cmd) == 0, "python wrote shards");
    TokenData *d;
    CHECK(tokens_open(path_in(dir, "np_*.bin"), &d) == 0, "%s", myr_last_error());
    if (!d) return;
    CHECK(tokens_num_shards(d) == 2 && tokens_count(d) == 103000, "two shards, 103000 tokens");
    int32_t *t = malloc(103000 * sizeof *t);
    CHECK(tokens_read(d, 0, 103000, t) == 0, "%s", myr_last_error());
    int bad = 0;
    for (uint64_t i = 0; i < 3000; i++) bad += t[i] != oracle_token(i, 1);
    for (uint64_t i = 0; i < 100000; i++) bad += t[3000 + i] != oracle_token(i, 7);
    CHECK(bad == 0, "%d tokens differ", bad);
    free(t);
    tokens_close(d);
}

/* Shards with tokens numbered globally, to check ordering and reads that span shards. */
static void write_numbered(const char *name, uint64_t first, uint64_t n) {
    int32_t *t = malloc((n + 1) * sizeof *t);
    for (uint64_t i = 0; i < n; i++) t[i] = (int32_t)(first + i);
    CHECK(shard_write(name, t, n, 7) == 0, "%s", myr_last_error());
    free(t);
}

static void test_specs_and_spanning_reads(void) {
    char sub[512];
    snprintf(sub, sizeof sub, "%s/specs", dir);
    mkdir(sub, 0755);
    /* created out of order; sorted by name: a (0..99), b (empty), c (100..149), d (150..151) */
    write_numbered(path_in(sub, "c.bin"), 100, 50);
    write_numbered(path_in(sub, "a.bin"), 0, 100);
    write_numbered(path_in(sub, "d.bin"), 150, 2);
    write_numbered(path_in(sub, "b.bin"), 999, 0);
    file_write(path_in(sub, "notes.txt"), "not a shard", 11); /* ignored: not *.bin */
    const char *specs[] = {sub, path_in(sub, "*.bin"), path_in(sub, "[a-d].bin")};
    for (int s = 0; s < 3; s++) {
        TokenData *d;
        CHECK(tokens_open(specs[s], &d) == 0, "%s: %s", specs[s], myr_last_error());
        if (!d) continue;
        CHECK(tokens_num_shards(d) == 4 && tokens_count(d) == 152, "%s: %d shards", specs[s], tokens_num_shards(d));
        CHECK(strstr(tokens_shard_path(d, 0), "a.bin") && strstr(tokens_shard_path(d, 3), "d.bin"), "sorted");
        int32_t t[152];
        for (uint64_t start = 0; start <= 152; start += 7)
            for (uint64_t n = 0; start + n <= 152; n += 13) {
                memset(t, 0xff, sizeof t);
                CHECK(tokens_read(d, start, n, t) == 0, "read [%lu,+%lu)", (unsigned long)start, (unsigned long)n);
                for (uint64_t i = 0; i < n; i++)
                    CHECK(t[i] == (int32_t)(start + i), "token %lu = %d", (unsigned long)(start + i), t[i]);
            }
        CHECK(tokens_read(d, 150, 3, t) == -1 && strstr(myr_last_error(), "past the end") && one_line(myr_last_error()),
              "read past the end");
        CHECK(tokens_read(d, UINT64_MAX, 2, t) == -1, "overflowing start");
        tokens_close(d);
    }
}

static void expect_open_error(const char *spec, const char *needle, const char *names) {
    TokenData *d = (TokenData *)1;
    CHECK(tokens_open(spec, &d) == -1 && d == NULL, "%s accepted", spec);
    CHECK(strstr(myr_last_error(), needle) != NULL, "'%s' lacks '%s'", myr_last_error(), needle);
    CHECK(strstr(myr_last_error(), names) != NULL, "'%s' does not name %s", myr_last_error(), names);
    CHECK(one_line(myr_last_error()), "one line");
}

static void test_errors(void) {
    int32_t t[100];
    for (int i = 0; i < 100; i++) t[i] = i;
    const char *good = path_in(dir, "good.bin");
    shard_write(good, t, 100, 1);
    size_t n;
    unsigned char *b = file_read(good, &n);
    const char *p = path_in(dir, "bad.bin");
    file_write(p, b, n - 1); /* truncated by one byte */
    expect_open_error(p, "truncated", p);
    file_write(p, b, 600); /* truncated inside the header */
    expect_open_error(p, "truncated", p);
    unsigned char *c = malloc(n + 2);
    memcpy(c, b, n);
    c[n] = c[n + 1] = 0;
    file_write(p, c, n + 2); /* two bytes too many */
    expect_open_error(p, "bytes after its 100 tokens", p);
    memcpy(c, b, n);
    c[0] ^= 1; /* wrong magic */
    file_write(p, c, n);
    expect_open_error(p, "wrong magic", p);
    memcpy(c, b, n);
    int32_t v7 = 7;
    memcpy(c + 4, &v7, 4); /* v1 magic with version 7 */
    file_write(p, c, n);
    expect_open_error(p, "unsupported version 7", p);
    memcpy(c, b, n);
    int32_t neg = -5;
    memcpy(c + 8, &neg, 4);
    file_write(p, c, n);
    expect_open_error(p, "negative token count", p);
    file_write(p, "hello world, just text\n", 23); /* a text file passed as --data */
    expect_open_error(p, "wrong magic", p);
    expect_open_error(path_in(dir, "missing.bin"), "No such file", "missing.bin");
    expect_open_error(path_in(dir, "zz*.bin"), "no shard files match", "zz*.bin");
    char empty[512];
    snprintf(empty, sizeof empty, "%s/emptydir", dir);
    mkdir(empty, 0755);
    expect_open_error(empty, "no *.bin shards", "emptydir");
    /* a bad shard among good ones is named */
    char mixed[512];
    snprintf(mixed, sizeof mixed, "%s/mixed", dir);
    mkdir(mixed, 0755);
    file_write(path_in(mixed, "a.bin"), b, n);
    file_write(path_in(mixed, "b.bin"), b, n - 3);
    expect_open_error(mixed, "truncated", "b.bin");
    free(b), free(c);
}

static void test_parse_header_direct(void) {
    uint8_t buf[1024 + 8] = {0};
    int32_t h[3] = {20240801, 7, 2};
    memcpy(buf, h, 12);
    int w;
    uint64_t count;
    CHECK(shards_parse_header(buf, sizeof buf, "m", &w, &count) == 0 && w == 4 && count == 2, "v7 header");
    CHECK(shards_parse_header(buf, sizeof buf - 1, "m", &w, &count) == -1, "short");
    CHECK(shards_parse_header(buf, 3, "m", &w, &count) == -1 && one_line(myr_last_error()), "tiny");
    CHECK(shards_parse_header(buf, 0, "m", &w, &count) == -1, "empty");
}

int main(void) {
    dir = tmpdir_make();
    RUN(test_header_bytes);
    RUN(test_roundtrip_and_width_limits);
    if (python_has("numpy")) RUN(test_reads_numpy_shards);
    else SKIP(test_reads_numpy_shards, "/usr/bin/python3 with numpy not found");
    RUN(test_specs_and_spanning_reads);
    RUN(test_errors);
    RUN(test_parse_header_direct);
    tmpdir_remove(dir);
    return TEST_SUMMARY();
}
