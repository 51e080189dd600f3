/* test_memckpt.c: in-memory checkpoint copies (src/ckpt/memckpt.c): round trip, the commit
 * protocol under writers killed at random points (a torn copy is never listed; the newest
 * listed copy always verifies), recycling the oldest copy under the same threat, bit flips anywhere in a copy always detected, scans that ignore
 * other layouts, retention. The oracle is the writer's own pattern and CRC-32C from crc32c.c
 * (itself tested against RFC 3720 vectors in test_ckpt). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckpt/crc32c.h"
#include "ckpt/memckpt.h"
#include "test.h"

static char dir[4096];
enum { PAYLOAD = 1 << 20, WORLD = 4 };
static const uint64_t LAYOUT = 0x1234abcdull;

static void fill(unsigned char *p, size_t n, int64_t step) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 131 + (size_t)step * 7 + (i >> 9));
}

/* Write rank's copy of step; crash_at k: _exit before finishing stage k (1 created, 2 half the
 * payload, 3 payload written, 4 header written) -- 0: complete. */
static int write_copy(int rank, int64_t step, int crash_at) {
    MemFile f;
    if (memckpt_create(&f, dir, rank, step, PAYLOAD)) return -1;
    if (crash_at == 1) _exit(86);
    unsigned char *p = f.map + MEMCKPT_HEADER;
    fill(p, PAYLOAD / 2, step);
    if (crash_at == 2) _exit(86);
    fill(p, PAYLOAD, step);
    if (crash_at == 3) _exit(86);
    MemHeader h = {rank, WORLD, step, LAYOUT, PAYLOAD, crc32c(p, PAYLOAD)};
    int rc = memckpt_commit(&f, &h);
    memckpt_close(&f);
    return rc;
}

static int copy_ok(int rank, int64_t step) {
    MemFile f;
    if (memckpt_open(&f, dir, rank, step)) return 0;
    int ok = !memckpt_verify(f.map, f.bytes, rank, WORLD, step, LAYOUT);
    unsigned char *want = malloc(PAYLOAD);
    fill(want, PAYLOAD, step);
    ok = ok && f.bytes == MEMCKPT_HEADER + PAYLOAD && !memcmp(want, f.map + MEMCKPT_HEADER, PAYLOAD);
    free(want);
    memckpt_close(&f);
    return ok;
}

static void test_round_trip_and_scan(void) {
    memckpt_remove(dir, -1);
    CHECK(write_copy(1, 5, 0) == 0, "%s", "write");
    CHECK(write_copy(1, 6, 0) == 0, "%s", "write");
    CHECK(write_copy(2, 6, 0) == 0, "%s", "write");
    CHECK(copy_ok(1, 5) && copy_ok(1, 6) && copy_ok(2, 6), "%s", "copies verify and hold the pattern");
    MemEntry e[8];
    int n = memckpt_scan(dir, WORLD, LAYOUT, e, 8);
    CHECK(n == 3 && e[0].step == 6 && e[0].rank == 1 && e[1].step == 6 && e[1].rank == 2 && e[2].step == 5,
          "scan newest first: n=%d", n);
    CHECK(memckpt_scan(dir, WORLD, LAYOUT + 1, e, 8) == 0, "%s", "another layout is never listed");
    CHECK(memckpt_scan(dir, WORLD + 1, LAYOUT, e, 8) == 0, "%s", "another world size is never listed");
    CHECK(write_copy(1, 7, 0) == 0, "%s", "write");
    memckpt_prune(dir, 1, 2);
    n = memckpt_scan(dir, WORLD, LAYOUT, e, 8);
    CHECK(n == 3 && !copy_ok(1, 5) && copy_ok(1, 6) && copy_ok(1, 7) && copy_ok(2, 6), "prune keeps the 2 newest: n=%d", n);
    memckpt_remove(dir, -1);
    CHECK(memckpt_scan(dir, WORLD, LAYOUT, e, 8) == 0, "%s", "remove");
}

/* A child writing step 2 (step 1 committed) dies at a crash point or by SIGKILL at a random
 * moment; the parent then lists the copies: never a torn one, and the newest verifies. */
static void test_torn_writes(void) {
    memckpt_remove(dir, -1);
    CHECK(write_copy(0, 1, 0) == 0, "%s", "write step 1");
    int trials = 240, newer = 0, older = 0, bad = 0;
    srand(7);
    for (int t = 0; t < trials; t++) {
        int crash = t < 80 ? 1 + t % 4 : 0; /* 80 at each crash point in turn, then random kills */
        pid_t pid = fork();
        if (pid == 0) {
            write_copy(0, 2, crash);
            _exit(0);
        }
        if (!crash) {
            usleep((useconds_t)(rand() % 1500));
            kill(pid, SIGKILL);
        }
        int st;
        waitpid(pid, &st, 0);
        MemEntry e[8];
        int n = memckpt_scan(dir, 1 * WORLD, LAYOUT, e, 8);
        if (n < 1 || !copy_ok(0, e[0].step)) bad++;
        else if (e[0].step == 2) newer++;
        else older++;
        for (int i = 0; i < n; i++) bad += !copy_ok(0, e[i].step);
        /* back to "step 1 committed, step 2 absent"; a leftover temporary file is the next writer's to clear */
        char path[4200];
        snprintf(path, sizeof path, "%s/r%05d-s%012d.mem", dir, 0, 2);
        unlink(path);
    }
    printf("# torn in-memory writes: %d trials: %d listed the new step, %d the previous, %d invalid\n", trials, newer,
           older, bad);
    CHECK(bad == 0, "%d trials left an invalid copy listed", bad);
    CHECK(older >= 80, "crash points before the rename must leave the previous step (%d)", older);
    memckpt_remove(dir, -1);
}

