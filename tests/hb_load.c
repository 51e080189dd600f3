/* hb_load.c: a load generator for `myriad run`'s supervisor (not a test program itself: built and
 * run by tests/test_supervisor_scale.sh and bench/supervisor_scale.sh under `myriad run
 * --launcher direct`). One process simulates N ranks, each with its own heartbeat connection
 * speaking the real protocol (greeting, HELLO, MACed STEP lines with section times, "done"),
 * driven by one epoll loop. Every rank sends a step every PERIOD seconds, the ranks spread evenly
 * over the period. A rank can be made to fall silent (its connection stays open, like a host that
 * froze) or to close its connection, to check that the supervisor finds it (in the first attempt
 * only: a relaunch runs clean).
 * usage: hb_load --ranks N [--period S] [--steps K] [--silence RANK@STEP] [--close RANK@STEP]
 *                [--ranks-per-host H]
 * Prints "hb_load: N ranks connected in X s" and, at the end, its own CPU time. */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "launch/heartbeat.h"
#include "util/sha256.h"

typedef struct {
    int fd, state; /* 0 connecting, 1 greeting, 2 waiting for OK, 3 running, 4 silent or done */
    char nonce[2 * HB_NONCE_BYTES + 1];
    char in[128];
    size_t inlen;
    long long seq, step;
    double next;   /* when its next step is due */
} Rank;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static uint8_t secret[HB_SECRET_BYTES];

static int send_signed(Rank *k, char *line) {
    if (hb_sign(line, HB_LINE_MAX, secret, k->nonce) != 0) return -1;
    size_t len = strlen(line);
    line[len] = '\n';
    return send(k->fd, line, len + 1, MSG_NOSIGNAL) == (ssize_t)(len + 1) ? 0 : -1;
}

static void die(const char *what) {
    fprintf(stderr, "hb_load: %s: %s\n", what, strerror(errno));
    exit(1);
}

