/* test_safetensors.c: safetensors round trips (bit exact), interop with an independent Python
 * reader/writer, dtype conversions against hand-computed values, every header validation
 * error (one line each), and atomic writes that leave an existing file intact on failure. */
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "files.h"
#include "io/safetensors.h"
#include "test.h"
#include "util/error.h"

static const char *dir;

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Deterministic awkward values: normals, subnormals, +-0, inf, NaN payloads. */
static void fill(float *x, int n, uint32_t salt) {
    uint64_t s = 0x9E3779B97F4A7C15ULL * (salt + 1);
    for (int i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = float_of((uint32_t)(s >> 16));
    }
    if (n > 4) x[0] = -0.0f, x[1] = float_of(0x7fc12345), x[2] = float_of(0x00000001), x[3] = -INFINITY;
}

static void test_roundtrip_bit_exact(void) {
    float a[6 * 7], b[11], c[1], e[1];
    fill(a, 42, 1), fill(b, 11, 2), fill(c, 1, 3);
    StWriteTensor ts[] = {
        {"transformer.h.0.attn.c_attn.weight", a, 2, {6, 7}},
        {"odd/name \"quoted\"\\", b, 1, {11}},
        {"scalar", c, 0, {0}},
        {"empty", e, 3, {2, 0, 5}},
    };
    const char *p = path_in(dir, "rt.safetensors");
    CHECK(st_write_f32(p, ts, 4) == 0, "write: %s", myr_last_error());
    StFile f;
    CHECK(st_open(p, &f) == 0, "open: %s", myr_last_error());
    if (f.n != 4) { CHECK(0, "n=%d", f.n); return; }
    CHECK(!strcmp(st_metadata(&f, "format"), "pt"), "metadata format");
    CHECK((uintptr_t)f.data % 8 == 0 && ((const uint8_t *)f.data - (const uint8_t *)f.map) % 8 == 0,
          "data section 8-byte aligned");
    for (int i = 0; i < 4; i++) {
        const StTensor *t = st_find(&f, ts[i].name);
        CHECK(t && t == &f.tensors[i], "tensor %d found in order", i);
        if (!t) continue;
        CHECK(t->dtype == ST_F32 && t->ndim == ts[i].ndim, "dtype/ndim of %s", t->name);
        for (int d = 0; d < t->ndim; d++) CHECK(t->shape[d] == ts[i].shape[d], "dim %d", d);
        int64_t n = st_numel(t);
        float out[64];
        CHECK(st_read_f32(&f, t, out, n) == 0, "read %s: %s", t->name, myr_last_error());
        for (int64_t j = 0; j < n; j++)
            CHECK(bits_of(out[j]) == bits_of(ts[i].data[j]), "%s[%ld] bits %08x vs %08x", t->name, (long)j,
                  bits_of(out[j]), bits_of(ts[i].data[j]));
    }
    CHECK(st_find(&f, "nope") == NULL, "missing name");
    float tmp[3];
    CHECK(st_read_f32(&f, &f.tensors[0], tmp, 3) == -1 && one_line(myr_last_error()), "count mismatch rejected");
    st_close(&f);
    CHECK(!file_exists(path_in(dir, "rt.safetensors.tmp")), "no temporary file left");
}

