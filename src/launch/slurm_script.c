/* slurm_script.c: the sbatch script of `myriad run --slurm-script` (see slurm_script.h). */
#include "launch/slurm_script.h"

#include <string.h>

#include "launch/slurm.h"
#include "util/error.h"

/* One shell word: as is when it holds only safe characters, else in single quotes. */
static void shell_word(FILE *f, const char *w) {
    int plain = *w != 0;
    for (const char *p = w; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%", *p) != NULL;
    if (plain) {
        fputs(w, f);
        return;
    }
    fputc('\'', f);
    for (const char *p = w; *p; p++)
        if (*p == '\'') fputs("'\\''", f);
        else fputc(*p, f);
    fputc('\'', f);
}

static int has_arg(char **v, int n, const char *flag) {
    for (int i = 0; i < n; i++)
        if (!strcmp(v[i], flag)) return 1;
    return 0;
}

int slurm_script_write(FILE *f, const SlurmScript *sc) {
    int nodes = sc->nodes, tpn = sc->tasks_per_node;
    if (sc->nranks < 1) return myr_error("run: --slurm-script needs -n N (ranks)");
    if (nodes < 0 || tpn < 0 || sc->gpus_per_task < 0 || sc->spares < 0 || sc->signal_lead_s < 0)
        return myr_error("run: --nodes, --tasks-per-node, --gpus-per-task, --spares and --signal-lead must be >= 0");
    if (!nodes && !tpn) tpn = 1;
    if (!nodes) {
        if (sc->nranks % tpn) return myr_error("run: %d ranks do not fill nodes of %d tasks (--tasks-per-node)", sc->nranks, tpn);
        nodes = sc->nranks / tpn;
    }
    if (!tpn) {
        if (sc->nranks % nodes) return myr_error("run: %d ranks do not spread evenly over %d nodes (--nodes)", sc->nranks, nodes);
        tpn = sc->nranks / nodes;
    }
    if (nodes * tpn != sc->nranks)
        return myr_error("run: --nodes %d x --tasks-per-node %d = %d tasks, but -n %d ranks", nodes, tpn, nodes * tpn,
                         sc->nranks);
    if (sc->ncmd < 1) return myr_error("run: --slurm-script needs the command after --, e.g. -- train --save ckpt ...");
    int is_train = !sc->exec_mode && !strcmp(sc->cmd[0], "train");
    if (is_train && !has_arg(sc->cmd, sc->ncmd, "--save"))
        return myr_error("run: the job needs --save DIR in its train command: a restarted or requeued job resumes "
                         "from the checkpoints there (--resume auto)");

    fprintf(f, "#!/bin/bash\n");
    fprintf(f, "# A myriad job written by `myriad run --slurm-script`: %d ranks on %d nodes x %d tasks", sc->nranks, nodes, tpn);
    if (sc->spares) fprintf(f, ", plus %d spare node%s", sc->spares, sc->spares == 1 ? "" : "s");
    fprintf(f, ".\n# Submit with sbatch. A failed node stays out of the allocation (--no-kill) and myriad run goes\n"
               "# on without it (on a spare); with no spare left, or after the checkpoint taken on the\n"
               "# warning signal before the time limit, it exits %d and the job requeues itself and resumes\n"
               "# from its checkpoint (--resume auto). See docs/SLURM.md.\n", SLURM_EXIT_REQUEUE);
    fprintf(f, "#SBATCH --job-name=%s\n", sc->job_name ? sc->job_name : "myriad");
    fprintf(f, "#SBATCH --nodes=%d\n", nodes + sc->spares);
    fprintf(f, "#SBATCH --ntasks-per-node=%d\n", tpn);
    if (sc->gpus_per_task) fprintf(f, "#SBATCH --gpus-per-task=%d\n", sc->gpus_per_task);
    if (sc->switches) fprintf(f, "#SBATCH --switches=%s\n", sc->switches);
    if (sc->time_limit) fprintf(f, "#SBATCH --time=%s\n", sc->time_limit);
    if (sc->partition) fprintf(f, "#SBATCH --partition=%s\n", sc->partition);
    if (sc->account) fprintf(f, "#SBATCH --account=%s\n", sc->account);
    fprintf(f, "#SBATCH --requeue\n");
    fprintf(f, "#SBATCH --no-kill\n");
    fprintf(f, "#SBATCH --signal=B:USR1@%d\n", sc->signal_lead_s);
    fprintf(f, "#SBATCH --open-mode=append\n");
    fprintf(f, "#SBATCH --output=%s\n", sc->output ? sc->output : "myriad-%j.out");
    fprintf(f, "set -u\ncd ");
    shell_word(f, sc->workdir);
    fprintf(f, " || exit 1\n");
    fprintf(f, "echo \"myriad: job $SLURM_JOB_ID (start $(( ${SLURM_RESTART_COUNT:-0} + 1 ))) on $SLURM_JOB_NODELIST at $(date +%%FT%%T)\"\n");
    shell_word(f, sc->myriad);
    fprintf(f, " run");
    for (int i = 0; i < sc->nrun_opts; i++) fputc(' ', f), shell_word(f, sc->run_opts[i]);
    fprintf(f, " --");
    for (int i = 0; i < sc->ncmd; i++) fputc(' ', f), shell_word(f, sc->cmd[i]);
    if (is_train && !has_arg(sc->cmd, sc->ncmd, "--resume")) fprintf(f, " --resume auto");
    fprintf(f, " &\npid=$!\n");
    fprintf(f, "# the warning before the time limit comes to this shell: myriad run has the ranks checkpoint and\n"
               "# stop. A SIGTERM (scancel, the limit) reaches myriad run and the ranks directly: outlive it here.\n");
    fprintf(f, "trap 'kill -USR1 $pid 2>/dev/null' USR1\n");
    fprintf(f, "trap ':' TERM\n");
    fprintf(f, "while kill -0 $pid 2>/dev/null; do wait $pid; done # a trapped signal ends a wait early\n");
    fprintf(f, "wait $pid\nrc=$?\n");
    fprintf(f, "if [ $rc -eq %d ]; then\n", SLURM_EXIT_REQUEUE);
    fprintf(f, "    echo \"myriad: requeueing job $SLURM_JOB_ID; it resumes from its checkpoint\"\n");
    fprintf(f, "    scontrol requeue \"$SLURM_JOB_ID\" && sleep 300 # the requeue ends this script\n");
    fprintf(f, "fi\nexit $rc\n");
    return ferror(f) ? myr_error("run: cannot write the sbatch script") : 0;
}
