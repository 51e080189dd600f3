/* heartbeat.c: client side of the heartbeat channel and the line format both sides share.
 * See heartbeat.h for the API and docs/LAUNCHER.md for the protocol. */
#define _GNU_SOURCE
#include "launch/heartbeat.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "util/error.h"
#include "util/sha256.h"

static struct {
    int fd;
    uint8_t secret[HB_SECRET_BYTES];
    char nonce[2 * HB_NONCE_BYTES + 1];
    long long seq;
    long long *hold; /* steps after which the rank waits for the launcher's GO (MYRIAD_HB_HOLD) */
    int nhold;
} hb = {.fd = -1};

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int hb_sign(char *buf, size_t cap, const uint8_t secret[HB_SECRET_BYTES], const char *nonce_hex) {
    size_t len = strlen(buf);
    if (len + 1 + 64 + 1 > cap) return myr_error("heartbeat: message too long");
    char prefix[2 * HB_NONCE_BYTES + 2];
    snprintf(prefix, sizeof prefix, "%s ", nonce_hex);
    uint8_t mac[32];
    hmac_sha256_2(secret, HB_SECRET_BYTES, prefix, strlen(prefix), buf, len, mac);
    buf[len] = ' ';
    hex_encode(mac, 32, buf + len + 1);
    return 0;
}

int hb_verify(char *line, const uint8_t secret[HB_SECRET_BYTES], const char *nonce_hex) {
    char *sp = strrchr(line, ' ');
    uint8_t got[32], want[32];
    if (!sp || hex_decode(sp + 1, got, 32) != 0) return myr_error("heartbeat: message without a MAC");
    char prefix[2 * HB_NONCE_BYTES + 2];
    snprintf(prefix, sizeof prefix, "%s ", nonce_hex);
    hmac_sha256_2(secret, HB_SECRET_BYTES, prefix, strlen(prefix), line, (size_t)(sp - line), want);
    if (!equal_const_time(got, want, 32)) return myr_error("heartbeat: bad MAC (wrong job secret?)");
    *sp = 0;
    return 0;
}

/* Strict integer field: the whole token must be a number. */
static int field_ll(const char *tok, long long *out) {
    if (!tok || !*tok) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(tok, &end, 10);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

int hb_parse(const char *line, HbMsg *m) {
    char buf[HB_LINE_MAX];
    if (strlen(line) >= sizeof buf) return myr_error("heartbeat: line too long");
    strcpy(buf, line);
    char *save, *tok[8];
    int n = 0;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (n == 8) return myr_error("heartbeat: too many fields");
        tok[n++] = t;
    }
    memset(m, 0, sizeof *m);
    m->loss = NAN;
    long long a, b, c;
    if (n == 5 && !strcmp(tok[0], "HELLO")) {
        m->type = HB_HELLO;
        if (field_ll(tok[1], &a) || field_ll(tok[2], &b) || field_ll(tok[3], &c) || a < 0 || b < 0 ||
            b > 1000000000 || a > 1000000000 || c <= 0)
            return myr_error("heartbeat: bad HELLO fields");
        if (strlen(tok[4]) >= HB_HOST_MAX) return myr_error("heartbeat: host name too long");
        m->attempt = (int)a, m->rank = (int)b, m->pid = c;
        strcpy(m->host, tok[4]);
        return 0;
    }
    if (n == 5 && !strcmp(tok[0], "STEP")) {
        m->type = HB_STEP;
        if (field_ll(tok[1], &m->seq) || field_ll(tok[2], &m->step) || field_ll(tok[4], &m->t_us) || m->step < 0)
            return myr_error("heartbeat: bad STEP fields");
        if (strcmp(tok[3], "-")) {
            char *end;
            m->loss = strtod(tok[3], &end);
            if (*end) return myr_error("heartbeat: bad loss '%s'", tok[3]);
        }
        return 0;
    }
    if (n == 4 && !strcmp(tok[0], "FROM")) {
        m->type = HB_FROM;
        if (field_ll(tok[1], &m->seq) || field_ll(tok[2], &m->step) || field_ll(tok[3], &m->t_us) || m->step < 0)
            return myr_error("heartbeat: bad FROM fields");
        return 0;
    }
    if (n == 4 && !strcmp(tok[0], "EVENT")) {
        m->type = HB_EVENT;
        if (field_ll(tok[1], &m->seq) || field_ll(tok[3], &m->t_us)) return myr_error("heartbeat: bad EVENT fields");
        if (strlen(tok[2]) >= sizeof m->name) return myr_error("heartbeat: event name too long");
        strcpy(m->name, tok[2]);
        return 0;
    }
    return myr_error("heartbeat: unknown message '%.20s'", line);
}

/* Read one '\n'-terminated line (blocking, bounded by the socket's receive timeout). */
/* One line without its newline; -1 on EOF, error or a line longer than cap. patient: receive
 * timeouts (SO_RCVTIMEO) and signals are waited through instead of failing. */
static int read_line(int fd, char *buf, size_t cap, int patient) {
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, 1);
        if (r < 0 && patient && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        if (r <= 0) return -1;
        if (buf[n] == '\n') {
            buf[n] = 0;
            return 0;
        }
        n++;
    }
    return -1;
}

