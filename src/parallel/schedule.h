/* schedule.h: pipeline schedules as data. For p stages, m micro-batches and v model chunks per
 * stage, the ordered list of operations each stage runs in one step: forward(mb, chunk),
 * backward(mb, chunk), and the sends/receives of activations (to the next virtual stage) and
 * gradients (to the previous one). Schedules: GPipe (Huang et al. 2019), 1F1B / PipeDream-Flush
 * (Narayanan et al. 2021), interleaved 1F1B (Narayanan et al. SC'21, as in Megatron-LM).
 *
 * Virtual stages: chunk c of stage s is virtual stage k = c*p + s (v = 1: k = s); layers run in
 * the order of k, so activations go s -> s+1 and, from the last stage, to stage 0's next chunk.
 *
 * Communication order (docs/PIPELINE.md has the argument): a receive sits just before the compute
 * that needs it and a send just after the compute that produced it; between two computes the
 * activation message goes before the gradient message, otherwise the send goes first. With that
 * order the lists of GPipe and 1F1B cannot deadlock even with blocking (rendezvous) send/recv,
 * and every schedule (interleaved included) cannot deadlock with nonblocking sends (isend posted
 * in list order, each receive waited for where it stands); schedule_build_blocking gives lists
 * safe with blocking transfers for interleaved too. schedule_simulate checks all of it. */
#ifndef MYRIAD_PARALLEL_SCHEDULE_H
#define MYRIAD_PARALLEL_SCHEDULE_H

#include <stddef.h>

typedef enum { SCHEDULE_GPIPE = 0, SCHEDULE_1F1B = 1, SCHEDULE_INTERLEAVED = 2 } ScheduleKind;

typedef enum {
    OP_FORWARD = 0,
    OP_BACKWARD,
    OP_SEND_ACT,  /* output activation of forward(mb, chunk) to stage `peer` */
    OP_RECV_ACT,  /* input activation of forward(mb, chunk) from stage `peer` */
    OP_SEND_GRAD, /* input gradient made by backward(mb, chunk) to stage `peer` */
    OP_RECV_GRAD, /* output gradient needed by backward(mb, chunk) from stage `peer` */
} ScheduleOpKind;

typedef struct {
    ScheduleOpKind kind;
    int mb;    /* micro-batch 0..m-1 */
    int chunk; /* model chunk on this stage 0..v-1 (the compute the transfer feeds or comes from) */
    int peer;  /* pipeline stage at the other end (send/recv), -1 for compute */
} ScheduleOp;

typedef struct {
    ScheduleKind kind;
    int pp, vpp, micro;
    int blocking_safe; /* the lists cannot deadlock with blocking send/recv (GPipe, 1F1B, schedule_build_blocking) */
    int *nops;        /* per stage */
    ScheduleOp **ops; /* per stage: nops[s] operations in execution order */
} Schedule;

/* "gpipe", "1f1b", "interleaved" -> kind; -1 with a one-line reason otherwise. */
int schedule_parse(const char *name, ScheduleKind *kind);
const char *schedule_name(ScheduleKind kind);

/* Check a layout before any work; -1 with a one-line reason: pp or micro-batches < 1,
 * vpp > 1 without the interleaved schedule, interleaved with vpp < 2 or micro-batches not a
 * multiple of pp, 1f1b with fewer micro-batches than pp. */
int schedule_validate(ScheduleKind kind, int pp, int vpp, int micro);

/* Build every stage's operation list (validates first). Free with schedule_free. */
int schedule_build(Schedule *s, ScheduleKind kind, int pp, int vpp, int micro);
void schedule_free(Schedule *s);
/* The same computes in the same order, with the transfers reordered so that the lists cannot
 * deadlock even with blocking (rendezvous) send/recv, for every schedule including interleaved:
 * each transfer moves to just before the compute that consumes it, in the order the nonblocking
 * execution with forward/backward times t_fwd/t_bwd (per whole stage) starts those computes, so
 * all stages' lists are projections of one global sequence (docs/PIPELINE.md). A send may then
 * wait for its receiver, which can stretch the step: schedule_simulate measures it. */
int schedule_build_blocking(Schedule *s, ScheduleKind kind, int pp, int vpp, int micro, double t_fwd, double t_bwd);

/* Compact text of one op, as used in docs and tests: F3 B3 (forward/backward of micro-batch 3),
 * sa3 ra3 sg3 rg3 (send/recv activation/gradient); with vpp > 1 the chunk follows: F3.1, ra3.1. */
void schedule_op_str(const ScheduleOp *op, int vpp, char *buf, size_t cap);
/* A stage's whole list as space-separated op strings. Returns -1 if cap is too small. */
int schedule_stage_str(const Schedule *s, int stage, char *buf, size_t cap);

/* Layers of each virtual stage k = chunk*pp + rank: layers [start[k], start[k] + count[k]).
 * Even split by default (layers must be divisible by pp*vpp); explicit_counts (n_explicit ==
 * pp*vpp entries, each >= 1, summing to layers) overrides it. -1 with a one-line reason. */
int schedule_stage_layers(int layers, int pp, int vpp, const int *explicit_counts, int n_explicit, int *start,
                          int *count);

/* Result of executing all stages' lists together (schedule_simulate). */
typedef struct {
    double makespan;        /* time of the last op on any stage */
    double bubble;          /* idle fraction: 1 - m*(t_fwd+t_bwd) / makespan */
    double bubble_analytic; /* (p-1) / (v*m + p-1); v = 1 for GPipe and 1F1B */
    int peak_live_chunks0;  /* stage 0: most (mb, chunk) forwards done whose backward has not run */
    double peak_live_mb0;   /* the same in micro-batches of a whole stage: peak_live_chunks0 / v */
    int messages;           /* send/recv pairs matched */
} ScheduleSimResult;

/* Execute every stage's list with forward/backward of a whole stage taking t_fwd/t_bwd (a chunk
 * takes 1/v of that) and zero-time transfers. rendezvous = 1: a send and its recv both block
 * until the peer reaches the matching op; 0: sends are posted without blocking and a recv waits
 * for its send. Checks that the lists never deadlock, that every recv meets a send of the same
 * message from the right stage (and no send is left unreceived), that a forward has its input,
 * a backward its forward and its output gradient, and a send its data. -1 with a one-line
 * reason naming the stage and op otherwise. */
int schedule_simulate(const Schedule *s, double t_fwd, double t_bwd, int rendezvous, ScheduleSimResult *r);

#endif
