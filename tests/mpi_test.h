/* mpi_test.h: test cases of a program run on several MPI ranks. Every rank runs the case; it
 * passes only if it passed on all of them, and rank 0 prints the one "ok"/"FAIL" line (name
 * plus a suffix naming the configuration, e.g. "_np4_mpi"). */
#ifndef MYRIAD_TESTS_MPI_TEST_H
#define MYRIAD_TESTS_MPI_TEST_H

#include <mpi.h>
#include <stdio.h>

#include "test.h"

static void mpi_run_case(void (*fn)(void), const char *name, const char *suffix) {
    test_failures_in_case = 0;
    fn();
    int mine = test_failures_in_case, any = 0, rank = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (any) tests_failed++;
    else tests_passed++;
    if (rank == 0) printf("%s %s%s\n", any ? "FAIL" : "ok", name, suffix);
    fflush(stdout);
}

#define MPI_RUN(fn, suffix) mpi_run_case(fn, #fn, suffix)

#endif
