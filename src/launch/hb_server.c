/* hb_server.c: the launcher's side of the heartbeat channel: the listening socket, one connection
 * per rank, authentication of every line (HMAC under the job secret and the connection's nonce,
 * rising sequence numbers, the current attempt) and what each message means for the rank's
 * state. Protocol: docs/LAUNCHER.md. */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/error.h"
#include "util/sha256.h"

int hb_listen(const char *host, int nranks, int *port_out) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
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
    /* a backlog for every rank connecting at once (the kernel caps it at net.core.somaxconn) */
    int backlog = nranks + 64 < 65535 ? nranks + 64 : 65535;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, backlog < 1024 ? 1024 : backlog) != 0) {
        int e = errno;
        close(fd);
        return myr_error("run: cannot listen on %s: %s", host, strerror(e));
    }
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    *port_out = ntohs(sa.sin_port);
    return fd;
}

int sup_random_bytes(uint8_t *out, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}

void hb_close_conn(Sup *s, int slot) {
    Conn *c = &s->conns[slot];
    if (c->fd < 0) return;
    close(c->fd); /* leaves the epoll set with it */
    if (c->rank >= 0 && s->ranks[c->rank].fd == c->fd) s->ranks[c->rank].fd = -1;
    c->fd = -1;
    s->free_conns[s->nfree++] = slot;
    s->nconns--;
}

void hb_close_all(Sup *s) {
    for (int i = 0; i < s->cap_conns; i++) hb_close_conn(s, i);
}

/* "addr:port" of a connection, for the event log of a refusal (a system call: errors only) */
static void peer_name(int fd, char *buf, size_t n) {
    struct sockaddr_in peer;
    socklen_t plen = sizeof peer;
    snprintf(buf, n, "?");
    if (getpeername(fd, (struct sockaddr *)&peer, &plen) == 0)
        snprintf(buf, n, "%s:%d", inet_ntoa(peer.sin_addr), ntohs(peer.sin_port));
}

static void refuse(Sup *s, Conn *c, const char *reason, int say_no) {
    char peer[64];
    peer_name(c->fd, peer, sizeof peer);
    cJSON *e = sup_event("auth-refused");
    cJSON_AddStringToObject(e, "peer", peer);
    cJSON_AddStringToObject(e, "reason", reason);
    if (c->rank >= 0) cJSON_AddNumberToObject(e, "rank", c->rank);
    sup_emit(e);
    if (say_no) {
        char msg[160];
        snprintf(msg, sizeof msg, "NO %.150s\n", reason);
        hb_send_line(c->fd, msg);
    }
    c->len = (size_t)-1; /* mark for closing */
}

static void hello(Sup *s, Conn *c, const HbMsg *m) {
    const char *no = NULL;
    if (m->type != HB_HELLO) no = "expected HELLO";
    else if (m->attempt != s->attempt) no = "stale attempt";
    else if (m->rank >= s->o->nranks) no = "rank out of range";
    else if (s->ranks[m->rank].connected) no = "rank already connected";
    if (no) {
        refuse(s, c, no, 1);
        return;
    }
    RankState *rs = &s->ranks[m->rank];
    c->rank = m->rank;
    rs->fd = c->fd;
    rs->pid = m->pid;
    snprintf(rs->host, sizeof rs->host, "%s", m->host);
    hb_send_line(c->fd, "OK\n");
    progress_connected(s, m->rank);
    if (s->nconnected == s->o->nranks && !s->all_connected) {
        s->all_connected = 1;
        s->tl[s->attempt].t0 = sup_now();
        sup_ledger_connected(s, m->rank);
        faults_clock_arm(s);
        cJSON *e = sup_event("connected");
        cJSON_AddNumberToObject(e, "attempt", s->attempt);
        cJSON_AddNumberToObject(e, "ranks", s->o->nranks);
        sup_emit(e);
    }
}