/* Values hand-computed from the IEEE formats. */
static void test_dtype_conversions(void) {
    uint16_t f16[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF, 0x7C00, 0xFC00, 0x8000, 0x3555};
    float f16_want[] = {1.0f, -2.0f, 65504.0f, 0x1p-24f, 1023 * 0x1p-24f, INFINITY, -INFINITY, -0.0f,
                        0x1.554p-2f};
    uint16_t bf16[] = {0x3F80, 0x4049, 0xC2F7, 0x0001};
    float bf16_want[] = {1.0f, 3.140625f, -123.5f, float_of(0x00010000)};
    double f64[] = {0.1, -1e300, 1e-320};
    float f64_want[] = {0.1f, -INFINITY, 0.0f};
    /* hand-built file: header then the three blocks back to back */
    char header[512];
    int hl = snprintf(header, sizeof header,
                      "{\"a\":{\"dtype\":\"F16\",\"shape\":[9],\"data_offsets\":[0,18]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[18,26]},"
                      "\"c\":{\"dtype\":\"F64\",\"shape\":[3],\"data_offsets\":[26,50]},"
                      "\"i\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[50,54]}}");
    uint8_t buf[600];
    uint64_t n = (uint64_t)hl;
    memcpy(buf, &n, 8);
    memcpy(buf + 8, header, hl);
    memcpy(buf + 8 + hl, f16, 18);
    memcpy(buf + 8 + hl + 18, bf16, 8);
    memcpy(buf + 8 + hl + 26, f64, 24);
    memset(buf + 8 + hl + 50, 0, 4);
    StFile f;
    CHECK(st_parse(buf, 8 + hl + 54, &f) == 0, "parse: %s", myr_last_error());
    if (f.n != 4) return;
    float out[9];
    CHECK(st_read_f32(&f, &f.tensors[0], out, 9) == 0, "f16");
    for (int i = 0; i < 9; i++) CHECK(bits_of(out[i]) == bits_of(f16_want[i]), "f16[%d] = %g want %g", i, out[i], f16_want[i]);
    CHECK(st_read_f32(&f, &f.tensors[1], out, 4) == 0, "bf16");
    for (int i = 0; i < 4; i++) CHECK(bits_of(out[i]) == bits_of(bf16_want[i]), "bf16[%d] = %g", i, out[i]);
    CHECK(st_read_f32(&f, &f.tensors[2], out, 3) == 0, "f64");
    for (int i = 0; i < 3; i++) CHECK(bits_of(out[i]) == bits_of(f64_want[i]), "f64[%d] = %g", i, out[i]);
    CHECK(st_read_f32(&f, &f.tensors[3], out, 1) == -1 && strstr(myr_last_error(), "I32"), "int tensor refused: %s",
          myr_last_error());
    st_close(&f);
}

/* Build "8-byte length + header + data" in buf; returns the total length. */
static size_t make_file(uint8_t *buf, const char *header, size_t data_bytes) {
    uint64_t n = strlen(header);
    memcpy(buf, &n, 8);
    memcpy(buf + 8, header, n);
    memset(buf + 8 + n, 0x11, data_bytes);
    return 8 + n + data_bytes;
}

static void expect_reject(const char *header, size_t data_bytes, const char *needle) {
    uint8_t buf[4096];
    size_t len = make_file(buf, header, data_bytes);
    StFile f;
    int rc = st_parse_named(buf, len, "bad.safetensors", &f);
    CHECK(rc == -1, "accepted: %s", header);
    CHECK(strstr(myr_last_error(), needle) != NULL, "message '%s' lacks '%s'", myr_last_error(), needle);
    CHECK(strstr(myr_last_error(), "bad.safetensors") != NULL, "message names the file: %s", myr_last_error());
    CHECK(one_line(myr_last_error()), "one line");
}

static void test_header_validation(void) {
    /* length field: beyond the file, and shorter than 8 bytes */
    uint8_t buf[64];
    uint64_t huge = 1000;
    memcpy(buf, &huge, 8);
    memcpy(buf + 8, "{}", 2);
    StFile f;
    CHECK(st_parse_named(buf, 10, "x", &f) == -1 && strstr(myr_last_error(), "runs past the end"), "%s",
          myr_last_error());
    CHECK(st_parse_named(buf, 5, "x", &f) == -1 && strstr(myr_last_error(), "too short"), "%s", myr_last_error());
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "not valid JSON");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "unexpected bytes");
    expect_reject("[1,2]", 0, "not a JSON object");
    expect_reject("{\"a\":{\"dtype\":\"F99\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unsupported dtype 'F99'");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "non-negative integer");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "non-negative integer");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
                  "9 dimensions");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
                  "absurdly large");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "offsets lie");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7, "offsets lie");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 12, "offsets lie");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, "appears twice");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "data_offsets");
    expect_reject("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8, "shape");
    expect_reject("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype");
    expect_reject("{\"a\":3}", 0, "not an object");
    expect_reject("{\"__metadata__\":{\"k\":1}}", 0, "not a string");
    /* what is legal: gaps between tensors, zero-size tensors anywhere, trailing spaces */
    uint8_t ok[256];
    size_t len = make_file(ok, "{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[4,6]},"
                               "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[5,5]}}   ", 8);
    CHECK(st_parse(ok, len, &f) == 0, "gaps/empty accepted: %s", myr_last_error());
    if (f.n == 2) CHECK(f.tensors[0].begin == 4 && st_numel(&f.tensors[1]) == 0, "parsed values");
    st_close(&f);
}

