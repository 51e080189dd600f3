/* rank_binding.h: where mpirun places the ranks of `myriad run` on a machine's cores. */
#ifndef MYRIAD_LAUNCH_RANK_BINDING_H
#define MYRIAD_LAUNCH_RANK_BINDING_H

/* 1 when one of args[0..nargs) starts with flag (so "--bind-to" matches "--bind-to=core"): how
 * the launcher tells which mpirun/srun options the user already gave with --mpirun-arg. */
int launch_args_have(const char *const *args, int nargs, const char *flag);

/* The --bind-to policy for mpirun, or NULL when the user's own mpirun flags (extra) already
 * choose one (--bind-to, --cpu-set, --rankfile). "core:overload-allowed" when the ranks run on
 * this machine alone (no hostfile, no --host in extra) and each runs one thread
 * (OMP_NUM_THREADS=1): ranks are bound round-robin to the cores, more than one per core when
 * there are more ranks than cores. Else "none": a rank's OpenMP threads need more than one core,
 * and emulated hosts that are all this machine would each bind their ranks from core 0 up,
 * stacking them on the first cores.
 * Why bind: unbound ranks drift between cores, so which ranks share a core, and its caches, with
 * whom changes during a run; on 2 cores with 4 ranks and 2 other busy processes, healthy ranks'
 * CPU time per step then differed by up to 1.3x for tens of steps, hiding a 1.5x straggler
 * (bench/straggler_results.md). Bound, every core holds the same share of the ranks. */
const char *rank_binding(const char *const *extra, int nextra, int hostfile);

#endif
