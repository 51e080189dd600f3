/* comm_util.c: backend-independent pieces of the comm API: names of dtypes, reductions and
 * algorithms, bfloat16 conversion, default options and parsing of the comm CLI flags. */
#include <string.h>

#include "util/bf16.h"
#include "comm/comm.h"
#include "comm/comm_opts.h"
#include "util/error.h"

CommOptions comm_default_options(void) {
    CommOptions o = {.timeout_s = COMM_DEFAULT_TIMEOUT_S, .ranks_per_node = 0, .algo = COMM_ALGO_AUTO,
                     .transport = COMM_TRANSPORT_AUTO};
    return o;
}

const char *const comm_algo_names[] = {"auto", "mpi", "hier", NULL};
const char *const comm_transport_names[] = {"auto", "mpi", "nccl", NULL};
const char *comm_transport_name(CommTransport t) {
    return t == COMM_TRANSPORT_MPI ? "mpi" : t == COMM_TRANSPORT_NCCL ? "nccl" : "auto";
}

int comm_parse_flag(CommOptions *opt, int argc, char **argv, int *i) {
    const Opt rows[] = {COMM_OPTS(opt), OPT_END};
    OptCommand cmd = {.name = "comm", .rows = rows};
    return opts_apply(&cmd, argc, argv, i);
}

const char *comm_dtype_name(CommDtype dt) { return dt == COMM_BF16 ? "bfloat16" : "float"; }
const char *comm_op_name(CommOp op) { return op == COMM_AVG ? "avg" : op == COMM_MAX ? "max" : "sum"; }
const char *comm_algo_name(CommAlgo a) { return a == COMM_ALGO_MPI ? "mpi" : a == COMM_ALGO_HIER ? "hier" : "auto"; }

uint16_t comm_f32_to_bf16(float x) { return f32_to_bf16(x); }
float comm_bf16_to_f32(uint16_t b) { return bf16_to_f32(b); }

void comm_f32_to_bf16_array(const float *src, uint16_t *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = f32_to_bf16(src[i]);
}

void comm_bf16_to_f32_array(const uint16_t *src, float *dst, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = bf16_to_f32(src[i]);
}
