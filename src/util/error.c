/* error.c: thread-local last-error message and the CLI's fatal exit. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static _Thread_local char last_error[1024];

int myr_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    /* one line, whatever the message quotes (a JSON value, a file name): controls become '?' */
    for (char *p = last_error; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return -1;
}

const char *myr_last_error(void) { return last_error; }

static int quiet_die;

void myr_die_quietly(int quiet) { quiet_die = quiet; }

void myr_vdie(const char *fmt, va_list ap) {
    if (quiet_die) { /* another process prints the same message: give it time to get out first */
        fflush(stdout);
        sleep(2);
        exit(1);
    }
    fputs("myriad: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    exit(1);
}

void myr_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    myr_vdie(fmt, ap);
}

void myr_die_last(void) { myr_die("%s", last_error[0] ? last_error : "unknown error"); }
