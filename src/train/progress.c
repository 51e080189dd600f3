/* progress.c: progress line, ETA and the JSON-lines step log. */
#include "train/progress.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

#define GIB 1073741824.0

void progress_open(Progress *p, const char *log_path, long steps, int print_every, int append) {
    memset(p, 0, sizeof *p);
    p->tty = isatty(STDERR_FILENO);
    p->print_every = print_every > 0 ? print_every : (steps <= 100 ? 1 : steps / 50);
    if (log_path) {
        p->log = fopen(log_path, append ? "a" : "w");
        if (!p->log) myr_die("--log %s: cannot create (%s)", log_path, strerror(errno));
    }
}

/* "1.23/4.56 GiB", or MiB below a GiB */
static void format_mem(char *buf, size_t n, double now, double peak) {
    if (peak >= GIB) snprintf(buf, n, "%.2f/%.2f GiB", now / GIB, peak / GIB);
    else snprintf(buf, n, "%.1f/%.1f MiB", now / 1048576.0, peak / 1048576.0);
}

static void format_eta(char *buf, size_t n, double s) {
    if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
}

/* A JSON number, or null when it is not finite (JSON has no NaN or infinity). */
static void json_num(FILE *f, const char *key, const char *fmt, double v) {
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v)) fprintf(f, fmt, v);
    else fputs("null", f);
}

void progress_step(Progress *p, const StepReport *r) {
    long done = r->step + 1; /* steps are counted from 1 everywhere: console, log, checkpoints */
    p->elapsed_s += r->ms / 1000;
    p->timed++;
    if (p->log) {
        fprintf(p->log, "{\"step\": %ld", done);
        if (p->config && !p->config_logged) fprintf(p->log, ", \"config\": %s", p->config), p->config_logged = 1;
        json_num(p->log, "loss", "%.9g", r->loss);
        json_num(p->log, "lr", "%.9g", r->lr);
        json_num(p->log, "grad_norm", "%.9g", r->grad_norm);
        json_num(p->log, "tokens_per_s", "%.1f", r->tokens_per_s);
        json_num(p->log, "mfu", "%.6g", r->mfu); /* as the heartbeat sends it: one figure */
        if (r->peak_flops > 0 && r->peak_flops != p->logged_peak) {
            fprintf(p->log, ", \"mfu_peak\": {\"flops\": %.6g, \"source\": \"%s\"}", r->peak_flops,
                    r->peak_source ? r->peak_source : "");
            p->logged_peak = r->peak_flops;
        }
        json_num(p->log, "ms", "%.3f", r->ms);
        json_num(p->log, "mem_gib", "%.4f", r->mem_bytes / GIB);
        json_num(p->log, "mem_peak_gib", "%.4f", r->mem_peak_bytes / GIB);
        if (r->rss_bytes >= 0) json_num(p->log, "rss_gib", "%.4f", r->rss_bytes / GIB);
        if (r->rss_peak_bytes >= 0) json_num(p->log, "rss_peak_gib", "%.4f", r->rss_peak_bytes / GIB);
        if (r->skipped) fprintf(p->log, ", \"skipped\": true");
        if (r->stopped) fprintf(p->log, ", \"stopped\": true");
        if (r->have_val) json_num(p->log, "val_loss", "%.9g", r->val_loss);
        if (r->comm_ms >= 0) json_num(p->log, "comm_exposed_ms", "%.3f", r->comm_ms);
        if (r->have_moe) {
            fprintf(p->log, ", \"moe_tokens_per_expert\": {\"min\": %.0f, \"max\": %.0f, \"mean\": %.3f}", r->moe_tokens_min,
                    r->moe_tokens_max, r->moe_tokens_mean);
            json_num(p->log, "moe_dropped", "%.0f", r->moe_dropped);
            json_num(p->log, "moe_aux", "%.9g", r->moe_aux);
            json_num(p->log, "a2a_bytes", "%.0f", r->a2a_bytes);
            json_num(p->log, "a2a_ms", "%.3f", r->a2a_ms);
            json_num(p->log, "a2a_wait_ms", "%.3f", r->a2a_wait_ms);
        }
        if (r->ckpt_ms > 0) json_num(p->log, "ckpt_ms", "%.3f", r->ckpt_ms);
        fprintf(p->log, "}\n");
        fflush(p->log);
    }
    if (p->quiet) return;
    char eta[32]; /* from this run's own steps (a resumed run has done fewer than `done`) */
    format_eta(eta, sizeof eta, p->elapsed_s / p->timed * (r->steps - done));
    char val[48] = "", mem[64];
    if (r->have_val) snprintf(val, sizeof val, " | val %.4f", r->val_loss);
    /* what was measured, and which: the resident set on the CPU, the device allocator on a GPU */
    if (r->host_memory && r->rss_peak_bytes > 0) {
        memcpy(mem, "RSS ", 5);
        format_mem(mem + 4, sizeof mem - 4, r->rss_bytes, r->rss_peak_bytes);
    } else {
        memcpy(mem, "dev ", 5);
        format_mem(mem + 4, sizeof mem - 4, r->mem_bytes, r->mem_peak_bytes);
    }
    const char *skip = r->stopped ? " | non-finite: the run stops here" : r->skipped ? " | skipped (non-finite)" : "";
    if (p->tty) {
        fprintf(stderr, "\rstep %ld/%ld | loss %.4f%s | %.0f tok/s | MFU %.1f%% | mem %s | ETA %s%s   ", done, r->steps,
                r->loss, val, r->tokens_per_s, 100 * r->mfu, mem, eta, skip);
        if (done == r->steps) fputc('\n', stderr);
    } else if (done % p->print_every == 0 || done == r->steps || p->timed == 1 || r->have_val || r->skipped || r->stopped) {
        fprintf(stderr, "step %ld/%ld | loss %.4f%s | lr %.3g | norm %.3f | %.0f tok/s | MFU %.1f%% | mem %s | %.0f ms | "
                "ETA %s%s\n",
                done, r->steps, r->loss, val, r->lr, r->grad_norm, r->tokens_per_s, 100 * r->mfu, mem, r->ms, eta, skip);
    }
}

/* The live line (a terminal) ends before anything else is printed on stderr. */
void progress_break_line(Progress *p) {
    if (p->tty && !p->quiet && p->timed) fputc('\n', stderr);
}

void progress_close(Progress *p) {
    if (p->log) fclose(p->log);
    p->log = NULL;
}
