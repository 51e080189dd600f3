/* test_ckpt.c: checkpoints (src/ckpt/). Oracles: the full tensors kept in memory and sliced by
 * a plain index computation written here; CRC-32C against published vectors and a bitwise
 * reference; which checkpoint "auto" must pick from whether the new manifest was renamed into
 * place. Several ranks are simulated in one process with the lower-level API; the same
 * program under mpirun (`--mpi DIR`, tests/test_ckpt.sh) checks the collective path. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/crc32c.h"
#include "comm/comm.h"
#include "test.h"
#include "util/error.h"

/* ---- helpers */
static uint64_t rng_state = 0x1234567;
static uint64_t rnd(void) { /* xorshift64*: test inputs only */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); } /* [lo, hi] */

static char scratch_base[128];
static const char *scratch(const char *name) {
    static char path[700];
    snprintf(path, sizeof path, "%s/%s", scratch_base, name);
    char cmd[1500];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", path, path);
    if (system(cmd)) exit(1);
    return path;
}

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[CKPT_MAX_NDIM];
    float *full;
} Tensor;

static int64_t numel(int ndim, const int64_t *s) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= s[d];
    return n;
}

/* Oracle slicing: element l of the slice -> mixed-radix coordinates -> global index. */
static int64_t global_index(const Tensor *t, const CkptSlice *s, int64_t l) {
    if (s->flat) return s->offset + l;
    int64_t g = 0, stride = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        g += (s->start[d] + l % s->extent[d]) * stride;
        l /= s->extent[d];
        stride *= t->shape[d];
    }
    return g;
}
static float *extract(const Tensor *t, const CkptSlice *s) {
    int64_t n = ckpt_slice_numel(s, t->ndim);
    float *out = malloc(sizeof(float) * (n ? n : 1));
    for (int64_t l = 0; l < n; l++) out[l] = t->full[global_index(t, s, l)];
    return out;
}

static void fill_tensors(Tensor *ts, int nt, uint32_t seed) {
    for (int i = 0; i < nt; i++) {
        int64_t n = numel(ts[i].ndim, ts[i].shape);
        free(ts[i].full);
        ts[i].full = malloc(sizeof(float) * n);
        for (int64_t k = 0; k < n; k++) { /* arbitrary bit patterns, NaN payloads included */
            uint32_t b = (uint32_t)(k * 2654435761u) ^ (seed * 40503u) ^ (uint32_t)(i << 24);
            memcpy(&ts[i].full[k], &b, 4);
        }
    }
}

typedef enum { L_ROWS, L_COLS, L_TILES, L_ZERO, L_TP_ZERO } Layout;

/* The slices rank r of n owns of tensor i under a layout (ZeRO: a flat range of the
 * concatenation of all tensors, cut into one flat range per tensor it overlaps). */
static int layout_slices(Layout L, const Tensor *ts, int nt, int i, int r, int n, CkptSlice *out) {
    const Tensor *t = &ts[i];
    if (L == L_ZERO) {
        int64_t total = 0, before = 0;
        for (int k = 0; k < nt; k++) total += numel(ts[k].ndim, ts[k].shape);
        for (int k = 0; k < i; k++) before += numel(ts[k].ndim, ts[k].shape);
        int64_t a = total * r / n, b = total * (r + 1) / n, tn = numel(t->ndim, t->shape);
        int64_t lo = a > before ? a : before, hi = b < before + tn ? b : before + tn;
        if (lo >= hi) return 0;
        out[0] = ckpt_flat(lo - before, hi - lo);
        return 1;
    }
    if (L == L_TP_ZERO) { /* tp 2 x dp n/2: column blocks over tp, each local block flat-split over dp */
        int tp = r % 2, dp = r / 2, ndp = n / 2;
        CkptSlice local;
        if (t->ndim == 1) local = ckpt_rows(1, t->shape, t->shape[0] * tp / 2, t->shape[0] * (tp + 1) / 2 - t->shape[0] * tp / 2);
        else {
            int64_t C = t->shape[t->ndim - 1];
            local = ckpt_cols(t->ndim, t->shape, C * tp / 2, C * (tp + 1) / 2 - C * tp / 2);
        }
        int64_t ln = ckpt_slice_numel(&local, t->ndim), a = ln * dp / ndp, b = ln * (dp + 1) / ndp;
        return ckpt_box_range(&local, t->ndim, a, b - a, out, 4);
    }
    if (L == L_ROWS || (L == L_COLS && t->ndim == 1)) {
        int64_t R = t->shape[0];
        out[0] = ckpt_rows(t->ndim, t->shape, R * r / n, R * (r + 1) / n - R * r / n);
        return 1;
    }
    if (L == L_COLS) {
        int64_t C = t->shape[t->ndim - 1];
        out[0] = ckpt_cols(t->ndim, t->shape, C * r / n, C * (r + 1) / n - C * r / n);
        return 1;
    }
    /* tiles: n = 4 as 2 x 2 over the first and last dimensions */
    CkptSlice s = ckpt_whole(t->ndim, t->shape);
    int64_t R = t->shape[0], C = t->shape[t->ndim - 1];
    int rr = r / 2, cc = r % 2;
    s.start[0] = R * rr / 2;
    s.extent[0] = R * (rr + 1) / 2 - s.start[0];
    if (t->ndim > 1) {
        s.start[t->ndim - 1] = C * cc / 2;
        s.extent[t->ndim - 1] = C * (cc + 1) / 2 - s.start[t->ndim - 1];
    } else if (cc) return 0;
    out[0] = s;
    return 1;
}

