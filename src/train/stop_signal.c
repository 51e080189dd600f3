/* stop_signal.c: the stop signals of training (see stop_signal.h). */
#include "train/stop_signal.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received;

static void on_stop(int sig) {
    if (!received) received = sig;
}

void train_stop_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART; /* a step in progress (MPI, I/O) goes on undisturbed */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGUSR2, &sa, NULL);
}

int train_stop_agreed(Comm *world) {
    float mine = (float)received, any = mine;
    /* the largest signal number any rank got: all ranks see the same value after the same step */
    if (world && comm_all_reduce(world, &mine, &any, 1, COMM_F32, COMM_MAX)) return 0;
    return (int)any;
}
