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
    HmacKey key; /* the secret's HMAC pads, absorbed once */
    char nonce[2 * HB_NONCE_BYTES + 1];
    long long seq;
    long long *hold; /* steps after which the rank waits for the launcher's GO (MYRIAD_HB_HOLD) */
    int nhold;
    long long slow_step; /* --inject slow@ on this rank: from this step on (MYRIAD_INJECT_SLOW) */
    double slow_factor;
} hb = {.fd = -1};

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int sign_key(char *buf, size_t cap, const HmacKey *key, const char *nonce_hex) {
    size_t len = strlen(buf);
    if (len + 1 + 64 + 1 > cap) return myr_error("heartbeat: message too long");
    char prefix[2 * HB_NONCE_BYTES + 2];
    snprintf(prefix, sizeof prefix, "%s ", nonce_hex);
    uint8_t mac[32];
    hmac_sha256_keyed(key, prefix, strlen(prefix), buf, len, mac);
    buf[len] = ' ';
    hex_encode(mac, 32, buf + len + 1);
    return 0;
}

int hb_sign(char *buf, size_t cap, const uint8_t secret[HB_SECRET_BYTES], const char *nonce_hex) {
    HmacKey key;
    hmac_sha256_key(&key, secret, HB_SECRET_BYTES);
    return sign_key(buf, cap, &key, nonce_hex);
}

int hb_verify_key(char *line, const HmacKey *key, const char *nonce_hex) {
    char *sp = strrchr(line, ' ');
    uint8_t got[32], want[32];
    if (!sp || hex_decode(sp + 1, got, 32) != 0) return myr_error("heartbeat: message without a MAC");
    char prefix[2 * HB_NONCE_BYTES + 2];
    snprintf(prefix, sizeof prefix, "%s ", nonce_hex);
    hmac_sha256_keyed(key, prefix, strlen(prefix), line, (size_t)(sp - line), want);
    if (!equal_const_time(got, want, 32)) return myr_error("heartbeat: bad MAC (wrong job secret?)");
    *sp = 0;
    return 0;
}