/* Save step `step` as n simulated ranks (one process): every shard, then the manifest. */
static int save_sim(const char *dir, int64_t step, int n, Layout L, Tensor *ts, int nt, int64_t block, int keep) {
    CkptWriteOptions o = {block, keep};
    char **tables = calloc(n, sizeof *tables);
    int rc = 0;
    for (int r = 0; r < n && !rc; r++) {
        CkptWriter *w;
        if (ckpt_writer_begin(dir, step, r, n, &o, &w)) {
            rc = -1;
            break;
        }
        float *bufs[64];
        int nb = 0;
        for (int i = 0; i < nt && !rc; i++) {
            CkptSlice s[4];
            int k = layout_slices(L, ts, nt, i, r, n, s);
            for (int j = 0; j < k && !rc; j++) {
                bufs[nb] = extract(&ts[i], &s[j]);
                rc = ckpt_add_piece(w, ts[i].name, CKPT_F32, ts[i].ndim, ts[i].shape, &s[j], bufs[nb]);
                nb++;
            }
        }
        if (rc) ckpt_writer_abort(w);
        else rc = ckpt_writer_write_shard(w, &tables[r]);
        for (int b = 0; b < nb; b++) free(bufs[b]);
    }
    char meta[128];
    snprintf(meta, sizeof meta, "{\"data_position\": %" PRId64 ", \"layout\": %d}", step * 7, (int)L);
    if (!rc) rc = ckpt_commit_manifest(dir, step, n, tables, meta, &o);
    for (int r = 0; r < n; r++) free(tables[r]);
    free(tables);
    return rc;
}

/* Every tensor of c equals ts, read whole. */
static int matches(Ckpt *c, const Tensor *ts, int nt) {
    for (int i = 0; i < nt; i++) {
        int64_t n = numel(ts[i].ndim, ts[i].shape);
        float *buf = malloc(sizeof(float) * n);
        CkptSlice s = ckpt_whole(ts[i].ndim, ts[i].shape);
        int ok = ckpt_read_slice(c, ts[i].name, &s, buf) == 0 && memcmp(buf, ts[i].full, sizeof(float) * n) == 0;
        free(buf);
        if (!ok) return 0;
    }
    return 1;
}

static int ckpt_check_slice_for_test(const CkptSlice *s, int ndim, const int64_t *shape) {
    for (int d = 0; d < ndim; d++)
        if (s->start[d] < 0 || s->extent[d] < 1 || s->start[d] + s->extent[d] > shape[d]) return -1;
    return s->flat;
}

static void free_tensors(Tensor *ts, int nt) {
    for (int i = 0; i < nt; i++) free(ts[i].full), ts[i].full = NULL;
}

/* ---- CRC-32C */
static uint32_t crc_bitwise(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
}

static void test_crc32c_vectors(void) {
    CHECK(crc32c("123456789", 9) == 0xE3069283u, "check value %08x", crc32c("123456789", 9));
    uint8_t b[32];
    memset(b, 0, 32); /* RFC 3720 appendix B.4 */
    CHECK(crc32c(b, 32) == 0x8A9136AAu, "zeros %08x", crc32c(b, 32));
    memset(b, 0xFF, 32);
    CHECK(crc32c(b, 32) == 0x62A8AB43u, "ones %08x", crc32c(b, 32));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)i;
    CHECK(crc32c(b, 32) == 0x46DD794Eu, "incrementing %08x", crc32c(b, 32));
    for (int i = 0; i < 32; i++) b[i] = (uint8_t)(31 - i);
    CHECK(crc32c(b, 32) == 0x113FDB5Cu, "decrementing %08x", crc32c(b, 32));
    CHECK(crc32c(NULL, 0) == 0, "empty");
    CHECK(crc32c_update_sw(0, "123456789", 9) == 0xE3069283u, "software check value");
    uint8_t buf[1100];
    for (int i = 0; i < 1100; i++) buf[i] = (uint8_t)rnd();
    for (int t = 0; t < 300; t++) {
        size_t off = (size_t)rnd_in(0, 7), n = (size_t)rnd_in(0, 1000), cut = n ? (size_t)rnd_in(0, (int64_t)n) : 0;
        uint32_t ref = crc_bitwise(buf + off, n);
        CHECK(crc32c(buf + off, n) == ref, "len %zu off %zu", n, off);
        CHECK(crc32c_update_sw(0, buf + off, n) == ref, "software, len %zu off %zu", n, off);
        CHECK(crc32c_update(crc32c(buf + off, cut), buf + off + cut, n - cut) == ref, "chained at %zu", cut);
    }
    /* long buffers take the three-lane path (12 KiB rounds) and the streaming copy (24 KiB
     * blocks, 32-byte aligned stores): lengths and offsets around those sizes, against the
     * table-driven version, the copy checked byte for byte */
    size_t big = 200000;
    uint8_t *src = malloc(big + 64), *dst = malloc(big + 64);
    for (size_t i = 0; i < big + 64; i++) src[i] = (uint8_t)rnd();
    size_t lens[] = {12287, 12288, 12289, 24575, 24576, 24608, 36864 + 5, 49152, 99999, 200000};
    for (int t = 0; t < 40; t++) {
        size_t n = lens[t % 10], so = (size_t)rnd_in(0, 31), d0 = (size_t)rnd_in(0, 31);
        if (n + so > big + 64 || n + d0 > big + 64) continue;
        uint32_t ref = crc32c_update_sw(0, src + so, n), seed = (uint32_t)rnd();
        CHECK(crc32c(src + so, n) == ref, "long buffer len %zu off %zu", n, so);
        CHECK(crc32c_update(crc32c(src + so, 7), src + so + 7, n - 7) == ref, "long chained len %zu", n);
        memset(dst, 0xA5, big + 64);
        uint32_t c = crc32c_copy(seed, dst + d0, src + so, n);
        CHECK(c == crc32c_update_sw(seed, src + so, n), "copy crc len %zu src+%zu dst+%zu", n, so, d0);
        CHECK(!memcmp(dst + d0, src + so, n) && (d0 == 0 || dst[d0 - 1] == 0xA5) && dst[d0 + n] == 0xA5,
              "copy bytes len %zu src+%zu dst+%zu", n, so, d0);
    }
    for (int t = 0; t < 60; t++) { /* pieces checksummed apart and joined */
        size_t n = (size_t)rnd_in(0, (int64_t)big), cut = (size_t)rnd_in(0, (int64_t)n);
        uint32_t a = crc32c(src, cut), b = crc32c(src + cut, n - cut);
        CHECK(crc32c_combine(a, b, n - cut) == crc32c_update_sw(0, src, n), "combine %zu + %zu", cut, n - cut);
    }
    CHECK(crc32c_combine(crc32c("1234", 4), crc32c("56789", 5), 5) == 0xE3069283u, "combine check value");
    free(src), free(dst);
}

