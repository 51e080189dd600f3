/* commands.h: the subcommands of bin/myriad. Each takes the arguments after its name
 * (argv[0] is the subcommand name) and returns the process exit code.
 * To add a subcommand: declare it here and add one row to the table in src/main.c. */
#ifndef MYRIAD_CLI_COMMANDS_H
#define MYRIAD_CLI_COMMANDS_H

int cmd_train(int argc, char **argv); /* src/train/train_cmd.c */
int cmd_eval(int argc, char **argv);  /* src/train/eval_cmd.c */
int cmd_data(int argc, char **argv);  /* src/data/data_cmd.c */
int cmd_tokenize(int argc, char **argv);   /* src/tokenizer/tok_cmd.c */
int cmd_detokenize(int argc, char **argv); /* src/tokenizer/tok_cmd.c */
int cmd_sim(int argc, char **argv);   /* src/sim/sim_cmd.c */
int cmd_plan(int argc, char **argv);  /* src/sim/plan_cmd.c */
int cmd_bench(int argc, char **argv); /* src/bench/bench_cmd.c */
int cmd_run(int argc, char **argv);   /* src/launch/run_cmd.c */
int cmd_mesh(int argc, char **argv);  /* src/parallel/mesh_cmd.c */
int cmd_sched(int argc, char **argv); /* src/sched/sched_cmd.c */
int cmd_doctor(int argc, char **argv); /* src/ops/doctor_cmd.c */
int cmd_report(int argc, char **argv); /* src/ops/report_cmd.c */

#endif
