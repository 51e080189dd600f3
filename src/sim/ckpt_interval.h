/* ckpt_interval.h: the checkpoint-interval optimum of Young (1974) and Daly (2006) and Daly's
 * expected goodput, implemented in reliability.c (docs/SIMULATOR.md, Reliability). One formula for
 * the simulator's goodput and the trainer's --save-every auto / --mem-ckpt-every auto
 * (src/train/ckpt_policy.c), so a run and its prediction choose the same interval. */
#ifndef MYRIAD_SIM_CKPT_INTERVAL_H
#define MYRIAD_SIM_CKPT_INTERVAL_H

double sim_young_interval(double ckpt_cost, double mtbf);
double sim_daly_interval(double ckpt_cost, double mtbf);
/* Daly (2006) expected wall time per unit of solve time with interval tau, checkpoint cost delta,
 * restart cost R, exponential failures with mean M. goodput = 1/that. */
double sim_daly_goodput(double tau, double delta, double restart, double mtbf);

#endif