static int send_all(const char *buf, size_t len) {
    while (len) {
        ssize_t w = send(hb.fd, buf, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return myr_error("heartbeat: send failed: %s", strerror(errno));
        buf += w, len -= (size_t)w;
    }
    return 0;
}

static int send_signed(char *line, size_t cap) {
    if (hb_sign(line, cap, hb.secret, hb.nonce) != 0) return -1;
    size_t len = strlen(line);
    line[len] = '\n';
    return send_all(line, len + 1);
}

int hb_connect(const char *addr, const uint8_t secret[HB_SECRET_BYTES], int attempt, int rank) {
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host)
        return myr_error("heartbeat: MYRIAD_HB_ADDR '%s' is not host:port", addr);
    snprintf(host, sizeof host, "%.*s", (int)(colon - addr), addr);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc != 0) return myr_error("heartbeat: cannot resolve %s: %s", addr, gai_strerror(rc));
    int fd = -1;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
        if (fd < 0) continue;
        struct timeval tv = {10, 0}; /* never hang a rank on a launcher that stopped answering */
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) return myr_error("heartbeat: cannot connect to the launcher at %s: %s", addr, strerror(errno));
    char line[HB_LINE_MAX];
    if (read_line(fd, line, sizeof line, 0) != 0 || strncmp(line, "MYRHB1 ", 7) ||
        strlen(line + 7) != 2 * HB_NONCE_BYTES) {
        close(fd);
        return myr_error("heartbeat: no greeting from the launcher at %s", addr);
    }
    hb.fd = fd;
    memcpy(hb.secret, secret, HB_SECRET_BYTES);
    strcpy(hb.nonce, line + 7);
    hb.seq = 0;
    char me[HB_HOST_MAX] = "";
    const char *env_host = getenv("MYRIAD_HOST"); /* emulated hosts share one kernel hostname */
    if (!env_host || !*env_host) env_host = getenv("SLURMD_NODENAME"); /* Slurm's name (srun --exclude) */
    if (env_host && *env_host) snprintf(me, sizeof me, "%s", env_host);
    else gethostname(me, sizeof me - 1);
    for (char *p = me; *p; p++)
        if (*p == ' ') *p = '_';
    snprintf(line, sizeof line, "HELLO %d %d %lld %s", attempt, rank, (long long)getpid(), me);
    int sent = send_signed(line, sizeof line) == 0;
    line[0] = 0;
    if (!sent || read_line(fd, line, sizeof line, 0) != 0 || strcmp(line, "OK")) {
        char why[128];
        snprintf(why, sizeof why, "%.100s", line[0] ? line : "connection closed");
        close(fd);
        hb.fd = -1;
        return myr_error("heartbeat: the launcher refused rank %d (%s)", rank, why);
    }
    return 0;
}

static int env_rank(void) {
    static const char *names[] = {"MYRIAD_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID", "PMI_RANK"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

/* "6,7,12": the steps at which the launcher injects a fault this attempt */
static void parse_holds(const char *list) {
    free(hb.hold);
    hb.hold = NULL, hb.nhold = 0;
    for (const char *p = list; p && *p;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p) break;
        long long *h = realloc(hb.hold, ((size_t)hb.nhold + 1) * sizeof *h);
        if (!h) break;
        hb.hold = h, hb.hold[hb.nhold++] = v;
        p = *end == ',' ? end + 1 : end;
    }
}

/* Wait for "GO <step>": the launcher has fired what was due at this step (perhaps at us). EOF
 * or an error (the launcher is gone) ends the wait; receive timeouts just repeat it. */
static void wait_go(long long step) {
    char line[64], want[40];
    snprintf(want, sizeof want, "GO %lld", step);
    while (read_line(hb.fd, line, sizeof line, 1) == 0)
        if (!strcmp(line, want)) return;
}

int hb_connect_from_env(void) {
    const char *addr = getenv("MYRIAD_HB_ADDR");
    if (!addr || !*addr) return 0;
    parse_holds(getenv("MYRIAD_HB_HOLD"));
    const char *hex = getenv("MYRIAD_HB_SECRET");
    uint8_t secret[HB_SECRET_BYTES];
    if (!hex || hex_decode(hex, secret, HB_SECRET_BYTES) != 0)
        return myr_error("heartbeat: MYRIAD_HB_SECRET must be %d hex characters", 2 * HB_SECRET_BYTES);
    const char *att = getenv("MYRIAD_HB_ATTEMPT");
    return hb_connect(addr, secret, att ? atoi(att) : 0, env_rank());
}

int hb_active(void) { return hb.fd >= 0; }

int hb_step(long long step, double loss) {
    if (hb.fd < 0) return 0;
    char line[HB_LINE_MAX], lossbuf[32] = "-";
    if (isfinite(loss)) snprintf(lossbuf, sizeof lossbuf, "%.9g", loss);
    snprintf(line, sizeof line, "STEP %lld %lld %s %lld", ++hb.seq, step, lossbuf, now_us());
    int rc = send_signed(line, sizeof line);
    for (int i = 0; i < hb.nhold && rc == 0; i++)
        if (hb.hold[i] == step) {
            wait_go(step);
            break;
        }
    return rc;
}

int hb_start(long long step) {
    if (hb.fd < 0) return 0;
    char line[HB_LINE_MAX];
    snprintf(line, sizeof line, "FROM %lld %lld %lld", ++hb.seq, step, now_us());
    return send_signed(line, sizeof line);
}

int hb_event(const char *name) {
    if (hb.fd < 0) return 0;
    if (!name || !*name || strlen(name) >= 32 || strchr(name, ' ') || strchr(name, '\n'))
        return myr_error("heartbeat: event name must be one word under 32 characters");
    char line[HB_LINE_MAX];
    snprintf(line, sizeof line, "EVENT %lld %s %lld", ++hb.seq, name, now_us());
    return send_signed(line, sizeof line);
}

void hb_finish(void) {
    if (hb.fd < 0) return;
    hb_event("done");
    close(hb.fd);
    hb.fd = -1;
}