/* ---- geometry, round trip, sub-slices */
static Tensor reshard_set[3];
static void make_reshard_set(uint32_t seed) {
    Tensor ts[3] = {{"layers.0.qkv_w", 2, {128, 2048}, NULL},
                    {"layers.0.fc_w", 2, {64, 2048}, NULL},
                    {"layers.0.bias", 1, {4096}, NULL}};
    free_tensors(reshard_set, 3);
    memcpy(reshard_set, ts, sizeof ts);
    fill_tensors(reshard_set, 3, seed);
}

static void test_roundtrip_and_subslices(void) {
    const char *dir = scratch("sub");
    Tensor ts[3] = {{"a", 3, {6, 10, 14}, NULL}, {"b", 2, {33, 17}, NULL}, {"c", 1, {1000}, NULL}};
    fill_tensors(ts, 3, 1);
    CHECK(save_sim(dir, 5, 4, L_ROWS, ts, 3, 256, 0) == 0, "save: %s", myr_last_error());
    Ckpt *c;
    CHECK(ckpt_open(dir, &c) == 0, "open: %s", myr_last_error());
    if (!c) return;
    CHECK(ckpt_step(c) == 5, "step");
    CHECK(strstr(ckpt_meta(c), "\"data_position\":35") != NULL, "meta %s", ckpt_meta(c));
    CHECK(matches(c, ts, 3), "whole tensors bit exact");
    CHECK(ckpt_tensor_count(c) == 3, "count");
    int bad = 0;
    for (int trial = 0; trial < 400; trial++) {
        Tensor *t = &ts[rnd() % 3];
        CkptSlice s;
        int kind = (int)(rnd() % 4);
        int64_t n = numel(t->ndim, t->shape);
        if (kind == 0) {
            int64_t o = rnd_in(0, n), k = rnd_in(0, n - o);
            s = ckpt_flat(o, k); /* flat ranges crossing pieces */
        } else {
            s = ckpt_whole(t->ndim, t->shape);
            for (int d = 0; d < t->ndim; d++) {
                if (kind == 1 && d != 0) continue;              /* row blocks */
                if (kind == 2 && d != t->ndim - 1) continue;     /* column blocks */
                s.start[d] = rnd_in(0, t->shape[d]);             /* kind 3: any box */
                s.extent[d] = rnd_in(0, t->shape[d] - s.start[d]);
            }
        }
        int64_t k = ckpt_slice_numel(&s, t->ndim);
        float *got = malloc(sizeof(float) * (k + 1)), *want = extract(t, &s);
        if (ckpt_read_slice(c, t->name, &s, got) || memcmp(got, want, sizeof(float) * k)) bad++;
        free(got);
        free(want);
    }
    CHECK(bad == 0, "%d of 400 sub-slices differ from the oracle: %s", bad, myr_last_error());
    ckpt_close(c);
    free_tensors(ts, 3);
}

/* A flat range of a box's own order, as boxes of the global tensor (ZeRO over TP). */
static void test_box_range(void) {
    int bad = 0, most = 0;
    for (int trial = 0; trial < 2000; trial++) {
        Tensor t = {"t", (int)rnd_in(1, 4), {0}, NULL};
        for (int d = 0; d < t.ndim; d++) t.shape[d] = rnd_in(1, 7);
        CkptSlice box = ckpt_whole(t.ndim, t.shape);
        for (int d = 0; d < t.ndim; d++) {
            box.start[d] = rnd_in(0, t.shape[d] - 1);
            box.extent[d] = rnd_in(1, t.shape[d] - box.start[d]);
        }
        int64_t n = ckpt_slice_numel(&box, t.ndim), o = rnd_in(0, n), k = rnd_in(0, n - o);
        CkptSlice parts[2 * CKPT_MAX_NDIM];
        int np = ckpt_box_range(&box, t.ndim, o, k, parts, 2 * CKPT_MAX_NDIM);
        if (np < 0 || np > 2 * t.ndim - 1) {
            bad++;
            continue;
        }
        if (np > most) most = np;
        /* the concatenated global indices of the parts = indices o..o+k of the box */
        int64_t l = o;
        for (int i = 0; i < np && !bad; i++) {
            if (ckpt_check_slice_for_test(&parts[i], t.ndim, t.shape)) bad++;
            for (int64_t e = 0; e < ckpt_slice_numel(&parts[i], t.ndim); e++, l++)
                if (global_index(&t, &parts[i], e) != global_index(&t, &box, l)) bad++;
        }
        if (l != o + k) bad++;
    }
    CHECK(bad == 0, "%d mismatches", bad);
    CHECK(most >= 3, "the split into head / middle / tail occurs (max %d parts)", most);
    CkptSlice w = ckpt_whole(2, (int64_t[]){4, 4}), p[3];
    CHECK(ckpt_box_range(&w, 2, 3, 20, p, 3) == -1, "outside");
}

/* Write as N ranks with one split, read back as M ranks with another; each reading rank
 * reads at most 1.1x its own share. */
