/* progress.c: progress line, ETA and the JSON-lines step log. */
#include "train/progress.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "util/error.h"

void progress_open(Progress *p, const char *log_path, long steps, int print_every, int append) {
    memset(p, 0, sizeof *p);
    p->tty = isatty(STDERR_FILENO);
    p->print_every = print_every > 0 ? print_every : (steps <= 100 ? 1 : steps / 50);
    if (log_path) {
        p->log = fopen(log_path, append ? "a" : "w");
        if (!p->log) myr_die("--log %s: cannot create (%s)", log_path, strerror(errno));
    }
}

static void format_eta(char *buf, size_t n, double s) {
    if (s >= 3600) snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
    else snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)s % 60);
}

void progress_step(Progress *p, const StepReport *r) {
    p->elapsed_s += r->ms / 1000;
    if (p->log) {
        fprintf(p->log,
                "{\"step\": %ld, \"loss\": %.9g, \"lr\": %.9g, \"grad_norm\": %.9g, \"tokens_per_s\": %.1f, "
                "\"mfu\": %.5f, \"ms\": %.3f",
                r->step, r->loss, r->lr, r->grad_norm, r->tokens_per_s, r->mfu, r->ms);
        if (r->have_val) fprintf(p->log, ", \"val_loss\": %.9g", r->val_loss);
        if (r->comm_ms >= 0) fprintf(p->log, ", \"comm_exposed_ms\": %.3f", r->comm_ms);
        if (r->have_moe)
            fprintf(p->log,
                    ", \"moe_tokens_per_expert\": {\"min\": %.0f, \"max\": %.0f, \"mean\": %.3f}, \"moe_dropped\": %.0f, "
                    "\"moe_aux\": %.9g, \"a2a_bytes\": %.0f, \"a2a_ms\": %.3f, \"a2a_wait_ms\": %.3f",
                    r->moe_tokens_min, r->moe_tokens_max, r->moe_tokens_mean, r->moe_dropped, r->moe_aux, r->a2a_bytes,
                    r->a2a_ms, r->a2a_wait_ms);
        if (r->ckpt_ms > 0) fprintf(p->log, ", \"ckpt_ms\": %.3f", r->ckpt_ms);
        fprintf(p->log, "}\n");
        fflush(p->log);
    }
    if (p->quiet) return;
    long done = r->step + 1;
    char eta[32];
    format_eta(eta, sizeof eta, p->elapsed_s / done * (r->steps - done));
    char val[48] = "";
    if (r->have_val) snprintf(val, sizeof val, " | val %.4f", r->val_loss);
    if (p->tty) {
        fprintf(stderr, "\rstep %ld/%ld | loss %.4f%s | %.0f tok/s | MFU %.1f%% | ETA %s   ", done, r->steps, r->loss,
                val, r->tokens_per_s, 100 * r->mfu, eta);
        if (done == r->steps) fputc('\n', stderr);
    } else if (done % p->print_every == 0 || done == r->steps || done == 1 || r->have_val) {
        fprintf(stderr, "step %ld/%ld | loss %.4f%s | lr %.3g | norm %.3f | %.0f tok/s | MFU %.1f%% | %.0f ms | ETA %s\n",
                done, r->steps, r->loss, val, r->lr, r->grad_norm, r->tokens_per_s, 100 * r->mfu, r->ms, eta);
    }
}

void progress_close(Progress *p) {
    if (p->log) fclose(p->log);
    p->log = NULL;
}
