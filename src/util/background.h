/* background.h: threads that do bookkeeping beside the training step (checkpoint copies and
 * writes) run at the lowest CPU priority, so they use what the step leaves idle instead of
 * slicing time off it. */
#ifndef MYRIAD_UTIL_BACKGROUND_H
#define MYRIAD_UTIL_BACKGROUND_H

/* Lower the calling thread (only it) to nice 19. Best effort: a failure changes nothing else. */
void background_thread_priority(void);

#endif
