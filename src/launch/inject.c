/* inject.c: parsing of --inject specs and the deterministic expansion of random:SEED:COUNT. */
#define _GNU_SOURCE
#include "launch/inject.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"

const char *fault_kind_name(FaultKind k) {
    static const char *names[] = {"kill", "hang", "host", "corrupt", "nan", "slow", "cmd"};
    return names[k];
}

uint64_t inject_next(uint64_t *state) { return splitmix64_next(state); }

static int add(FaultPlan *p, Fault f) {
    if (p->n == p->cap) {
        int cap = p->cap ? 2 * p->cap : 8;
        Fault *nf = realloc(p->faults, (size_t)cap * sizeof *nf);
        if (!nf) return myr_error("inject: out of memory");
        p->faults = nf, p->cap = cap;
    }
    p->faults[p->n++] = f;
    return 0;
}

static int num(const char *s, long long lo, long long *out) {
    if (!s || !*s) return -1;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno || v < lo) return -1;
    *out = v;
    return 0;
}

#define FORMS "kill@STEP:RANK, hang@STEP:RANK, host@STEP:HOST, corrupt@STEP, nan@STEP:RANK, slow@STEP:RANK:FACTOR, cmd@STEP or random:SEED:COUNT[:MAXSTEP]"

static int parse_one(FaultPlan *p, char *spec, int nranks) {
    Fault f = {.rank = -1};
    long long step, rank;
    if (!strncmp(spec, "random:", 7)) {
        char *a = spec + 7, *b = strchr(a, ':');
        if (!b) return myr_error("inject: '%s' is not random:SEED:COUNT[:MAXSTEP]", spec);
        *b++ = 0;
        char *c = strchr(b, ':');
        if (c) *c++ = 0;
        long long seed, count, maxstep = 100;
        if (num(a, 0, &seed) || num(b, 1, &count) || count > 100000 || (c && num(c, 1, &maxstep)))
            return myr_error("inject: random:SEED:COUNT[:MAXSTEP] needs SEED >= 0, 1 <= COUNT <= 100000, MAXSTEP >= 1");
        uint64_t st = (uint64_t)seed;
        p->seed = (uint64_t)seed;
        for (long long i = 0; i < count; i++) {
            Fault r = {.rank = -1};
            r.kind = inject_next(&st) % 2 ? FAULT_HANG : FAULT_KILL;
            /* steps 1..MAXSTEP-1: the slowest rank still has work when the fault fires */
            r.step = maxstep > 1 ? 1 + (long long)(inject_next(&st) % (uint64_t)(maxstep - 1)) : 1;
            r.job_level = 1;
            r.rank = (int)(inject_next(&st) % (uint64_t)nranks);
            if (add(p, r)) return -1;
        }
        return 0;
    }
    char *at = strchr(spec, '@');
    if (!at) return myr_error("inject: '%s' is not one of " FORMS, spec);
    *at = 0;
    char *arg = at + 1, *colon = strchr(arg, ':');
    if (colon) *colon++ = 0;
    if (num(arg, 1, &step)) return myr_error("inject: '%s@%s': STEP must be an integer >= 1", spec, arg);
    f.step = step;
    if (!strcmp(spec, "kill") || !strcmp(spec, "hang") || !strcmp(spec, "nan")) {
        f.kind = spec[0] == 'k' ? FAULT_KILL : spec[0] == 'h' ? FAULT_HANG : FAULT_NAN;
        for (int i = 0; f.kind == FAULT_NAN && i < p->n; i++)
            if (p->faults[i].kind == FAULT_NAN) return myr_error("inject: one nan@ fault per run");
        if (!colon || num(colon, 0, &rank) || rank >= nranks)
            return myr_error("inject: %s@%lld:RANK needs a RANK in 0..%d", spec, step, nranks - 1);
        f.rank = (int)rank;
    } else if (!strcmp(spec, "host")) {
        f.kind = FAULT_HOST;
        if (!colon || !*colon || strlen(colon) >= sizeof f.host)
            return myr_error("inject: host@%lld:HOST needs a host name from the hosts file", step);
        strcpy(f.host, colon);
    } else if (!strcmp(spec, "slow")) {
        f.kind = FAULT_SLOW;
        char *fac = colon ? strchr(colon, ':') : NULL, *end;
        if (fac) *fac++ = 0;
        if (!colon || num(colon, 0, &rank) || rank >= nranks || !fac)
            return myr_error("inject: slow@%lld:RANK:FACTOR needs a RANK in 0..%d and a FACTOR > 1", step, nranks - 1);
        f.rank = (int)rank;
        errno = 0;
        f.factor = strtod(fac, &end);
        if (*end || errno || !(f.factor > 1 && f.factor <= 1000))
            return myr_error("inject: slow@%lld:%lld:%s: FACTOR must be a number in (1, 1000], e.g. 1.5", step, rank, fac);
    } else if (!strcmp(spec, "corrupt") || !strcmp(spec, "cmd")) {
        f.kind = spec[1] == 'o' ? FAULT_CORRUPT : FAULT_CMD;
        f.job_level = f.kind == FAULT_CMD; /* every rank has reached the step (and waits there) */
        if (colon) return myr_error("inject: %s@STEP takes no ':' part", spec);
    } else return myr_error("inject: unknown fault '%s'; expected " FORMS, spec);
    return add(p, f);
}

int inject_parse(FaultPlan *plan, const char *spec, int nranks) {
    if (!plan->seed) plan->seed = 1;
    char *copy = strdup(spec), *save;
    if (!copy) return myr_error("inject: out of memory");
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) rc = parse_one(plan, t, nranks);
    free(copy);
    return rc;
}

void inject_free(FaultPlan *plan) {
    free(plan->faults);
    memset(plan, 0, sizeof *plan);
}