static void test_reshard(void) {
    const char *dir = scratch("reshard");
    make_reshard_set(2);
    Tensor *ts = reshard_set;
    struct { Layout w; int wn; Layout r; int rn; } cases[] = {
        {L_ROWS, 4, L_COLS, 2}, {L_ZERO, 3, L_ROWS, 2}, {L_COLS, 2, L_ROWS, 4},
        {L_TILES, 4, L_ZERO, 5}, {L_ROWS, 4, L_ZERO, 8}, {L_ZERO, 8, L_TILES, 4}, {L_COLS, 4, L_ROWS, 1},
        {L_TP_ZERO, 4, L_ROWS, 2}, {L_ROWS, 2, L_TP_ZERO, 6}, {L_TP_ZERO, 6, L_TP_ZERO, 4}};
    double worst = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        CHECK(save_sim(dir, (int64_t)k + 1, cases[k].wn, cases[k].w, ts, 3, 4096, 0) == 0, "save %s", myr_last_error());
        for (int r = 0; r < cases[k].rn; r++) {
            Ckpt *c;
            if (ckpt_open(dir, &c)) {
                CHECK(0, "open %s", myr_last_error());
                continue;
            }
            CHECK(ckpt_step(c) == (int64_t)k + 1, "newest");
            uint64_t share = 0;
            for (int i = 0; i < 3; i++) {
                CkptSlice s[4];
                int m = layout_slices(cases[k].r, ts, 3, i, r, cases[k].rn, s);
                for (int j = 0; j < m; j++) {
                    int64_t n = ckpt_slice_numel(&s[j], ts[i].ndim);
                    float *got = malloc(sizeof(float) * (n + 1)), *want = extract(&ts[i], &s[j]);
                    CHECK(ckpt_read_slice(c, ts[i].name, &s[j], got) == 0, "read %s", myr_last_error());
                    CHECK(memcmp(got, want, sizeof(float) * n) == 0, "case %zu rank %d tensor %s", k, r, ts[i].name);
                    share += (uint64_t)n * 4;
                    free(got);
                    free(want);
                }
            }
            double ratio = (double)ckpt_bytes_read(c) / (double)share;
            if (ratio > worst) worst = ratio;
            /* a contiguous run costs at most a partial checksum block at each end, and blocks are
             * cut per piece at fractions of its rows (format version 2), so even column halves
             * cut out of flat (ZeRO) pieces (case 5) stay within 1.1x */
            CHECK(ratio <= 1.1, "case %zu rank %d read %" PRIu64 " bytes for a share of %" PRIu64, k, r,
                  ckpt_bytes_read(c), share);
            ckpt_close(c);
        }
    }
    printf("# reshard: worst bytes read / own share = %.4f\n", worst);
}

/* ---- torn writes: a child saving step 20 exits at a random crash point or is SIGKILLed */
static int file_exists(const char *p) { return access(p, F_OK) == 0; }

static void test_torn_writes(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", scratch("torn"));
    Tensor old[2] = {{"w", 2, {16, 24}, NULL}, {"v", 1, {100}, NULL}};
    Tensor neu[2] = {{"w", 2, {16, 24}, NULL}, {"v", 1, {100}, NULL}};
    fill_tensors(old, 2, 10);
    fill_tensors(neu, 2, 20);
    /* how many crash points a save has (keep 1: the retention step counts too) */
    CHECK(save_sim(dir, 10, 3, L_ROWS, old, 2, 256, 1) == 0, "save %s", myr_last_error());
    ckpt_test_crash_at(0);
    CHECK(save_sim(dir, 20, 3, L_ROWS, neu, 2, 256, 1) == 0, "save %s", myr_last_error());
    long points = ckpt_test_crash_points();
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(save_sim(dir, 30, 3, L_ROWS, neu, 2, 256, 1) == 0, "save %s", myr_last_error());
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long save_us = (t1.tv_sec - t0.tv_sec) * 1000000L + (t1.tv_nsec - t0.tv_nsec) / 1000 + 1;
    int trials = 0, wrong = 0, got_new = 0, got_old = 0, killed_mid_save = 0;
    char m20[600], cmd[1200];
    snprintf(m20, sizeof m20, "%s/step-00000020/manifest.json", dir);
    for (int t = 0; t < 260; t++) {
        /* fresh state: only step 10, complete */
        snprintf(cmd, sizeof cmd, "rm -rf '%s'/*", dir);
        if (system(cmd)) break;
        if (save_sim(dir, 10, 3, L_ROWS, old, 2, 256, 0)) break;
        int by_signal = t >= 200;
        long k = rnd_in(1, points + 1);
        pid_t pid = fork();
        if (pid == 0) {
            if (!by_signal) ckpt_test_crash_at(k);
            else ckpt_test_crash_at(0);
            _exit(save_sim(dir, 20, 3, L_ROWS, neu, 2, 256, (int)(t % 2)) ? 1 : 0);
        }
        if (by_signal) {
            struct timespec d = {0, (long)rnd_in(0, save_us) * 1000};
            nanosleep(&d, NULL);
            kill(pid, SIGKILL);
        }
        int st;
        waitpid(pid, &st, 0);
        trials++;
        int64_t expect = file_exists(m20) ? 20 : 10; /* committed iff the manifest was renamed into place */
        char d20[600];
        snprintf(d20, sizeof d20, "%s/step-00000020", dir);
        if (by_signal && expect == 10 && file_exists(d20)) killed_mid_save++;
        CkptOpenOptions o = {1, 0};
        Ckpt *c;
        if (ckpt_open_ex(dir, &o, &c)) {
            wrong++;
            fprintf(stderr, "trial %d: no checkpoint: %s\n", t, myr_last_error());
            continue;
        }
        int ok = ckpt_step(c) == expect && matches(c, expect == 20 ? neu : old, 2);
        if (!ok) {
            wrong++;
            fprintf(stderr, "trial %d (k=%ld): got step %" PRId64 ", expected %" PRId64 "\n", t, k, ckpt_step(c), expect);
        }
        if (expect == 20) got_new++;
        else got_old++;
        ckpt_close(c);
        /* a step directory without a committed manifest never opens as valid */
        if (expect == 10) {
            char p[600];
            snprintf(p, sizeof p, "%s/step-00000020", dir);
            if (file_exists(p) && ckpt_open(p, &c) == 0) {
                wrong++;
                ckpt_close(c);
            }
        }
    }
    ckpt_test_crash_at(0);
    printf("# torn writes: %d trials (%ld crash points, save %ld us): %d resumed the new step, %d the previous; "
           "%d of the 60 SIGKILLs hit a save in progress\n", trials, points, save_us, got_new, got_old, killed_mid_save);
    CHECK(trials == 260, "trials %d", trials);
    CHECK(wrong == 0, "%d trials opened an invalid or not the newest complete checkpoint", wrong);
    CHECK(got_new > 0 && got_old > 0, "both outcomes occur (%d/%d)", got_new, got_old);
    free_tensors(old, 2);
    free_tensors(neu, 2);
}

/* ---- bit flips in shards and in the manifest */
static void flip_bit(const char *path, off_t at, int bit) {
    int fd = open(path, O_RDWR);
    uint8_t b;
    if (fd < 0 || pread(fd, &b, 1, at) != 1) exit(2);
    b ^= (uint8_t)(1u << bit);
    if (pwrite(fd, &b, 1, at) != 1) exit(2);
    close(fd);
}

static off_t file_size(const char *p) {
    struct stat st;
    return stat(p, &st) ? -1 : st.st_size;
}

