/* bench.h: the sub-benchmarks of `myriad bench` (table in bench_cmd.c). Each takes the
 * arguments after its name (argv[0] is the benchmark name) and returns the exit code. */
#ifndef MYRIAD_BENCH_BENCH_H
#define MYRIAD_BENCH_BENCH_H

int bench_comm(int argc, char **argv); /* bench_comm.c */
int bench_sgemm(int argc, char **argv); /* bench_sgemm.c */
int bench_calibrate(int argc, char **argv); /* bench_calibrate.c */

#endif
