/* ledger.h: the time ledger of a supervised run: every second of the job's wall time, from the
 * launcher's start to its end, accounted to exactly one cause, per attempt and in total, with the
 * segments in time order (the report's timeline). Pure bookkeeping on a clock the caller passes
 * (no I/O): the supervisor's sup_ledger.c decides what each interval was. Time is accounted up to
 * a mark that only moves forward, so the causes add up to the time accounted by construction and
 * every counter only grows (what Prometheus counters must do). Causes and their rules:
 * docs/LAUNCHER.md, "Time ledger". */
#ifndef MYRIAD_LAUNCH_LEDGER_H
#define MYRIAD_LAUNCH_LEDGER_H

#include <cjson/cJSON.h>

typedef enum {
    LEDGER_PRODUCTIVE,     /* steps computed for the first time, less the rank-side causes below */
    LEDGER_RECOMPUTED,     /* steps computed again after a restore, and the part of the step lost with a failure */
    LEDGER_DETECTION,      /* from a failure to the launcher declaring it */
    LEDGER_TEARDOWN,       /* killing the attempt until the launcher is ready to relaunch */
    LEDGER_LAUNCH,         /* mpirun/srun starting the ranks, until each process runs (every launch) */
    LEDGER_MPI_INIT,       /* MPI init and the layout check in the ranks */
    LEDGER_SETUP,          /* building the model, data and parallelism */
    LEDGER_RESTORE_MEMORY, /* restoring from in-memory copies (own or replicas) */
    LEDGER_RESTORE_DISK,   /* restoring (and resharding) a disk checkpoint */
    LEDGER_REJOIN,         /* from the restore to every rank connected: pre-step checks, waiting for the slowest */
    LEDGER_CHECKPOINT,     /* the part of checkpoint saves (disk or memory) the steps waited for */
    LEDGER_DATA,           /* steps waiting for their batch */
    LEDGER_EVAL,           /* validation inside steps */
    LEDGER_STRAGGLER,      /* step time above the cohort's pace while a rank scored as slow */
    LEDGER_PREFLIGHT,      /* the --preflight health check */
    LEDGER_SPARE_WAIT,     /* waiting for a spare or for Slurm (lost-node checks, settling) */
    LEDGER_RESHARD,        /* an elastic resize: stopping at a checkpoint and changing the layout */
    LEDGER_FINISH,         /* after the last step: final saves, export, exit */
    LEDGER_CAUSES
} LedgerCause;

typedef struct {
    double seconds[LEDGER_CAUSES];
} LedgerRow;

typedef struct {
    double t0, t1; /* seconds since the ledger's start */
    int cause;     /* steps: LEDGER_PRODUCTIVE or LEDGER_RECOMPUTED (their rank-side parts inside them) */
    int attempt;
} LedgerSegment;

typedef struct {
    double t_start;       /* the run's start (the launcher's, before any --preflight) */
    double t_mark;        /* everything before this is accounted */
    LedgerRow total;
    LedgerRow *att;       /* att[a]: what was accounted while attempt a was the current one */
    int natt, cap;
    int cur;              /* the current attempt (time before the first launch goes to attempt 0) */
    LedgerSegment *seg;
    int nseg, capseg;
} Ledger;

void ledger_init(Ledger *l, double t_start);
void ledger_free(Ledger *l);
/* From now on time is accounted to attempt `attempt`. */
void ledger_set_attempt(Ledger *l, int attempt);
/* Account [mark, t) to cause; nothing when t <= mark. Returns the seconds added. */
double ledger_account(Ledger *l, int cause, double t);
/* Account [mark, t) as a step: the first nsub causes take sub[i] seconds each (clamped to what is
 * left, in order), the rest goes to rest_cause (productive or recomputed). */
void ledger_step(Ledger *l, double t, int rest_cause, const int *sub_cause, const double *sub, int nsub);
double ledger_row_sum(const LedgerRow *r);
const char *ledger_cause_name(int cause);
/* {"productive": s, ...}: every cause, seconds rounded to 1 ms */
cJSON *ledger_row_json(const LedgerRow *r);
/* [[t0, t1, "cause", attempt], ...]: the segments, consecutive ones of one cause and attempt merged */
cJSON *ledger_timeline_json(const Ledger *l);
/* One line: "wall W s: productive P s (X%), ..." with the non-zero causes, largest first. */
void ledger_summary(const LedgerRow *r, double wall, char *buf, size_t cap);

#endif
