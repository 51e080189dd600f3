/* ckpt_durable.c: what the writer and the commit share to make a save durable: the fsync of a
 * directory (a rename is durable only once its directory is), and the crash points between the
 * durable steps, where torn-write tests (MYRIAD_CKPT_CRASH_AT=k) kill the process at the k-th. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckpt/ckpt.h"
#include "ckpt/ckpt_writer.h"
#include "util/error.h"

/* ---- crash hook (torn-write tests) */
static long crash_at, crash_passed;

void ckpt_test_crash_at(long k) {
    crash_at = k;
    crash_passed = 0;
}
long ckpt_test_crash_points(void) { return crash_passed; }

void ckpt_crash_env(void) {
    const char *e = getenv("MYRIAD_CKPT_CRASH_AT");
    if (e && *e && crash_at == 0) ckpt_test_crash_at(strtol(e, NULL, 10));
}

void ckpt_crash_point(void) {
    crash_passed++;
    if (crash_at > 0 && crash_passed == crash_at) _exit(86);
}

int ckpt_fsync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return myr_error("cannot open directory %s: %s", dir, strerror(errno));
    int rc = 0;
    if (fsync(fd) && errno != EINVAL) rc = myr_error("fsync of directory %s failed: %s", dir, strerror(errno));
    close(fd);
    return rc;
}
