/* hostlist.h: Slurm host lists ("n[1-3,07-09],gpu-a[01-02]-x") expanded into node names and
 * node names compressed back into one, as Slurm's commands write and read them
 * (SLURM_JOB_NODELIST, sinfo/scontrol output, --nodelist/--exclude). */
#ifndef MYRIAD_UTIL_HOSTLIST_H
#define MYRIAD_UTIL_HOSTLIST_H

#include <stddef.h>

/* A growable list of host names. */
typedef struct {
    char **names;
    int n, cap;
} HostList;

/* Appends the hosts of `expr` (comma-separated items; an item may hold several bracket groups of
 * ranges, zero padding kept: "n[08-10]" -> n08 n09 n10). At most `limit` names in all (<= 0:
 * 1,000,000), so a typo such as n[1-999999999] fails instead of exhausting memory. Returns 0, or -1
 * with myr_error() naming the malformed part. */
int hostlist_expand(HostList *hl, const char *expr, int limit);
void hostlist_add(HostList *hl, const char *name);
/* Index of `name` in the list, -1 when absent. */
int hostlist_find(const HostList *hl, const char *name);
void hostlist_free(HostList *hl);

/* Writes names[0..n) as one compressed expression ("n[1-3,5],login1") into out; names with the
 * same prefix and digit width fold into one bracket group, in ascending numeric order. Returns 0,
 * or -1 when it does not fit in cap bytes. */
int hostlist_compress(char *const *names, int n, char *out, size_t cap);

#endif
