/* stop_signal.c: the stop signals of training (see stop_signal.h). */
#include "train/stop_signal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t received, interrupts, speaks;
/* What a second Ctrl-C loses, written by the loop between signals: two buffers, the handler reads
 * the one `current` names (switched only after the other is complete), so it never sees a torn one. */
static char lost[2][1024];
static volatile sig_atomic_t current = -1;

static void say(const char *s) {
    for (size_t n = strlen(s); n > 0;) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w, n -= (size_t)w;
    }
}

static void on_stop(int sig) {
    if (sig == SIGINT && interrupts++) { /* the second Ctrl-C: out now, saying what that costs */
        if (speaks) {
            say("\nmyriad train: interrupted again: exiting now without a checkpoint");
            if (current >= 0) say("; "), say(lost[current]);
            say("\n");
        }
        _exit(128 + SIGINT);
    }
    if (sig == SIGINT && speaks)
        say("\nmyriad train: interrupt: stopping after this step with a checkpoint (all ranks agree on the step); "
            "press Ctrl-C again to exit at once\n");
    if (!received) received = sig;
}

void train_stop_install(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"};
    speaks = 1;
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v) {
            speaks = atoi(v) == 0; /* rank 0 speaks for the job */
            break;
        }
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART; /* a step in progress (MPI, I/O) goes on undisturbed */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

void train_stop_set_lost(const char *what) {
    int next = current == 0 ? 1 : 0;
    snprintf(lost[next], sizeof lost[next], "%s", what);
    current = next;
}

int train_stop_agreed(Comm *world) {
    float mine = (float)received, any = mine;
    /* the largest signal number any rank got: all ranks see the same value after the same step */
    if (world && comm_all_reduce(world, &mine, &any, 1, COMM_F32, COMM_MAX)) return 0;
    return (int)any;
}

int train_stop_exit_code(int sig) { return sig == SIGINT ? 128 + SIGINT : TRAIN_EXIT_STOPPED; }
