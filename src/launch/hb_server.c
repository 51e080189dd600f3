/* hb_server.c: the launcher's side of the heartbeat channel: the listening socket, one connection
 * per rank, authentication of every line (HMAC under the job secret and the connection's nonce,
 * rising sequence numbers, the current attempt) and what each message means for the rank's
 * state. Protocol: docs/LAUNCHER.md. */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/error.h"
#include "util/sha256.h"

int hb_listen(const char *host, int *port_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return myr_error("run: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
        struct addrinfo hints = {.ai_family = AF_INET}, *res;
        if (getaddrinfo(host, NULL, &hints, &res) != 0) {
            close(fd);
            return myr_error("run: --hb-addr '%s' is not an IPv4 address or resolvable name", host);
        }
        sa.sin_addr = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
        freeaddrinfo(res);
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        close(fd);
        return myr_error("run: cannot listen on %s: %s", host, strerror(e));
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *port_out = ntohs(sa.sin_port);
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

int sup_random_bytes(uint8_t *out, size_t n) {
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, out + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    return got == n ? 0 : -1;
}

void hb_send_line(int fd, const char *s) {
    size_t len = strlen(s);
    (void)!send(fd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

void hb_close_conn(Sup *s, int i) {
    close(s->conns[i].fd);
    s->conns[i] = s->conns[--s->nconns];
}

static void handle_line(Sup *s, int ci, char *line) {
    Conn *c = &s->conns[ci];
    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    char peerbuf[64] = "?";
    if (getpeername(c->fd, (struct sockaddr *)&peer, &plen) == 0)
        snprintf(peerbuf, sizeof peerbuf, "%s:%d", inet_ntoa(peer.sin_addr), ntohs(peer.sin_port));
    HbMsg m;
    if (hb_verify(line, s->secret, c->nonce) != 0 || hb_parse(line, &m) != 0) {
        cJSON *e = sup_event("auth-refused");
        cJSON_AddStringToObject(e, "peer", peerbuf);
        cJSON_AddStringToObject(e, "reason", myr_last_error());
        if (c->rank >= 0) cJSON_AddNumberToObject(e, "rank", c->rank);
        sup_emit(e);
        s->refused++;
        hb_send_line(c->fd, "NO authentication failed\n");
        c->len = (size_t)-1; /* mark for closing */
        return;
    }
    if (c->rank < 0) {
        const char *no = NULL;
        if (m.type != HB_HELLO) no = "expected HELLO";
        else if (m.attempt != s->attempt) no = "stale attempt";
        else if (m.rank >= s->o->nranks) no = "rank out of range";
        else if (s->ranks[m.rank].connected) no = "rank already connected";
        if (no) {
            cJSON *e = sup_event("auth-refused");
            cJSON_AddStringToObject(e, "peer", peerbuf);
            cJSON_AddStringToObject(e, "reason", no);
            sup_emit(e);
            char msg[64];
            snprintf(msg, sizeof msg, "NO %s\n", no);
            hb_send_line(c->fd, msg);
            c->len = (size_t)-1;
            return;
        }
        RankState *rs = &s->ranks[m.rank];
        c->rank = m.rank;
        rs->connected = 1;
        rs->fd = c->fd;
        rs->pid = m.pid;
        snprintf(rs->host, sizeof rs->host, "%s", m.host);
        rs->last_progress = sup_now();
        hb_send_line(c->fd, "OK\n");
        int all = 1;
        for (int r = 0; r < s->o->nranks; r++) all &= s->ranks[r].connected;
        if (all && !s->all_connected) {
            s->all_connected = 1;
            s->tl[s->attempt].t0 = sup_now();
            cJSON *e = sup_event("connected");
            cJSON_AddNumberToObject(e, "attempt", s->attempt);
            cJSON_AddNumberToObject(e, "ranks", s->o->nranks);
            sup_emit(e);
        }
        return;
    }
    if (m.seq <= c->last_seq) { /* a replayed or reordered line */
        cJSON *e = sup_event("auth-refused");
        cJSON_AddStringToObject(e, "peer", peerbuf);
        cJSON_AddStringToObject(e, "reason", "sequence number went backwards (replay)");
        cJSON_AddNumberToObject(e, "rank", c->rank);
        sup_emit(e);
        c->len = (size_t)-1;
        return;
    }
    c->last_seq = m.seq;
    RankState *rs = &s->ranks[c->rank];
    if (m.type == HB_EVENT) {
        if (!strcmp(m.name, "done")) rs->done = 1;
        else {
            /* where the trainer restored from: memory, replica, disk, disk-fallback, scratch */
            if (c->rank == 0 && (!strncmp(m.name, "restored-from-", 14) || !strcmp(m.name, "disk-fallback") ||
                                 !strcmp(m.name, "started-from-scratch")))
                snprintf(s->source, sizeof s->source, "%s",
                         !strncmp(m.name, "restored-from-", 14) ? m.name + 14 : m.name);
            if (c->rank == 0 && !strcmp(m.name, "mem-copy-rejected")) s->copy_rejected = 1;
            cJSON *e = sup_event("rank-event");
            cJSON_AddNumberToObject(e, "rank", c->rank);
            cJSON_AddStringToObject(e, "name", m.name);
            sup_emit(e);
        }
        return;
    }
    if (m.type == HB_FROM) { /* resumed position: the next step it computes is m.step + 1 */
        if (rs->first_step < 0) rs->first_step = m.step + 1;
        if (m.step > rs->step) rs->step = m.step;
        rs->last_progress = sup_now();
        progress_update_job_step(s);
        return;
    }
    if (m.type != HB_STEP) return;
    if (rs->first_step < 0) rs->first_step = m.step;
    if (m.step > rs->step) {
        rs->step = m.step;
        rs->last_progress = sup_now();
    }
    if (m.step > rs->best_step) rs->best_step = m.step;
    if (holds_has(s, m.step)) rs->held = m.step;
    progress_update_job_step(s);
    faults_fire(s, c->rank, m.step);
    holds_release(s);
}

void hb_read(Sup *s, int ci) {
    Conn *c = &s->conns[ci];
    char tmp[4096];
    ssize_t r = recv(c->fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) { /* EOF: the rank's process is gone (or closed after "done") */
        if (c->rank >= 0) {
            RankState *rs = &s->ranks[c->rank];
            rs->closed = 1;
            if (!rs->done && !s->failed) {
                cJSON *e = sup_event("exit");
                cJSON_AddNumberToObject(e, "rank", c->rank);
                cJSON_AddNumberToObject(e, "pid", (double)rs->pid);
                cJSON_AddStringToObject(e, "host", rs->host);
                cJSON_AddNumberToObject(e, "step", (double)rs->step);
                cJSON_AddStringToObject(e, "why", "heartbeat connection closed before the rank finished");
                sup_emit(e);
                sup_fail(s, "rank %d (pid %lld on %s) exited at step %lld", c->rank, rs->pid, rs->host, rs->step);
            }
        }
        hb_close_conn(s, ci);
        holds_release(s);
        return;
    }
    for (ssize_t i = 0; i < r; i++) {
        if (tmp[i] == '\n') {
            c->buf[c->len] = 0;
            c->len = 0;
            handle_line(s, ci, c->buf);
            c = &s->conns[ci];
            if (c->len == (size_t)-1) {
                hb_close_conn(s, ci);
                return;
            }
        } else if (c->len + 1 >= sizeof c->buf) {
            cJSON *e = sup_event("auth-refused");
            cJSON_AddStringToObject(e, "reason", "line too long");
            sup_emit(e);
            hb_close_conn(s, ci);
            return;
        } else c->buf[c->len++] = tmp[i];
    }
}

void hb_accept(Sup *s, int lfd) {
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) return;
        if (s->nconns == s->cap_conns) {
            s->cap_conns = s->cap_conns ? 2 * s->cap_conns : 64;
            s->conns = realloc(s->conns, (size_t)s->cap_conns * sizeof *s->conns);
        }
        Conn *c = &s->conns[s->nconns++];
        memset(c, 0, sizeof *c);
        c->fd = fd;
        c->rank = -1;
        uint8_t nonce[HB_NONCE_BYTES];
        if (sup_random_bytes(nonce, sizeof nonce) != 0) memset(nonce, 0, sizeof nonce);
        hex_encode(nonce, sizeof nonce, c->nonce);
        char greet[64];
        snprintf(greet, sizeof greet, "MYRHB1 %s\n", c->nonce);
        hb_send_line(fd, greet);
    }
}