static void test_bit_flips(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", scratch("flips"));
    Tensor old[2] = {{"w", 2, {40, 24}, NULL}, {"v", 1, {333}, NULL}};
    Tensor neu[2] = {{"w", 2, {40, 24}, NULL}, {"v", 1, {333}, NULL}};
    fill_tensors(old, 2, 11);
    fill_tensors(neu, 2, 21);
    CHECK(save_sim(dir, 10, 3, L_ZERO, old, 2, 512, 0) == 0, "save %s", myr_last_error());
    CHECK(save_sim(dir, 20, 3, L_ROWS, neu, 2, 512, 0) == 0, "save %s", myr_last_error());
    int missed = 0, fallback_bad = 0, msg_bad = 0;
    for (int t = 0; t < 300; t++) {
        char path[700];
        int manifest = t >= 200;
        if (manifest) snprintf(path, sizeof path, "%s/step-00000020/manifest.json", dir);
        else snprintf(path, sizeof path, "%s/step-00000020/rank-%05d.bin", dir, (int)rnd_in(0, 2));
        off_t at = (off_t)rnd_in(0, file_size(path) - 1);
        int bit = (int)rnd_in(0, 7);
        flip_bit(path, at, bit);
        /* load step 20 explicitly: detected (at open for the manifest, on read for shards) */
        Ckpt *c;
        char step20[600];
        snprintf(step20, sizeof step20, "%s/step-00000020", dir);
        int detected;
        if (ckpt_open(step20, &c) != 0) detected = 1;
        else {
            detected = !matches(c, neu, 2) && ckpt_verify(c) != 0;
            ckpt_close(c);
        }
        if (!detected) missed++;
        const char *e = myr_last_error();
        if (detected && !((strstr(e, "checksum mismatch in") || (manifest && strstr(e, "is damaged"))) && strstr(e, path) &&
                          (manifest || strstr(e, "the file is corrupt; an older checkpoint or a replica is needed")) &&
                          !strchr(e, '\n'))) {
            if (msg_bad++ == 0) fprintf(stderr, "unexpected message: %s\n", e);
        }
        /* auto with verification falls back to step 10 and says it skipped step 20 */
        CkptOpenOptions o = {1, 0};
        if (ckpt_open_ex(dir, &o, &c) != 0) fallback_bad++;
        else {
            if (ckpt_step(c) != 10 || !strstr(ckpt_notes(c), "skipped") || !strstr(ckpt_notes(c), "step-00000020") ||
                !matches(c, old, 2))
                fallback_bad++;
            if (t == 0) printf("# auto after a flip: %s\n", ckpt_notes(c));
            ckpt_close(c);
        }
        flip_bit(path, at, bit); /* restore */
    }
    printf("# bit flips: 200 in shards, 100 in the manifest: %d missed\n", missed);
    CHECK(missed == 0, "%d flips not detected", missed);
    CHECK(msg_bad == 0, "%d messages without file / cause", msg_bad);
    CHECK(fallback_bad == 0, "%d auto opens did not fall back to step 10 with a note", fallback_bad);
    Ckpt *c; /* restored: valid again */
    CkptOpenOptions o = {1, 0};
    CHECK(ckpt_open_ex(dir, &o, &c) == 0 && ckpt_step(c) == 20 && !*ckpt_notes(c), "restored");
    ckpt_close(c);
    /* fall back below a step that failed to load (the caller's way after a read error) */
    CkptOpenOptions below = {0, 20};
    CHECK(ckpt_open_ex(dir, &below, &c) == 0 && ckpt_step(c) == 10, "below_step");
    ckpt_close(c);
    free_tensors(old, 2);
    free_tensors(neu, 2);
}