int hb_verify(char *line, const uint8_t secret[HB_SECRET_BYTES], const char *nonce_hex) {
    HmacKey key;
    hmac_sha256_key(&key, secret, HB_SECRET_BYTES);
    return hb_verify_key(line, &key, nonce_hex);
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

static const char *const section_names[HB_NSECTIONS] = {"data", "forward", "backward", "comm", "optimizer", "checkpoint"};
/* the wire keys of the STEP line's info field, sections first (in HbSection order) */
static const char *const info_keys[HB_NSECTIONS + 7] = {"data", "fwd", "bwd", "comm", "opt", "ckpt", "tps", "mfu", "mem",
                                                        "wck", "wdat", "wev", "role"};
enum { INFO_KEYS = HB_NSECTIONS + 7, INFO_ROLE = HB_NSECTIONS + 6 };
/* the FROM line's start field: microseconds */
static const char *const start_keys[5] = {"age", "mpi", "setup", "restore", "post"};

const char *hb_section_name(int section) { return section >= 0 && section < HB_NSECTIONS ? section_names[section] : "?"; }

void hb_step_info_init(HbStepInfo *info) {
    for (int i = 0; i < HB_NSECTIONS; i++) info->section_s[i] = -1;
    info->tokens_per_s = info->mfu = NAN;
    info->mem_step = -1;
    info->wall_ckpt_s = info->wall_data_s = info->wall_eval_s = -1;
    info->role = -1;
}

void hb_start_info_init(HbStartInfo *info) {
    info->age_s = info->mpi_s = info->setup_s = info->restore_s = info->post_s = -1;
}

static double *start_field(HbStartInfo *info, int k) {
    double *f[5] = {&info->age_s, &info->mpi_s, &info->setup_s, &info->restore_s, &info->post_s};
    return f[k];
}

static double *wall_field(HbStepInfo *info, int k) { /* k: 0 ckpt, 1 data, 2 eval */
    return k == 0 ? &info->wall_ckpt_s : k == 1 ? &info->wall_data_s : &info->wall_eval_s;
}

/* The "key=value,..." fields of the STEP and FROM lines: `each` gets every pair's key as its
 * index in keys (nkeys for an unknown key: a newer trainer may send more) and its value, a finite
 * non-negative number. -1 for a malformed pair or a value `each` refuses. */
typedef int (*PairFn)(void *ctx, int k, double v);
static int parse_pairs(char *tok, const char *const *keys, int nkeys, PairFn each, void *ctx) {
    char *save;
    for (char *kv = strtok_r(tok, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '='), *end;
        if (!eq || eq == kv || !eq[1]) return -1;
        *eq = 0;
        errno = 0;
        double v = strtod(eq + 1, &end);
        if (*end || errno || !isfinite(v) || v < 0) return -1;
        int k = 0;
        while (k < nkeys && strcmp(kv, keys[k])) k++;
        if (each(ctx, k, v)) return -1;
    }
    return 0;
}

/* one pair of the STEP info field: sections in integer microseconds, tps and mfu as numbers,
 * mem a step, role a small integer */
static int info_pair(void *ctx, int k, double v) {
    HbStepInfo *info = ctx;
    if (k < HB_NSECTIONS) info->section_s[k] = v / 1e6; /* correctly rounded: 12 -> 12e-6 exactly */
    else if (k == HB_NSECTIONS) info->tokens_per_s = v;
    else if (k == HB_NSECTIONS + 1) info->mfu = v;
    else if (k == HB_NSECTIONS + 2) {
        if (v != floor(v) || v > 1e15) return -1;
        info->mem_step = (long long)v;
    } else if (k == INFO_ROLE) {
        if (v != floor(v) || v > 1e6) return -1;
        info->role = (int)v;
    } else if (k < INFO_KEYS) *wall_field(info, k - HB_NSECTIONS - 3) = v / 1e6;
    return 0;
}

static int parse_info(char *tok, HbStepInfo *info) {
    hb_step_info_init(info);
    return parse_pairs(tok, info_keys, INFO_KEYS, info_pair, info);
}

/* one pair of the FROM line's start field: microseconds */
static int start_pair(void *ctx, int k, double v) {
    if (k < 5) *start_field(ctx, k) = v / 1e6;
    return 0;
}

static int parse_start(char *tok, HbStartInfo *info) { return parse_pairs(tok, start_keys, 5, start_pair, info); }

/* Append the info field (with its leading space) to line; nothing when nothing was measured. */
static void format_info(char *line, size_t cap, const HbStepInfo *info) {
    size_t len = strlen(line);
    char sep = ' ';
    for (int k = 0; k < INFO_KEYS && len < cap; k++) {
        char val[40] = "";
        if (k < HB_NSECTIONS && info->section_s[k] >= 0) snprintf(val, sizeof val, "%.0f", info->section_s[k] * 1e6);
        else if (k == HB_NSECTIONS && isfinite(info->tokens_per_s)) snprintf(val, sizeof val, "%.6g", info->tokens_per_s);
        else if (k == HB_NSECTIONS + 1 && isfinite(info->mfu)) snprintf(val, sizeof val, "%.6g", info->mfu);
        else if (k == HB_NSECTIONS + 2 && info->mem_step >= 0) snprintf(val, sizeof val, "%lld", info->mem_step);
        else if (k == INFO_ROLE) {
            if (info->role >= 0) snprintf(val, sizeof val, "%d", info->role);
        } else if (k > HB_NSECTIONS + 2) {
            double w = *wall_field((HbStepInfo *)info, k - HB_NSECTIONS - 3);
            if (w >= 0 && isfinite(w)) snprintf(val, sizeof val, "%.0f", w * 1e6);
        }
        if (!val[0]) continue;
        len += (size_t)snprintf(line + len, cap - len, "%c%s=%s", sep, info_keys[k], val);
        sep = ',';
    }
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
    if ((n == 5 || n == 6) && !strcmp(tok[0], "STEP")) {
        m->type = HB_STEP;
        if (field_ll(tok[1], &m->seq) || field_ll(tok[2], &m->step) || field_ll(tok[4], &m->t_us) || m->step < 0)
            return myr_error("heartbeat: bad STEP fields");
        hb_step_info_init(&m->info);
        if (n == 6 && parse_info(tok[5], &m->info) != 0) return myr_error("heartbeat: bad STEP info field");
        m->has_info = n == 6;
        if (strcmp(tok[3], "-")) {
            char *end;
            m->loss = strtod(tok[3], &end);
            if (*end) return myr_error("heartbeat: bad loss '%s'", tok[3]);
        }
        return 0;
    }
    if ((n == 4 || n == 5) && !strcmp(tok[0], "FROM")) {
        m->type = HB_FROM;
        if (field_ll(tok[1], &m->seq) || field_ll(tok[2], &m->step) || field_ll(tok[3], &m->t_us) || m->step < 0)
            return myr_error("heartbeat: bad FROM fields");
        hb_start_info_init(&m->start);
        if (n == 5 && parse_start(tok[4], &m->start) != 0) return myr_error("heartbeat: bad FROM start field");
        m->has_start = n == 5;
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

/* The launcher's replies (OK, NO, GO): a non-blocking send that drops what the socket cannot take
 * now and never raises SIGPIPE, since a rank that is gone must not stop the supervisor. */
void hb_send_line(int fd, const char *s) {
    size_t len = strlen(s);
    (void)!send(fd, s, len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static int send_signed(char *line, size_t cap) {
    if (sign_key(line, cap, &hb.key, hb.nonce) != 0) return -1;
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
    hmac_sha256_key(&hb.key, secret, HB_SECRET_BYTES);
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

/* "20:2:1.5,40:0:2": slow@STEP:RANK:FACTOR faults of this attempt; keep the first for my rank */
static void parse_slow(const char *list, int rank) {
    hb.slow_factor = 1, hb.slow_step = 0;
    for (const char *p = list; p && *p;) {
        long long step, r;
        double f;
        int used = 0;
        if (sscanf(p, "%lld:%lld:%lf%n", &step, &r, &f, &used) != 3) break;
        if (r == rank && f > 1) {
            hb.slow_step = step, hb.slow_factor = f;
            return;
        }
        p += used;
        if (*p != ',') break;
        p++;
    }
}

double hb_slow_factor(long long step) { return hb.slow_factor > 1 && step >= hb.slow_step ? hb.slow_factor : 1; }

int hb_connect_from_env(void) {
    const char *addr = getenv("MYRIAD_HB_ADDR");
    if (!addr || !*addr) return 0;
    parse_holds(getenv("MYRIAD_HB_HOLD"));
    parse_slow(getenv("MYRIAD_INJECT_SLOW"), env_rank());
    const char *hex = getenv("MYRIAD_HB_SECRET");
    uint8_t secret[HB_SECRET_BYTES];
    if (!hex || hex_decode(hex, secret, HB_SECRET_BYTES) != 0)
        return myr_error("heartbeat: MYRIAD_HB_SECRET must be %d hex characters", 2 * HB_SECRET_BYTES);
    const char *att = getenv("MYRIAD_HB_ATTEMPT");
    return hb_connect(addr, secret, att ? atoi(att) : 0, env_rank());
}

int hb_active(void) { return hb.fd >= 0; }

void hb_format_step(char *line, size_t cap, long long seq, long long step, double loss, long long t_us,
                    const HbStepInfo *info) {
    char lossbuf[32] = "-";
    if (isfinite(loss)) snprintf(lossbuf, sizeof lossbuf, "%.9g", loss);
    snprintf(line, cap, "STEP %lld %lld %s %lld", seq, step, lossbuf, t_us);
    if (info && cap > 80) format_info(line, cap - 80, info); /* room left for the MAC */
}

int hb_step(long long step, double loss) { return hb_step_info(step, loss, NULL); }

int hb_step_info(long long step, double loss, const HbStepInfo *info) {
    if (hb.fd < 0) return 0;
    char line[HB_LINE_MAX];
    hb_format_step(line, sizeof line, ++hb.seq, step, loss, now_us(), info);
    int rc = send_signed(line, sizeof line);
    for (int i = 0; i < hb.nhold && rc == 0; i++)
        if (hb.hold[i] == step) {
            wait_go(step);
            break;
        }
    return rc;
}

double hb_process_age_s(void) {
    /* field 22 of /proc/self/stat: the start time in clock ticks since boot (CLOCK_BOOTTIME) */
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f) return -1;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    if (!p) return -1;
    unsigned long long start = 0;
    int field = 2;
    char *save;
    for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
        if (++field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    long hz = sysconf(_SC_CLK_TCK);
    struct timespec ts;
    if (field != 22 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &ts) != 0) return -1;
    double age = ts.tv_sec + ts.tv_nsec * 1e-9 - (double)start / hz;
    return age >= 0 ? age : -1;
}

int hb_start(long long step) { return hb_start_info(step, NULL); }

int hb_start_info(long long step, HbStartInfo *info) {
    if (hb.fd < 0) return 0;
    char line[HB_LINE_MAX];
    snprintf(line, sizeof line, "FROM %lld %lld %lld", ++hb.seq, step, now_us());
    if (info) {
        info->age_s = hb_process_age_s();
        char sep = ' ';
        for (int k = 0; k < 5; k++) {
            double v = *start_field(info, k);
            if (v < 0 || !isfinite(v)) continue;
            size_t len = strlen(line);
            snprintf(line + len, sizeof line - len, "%c%s=%.0f", sep, start_keys[k], v * 1e6);
            sep = ',';
        }
    }
    int rc = send_signed(line, sizeof line);
    /* A fault step at or before where this rank resumed is still due (the rank ran ahead of the
     * others, or the attempt ended before that fault fired): it fires once the job step reaches
     * it. Wait for GO of the latest such step, as at a hold step, so the fault finds this rank
     * here, not after it ran on (a rank with no step left could finish first and the fault
     * would land on a finished job). The launcher mirrors this rule (hb_server.c). */
    long long due = -1;
    for (int i = 0; i < hb.nhold; i++)
        if (hb.hold[i] <= step && hb.hold[i] > due) due = hb.hold[i];
    if (rc == 0 && due >= 0) wait_go(due);
    return rc;
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
