/* moe_a2a_model.c: the simulator's all-to-all cost (src/sim/collectives.c, sim_coll_time) on a
 * one-level network with a given latency and bandwidth, for bench/moe_a2a.sh.
 *   moe_a2a_model fit N SMALL_BYTES SMALL_US LARGE_BYTES LARGE_US
 *       -> "alpha_us bw_GBps": the model's alpha and per-rank bandwidth that reproduce two
 *          measured all-to-alls of N ranks (latency from the small one, bandwidth from the large)
 *   moe_a2a_model time N ALPHA_US BW_GBPS BYTES...
 *       -> the model's time in us of one all-to-all of each per-rank send buffer size */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"

static double model(int n, double alpha, double bw, double bytes) {
    Network net;
    memset(&net, 0, sizeof net);
    net.nlevels = 1;
    net.alpha[0] = alpha;
    net.bw[0] = bw;
    net.reach[0] = n; /* every rank in one scale-up domain (one host, shared memory) */
    return sim_coll_time(&net, COLL_ALLTOALL, ALG_AUTO, bytes, (Group){n, 1});
}

int main(int argc, char **argv) {
    if (argc >= 7 && !strcmp(argv[1], "fit")) {
        int n = atoi(argv[2]);
        double s0 = atof(argv[3]), t0 = atof(argv[4]) * 1e-6, s1 = atof(argv[5]), t1 = atof(argv[6]) * 1e-6;
        /* t = (n-1)/n S / bw + alpha (1 + (n-1)/8): alpha from the small size (bandwidth term
         * removed after a first estimate), then bw from the large one */
        double alpha = t0 / (1 + (n - 1) / 8.0), bw = 0;
        for (int it = 0; it < 20; it++) {
            bw = (n - 1.0) / n * s1 / (t1 - alpha * (1 + (n - 1) / 8.0));
            alpha = (t0 - (n - 1.0) / n * s0 / bw) / (1 + (n - 1) / 8.0);
        }
        printf("%.3f %.4f\n", alpha * 1e6, bw / 1e9);
        return 0;
    }
    if (argc >= 6 && !strcmp(argv[1], "time")) {
        int n = atoi(argv[2]);
        double alpha = atof(argv[3]) * 1e-6, bw = atof(argv[4]) * 1e9;
        for (int i = 5; i < argc; i++) printf("%.3f\n", model(n, alpha, bw, atof(argv[i])) * 1e6);
        return 0;
    }
    fprintf(stderr, "usage: moe_a2a_model fit N SMALL_BYTES SMALL_US LARGE_BYTES LARGE_US | time N ALPHA_US BW_GBPS BYTES...\n");
    return 1;
}