static void rank_event(Sup *s, int r, const char *name) {
    RankState *rs = &s->ranks[r];
    if (!strcmp(name, "done")) {
        if (!rs->done) {
            rs->done = 1;
            s->ndone++;
            progress_stop_running(s, r);
            holds_release(s); /* it no longer holds the others back */
            progress_unwatch(s, r);
        }
        return;
    }
    if (!strcmp(name, "stopped-on-signal")) rs->stopped = 1;
    /* where the trainer restored from: memory, replica, disk, disk-fallback, scratch */
    if (r == 0 && (!strncmp(name, "restored-from-", 14) || !strcmp(name, "disk-fallback") ||
                   !strcmp(name, "started-from-scratch")))
        snprintf(s->source, sizeof s->source, "%.31s", !strncmp(name, "restored-from-", 14) ? name + 14 : name);
    if (r == 0 && !strcmp(name, "mem-copy-rejected")) s->copy_rejected = 1;
    cJSON *e = sup_event("rank-event");
    cJSON_AddNumberToObject(e, "rank", r);
    cJSON_AddStringToObject(e, "name", name);
    sup_emit(e);
}

/* A rank's step (STEP, or FROM: where it resumed) to the progress tracker; when the job step (the
 * slowest rank's) advances, the job-level (random) faults due by then fire and the straggler
 * detector judges the steps every rank has finished. */
static void report_progress(Sup *s, int r, long long step, int from) {
    if (!progress_report(s, r, step, from)) return;
    if (s->job_step >= s->next_fault_step) faults_fire(s, -1, s->job_step);
    sup_straggler_advance(s);
}

/* A STEP: progress, its duration by the rank's clock, what it measured, faults and holds. */
static void step(Sup *s, int r, const HbMsg *m) {
    RankState *rs = &s->ranks[r];
    long long prev = rs->step;
    report_progress(s, r, m->step, 0);
    if (m->step == prev + 1 && rs->last_t_us > 0) rs->step_s = (m->t_us - rs->last_t_us) * 1e-6;
    else rs->step_s = NAN; /* the first step after a start or a jump: no duration */
    rs->last_t_us = m->t_us;
    if (r == 0 && m->step >= s->m.r0_step) {
        SupMetrics *mt = &s->m;
        mt->r0_step = m->step, mt->r0_loss = m->loss;
        if (m->has_info) {
            mt->tokens_per_s = m->info.tokens_per_s, mt->mfu = m->info.mfu;
            if (m->info.section_s[HB_SEC_CHECKPOINT] > 0) mt->ckpt_s += m->info.section_s[HB_SEC_CHECKPOINT];
            if (m->info.mem_step > mt->mem_step) mt->mem_step = m->info.mem_step, mt->mem_seen = sup_now();
        }
    }
    if (m->has_info) sup_straggler_sample(s, r, m), sup_ledger_sample(s, r, m);
    if (holds_has(s, m->step)) holds_add(s, r, m->step);
    if (m->step >= s->next_fault_step) faults_fire(s, r, m->step);
    holds_release(s);
}

static void handle_line(Sup *s, Conn *c, char *line) {
    HbMsg m;
    if (hb_verify_key(line, &s->key, c->nonce) != 0 || hb_parse(line, &m) != 0) {
        s->refused++;
        refuse(s, c, myr_last_error(), 0);
        hb_send_line(c->fd, "NO authentication failed\n");
        return;
    }
    if (c->rank < 0) {
        hello(s, c, &m);
        return;
    }
    if (m.seq <= c->last_seq) { /* a replayed or reordered line */
        refuse(s, c, "sequence number went backwards (replay)", 0);
        return;
    }
    c->last_seq = m.seq;
    if (m.type == HB_EVENT) rank_event(s, c->rank, m.name);
    else if (m.type == HB_FROM) { /* resumed: next step is m.step + 1 */
        sup_ledger_from(s, c->rank, &m);
        report_progress(s, c->rank, m.step, 1);
        /* a fault step at or before it is still due: the rank waits for GO of the latest one
         * (hb_start), released once every running rank has reached it and its faults fired */
        long long due = -1;
        for (int i = 0; i < s->nholds && s->holds[i] <= m.step; i++) due = s->holds[i]; /* ascending */
        if (due >= 0) holds_add(s, c->rank, due);
        holds_release(s);
    }
    else if (m.type == HB_STEP) step(s, c->rank, &m);
}

