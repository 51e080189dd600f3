/* metrics.h: the Prometheus endpoint of `myriad run --metrics-port P` (metrics.c): GET /metrics
 * renders the supervisor's state in the text exposition format. The server has no thread of its
 * own: the supervisor watches metrics_fd() in its epoll set and calls metrics_run(). */
#ifndef MYRIAD_LAUNCH_METRICS_H
#define MYRIAD_LAUNCH_METRICS_H

#include <stddef.h>

struct Sup;
typedef struct MetricsServer MetricsServer;

/* Listen on addr (NULL: every interface) and port (0: any free one); NULL with myr_error(). */
MetricsServer *metrics_start(struct Sup *s, const char *addr, int port);
int metrics_port(const MetricsServer *m);     /* the bound port */
int metrics_fd(const MetricsServer *m);       /* readable when metrics_run has work */
double metrics_timeout(const MetricsServer *m); /* seconds until metrics_run is due anyway (INFINITY: none) */
void metrics_run(MetricsServer *m);
long long metrics_served(const MetricsServer *m); /* /metrics answers so far */
void metrics_stop(MetricsServer *m);
/* The exposition text of the supervisor's state (malloc'ed, *len bytes). */
char *metrics_render(struct Sup *s, size_t *len);

#endif
