/* train_cmd.c: `myriad train` (being built). */
#include "cli/commands.h"
#include "util/error.h"
int cmd_train(int argc, char **argv) { myr_die("train: not built yet"); }
int cmd_eval(int argc, char **argv) { myr_die("eval: not built yet"); }