static void test_open_errors(void) {
    StFile f;
    const char *missing = path_in(dir, "missing.safetensors");
    CHECK(st_open(missing, &f) == -1 && strstr(myr_last_error(), missing) && one_line(myr_last_error()), "%s",
          myr_last_error());
    /* a file on disk whose header offsets lie: the whole file is refused with a clear message */
    uint8_t buf[256];
    size_t len = make_file(buf, "{\"w\":{\"dtype\":\"F32\",\"shape\":[4,4],\"data_offsets\":[0,32]}}", 32);
    const char *p = path_in(dir, "lies.safetensors");
    file_write(p, buf, len);
    CHECK(st_open(p, &f) == -1 && strstr(myr_last_error(), "header offsets lie") && strstr(myr_last_error(), p) &&
              one_line(myr_last_error()), "%s", myr_last_error());
    CHECK(st_open(dir, &f) == -1 && one_line(myr_last_error()), "directory refused: %s", myr_last_error());
}

/* A write that fails midway (file size limit => EFBIG, like a full disk) must leave the
 * existing file exactly as it was and no temporary file behind. */
static void test_failed_write_keeps_old_file(void) {
    const char *p = path_in(dir, "keep.safetensors");
    float small[4] = {1, 2, 3, 4};
    StWriteTensor old = {"w", small, 1, {4}};
    CHECK(st_write_f32(p, &old, 1) == 0, "write original");
    size_t n0;
    unsigned char *before = file_read(p, &n0);
    enum { BIG = 1 << 20 };
    float *big = calloc(BIG, sizeof *big);
    StWriteTensor t = {"w", big, 1, {BIG}};
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {100000, 100000};
        setrlimit(RLIMIT_FSIZE, &rl);
        int rc = st_write_f32(p, &t, 1);
        fprintf(stderr, "  (expected failure: %s)\n", myr_last_error());
        _exit(rc == -1 && one_line(myr_last_error()) ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "write under the size limit reported a failure");
    size_t n1;
    unsigned char *after = file_read(p, &n1);
    CHECK(after && n0 == n1 && !memcmp(before, after, n0), "old file unchanged");
    CHECK(!file_exists(path_in(dir, "keep.safetensors.tmp")), "temporary removed");
    /* invalid input (duplicate names) is refused before anything is written */
    StWriteTensor dup[2] = {{"w", small, 1, {4}}, {"w", small, 1, {4}}};
    CHECK(st_write_f32(p, dup, 2) == -1 && strstr(myr_last_error(), "twice"), "%s", myr_last_error());
    free(after);
    after = file_read(p, &n1);
    CHECK(after && n0 == n1 && !memcmp(before, after, n0), "old file unchanged after refused input");
    /* a destination directory that does not exist */
    CHECK(st_write_f32(path_in(dir, "no/such/dir.safetensors"), &old, 1) == -1 && one_line(myr_last_error()), "%s",
          myr_last_error());
    free(before), free(after), free(big);
}

