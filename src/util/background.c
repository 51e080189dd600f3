/* background.c: see background.h. On Linux the nice value is per thread: setpriority on the
 * thread id leaves the rest of the process alone. */
#define _GNU_SOURCE /* syscall */
#include "util/background.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void background_thread_priority(void) {
#ifdef SYS_gettid
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
#endif
}
