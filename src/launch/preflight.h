/* preflight.h: `myriad run --preflight`: run `myriad doctor` over every host of the job (working
 * hosts and spares) before the first launch, then launch on healthy hosts only: flagged working
 * hosts are replaced by healthy spares in order, flagged spares are dropped, and with too few
 * healthy spares the run is refused with the reasons. Behaviour: docs/OPERATIONS.md. */
#ifndef MYRIAD_LAUNCH_PREFLIGHT_H
#define MYRIAD_LAUNCH_PREFLIGHT_H

#include "launch/hostfile.h"
#include "launch/supervise.h"

#define PREFLIGHT_MAX_ARGS 32

typedef struct {
    int enabled;
    const char *out_path;                       /* --preflight-out: the doctor's JSON document */
    const char *doctor_args[PREFLIGHT_MAX_ARGS]; /* --doctor-arg: passed on to `myriad doctor` */
    int ndoctor_args;
    double timeout_s; /* the doctor must finish within this (default 300 s); a launch that does not is retried once */
} PreflightOpts;

/* The pure decision: given which of the n hosts (the last `spares` of them spares) are flagged,
 * fill order[] with the hosts to use, working hosts first (flagged ones replaced in place by the
 * first healthy unused spare) then the remaining healthy spares; *nwork_out / *nspare_out say how
 * many of each; replaced_by[i] is the spare that took working host i's place (-1: none).
 * -1 when a flagged working host finds no healthy spare. */
int preflight_choose(int n, int spares, const int *flagged, int *order, int *nwork_out, int *nspare_out, int *replaced_by);

/* Run the check and rewrite so->hosts_file / so->spares to the chosen hosts (written to
 * new_hostfile, at least 32 bytes, which the caller unlinks after the run; "" when not written).
 * self: this binary. 0, or -1 with myr_error() giving the reasons the run is refused. */
int preflight_run(SuperviseOpts *so, const PreflightOpts *po, const char *self, char *new_hostfile);

#endif
