/* rss.h: this process's resident set, measured by the kernel (/proc/self/status): what a CPU run
 * really holds, as opposed to what it planned or allocated. */
#ifndef MYRIAD_UTIL_RSS_H
#define MYRIAD_UTIL_RSS_H

/* VmRSS and VmHWM (the peak) in bytes; each -1 when unknown (no /proc). Returns 0, or -1 when
 * neither could be read. */
int rss_bytes(double *now, double *peak);

#endif
