/* fault_clock.c: parsing of a Poisson fault clock's spec and its seeded draws (fault_clock.h). */
#define _GNU_SOURCE
#include "util/fault_clock.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"
#include "util/rng.h"

#define FORM "KINDS:MTBF_SECONDS[,seed=N] (KINDS: kill, hang, host joined by '+'), e.g. kill+hang:20,seed=3"

const char *fault_clock_kind_name(int kind) {
    static const char *names[] = {"kill", "hang", "host"};
    return kind >= 0 && kind < CLOCK_KINDS ? names[kind] : "?";
}

int fault_clock_parse(FaultClock *c, const char *spec) {
    memset(c, 0, sizeof *c);
    c->seed = 1;
    const char *colon = strchr(spec, ':');
    if (!colon || colon == spec) return myr_error("inject-rate: '%s' is not " FORM, spec);
    /* the kinds, up to the colon */
    for (const char *p = spec; p < colon;) {
        const char *end = memchr(p, '+', (size_t)(colon - p));
        if (!end) end = colon;
        size_t n = (size_t)(end - p);
        int k = -1;
        for (int i = 0; i < CLOCK_KINDS; i++)
            if (n == strlen(fault_clock_kind_name(i)) && !strncmp(p, fault_clock_kind_name(i), n)) k = i;
        if (k < 0) return myr_error("inject-rate: unknown fault kind '%.*s' in '%s'; expected " FORM, (int)n, p, spec);
        if (c->kinds[k]) return myr_error("inject-rate: '%s' lists %s twice", spec, fault_clock_kind_name(k));
        c->kinds[k] = 1, c->nkinds++;
        p = end + (end < colon);
        if (end < colon && p == colon) return myr_error("inject-rate: '%s' ends its kinds with '+'; expected " FORM, spec);
    }
    char *end;
    errno = 0;
    c->mtbf_s = strtod(colon + 1, &end);
    if (end == colon + 1 || errno || !(c->mtbf_s > 0) || !isfinite(c->mtbf_s))
        return myr_error("inject-rate: '%s': MTBF_SECONDS must be a positive number of seconds; expected " FORM, spec);
    while (*end == ',') {
        const char *key = end + 1;
        if (strncmp(key, "seed=", 5)) return myr_error("inject-rate: '%s': unknown option '%s'; expected " FORM, spec, key);
        char *e2;
        errno = 0;
        unsigned long long seed = strtoull(key + 5, &e2, 10);
        if (e2 == key + 5 || errno || key[5] == '-') return myr_error("inject-rate: '%s': seed must be an integer >= 0", spec);
        c->seed = seed;
        end = e2;
    }
    if (*end) return myr_error("inject-rate: '%s': unexpected '%s'; expected " FORM, spec, end);
    fault_clock_reset(c);
    return 0;
}

void fault_clock_reset(FaultClock *c) {
    c->state = c->seed;
    c->drawn = 0;
}

void fault_clock_draw(FaultClock *c, ClockDraw *d) {
    /* inverse transform: -M ln U with U uniform in (0, 1) (never 0, so the time is finite) */
    d->after_s = -c->mtbf_s * log(splitmix64_uniform(&c->state));
    uint64_t k = splitmix64_next(&c->state) % (uint64_t)(c->nkinds > 0 ? c->nkinds : 1);
    d->kind = CLOCK_KILL;
    for (int i = 0, seen = 0; i < CLOCK_KINDS; i++)
        if (c->kinds[i] && (uint64_t)seen++ == k) d->kind = i;
    d->pick = splitmix64_next(&c->state);
    d->index = c->drawn++;
}