/* Python (numpy/torch) writes a file with struct+json; we read every tensor exactly. */
static void test_python_written_file(void) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/py/safetensors_oracle.py write %s >/dev/null", dir);
    CHECK(system(cmd) == 0, "python writer ran");
    for (int file = 0; file < 2; file++) { /* struct+json by hand, then scripts/safetensors_io.py */
        StFile f;
        CHECK(st_open(path_in(dir, file ? "helper.safetensors" : "py.safetensors"), &f) == 0, "open: %s", myr_last_error());
        if (f.n != 7) { CHECK(0, "n = %d", f.n); st_close(&f); return; }
        if (!file) CHECK(st_metadata(&f, "source") && !strcmp(st_metadata(&f, "source"), "numpy"), "metadata");
        else CHECK(st_metadata(&f, "format") && !strcmp(st_metadata(&f, "format"), "pt"), "helper metadata");
        const char *names[] = {"w_f32", "h_f16", "b_bf16", "d_f64", "scalar", "empty"};
        for (int i = 0; i < 6; i++) {
            const StTensor *t = st_find(&f, names[i]);
            CHECK(t != NULL, "%s present", names[i]);
            if (!t) continue;
            char ref[64];
            snprintf(ref, sizeof ref, "ref_%s.f32", names[i]);
            size_t n;
            unsigned char *want = file_read(path_in(dir, ref), &n);
            int64_t numel = st_numel(t);
            CHECK(want && (int64_t)n == 4 * numel, "%s reference size", names[i]);
            float *got = malloc(4 * (numel + 1));
            CHECK(st_read_f32(&f, t, got, numel) == 0, "%s: %s", names[i], myr_last_error());
            CHECK(want && !memcmp(got, want, n), "%s values differ from numpy/torch's float32 conversion", names[i]);
            free(got);
            free(want);
        }
        const StTensor *ids = st_find(&f, "ids");
        CHECK(ids && ids->dtype == ST_I64 && ids->shape[0] == 5, "int tensor described");
        st_close(&f);
    }
}

/* Our writer's output, read by the independent Python reader (and torch.frombuffer). */
static void test_python_reads_our_file(void) {
    float a[2 * 3], b[7], c[1], e[1];
    fill(a, 6, 7), fill(b, 7, 8), fill(c, 1, 9);
    StWriteTensor ts[] = {{"lm_head.weight", a, 2, {2, 3}}, {"b", b, 1, {7}}, {"s", c, 0, {0}}, {"e", e, 2, {0, 3}}};
    CHECK(st_write_f32(path_in(dir, "ours.safetensors"), ts, 4) == 0, "write");
    FILE *exp = fopen(path_in(dir, "expected.txt"), "w");
    for (int i = 0; i < 4; i++) {
        fprintf(exp, "%s", ts[i].name);
        int64_t numel = 1;
        for (int d = 0; d < ts[i].ndim; d++) fprintf(exp, " %ld", (long)ts[i].shape[d]), numel *= ts[i].shape[d];
        fprintf(exp, "\n");
        char raw[64];
        snprintf(raw, sizeof raw, "raw_%s.bin", ts[i].name);
        file_write(path_in(dir, raw), ts[i].data, 4 * numel);
    }
    fclose(exp);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/py/safetensors_oracle.py check %s/ours.safetensors %s 1>&2", dir,
             dir);
    CHECK(system(cmd) == 0, "python reader accepted our file (see stderr)");
}

int main(void) {
    dir = tmpdir_make();
    RUN(test_roundtrip_bit_exact);
    RUN(test_dtype_conversions);
    RUN(test_header_validation);
    RUN(test_open_errors);
    RUN(test_failed_write_keeps_old_file);
    if (python_has("numpy, torch")) {
        RUN(test_python_written_file);
        RUN(test_python_reads_our_file);
    } else {
        SKIP(test_python_written_file, "/usr/bin/python3 with numpy and torch not found");
        SKIP(test_python_reads_our_file, "/usr/bin/python3 with numpy and torch not found");
    }
    tmpdir_remove(dir);
    return TEST_SUMMARY();
}
