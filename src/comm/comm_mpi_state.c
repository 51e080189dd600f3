/* comm_mpi_state.c: what every file of the MPI backend shares, so that none of them calls back into
 * another: the options and the list of live groups (comm_mpi.c fills both), the MPI datatype of a
 * CommDtype, and the one-line failure records naming the group, the rank and the operation. */
#include "comm/comm_mpi.h"

#include <stdarg.h>
#include <stdio.h>

#include "util/error.h"

CommOptions comm_opts;
Comm *comm_groups;

MPI_Datatype comm_mpi_type(CommDtype dt) { return dt == COMM_BF16 ? MPI_UINT16_T : MPI_FLOAT; }

const char *comm_mpi_errstr(int rc, char *buf, int cap) {
    int len = 0;
    if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) snprintf(buf, cap, "MPI error %d", rc);
    return buf;
}

static int vfail(const Comm *c, const char *opname, const char *fmt, va_list ap) {
    char reason[600];
    vsnprintf(reason, sizeof reason, fmt, ap);
    if (!c) return myr_error("comm: %s: %s", opname, reason);
    return myr_error("comm: %s on group '%s' (rank %d of %d, world rank %d): %s", opname, c->name,
                     c->rank, c->size, c->world_ranks[c->rank], reason);
}

int comm_fail(const Comm *c, const char *opname, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(c, opname, fmt, ap);
    va_end(ap);
    return -1;
}

int comm_error(const Comm *c, const char *opname, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(c, opname, fmt, ap);
    va_end(ap);
    return -1;
}

int64_t comm_count_collective(Comm *c) { return ++c->seq; }
double comm_timeout_seconds(void) { return comm_opts.timeout_s; }