void hb_read(Sup *s, int slot, unsigned gen) {
    Conn *c = &s->conns[slot];
    if (c->fd < 0 || c->gen != gen) return; /* closed (and perhaps reused) since the event was queued */
    char tmp[4096];
    ssize_t r = recv(c->fd, tmp, sizeof tmp, MSG_DONTWAIT);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (r <= 0) { /* EOF: the rank's process is gone (or closed after "done") */
        if (c->rank >= 0) {
            RankState *rs = &s->ranks[c->rank];
            if (!rs->closed) {
                rs->closed = 1;
                progress_stop_running(s, c->rank);
                holds_release(s);
                progress_unwatch(s, c->rank);
            }
            if (!rs->done && !rs->stopped && !sup_graceful_signal && !s->el.resizing && !s->failed) {
                cJSON *e = sup_event("exit");
                cJSON_AddNumberToObject(e, "rank", c->rank);
                cJSON_AddNumberToObject(e, "pid", (double)rs->pid);
                cJSON_AddStringToObject(e, "host", rs->host);
                cJSON_AddNumberToObject(e, "step", (double)rs->step);
                cJSON_AddStringToObject(e, "why", "heartbeat connection closed before the rank finished");
                sup_emit(e);
                sup_fail(s, FAIL_RANK_EXIT, "rank %d (pid %lld on %s) exited at step %lld", c->rank, rs->pid, rs->host,
                         rs->step);
            }
        }
        hb_close_conn(s, slot);
        holds_release(s);
        return;
    }
    for (ssize_t i = 0; i < r; i++) {
        if (tmp[i] == '\n') {
            c->buf[c->len] = 0;
            c->len = 0;
            handle_line(s, c, c->buf);
            if (c->len == (size_t)-1) {
                hb_close_conn(s, slot);
                return;
            }
        } else if (c->len + 1 >= sizeof c->buf) {
            refuse(s, c, "line too long", 0);
            hb_close_conn(s, slot);
            return;
        } else c->buf[c->len++] = tmp[i];
    }
}

void hb_drain(Sup *s) {
    for (int i = 0; i < s->cap_conns; i++)
        if (s->conns[i].fd >= 0) hb_read(s, i, s->conns[i].gen);
}

static int new_slot(Sup *s) {
    if (!s->nfree) {
        int cap = s->cap_conns ? 2 * s->cap_conns : 64;
        Conn *nc = realloc(s->conns, (size_t)cap * sizeof *nc);
        int *nf = realloc(s->free_conns, (size_t)cap * sizeof *nf);
        if (!nc || !nf) return -1;
        s->conns = nc, s->free_conns = nf;
        for (int i = cap - 1; i >= s->cap_conns; i--) s->conns[i].fd = -1, s->conns[i].gen = 0, s->free_conns[s->nfree++] = i;
        s->cap_conns = cap;
    }
    return s->free_conns[--s->nfree];
}

void hb_accept(Sup *s) {
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) { /* cannot happen below the limit set at start; say so once */
                static int said;
                if (!said++) fprintf(stderr, "myriad: run: out of file descriptors accepting heartbeat connections\n");
            }
            return;
        }
        int slot = new_slot(s);
        if (slot < 0) {
            close(fd);
            return;
        }
        Conn *c = &s->conns[slot];
        unsigned gen = (c->gen + 1) & 0x7fffffffu;
        memset(c, 0, sizeof *c);
        c->fd = fd, c->gen = gen, c->rank = -1;
        s->nconns++;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = SUP_TAG_CONN | (uint64_t)gen << 32 | (uint32_t)slot};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            hb_close_conn(s, slot);
            continue;
        }
        uint8_t nonce[HB_NONCE_BYTES];
        if (sup_random_bytes(nonce, sizeof nonce) != 0) memset(nonce, 0, sizeof nonce);
        hex_encode(nonce, sizeof nonce, c->nonce);
        char greet[64];
        snprintf(greet, sizeof greet, "MYRHB1 %s\n", c->nonce);
        hb_send_line(fd, greet);
    }
}
