/* comm_opts.h: the communication flags every distributed command takes (--comm-timeout,
 * --ranks-per-node, --comm-algo), as rows of an option table (src/util/opts.h):
 *     const Opt rows[] = {..., COMM_OPTS(&options.comm), OPT_END}; */
#ifndef MYRIAD_COMM_COMM_OPTS_H
#define MYRIAD_COMM_COMM_OPTS_H

#include "comm/comm.h"
#include "util/opts.h"

extern const char *const comm_algo_names[]; /* "auto", "mpi", "hier": CommAlgo order */

#define COMM_OPTS(co)                                                                                                \
    OPT_DOUBLE("--comm-timeout", "S", &(co)->timeout_s, 0, 1e9,                                                      \
               "report and fail a collective not done after S seconds (default 300; 0 = never)"),                   \
    OPT_INT("--ranks-per-node", "N", &(co)->ranks_per_node, 1, 1 << 20,                                              \
            "emulate nodes of N consecutive ranks (default: real shared-memory nodes)"),                             \
    OPT_CHOICE("--comm-algo", "mpi|hier|auto", &(co)->algo, comm_algo_names,                                         \
               "all-reduce algorithm (default auto: hier across >1 node for >= 256 KiB)")

#endif
