/* rank_binding.c: the --bind-to policy of `myriad run`'s mpirun (see rank_binding.h). */
#include "launch/rank_binding.h"

#include <stdlib.h>
#include <string.h>

int launch_args_have(const char *const *args, int nargs, const char *flag) {
    for (int i = 0; i < nargs; i++)
        if (!strncmp(args[i], flag, strlen(flag))) return 1; /* a prefix: also --bind-to=core */
    return 0;
}

static int given(const char *const *extra, int nextra, const char *const *flags, size_t nflags) {
    for (size_t f = 0; f < nflags; f++)
        if (launch_args_have(extra, nextra, flags[f])) return 1;
    return 0;
}

const char *rank_binding(const char *const *extra, int nextra, int hostfile) {
    static const char *const binding[] = {"--bind-to", "--cpu-set", "--rankfile", "-rf"};
    static const char *const hosts[] = {"--hostfile", "--machinefile", "--host", "-H", "-hostfile", "-machinefile"};
    if (given(extra, nextra, binding, sizeof binding / sizeof *binding)) return NULL;
    if (hostfile || given(extra, nextra, hosts, sizeof hosts / sizeof *hosts)) return "none";
    const char *t = getenv("OMP_NUM_THREADS");
    return t && !strcmp(t, "1") ? "core:overload-allowed" : "none";
}
