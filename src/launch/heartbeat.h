/* heartbeat.h: the authenticated heartbeat channel between training ranks and `myriad run`.
 * A rank calls hb_connect_from_env() once, hb_step() after every step and hb_finish() before
 * exiting; without MYRIAD_HB_ADDR in the environment (a plain run) every call is a no-op.
 * The wire protocol (one TCP connection per rank, text lines, each MACed with HMAC-SHA256 under
 * the per-job secret and a per-connection nonce) is specified in docs/LAUNCHER.md; the parsing
 * and MAC helpers are shared with the launcher's server side. */
#ifndef MYRIAD_LAUNCH_HEARTBEAT_H
#define MYRIAD_LAUNCH_HEARTBEAT_H

#include <stddef.h>
#include <stdint.h>

#include "util/sha256.h"

#define HB_SECRET_BYTES 32
#define HB_NONCE_BYTES 16
#define HB_LINE_MAX 512
#define HB_HOST_MAX 64

/* --- client (training rank) --- */
/* Connect and authenticate using MYRIAD_HB_ADDR (host:port), MYRIAD_HB_SECRET (64 hex chars),
 * MYRIAD_HB_ATTEMPT and the rank from MYRIAD_RANK / OMPI_COMM_WORLD_RANK / PMIX_RANK /
 * SLURM_PROCID / PMI_RANK. Returns 0 when connected or when MYRIAD_HB_ADDR is unset (no-op),
 * -1 with myr_error() when the launcher is unreachable or refuses the rank. */
int hb_connect_from_env(void);
/* Connect with explicit parameters (the test stubs use it to present a wrong secret). */
int hb_connect(const char *addr, const uint8_t secret[HB_SECRET_BYTES], int attempt, int rank);
int hb_active(void);
/* Report that `step` completed (loss: NAN when unknown). Errors are recorded but never fatal:
 * training must not stop because the launcher went away. At a step listed in MYRIAD_HB_HOLD
 * (where `myriad run --inject` fires a fault) it then waits for the launcher's "GO <step>", so
 * the fault lands exactly after that step, however short the steps are. */
int hb_step(long long step, double loss);

/* What a training step measured, reported with its STEP line (docs/OPERATIONS.md): the
 * sections' seconds (for straggler detection and the run report; each excludes the time
 * blocked in communication, which is the comm section), and rank 0's throughput figures. */
typedef enum { HB_SEC_DATA, HB_SEC_FORWARD, HB_SEC_BACKWARD, HB_SEC_COMM, HB_SEC_OPTIMIZER, HB_SEC_CHECKPOINT, HB_NSECTIONS } HbSection;
const char *hb_section_name(int section); /* "data", "forward", ... as in the event log */
typedef struct {
    double section_s[HB_NSECTIONS]; /* seconds; < 0: not measured */
    double tokens_per_s, mfu;       /* NAN: unknown */
    long long mem_step;             /* newest in-memory copy complete on every rank; -1: none */
    /* wall seconds of the step that went to the run's time ledger's rank-side causes (< 0: not
     * measured): the part of checkpoint saves the step waited for, reading the batch, evaluation */
    double wall_ckpt_s, wall_data_s, wall_eval_s;
    int role;                       /* the rank's cohort for straggler detection (its pipeline stage); -1: unknown */
} HbStepInfo;
void hb_step_info_init(HbStepInfo *info); /* nothing measured */
/* hb_step with what the step measured (info may be NULL). */
int hb_step_info(long long step, double loss, const HbStepInfo *info);
/* The STEP line's body (no MAC) as hb_step_info sends it; what hb_parse reads back. */
void hb_format_step(char *line, size_t cap, long long seq, long long step, double loss, long long t_us,
                    const HbStepInfo *info);
/* The factor by which `myriad run --inject slow@STEP:RANK:FACTOR` stretches this rank's compute
 * when it computes `step` (from MYRIAD_INJECT_SLOW, read by hb_connect_from_env): 1 when none
 * applies. The trainer computes (factor - 1) x each compute section more (a spin on its CPU
 * clock, train/trainer.c). */
double hb_slow_factor(long long step);
/* Report the step this rank starts from after loading a checkpoint (0 = from scratch), so the
 * launcher knows a resumed rank's position before its first new step completes. When fault
 * steps at or before it are still due (MYRIAD_HB_HOLD), waits for GO of the latest one. */
int hb_start(long long step);
/* Where a (re)started rank's time went before its first step, for the launcher's time ledger
 * (docs/LAUNCHER.md, Time ledger): seconds spent in MPI init (and the layout check), building the
 * model and data (setup), restoring a checkpoint, and from the end of the restore to this FROM;
 * age_s is filled by hb_start_info (seconds since this process started). < 0: not measured. */
typedef struct {
    double age_s, mpi_s, setup_s, restore_s, post_s;
} HbStartInfo;
void hb_start_info_init(HbStartInfo *info); /* nothing measured */
/* hb_start with what the start measured (info may be NULL; its age_s is set here). */
int hb_start_info(long long step, HbStartInfo *info);
/* Seconds since this process started (/proc/self/stat), or -1 when unknown. */
double hb_process_age_s(void);
/* A named event (a single word, e.g. "checkpoint-saved"). */
int hb_event(const char *name);
/* Send the "done" event and close: the launcher then treats this rank's exit as normal. */
void hb_finish(void);

/* --- protocol helpers shared with the launcher --- */
typedef enum { HB_HELLO, HB_STEP, HB_EVENT, HB_FROM } HbType;
typedef struct {
    HbType type;
    int attempt, rank;        /* HELLO */
    long long pid;            /* HELLO */
    char host[HB_HOST_MAX];   /* HELLO */
    long long seq;            /* STEP, EVENT: strictly increasing per connection */
    long long step;           /* STEP, FROM */
    double loss;              /* STEP (NAN when absent) */
    long long t_us;           /* STEP, EVENT: sender's CLOCK_REALTIME in microseconds */
    char name[32];            /* EVENT */
    int has_info;             /* STEP: the optional sixth field was present */
    HbStepInfo info;          /* STEP */
    int has_start;            /* FROM: the optional fifth field was present */
    HbStartInfo start;        /* FROM */
} HbMsg;

/* Append " <mac>" (HMAC-SHA256 of "<nonce_hex> <body>" in hex) to body in buf (size cap). */
int hb_sign(char *buf, size_t cap, const uint8_t secret[HB_SECRET_BYTES], const char *nonce_hex);
/* Check the MAC of a received line (no newline) and strip it: 0 when authentic, -1 otherwise. */
int hb_verify(char *line, const uint8_t secret[HB_SECRET_BYTES], const char *nonce_hex);
/* The same under the secret's prepared HMAC key (the launcher verifies every line under one). */
int hb_verify_key(char *line, const HmacKey *key, const char *nonce_hex);
/* Parse a verified line (MAC stripped) into m; -1 with myr_error() on malformed input. */
int hb_parse(const char *line, HbMsg *m);
/* The launcher's reply to a rank (OK, NO, GO lines): never blocks, never raises SIGPIPE. */
void hb_send_line(int fd, const char *s);

#endif
