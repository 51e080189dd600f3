/* comm_util.c: backend-independent pieces of the comm API: names of dtypes, reductions and
 * algorithms, bfloat16 conversion, default options and parsing of the comm CLI flags. */
#include <string.h>

#include "util/bf16.h"
#include "comm/comm.h"
#include "util/args.h"
#include "util/error.h"

CommOptions comm_default_options(void) {
    CommOptions o = {.timeout_s = COMM_DEFAULT_TIMEOUT_S, .ranks_per_node = 0, .algo = COMM_ALGO_AUTO};
    return o;
}

const char *comm_flags_help(void) {
    return "  --comm-timeout S      report and fail a collective not done after S seconds (default 300; 0 = never)\n"
           "  --ranks-per-node N    emulate nodes of N consecutive ranks (default: real shared-memory nodes)\n"
           "  --comm-algo mpi|hier|auto  all-reduce algorithm (default auto: hier across >1 node for >= 256 KiB)\n";
}

int comm_parse_flag(CommOptions *opt, int argc, char **argv, int *i) {
    const char *f = argv[*i];
    if (!strcmp(f, "--comm-timeout")) {
        opt->timeout_s = args_next_double(argc, argv, i);
        if (opt->timeout_s < 0) myr_die("--comm-timeout must be >= 0 seconds (0 disables the timeout)");
        return 1;
    }
    if (!strcmp(f, "--ranks-per-node")) {
        opt->ranks_per_node = args_next_int(argc, argv, i);
        if (opt->ranks_per_node < 1) myr_die("--ranks-per-node must be >= 1");
        return 1;
    }
    if (!strcmp(f, "--comm-algo")) {
        const char *v = args_value(argc, argv, i);
        if (!strcmp(v, "mpi")) opt->algo = COMM_ALGO_MPI;
        else if (!strcmp(v, "hier")) opt->algo = COMM_ALGO_HIER;
        else if (!strcmp(v, "auto")) opt->algo = COMM_ALGO_AUTO;
        else myr_die("--comm-algo expects mpi, hier or auto, got '%s'", v);
        return 1;
    }
    return 0;
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