/* ---- truncated and missing files, bad input, one-line messages */
static void test_damaged_files_and_errors(void) {
    char dir[512], p[700];
    snprintf(dir, sizeof dir, "%s", scratch("damage"));
    Tensor ts[2] = {{"layers.3.qkv_w", 2, {96, 32}, NULL}, {"v", 1, {50}, NULL}};
    fill_tensors(ts, 2, 3);
    CHECK(save_sim(dir, 10, 2, L_ROWS, ts, 2, 1024, 0) == 0, "save %s", myr_last_error());
    Ckpt *c;
    CHECK(ckpt_open(dir, &c) == 0, "open");
    int64_t want[2] = {192, 32};
    CHECK(ckpt_expect(c, "layers.3.qkv_w", CKPT_F32, 2, want) == -1, "shape mismatch");
    CHECK(strstr(myr_last_error(), "checkpoint tensor layers.3.qkv_w has shape [96, 32], the model needs [192, 32]"),
          "%s", myr_last_error());
    CHECK(ckpt_expect(c, "layers.3.qkv_w", CKPT_F32, 2, (int64_t[]){96, 32}) == 0, "expect ok");
    float x[4];
    CkptSlice s = ckpt_flat(0, 4);
    CHECK(ckpt_read_slice(c, "layers.9.fc_w", &s, x) == -1 && strstr(myr_last_error(), "has no tensor layers.9.fc_w"),
          "missing: %s", myr_last_error());
    s = ckpt_flat(48, 4);
    CHECK(ckpt_read_slice(c, "v", &s, x) == -1 && strstr(myr_last_error(), "outside"), "outside: %s", myr_last_error());
    ckpt_close(c);
    /* truncated shard */
    snprintf(p, sizeof p, "%s/step-00000010/rank-00001.bin", dir);
    off_t sz = file_size(p);
    CHECK(truncate(p, sz - 5) == 0, "truncate");
    CHECK(ckpt_open(dir, &c) == -1 && strstr(myr_last_error(), "rank-00001.bin is truncated"), "%s", myr_last_error());
    CHECK(!strchr(myr_last_error(), '\n'), "one line");
    /* missing shard */
    CHECK(unlink(p) == 0, "unlink");
    CHECK(ckpt_open(dir, &c) == -1 && strstr(myr_last_error(), "rank-00001.bin is missing"), "%s", myr_last_error());
    /* explicit step directory without a manifest */
    snprintf(p, sizeof p, "%s/step-00000010/manifest.json", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/step-00000010", dir);
    CHECK(ckpt_open(p, &c) == -1 && strstr(myr_last_error(), "no manifest.json"), "%s", myr_last_error());
    CHECK(ckpt_open(dir, &c) == -1 && strstr(myr_last_error(), "no valid checkpoint"), "%s", myr_last_error());
    /* pieces that do not partition a tensor are refused at commit */
    snprintf(dir, sizeof dir, "%s", scratch("partition"));
    CkptWriter *w;
    char *tab[2] = {0};
    int64_t sh[2] = {4, 4};
    float d[16] = {0};
    CHECK(ckpt_writer_begin(dir, 1, 0, 2, NULL, &w) == 0, "begin");
    CkptSlice a = ckpt_rows(2, sh, 0, 3);
    ckpt_add_piece(w, "t", CKPT_F32, 2, sh, &a, d);
    CHECK(ckpt_writer_write_shard(w, &tab[0]) == 0, "shard");
    CHECK(ckpt_writer_begin(dir, 1, 1, 2, NULL, &w) == 0, "begin");
    a = ckpt_rows(2, sh, 2, 2); /* overlaps row 2 */
    ckpt_add_piece(w, "t", CKPT_F32, 2, sh, &a, d);
    CHECK(ckpt_writer_write_shard(w, &tab[1]) == 0, "shard");
    CHECK(ckpt_commit_manifest(dir, 1, 2, tab, NULL, NULL) == -1 && strstr(myr_last_error(), "overlap"), "%s",
          myr_last_error());
    free(tab[1]);
    CHECK(ckpt_writer_begin(dir, 1, 1, 2, NULL, &w) == 0, "begin");
    CHECK(ckpt_writer_write_shard(w, &tab[1]) == 0, "shard"); /* rank 1 saves nothing: row 3 missing */
    CHECK(ckpt_commit_manifest(dir, 1, 2, tab, NULL, NULL) == -1 && strstr(myr_last_error(), "12 elements"), "%s",
          myr_last_error());
    CHECK(ckpt_commit_manifest(dir, 1, 2, tab, "[1]", NULL) == -1 && strstr(myr_last_error(), "JSON object"), "meta");
    free(tab[0]);
    free(tab[1]);
    /* bad pieces at add time */
    CHECK(ckpt_writer_begin(dir, 2, 0, 1, NULL, &w) == 0, "begin");
    a = ckpt_rows(2, sh, 3, 2);
    CHECK(ckpt_add_piece(w, "t", CKPT_F32, 2, sh, &a, d) == -1 && strstr(myr_last_error(), "outside"), "%s",
          myr_last_error());
    a = ckpt_rows(2, sh, 0, 1);
    CHECK(ckpt_add_piece(w, "t", CKPT_F32, 2, sh, &a, d) == 0, "ok piece");
    int64_t sh2[2] = {4, 5};
    a = ckpt_rows(2, sh2, 1, 1);
    CHECK(ckpt_add_piece(w, "t", CKPT_F32, 2, sh2, &a, d) == -1 && strstr(myr_last_error(), "earlier piece"), "%s",
          myr_last_error());
    ckpt_writer_abort(w);
    CHECK(ckpt_open("auto", &c) == -1, "bare auto");
    free_tensors(ts, 2);
}

/* ---- retention and the latest hint */
static void test_retention_and_latest(void) {
    char dir[512], p[700];
    snprintf(dir, sizeof dir, "%s", scratch("keep"));
    Tensor ts[1] = {{"w", 2, {8, 8}, NULL}};
    fill_tensors(ts, 1, 4);
    for (int s = 1; s <= 3; s++) CHECK(save_sim(dir, s, 2, L_ROWS, ts, 1, 256, 2) == 0, "save");
    snprintf(p, sizeof p, "%s/step-00000004", dir); /* an interrupted save's leftovers */
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/step-00000009", dir); /* a newer directory is left alone */
    mkdir(p, 0755);
    CHECK(save_sim(dir, 5, 2, L_ROWS, ts, 1, 256, 2) == 0, "save");
    const char *gone[] = {"step-00000001", "step-00000002", "step-00000004"}, *kept[] = {"step-00000003", "step-00000005", "step-00000009"};
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, gone[i]);
        CHECK(!file_exists(p), "%s should be deleted", gone[i]);
        snprintf(p, sizeof p, "%s/%s", dir, kept[i]);
        CHECK(file_exists(p), "%s should be kept", kept[i]);
    }
    snprintf(p, sizeof p, "%s/latest", dir);
    FILE *f = fopen(p, "r");
    char line[64] = "";
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = 0;
        fclose(f);
    }
    CHECK(strcmp(line, "step-00000005\n") == 0, "latest: %s", line);
    /* latest is a hint: pointing it at an old or missing step changes nothing */
    f = fopen(p, "w");
    fputs("step-00000003\n", f);
    fclose(f);
    Ckpt *c;
    CHECK(ckpt_open(dir, &c) == 0 && ckpt_step(c) == 5, "newest valid wins");
    ckpt_close(c);
    free_tensors(ts, 1);
}