/* Recycling (what training does each step): the oldest copy is renamed out of sight, rewritten
 * and committed under the new step. A writer killed at any point of that leaves the other copy
 * listed and valid, never the half-rewritten one. */
static void test_recycle(void) {
    int trials = 60, bad = 0, committed = 0;
    srand(5);
    for (int t = 0; t < trials; t++) {
        memckpt_remove(dir, -1);
        pid_t pid = fork();
        if (pid == 0) {
            MemFile a;
            MemHeader h = {0, WORLD, 1, LAYOUT, PAYLOAD, 0};
            if (memckpt_create(&a, dir, 0, 1, PAYLOAD)) _exit(2);
            fill(a.map + MEMCKPT_HEADER, PAYLOAD, 1);
            h.crc = crc32c(a.map + MEMCKPT_HEADER, PAYLOAD);
            if (memckpt_commit(&a, &h) || write_copy(0, 2, 0)) _exit(2);
            kill(getpid(), SIGSTOP); /* the parent resumes us and kills us at a random moment */
            if (memckpt_recycle(&a, dir, 0, 3)) _exit(2);
            fill(a.map + MEMCKPT_HEADER, PAYLOAD, 3);
            MemHeader h3 = {0, WORLD, 3, LAYOUT, PAYLOAD, crc32c(a.map + MEMCKPT_HEADER, PAYLOAD)};
            if (memckpt_commit(&a, &h3)) _exit(2);
            _exit(0);
        }
        int st;
        waitpid(pid, &st, WUNTRACED);
        kill(pid, SIGCONT);
        if (t % 4) {
            usleep((useconds_t)(rand() % 3000));
            kill(pid, SIGKILL);
        }
        waitpid(pid, &st, 0);
        MemEntry e[8];
        int n = memckpt_scan(dir, WORLD, LAYOUT, e, 8), has2 = 0, has3 = 0;
        for (int i = 0; i < n; i++) {
            bad += !copy_ok(0, e[i].step);
            has2 |= e[i].step == 2, has3 |= e[i].step == 3;
        }
        bad += !has2;
        committed += has3;
    }
    printf("# recycled copies: %d trials, %d committed the new step, %d invalid\n", trials, committed, bad);
    CHECK(bad == 0, "%d trials listed a bad copy or lost the untouched one", bad);
    CHECK(committed >= trials / 4, "the uninterrupted trials commit the new step (%d)", committed);
    memckpt_remove(dir, -1);
}

/* One bit flipped anywhere (header or payload) is detected: 200 trials. */
static void test_bit_flips(void) {
    memckpt_remove(dir, -1);
    CHECK(write_copy(3, 9, 0) == 0, "%s", "write");
    char path[4200];
    snprintf(path, sizeof path, "%s/r%05d-s%012d.mem", dir, 3, 9);
    int detected = 0, trials = 200;
    srand(11);
    for (int t = 0; t < trials; t++) {
        FILE *fp = fopen(path, "r+b");
        long off = t < 20 ? t * 3 : (long)((unsigned)rand() % (MEMCKPT_HEADER + PAYLOAD)); /* the header, then anywhere */
        int bit = rand() % 8;
        fseek(fp, off, SEEK_SET);
        int c = fgetc(fp);
        fseek(fp, off, SEEK_SET);
        fputc(c ^ (1 << bit), fp);
        fclose(fp);
        MemEntry e[4];
        int listed = memckpt_scan(dir, WORLD, LAYOUT, e, 4);
        detected += !listed || !copy_ok(3, 9);
        fp = fopen(path, "r+b"); /* restore */
        fseek(fp, off, SEEK_SET);
        fputc(c, fp);
        fclose(fp);
    }
    CHECK(copy_ok(3, 9), "%s", "the restored copy verifies again");
    printf("# in-memory bit flips: %d of %d detected\n", detected, trials);
    CHECK(detected == trials, "%d of %d flips detected", detected, trials);
    memckpt_remove(dir, -1);
}

int main(void) {
    char tmpl[] = "/tmp/myriad-memckpt-XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    setenv("MYRIAD_SHM_DIR", tmpl, 1);
    if (memckpt_dir(dir, sizeof dir, 42, "hostA")) return 1;
    RUN(test_round_trip_and_scan);
    RUN(test_torn_writes);
    RUN(test_recycle);
    RUN(test_bit_flips);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpl);
    if (system(cmd)) return 1;
    return TEST_SUMMARY();
}
