/* hb_stub.c: a stand-in trainer for tests/test_launcher.sh (not a test program itself: the
 * Makefile builds only tests/test_*.c). Each rank runs --steps steps of a deterministic per-rank
 * computation (a splitmix64 chain), saves its state to DIR/rank-R.state after every step (tmp +
 * rename), reports every step over the heartbeat channel like a real rank, and with
 * `--resume auto` continues from its state file. At the end the ranks all-reduce over MPI (so
 * a multi-host run really talks across hosts) and rank 0 writes DIR/final.txt: one line per rank
 * with its last step and value, which a failure-free run and a faulted run must share.
 * usage: hb_stub --steps N --state DIR [--step-ms M] [--resume auto] [--bad-secret-rank R] */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launch/heartbeat.h"
#include "util/error.h"
#include "util/sha256.h"

static uint64_t mix(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int main(int argc, char **argv) {
    long long steps = 20, step_ms = 20;
    const char *dir = NULL;
    int resume = 0, bad_rank = -1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--step-ms") && i + 1 < argc) step_ms = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--state") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--resume") && i + 1 < argc) resume = !strcmp(argv[++i], "auto");
        else if (!strcmp(argv[i], "--bad-secret-rank") && i + 1 < argc) bad_rank = atoi(argv[++i]);
        else {
            fprintf(stderr, "hb_stub: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "hb_stub: --state DIR is required\n");
        return 2;
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int rc;
    if (rank == bad_rank && getenv("MYRIAD_HB_ADDR")) {
        uint8_t wrong[HB_SECRET_BYTES];
        hex_decode(getenv("MYRIAD_HB_SECRET"), wrong, HB_SECRET_BYTES);
        wrong[0] ^= 1; /* one bit off the job's secret */
        const char *att = getenv("MYRIAD_HB_ATTEMPT");
        rc = hb_connect(getenv("MYRIAD_HB_ADDR"), wrong, att ? atoi(att) : 0, rank);
    } else rc = hb_connect_from_env();
    if (rc != 0) {
        fprintf(stderr, "hb_stub rank %d: %s\n", rank, myr_last_error());
        return 3; /* without MPI_Finalize: mpirun reports the failed rank */
    }

    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/rank-%d.state", dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    long long step = 0;
    uint64_t value = (uint64_t)rank + 1;
    if (resume) {
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%lld %" SCNu64, &step, &value) != 2) step = 0, value = (uint64_t)rank + 1;
            fclose(f);
        }
    }
    hb_start(step);
    struct timespec nap = {step_ms / 1000, (step_ms % 1000) * 1000000};
    while (step < steps) {
        nanosleep(&nap, NULL); /* the "work" of a step */
        value = mix(value ^ (uint64_t)(step + 1));
        step++;
        FILE *f = fopen(tmp, "w");
        if (!f || fprintf(f, "%lld %" PRIu64 "\n", step, value) < 0 || fclose(f) != 0 || rename(tmp, path) != 0) {
            fprintf(stderr, "hb_stub rank %d: cannot save %s: %s\n", rank, path, strerror(errno));
            return 4;
        }
        hb_step(step, (double)(value % 1000) / 100.0);
    }
    /* cross-host traffic: every rank's value, gathered to rank 0 */
    uint64_t *all = calloc((size_t)size, sizeof *all);
    MPI_Gather(&value, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        char fin[4200];
        snprintf(fin, sizeof fin, "%s/final.txt", dir);
        FILE *f = fopen(fin, "w");
        for (int r = 0; r < size; r++) fprintf(f, "rank %d step %lld value %" PRIu64 "\n", r, step, all[r]);
        fclose(f);
    }
    free(all);
    MPI_Barrier(MPI_COMM_WORLD);
    hb_finish();
    MPI_Finalize();
    return 0;
}