int main(int argc, char **argv) {
    int n = 0, steps = 10, per_host = 8, silent = -1, closer = -1;
    long long silent_at = 0, close_at = 0;
    double period = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--ranks") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--period") && i + 1 < argc) period = atof(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--ranks-per-host") && i + 1 < argc) per_host = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--silence") && i + 1 < argc) sscanf(argv[++i], "%d@%lld", &silent, &silent_at);
        else if (!strcmp(argv[i], "--close") && i + 1 < argc) sscanf(argv[++i], "%d@%lld", &closer, &close_at);
        else if (!strcmp(argv[i], "--resume")) i++; /* a relaunch: simulated ranks start over */
        else {
            fprintf(stderr, "hb_load: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    const char *addr = getenv("MYRIAD_HB_ADDR"), *hex = getenv("MYRIAD_HB_SECRET"), *att = getenv("MYRIAD_HB_ATTEMPT");
    if (n < 1 || !addr || !hex || hex_decode(hex, secret, sizeof secret) != 0) {
        fprintf(stderr, "hb_load: needs --ranks N and MYRIAD_HB_ADDR/MYRIAD_HB_SECRET (run it under myriad run)\n");
        return 2;
    }
    int attempt = att ? atoi(att) : 0;
    if (attempt > 0) silent = closer = -1; /* the faults happen once: a relaunch runs clean */
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < (rlim_t)n + 64) {
        rl.rlim_cur = (rlim_t)n + 64;
        if (rl.rlim_max < rl.rlim_cur) rl.rlim_max = rl.rlim_cur;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) die("raising the open-file limit");
    }
    char host[256];
    const char *colon = strrchr(addr, ':');
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) die("resolving MYRIAD_HB_ADDR");
    int ep = epoll_create1(0);
    Rank *ranks = calloc((size_t)n, sizeof *ranks);
    double t0 = now_s();
    int connected = 0, done = 0, live = n, cursor = 0;
    char line[HB_LINE_MAX];
    /* connect in batches, so the listen backlog never overflows into SYN retries */
    for (int next = 0, running = 1; running;) {
        while (next < n && next - connected < 512) {
            Rank *k = &ranks[next];
            k->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
            if (k->fd < 0) die("socket");
            if (connect(k->fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) die("connect");
            struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)next};
            epoll_ctl(ep, EPOLL_CTL_ADD, k->fd, &ev);
            k->state = 1;
            next++;
        }
        double t = now_s(), soonest = t + 0.05;
        /* the steps: ranks are due in rank order (phases spread over the period), so a cursor
         * walks them: constant work per step sent, whatever N */
        for (int guard = 0; connected == n && live > 0 && guard < n; guard++) {
            Rank *k = &ranks[cursor];
            if (k->state != 3) {
                cursor = (cursor + 1) % n;
                continue;
            }
            if (k->next > t) {
                soonest = k->next;
                break;
            }
            cursor = (cursor + 1) % n;
            int r = (int)(k - ranks);
            if (silent == r && k->step >= silent_at) { /* frozen: open connection, no more steps */
                k->state = 4, live--;
                continue;
            }
            if (closer == r && k->step >= close_at) { /* gone: the connection closes */
                close(k->fd);
                k->state = 4, live--;
                continue;
            }
            if (k->step == steps) {
                snprintf(line, sizeof line, "EVENT %lld done %lld", ++k->seq, now_us());
                send_signed(k, line);
                epoll_ctl(ep, EPOLL_CTL_DEL, k->fd, NULL);
                close(k->fd);
                k->state = 4, live--, done++;
                continue;
            }
            k->step++;
            /* plausible section times (microseconds), a little different per rank */
            snprintf(line, sizeof line, "STEP %lld %lld %.6f %lld data=%d,fwd=%d,bwd=%d,comm=%d,opt=%d,ckpt=%d", ++k->seq,
                     k->step, 5.0 - 0.01 * (double)k->step, now_us(), 100 + r % 7, 30000 + r % 97, 60000 + r % 89, 5000,
                     8000, 1000);
            if (send_signed(k, line) != 0) die("send");
            k->next += period;
        }
        struct epoll_event evs[256];
        int timeout = (int)((soonest - now_s()) * 1000 + 0.999);
        int m = epoll_wait(ep, evs, 256, timeout < 0 ? 0 : timeout > 50 ? 50 : timeout);
        for (int i = 0; i < m; i++) {
            int r = (int)evs[i].data.u32;
            Rank *k = &ranks[r];
            ssize_t got = recv(k->fd, k->in + k->inlen, sizeof k->in - 1 - k->inlen, 0);
            if (got <= 0) {
                if (k->state < 4 && live > 0) {
                    fprintf(stderr, "hb_load: rank %d: the launcher closed the connection\n", r);
                    return 1;
                }
                epoll_ctl(ep, EPOLL_CTL_DEL, k->fd, NULL);
                continue;
            }
            k->inlen += (size_t)got;
            char *nl;
            while ((nl = memchr(k->in, '\n', k->inlen))) {
                *nl = 0;
                if (k->state == 1 && !strncmp(k->in, "MYRHB1 ", 7)) {
                    snprintf(k->nonce, sizeof k->nonce, "%s", k->in + 7);
                    snprintf(line, sizeof line, "HELLO %d %d %d simhost-%d", attempt, r, (int)getpid(), r / per_host);
                    if (send_signed(k, line) != 0) die("send HELLO");
                    k->state = 2;
                } else if (k->state == 2 && !strcmp(k->in, "OK")) {
                    k->state = 3;
                    if (++connected == n) {
                        double tc = now_s();
                        printf("hb_load: %d ranks connected in %.2f s\n", n, tc - t0);
                        fflush(stdout);
                        for (int q = 0; q < n; q++) ranks[q].next = tc + period * q / n;
                    }
                } else if (strncmp(k->in, "GO ", 3)) {
                    fprintf(stderr, "hb_load: rank %d: unexpected '%s'\n", r, k->in);
                    return 1;
                }
                size_t used = (size_t)(nl - k->in) + 1;
                memmove(k->in, nl + 1, k->inlen - used);
                k->inlen -= used;
            }
        }
        if (connected == n && live == 0 && (silent < 0 || done == n)) running = 0;
        if (connected == n && live == 0 && silent >= 0) pause(); /* the silent rank's launcher kills us */
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("hb_load: %d ranks, %d finished; own CPU %.2f s\n", n, done,
           ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec));
    freeaddrinfo(ai);
    free(ranks);
    return 0;
}
