/* test_util.c: error reporting helpers and whole-file images written by atomic_write_image. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "io/atomic_file.h"
#include "test.h"
#include "util/error.h"

static void test_error_message_is_kept(void) {
    CHECK(myr_error("bad %s %d", "thing", 3) == -1, "returns -1");
    CHECK(!strcmp(myr_last_error(), "bad thing 3"), "got '%s'", myr_last_error());
}

static int file_equals(const char *path, const unsigned char *want, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    unsigned char *got = malloc(n + 1);
    size_t r = fread(got, 1, n + 1, f);
    fclose(f);
    int ok = r == n && !memcmp(got, want, n);
    free(got);
    return ok;
}

/* An image written in one call (direct I/O where the file system allows it, on the disk under
 * /tmp and on /dev/shm) reads back byte for byte at its exact length, whatever the length;
 * an unaligned image goes buffered; an image after other writes is refused; a size limit hit
 * in the middle fails with the reason and leaves the destination alone. */
static void test_atomic_write_image(void) {
    const char *roots[] = {"/tmp", "/dev/shm"};
    size_t lens[] = {1, 4096, 3 * 4096 + 123, ((size_t)9 << 20) + 5};
    size_t cap = ((size_t)10 << 20);
    unsigned char *img = aligned_alloc(4096, cap);
    for (size_t i = 0; i < cap; i++) img[i] = (unsigned char)(i * 131 + (i >> 12));
    for (int r = 0; r < 2; r++) {
        char dir[256], path[300];
        snprintf(dir, sizeof dir, "%s/myriad-image-XXXXXX", roots[r]);
        if (!mkdtemp(dir)) continue;
        snprintf(path, sizeof path, "%s/f.bin", dir);
        for (int k = 0; k < 4; k++)
            for (int off = 0; off < 2; off++) { /* off 1: an unaligned image */
                AtomicFile a;
                CHECK(atomic_open(&a, path) == 0, "open %s", myr_last_error());
                int rc = atomic_write_image(&a, img + off, lens[k]);
                CHECK(rc == 0 && atomic_commit(&a) == 0, "%s len %zu off %d: %s", roots[r], lens[k], off, myr_last_error());
                CHECK(file_equals(path, img + off, lens[k]), "%s len %zu off %d reads back", roots[r], lens[k], off);
            }
        AtomicFile a;
        CHECK(atomic_open(&a, path) == 0 && atomic_write(&a, "x", 1) == 0, "open");
        CHECK(atomic_write_image(&a, img, 4096) == -1 && strstr(myr_last_error(), "whole file"), "after a write: %s",
              myr_last_error());
        atomic_abort(&a);
        CHECK(file_equals(path, img + 1, lens[3]), "an aborted write leaves the destination");
        pid_t pid = fork();
        if (pid == 0) { /* a file size limit of 1 MiB + 100 bytes: the image of 9 MiB fails part way */
            signal(SIGXFSZ, SIG_IGN);
            struct rlimit rl = {((rlim_t)1 << 20) + 100, ((rlim_t)1 << 20) + 100};
            setrlimit(RLIMIT_FSIZE, &rl);
            AtomicFile b;
            if (atomic_open(&b, path)) _exit(3);
            int rc = atomic_write_image(&b, img, lens[3]);
            int said = strstr(myr_last_error(), "File too large") != NULL;
            atomic_abort(&b);
            _exit(rc == -1 && said ? 0 : 4);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "size limit: exit %d", WEXITSTATUS(st));
        CHECK(file_equals(path, img + 1, lens[3]), "the failed write left the destination alone");
        char tmp[320];
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        CHECK(access(tmp, F_OK) != 0, "no temporary file left");
        unlink(path);
        rmdir(dir);
    }
    free(img);
}

int main(void) {
    RUN(test_error_message_is_kept);
    RUN(test_atomic_write_image);
    return TEST_SUMMARY();
}