/* ---- full disk: RLIMIT_FSIZE in a child */
static void test_full_disk(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", scratch("full"));
    Tensor old[1] = {{"w", 2, {64, 64}, NULL}}, neu[1] = {{"w", 2, {64, 64}, NULL}};
    fill_tensors(old, 1, 5);
    fill_tensors(neu, 1, 6);
    CHECK(save_sim(dir, 10, 2, L_ROWS, old, 1, 1024, 1) == 0, "save");
    int fds[2];
    if (pipe(fds)) return;
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {6000, 6000}; /* each shard is 8 KiB */
        setrlimit(RLIMIT_FSIZE, &rl);
        char msg[4400];
        int rc1 = save_sim(dir, 20, 2, L_ROWS, neu, 1, 1024, 1);
        int n = snprintf(msg, sizeof msg, "%d|%s\n", rc1, myr_last_error());
        /* the async path reports the same failure from ckpt_async_wait */
        CkptWriter *w;
        int rc2 = ckpt_writer_begin(dir, 30, 0, 1, &(CkptWriteOptions){1024, 1}, &w);
        CkptSlice s = ckpt_whole(2, neu[0].shape);
        if (!rc2) rc2 = ckpt_add_piece(w, "w", CKPT_F32, 2, neu[0].shape, &s, neu[0].full);
        if (!rc2) rc2 = ckpt_writer_commit_async(w, NULL, "{}");
        if (!rc2) rc2 = ckpt_async_wait();
        n += snprintf(msg + n, sizeof msg - n, "%d|%s\n", rc2, myr_last_error());
        /* and the blocking commit of the trainer's path (ckpt_writer_commit) */
        int rc3 = ckpt_writer_begin(dir, 25, 0, 1, &(CkptWriteOptions){1024, 1}, &w);
        if (!rc3) rc3 = ckpt_add_piece(w, "w", CKPT_F32, 2, neu[0].shape, &s, neu[0].full);
        if (!rc3) rc3 = ckpt_writer_commit(w, NULL, "{}");
        n += snprintf(msg + n, sizeof msg - n, "%d|%s\n", rc3, myr_last_error());
        if (write(fds[1], msg, (size_t)n) < 0) _exit(3);
        _exit(0);
    }
    close(fds[1]);
    char buf[6600] = "";
    ssize_t got = 0, r;
    while ((r = read(fds[0], buf + got, sizeof buf - 1 - got)) > 0) got += r;
    buf[got > 0 ? got : 0] = 0;
    close(fds[0]);
    waitpid(pid, NULL, 0);
    printf("# full disk: %s", buf);
    char *second = strchr(buf, '\n');
    CHECK(strncmp(buf, "-1|", 3) == 0 && strstr(buf, "File too large"), "sync save must fail: %s", buf);
    CHECK(second && strncmp(second + 1, "-1|", 3) == 0 && strstr(second, "previous checkpoint"), "async: %s", buf);
    Ckpt *c;
    CkptOpenOptions o = {1, 0};
    CHECK(ckpt_open_ex(dir, &o, &c) == 0 && ckpt_step(c) == 10 && matches(c, old, 1), "previous stays valid: %s",
          myr_last_error());
    ckpt_close(c);
    /* no debris: the failed saves' step directories are gone (a full disk keeps nothing it cannot use) */
    char path[700];
    struct stat st;
    char *third = second ? strchr(second + 1, '\n') : NULL;
    CHECK(third && strncmp(third + 1, "-1|", 3) == 0, "blocking commit must fail: %s", buf);
    snprintf(path, sizeof path, "%s/step-00000025", dir);
    CHECK(stat(path, &st) != 0, "the failed blocking commit left %s", path);
    snprintf(path, sizeof path, "%s/step-00000030", dir);
    CHECK(stat(path, &st) != 0, "the failed async save left %s", path);
    CHECK(strstr(buf, "was not committed (and is removed)") != NULL, "the message says it is removed: %s", buf);
    free_tensors(old, 1);
    free_tensors(neu, 1);
}

/* ---- async save: copy semantics and serialization; a world of one through comm */
static void test_async_and_world_of_one(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", scratch("async"));
    Comm *world = comm_world();
    int64_t sh[2] = {256, 300};
    int64_t n = sh[0] * sh[1];
    float *buf = malloc(sizeof(float) * n);
    CkptSlice whole = ckpt_whole(2, sh);
    for (int step = 1; step <= 6; step++) {
        for (int64_t k = 0; k < n; k++) buf[k] = (float)(step * 1000003 + k);
        CkptWriter *w;
        CHECK(ckpt_writer_begin(dir, step, 0, 1, &(CkptWriteOptions){4096, 0}, &w) == 0, "begin");
        CHECK(ckpt_add_piece(w, "w", CKPT_F32, 2, sh, &whole, buf) == 0, "add");
        char meta[64];
        snprintf(meta, sizeof meta, "{\"lr_step\": %d}", step);
        if (step == 6) CHECK(ckpt_writer_commit(w, world, meta) == 0, "sync commit after async: %s", myr_last_error());
        else CHECK(ckpt_writer_commit_async(w, world, meta) == 0, "async %s", myr_last_error());
        /* training goes on: the buffers change at once (the next save then waits for this one) */
        for (int64_t k = 0; k < n; k++) buf[k] = -1.0f;
        CHECK(step == 6 || ckpt_async_pending(), "pending");
    }
    CHECK(ckpt_async_wait() == 0 && !ckpt_async_pending(), "wait");
    float *got = malloc(sizeof(float) * n);
    for (int step = 1; step <= 6; step++) {
        char p[700];
        snprintf(p, sizeof p, "%s/step-%08d", dir, step);
        Ckpt *c;
        if (ckpt_open(p, &c)) {
            CHECK(0, "open %s", myr_last_error());
            continue;
        }
        int bad = ckpt_read_slice(c, "w", &whole, got) != 0;
        for (int64_t k = 0; k < n && !bad; k++) bad = got[k] != (float)(step * 1000003 + k);
        CHECK(!bad, "step %d holds the snapshot taken at the call", step);
        char want[32];
        snprintf(want, sizeof want, "\"lr_step\":%d", step);
        CHECK(strstr(ckpt_meta(c), want) != NULL, "meta %s", ckpt_meta(c));
        ckpt_close(c);
    }
    Ckpt *c;
    CHECK(ckpt_open(dir, &c) == 0 && ckpt_step(c) == 6, "newest");
    ckpt_close(c);
    /* bad metadata is refused before anything is written */
    CkptWriter *wm;
    ckpt_writer_begin(dir, 8, 0, 1, NULL, &wm);
    CHECK(ckpt_writer_commit_async(wm, world, "not json") == -1 && strstr(myr_last_error(), "JSON object"), "meta");
    CHECK(!ckpt_async_pending(), "nothing started");
    /* a writer begun for another rank/size cannot commit in this world */
    CkptWriter *w;
    ckpt_writer_begin(dir, 7, 1, 2, NULL, &w);
    CHECK(ckpt_writer_commit(w, world, NULL) == -1 && strstr(myr_last_error(), "rank 1 of 2"), "%s", myr_last_error());
    free(buf);
    free(got);
}

/* ---- async save committed by polling: once the shard is written, ckpt_async_poll commits it
 * (the newest valid checkpoint) without another save or a wait */
