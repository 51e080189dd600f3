/* comm_opts.h: the communication flags every distributed command takes (--comm, --comm-timeout,
 * --ranks-per-node, --comm-algo), as rows of an option table (src/util/opts.h):
 *     const Opt rows[] = {..., COMM_OPTS(&options.comm), OPT_END}; */
#ifndef MYRIAD_COMM_COMM_OPTS_H
#define MYRIAD_COMM_COMM_OPTS_H

#include "comm/comm.h"
#include "util/opts.h"

extern const char *const comm_algo_names[];      /* "auto", "mpi", "hier": CommAlgo order */
extern const char *const comm_transport_names[]; /* "auto", "mpi", "nccl": CommTransport order */

#define COMM_OPTS(co)                                                                                                \
    OPT_CHOICE("--comm", "nccl|mpi", &(co)->transport, comm_transport_names,                                         \
               "what moves device buffers (default: nccl on GPUs when libnccl loads, else mpi)"),                   \
    OPT_DOUBLE("--comm-timeout", "S", &(co)->timeout_s, 0, 1e9,                                                      \
               "report and fail a collective not done after S seconds (default 300; 0 = never)"),                   \
    OPT_INT("--ranks-per-node", "N", &(co)->ranks_per_node, 1, 1 << 20,                                              \
            "emulate nodes of N consecutive ranks (default: real shared-memory nodes)"),                             \
    OPT_CHOICE("--comm-algo", "mpi|hier|auto", &(co)->algo, comm_algo_names,                                         \
               "all-reduce algorithm (default auto: hier across >1 node for >= 256 KiB)")

#endif
