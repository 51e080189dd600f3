/* hostfile.h: the hosts of a job: reading `--hosts FILE` (Open MPI hostfile syntax) and writing
 * the hostfile of one launch. Shared by the supervisor and the pre-flight check. */
#ifndef MYRIAD_LAUNCH_HOSTFILE_H
#define MYRIAD_LAUNCH_HOSTFILE_H

typedef struct {
    char name[64];
    int slots;
    int lost;    /* the supervisor's mark: the host died or was evicted (a straggler) and must not be used again */
    int settled; /* lost, and Slurm flagged it (or the supervisor gave it back): supervise.c settle_lost_nodes */
} Host;

/* One host per line, `HOST [slots=N]`, `#` comments, blank lines ignored. 0, or -1 with
 * myr_error() naming the file and line. *out is malloc'd. */
int hosts_load(const char *path, Host **out, int *n);
/* Write hosts[order[0..n)] as `NAME slots=N` lines to a new /tmp/myriad-hosts-XXXXXX file;
 * path (at least 32 bytes) receives its name. 0, or -1 with myr_error(). */
int hosts_write_temp(char *path, const Host *hosts, const int *order, int n);

#endif
