/* progress.h: what a training run reports: a live progress line on a terminal (or periodic
 * lines in a log), and one JSON object per step in --log FILE.jsonl. Steps are counted from 1
 * (step 1 is the first optimizer step; checkpoint step-N holds the state after step N). Numbers
 * that are not finite are written as JSON null; a step whose update was skipped has
 * "skipped": true, a step that stopped the run (non-finite, --on-nan stop or too many skips in a
 * row) "stopped": true. The first step logged, and any step at which the MFU denominator changed, carry
 * "mfu_peak": {"flops": F, "source": "..."}: the denominator of the job (all devices). */
#ifndef MYRIAD_TRAIN_PROGRESS_H
#define MYRIAD_TRAIN_PROGRESS_H

#include <stdio.h>

typedef struct {
    long step, steps;
    double loss, lr, grad_norm, ms, tokens_per_s, mfu;
    int have_val;
    double val_loss;
    double comm_ms; /* exposed (not hidden) communication this step; < 0 when single process */
    /* mixture of experts (have_moe): assignments kept per (layer, expert) over all ranks, assignments
     * dropped by capacity, the load-balancing loss (unweighted, mean over ranks and micro-batches),
     * all-to-all bytes sent and seconds spent by rank 0 */
    int have_moe;
    double moe_tokens_min, moe_tokens_max, moe_tokens_mean, moe_dropped, moe_aux, a2a_bytes, a2a_ms;
    double a2a_wait_ms; /* in barriers before the all-to-alls (--a2a-barrier only) */
    double ckpt_ms;       /* time this step spent saving checkpoints (disk snapshot, in-memory copy), outside ms */
    double mem_bytes, mem_peak_bytes; /* device memory this rank holds now and at most (kernels_memory_usage) */
    /* On the CPU the device allocator counts the planned allocations the backend rehearses, not
     * what the process holds: the line shows the measured resident set instead (VmRSS / VmHWM,
     * "RSS"), the log both (rss_gib, rss_peak_gib). */
    int host_memory;                  /* the "device" is this host's memory (the CPU backend) */
    double rss_bytes, rss_peak_bytes; /* this process's resident set now and at most; < 0: unknown */
    int skipped;          /* non-finite: no update was made (--on-nan skip) */
    int stopped;          /* non-finite: the run stops at this step (--on-nan stop, or too many skips) */
    double peak_flops;    /* the MFU denominator of the whole job (FLOP/s; 0: unknown) */
    const char *peak_source; /* where it came from, in a few words */
} StepReport;

typedef struct {
    FILE *log;        /* --log, or NULL */
    int tty;          /* stderr is a terminal: redraw one line */
    int quiet;        /* a rank other than 0: print nothing */
    long print_every; /* lines when not a terminal */
    double elapsed_s; /* sum of this run's step times, for the ETA */
    long timed;       /* steps this run has reported (fewer than the step number after a resume) */
    double logged_peak; /* the MFU denominator last written to the log (written again when it changes) */
    const char *config; /* JSON object: the run's whole configuration, on the log's first line; NULL: none */
    int config_logged;
} Progress;

/* Opens the log, truncating it, or appending to it when `append` (a supervised job's relaunch:
 * one log then holds the whole run across restarts, recomputed steps twice); dies with the reason
 * if it cannot be opened. */
void progress_open(Progress *p, const char *log_path, long steps, int print_every, int append);
void progress_step(Progress *p, const StepReport *r);
void progress_close(Progress *p);
/* Ends the terminal's live line so that a message printed next starts on its own line. */
void progress_break_line(Progress *p);

#endif
