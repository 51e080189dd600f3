/* sup_state.c: what every part of the supervisor may set, so that none of them calls back up into
 * supervise.c: the graceful-stop signal (set by supervise.c's handler) and the declaration of an
 * attempt's failure (the first one counts; supervise.c acts on it when the watch returns). */
#include "launch/sup_state.h"

#include <stdarg.h>
#include <stdio.h>

volatile sig_atomic_t sup_graceful_signal;

const char *sup_fail_kind_name(int kind) {
    static const char *kinds[FAIL_KINDS] = {"rank-exit", "hang", "never-connected", "launcher-exit", "host-lost", "straggler"};
    return kind >= 0 && kind < FAIL_KINDS ? kinds[kind] : "?";
}

void sup_fail(Sup *s, int kind, const char *fmt, ...) {
    if (s->failed) return;
    s->failed = 1;
    /* ranks that die with a lost host are counted as the host's loss */
    if (s->lost_host_this_attempt >= 0 && kind != FAIL_STRAGGLER) kind = FAIL_HOST_LOST;
    s->fail_kind = kind;
    s->m.failures[kind]++;
    sup_ledger_declared(s, sup_fail_kind_name(kind));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
}
