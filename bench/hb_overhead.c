/* bench/hb_overhead.c: the CPU cost of the heartbeat section timings, piece by piece (built and
 * run by bench/hb_overhead.sh, which counts how often each piece runs per training step):
 * one read of the thread's CPU clock (the marks of every section and of every communication wait
 * that has to wait), and a STEP line with its section times formatted and signed against the same
 * line without them (the extra bytes the MAC covers). CPU time of the loop, so the machine's
 * load does not inflate it. Prints "name ns_per_op". */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "launch/heartbeat.h"
#include "util/clock.h"
#include "util/sha256.h"

static double cpu_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

int main(void) {
    enum { N = 400000 };
    volatile double sink = 0;
    double t0 = cpu_now();
    for (int i = 0; i < N; i++) sink += clock_thread_cpu_s();
    double clock_ns = (cpu_now() - t0) / N * 1e9;
    uint8_t secret[HB_SECRET_BYTES] = {7};
    HmacKey key;
    hmac_sha256_key(&key, secret, sizeof secret);
    const char nonce[] = "0123456789abcdef0123456789abcdef ";
    HbStepInfo info;
    hb_step_info_init(&info);
    for (int k = 0; k < HB_NSECTIONS; k++) info.section_s[k] = 0.0123 * (k + 1);
    info.tokens_per_s = 23456.7, info.mfu = 0.3125, info.mem_step = 1234;
    double cost[2];
    for (int with = 0; with < 2; with++) {
        char line[HB_LINE_MAX];
        uint8_t mac[32];
        t0 = cpu_now();
        for (int i = 0; i < N; i++) {
            hb_format_step(line, sizeof line, i, 1000 + i, 4.123456789, 1700000000000000LL + i, with ? &info : NULL);
            hmac_sha256_keyed(&key, nonce, sizeof nonce - 1, line, strlen(line), mac);
            sink += mac[0];
        }
        cost[with] = (cpu_now() - t0) / N * 1e9;
    }
    printf("thread_cpu_clock_read %.0f\nstep_line_plain %.0f\nstep_line_with_sections %.0f\nstep_line_extra %.0f\n", clock_ns,
           cost[0], cost[1], cost[1] - cost[0]);
    return sink < 0;
}
