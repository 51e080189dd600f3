/* event_log.c: the supervisor's event log: one JSON object per line, {"t": seconds since start,
 * "event": name, ...}, on stderr and appended to --events. Event names and fields: docs/LAUNCHER.md. */
#define _GNU_SOURCE
#include "launch/sup_state.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

double sup_t_start;
FILE *sup_events_file;

double sup_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Log one event: a JSON line to the events file and to stderr. Takes ownership of obj. */
void sup_emit(cJSON *obj) {
    cJSON *ordered = cJSON_CreateObject();
    cJSON_AddNumberToObject(ordered, "t", round((sup_now() - sup_t_start) * 1000) / 1000);
    for (cJSON *it = obj->child; it;) {
        cJSON *next = it->next;
        cJSON_AddItemToObject(ordered, it->string, cJSON_DetachItemViaPointer(obj, it));
        it = next;
    }
    cJSON_Delete(obj);
    char *s = cJSON_PrintUnformatted(ordered);
    if (s) {
        fprintf(stderr, "myriad run: %s\n", s);
        if (sup_events_file) fprintf(sup_events_file, "%s\n", s), fflush(sup_events_file);
        free(s);
    }
    cJSON_Delete(ordered);
}

cJSON *sup_event(const char *name) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", name);
    return o;
}
