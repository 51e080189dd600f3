/* train_log_config.c: the run's whole configuration as `train --log` records it on the log's
 * first line ("config": {...}), so that a log read alone (`myriad report LOG.jsonl`) says how the
 * run was made: the checkpoint metadata (model, layout, batch, seq, seed, lr and its schedule,
 * steps, data), the other settings that shape it (optimizer, micro-batch, sequence parallelism,
 * pipeline schedule, ZeRO and gradient reduction, device and dtype, ranks), defaults included,
 * and the command line as given. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "parallel/schedule.h"
#include "train/train_job.h"

void train_job_keep_command(TrainJob *j, int argc, char **argv) {
    size_t used = (size_t)snprintf(j->command, sizeof j->command, "myriad");
    for (int i = 0; i < argc && used + 1 < sizeof j->command; i++) {
        /* an argument the shell would split or expand is single-quoted (a ' inside as '\''), so
         * the line can be pasted and run again */
        const char *a = argv[i];
        if (a[0] && !strpbrk(a, " \t\n'\"\\$*?;&|<>()`#~{}[]")) {
            used += (size_t)snprintf(j->command + used, sizeof j->command - used, " %s", a);
            continue;
        }
        used += (size_t)snprintf(j->command + used, sizeof j->command - used, " '");
        for (const char *c = a; *c && used + 5 < sizeof j->command; c++)
            used += (size_t)snprintf(j->command + used, sizeof j->command - used, *c == '\'' ? "'\\''" : "%c", *c);
        if (used + 1 < sizeof j->command) used += (size_t)snprintf(j->command + used, sizeof j->command - used, "'");
    }
}

char *train_job_config_json(const TrainJob *j) {
    const TrainOptions *o = &j->o;
    cJSON *c = cJSON_Parse(j->meta);
    if (!c) c = cJSON_CreateObject();
    cJSON *layout = cJSON_GetObjectItem(c, "layout");
    if (cJSON_IsObject(layout)) {
        cJSON_AddBoolToObject(layout, "sp", o->sp && j->tp > 1);
        if (j->pp > 1) cJSON_AddStringToObject(layout, "schedule", schedule_name((ScheduleKind)o->schedule));
        cJSON_AddNumberToObject(layout, "micro_batch", j->micro);
        cJSON_AddNumberToObject(layout, "ranks", j->world);
    }
    static const char *recompute[] = {"none", "selective", "full"};
    cJSON_AddStringToObject(c, "recompute", o->recompute >= 0 && o->recompute <= 2 ? recompute[o->recompute] : "?");
    cJSON_AddNumberToObject(c, "weight_decay", o->optim.adam.weight_decay);
    cJSON_AddNumberToObject(c, "beta1", o->optim.adam.beta1);
    cJSON_AddNumberToObject(c, "beta2", o->optim.adam.beta2);
    cJSON_AddNumberToObject(c, "eps", o->optim.adam.eps);
    cJSON_AddNumberToObject(c, "clip", o->optim.clip);
    cJSON_AddStringToObject(c, "grad_dtype", comm_dtype_name(o->dpo.grad_dtype));
    cJSON_AddBoolToObject(c, "overlap", o->dpo.overlap);
    cJSON_AddStringToObject(c, "device", kernels_device());
    cJSON_AddStringToObject(c, "dtype", dtype_name(kernels_dtype()));
    if (o->data) cJSON_AddStringToObject(c, "data", o->data);
    if (o->init_dir) cJSON_AddStringToObject(c, "init", o->init_dir);
    if (o->preset) cJSON_AddStringToObject(c, "preset", o->preset);
    cJSON_AddStringToObject(c, "command", j->command);
    char *text = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    return text;
}