static void test_async_poll_commits(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s", scratch("async-poll"));
    Comm *world = comm_world();
    int64_t sh[2] = {64, 100};
    float *buf = calloc((size_t)(sh[0] * sh[1]), sizeof(float));
    CkptSlice whole = ckpt_whole(2, sh);
    CkptWriter *w;
    CHECK(ckpt_writer_begin(dir, 3, 0, 1, NULL, &w) == 0, "begin");
    CHECK(ckpt_add_piece(w, "w", CKPT_F32, 2, sh, &whole, buf) == 0, "add");
    CHECK(ckpt_writer_commit_async(w, world, "{}") == 0, "async %s", myr_last_error());
    Ckpt *c = NULL;
    /* before the commit nothing loads as valid (no manifest yet, or the write is still going) */
    int polls = 0;
    while (ckpt_async_pending() && polls < 20000) { /* at most ~20 s: a loaded machine's fsync */
        CHECK(ckpt_async_poll() == 0, "poll: %s", myr_last_error());
        if (ckpt_async_pending()) usleep(1000);
        polls++;
    }
    CHECK(!ckpt_async_pending(), "the poll committed the save (after %d polls)", polls);
    CHECK(ckpt_open(dir, &c) == 0 && ckpt_step(c) == 3, "newest is step 3 without a wait: %s", myr_last_error());
    if (c) ckpt_close(c);
    CHECK(ckpt_async_poll() == 0 && ckpt_async_wait() == 0, "nothing left in flight");
    free(buf);
}

/* ---- under mpirun (tests/test_ckpt.sh): every rank saves its row block (sync), then its
 * column block (async) of a 2-D tensor; then each rank reads the other layout. */
static float val(int64_t step, int64_t k) { return (float)(step * 7919 + k * 3); }

static int mpi_main(const char *dir, const char *mode) {
    CommOptions opt = comm_default_options();
    int argc = 1;
    char *a0 = "test_ckpt", **argv = &a0;
    if (comm_init(&argc, &argv, &opt)) myr_die_last();
    Comm *world = comm_world();
    int r = comm_rank(world), n = comm_size(world), fails = 0;
    int64_t sh[2] = {256, 1024}, N = sh[0] * sh[1];
    float *full = malloc(sizeof(float) * N);
    if (!strcmp(mode, "save")) { /* step 1 rows, sync; step 2 columns, async; MYRIAD_CKPT_CRASH_AT may kill */
        for (int step = 1; step <= 2; step++) {
            for (int64_t k = 0; k < N; k++) full[k] = val(step, k);
            CkptSlice s = step == 1 ? ckpt_rows(2, sh, sh[0] * r / n, sh[0] * (r + 1) / n - sh[0] * r / n)
                                    : ckpt_cols(2, sh, sh[1] * r / n, sh[1] * (r + 1) / n - sh[1] * r / n);
            Tensor t = {"w", 2, {sh[0], sh[1]}, full};
            float *piece = extract(&t, &s);
            CkptWriter *w;
            if (ckpt_writer_begin(dir, step, r, n, &(CkptWriteOptions){256, 0}, &w)) myr_die_last();
            if (ckpt_add_piece(w, "w", CKPT_F32, 2, sh, &s, piece)) myr_die_last();
            int rc = step == 1 ? ckpt_writer_commit(w, world, "{\"mesh\": {\"dp\": 4}}")
                               : ckpt_writer_commit_async(w, world, "{\"mesh\": {\"dp\": 4}}");
            for (int64_t k = 0; k < ckpt_slice_numel(&s, 2); k++) piece[k] = 0; /* the async copy is taken */
            if (step == 2 && rc == 0) rc = ckpt_async_wait();
            if (rc) fprintf(stderr, "rank %d: %s\n", r, myr_last_error()), fails++;
            free(piece);
        }
    } else { /* "load": newest valid, each rank its column block (from row pieces) or row block */
        Ckpt *c;
        if (ckpt_open(dir, &c)) myr_die_last();
        int64_t step = ckpt_step(c);
        for (int64_t k = 0; k < N; k++) full[k] = val(step, k);
        Tensor t = {"w", 2, {sh[0], sh[1]}, full};
        CkptSlice s = step == 2 ? ckpt_rows(2, sh, sh[0] * r / n, sh[0] * (r + 1) / n - sh[0] * r / n)
                                : ckpt_cols(2, sh, sh[1] * r / n, sh[1] * (r + 1) / n - sh[1] * r / n);
        int64_t cnt = ckpt_slice_numel(&s, 2);
        float *want = extract(&t, &s), *got = malloc(sizeof(float) * cnt);
        if (ckpt_read_slice(c, "w", &s, got) || memcmp(got, want, sizeof(float) * cnt)) fails++;
        double ratio = (double)ckpt_bytes_read(c) / (double)(cnt * 4);
        if (ratio > 1.1) fails++;
        if (r == 0) printf("# step %" PRId64 " loaded on %d ranks, bytes read / share on rank 0: %.3f\n", step, n, ratio);
        printf("loaded step %" PRId64 "\n", step);
        free(want);
        free(got);
        ckpt_close(c);
    }
    float f = (float)fails, tot = 0;
    comm_all_reduce(world, &f, &tot, 1, COMM_F32, COMM_SUM);
    if (r == 0) printf("%s %s\n", tot == 0 ? "ok" : "FAIL", mode);
    free(full);
    comm_finalize();
    return tot != 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--mpi")) return mpi_main(argv[2], argv[3]);
    /* tmpfs when there is one: fsync is free there, and the protocol is the same */
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(scratch_base, sizeof scratch_base, "%s/myriad-ckpt-XXXXXX", base);
    if (!mkdtemp(scratch_base)) return 1;
    RUN(test_crc32c_vectors);
    RUN(test_roundtrip_and_subslices);
    RUN(test_box_range);
    RUN(test_reshard);
    RUN(test_torn_writes); /* fork-based tests before MPI starts */
    RUN(test_bit_flips);
    RUN(test_damaged_files_and_errors);
    RUN(test_retention_and_latest);
    RUN(test_full_disk);
    CommOptions opt = comm_default_options();
    if (comm_init(&argc, &argv, &opt)) {
        printf("FAIL comm_init: %s\n", myr_last_error());
        return 1;
    }
    RUN(test_async_and_world_of_one);
    RUN(test_async_poll_commits);
    comm_finalize();
    free_tensors(reshard_set, 3);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch_base);
    if (system(cmd)) return 1;
    return TEST_SUMMARY();
}
