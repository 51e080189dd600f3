/* quote.h: make untrusted strings (tensor names, JSON values) safe to put in a one-line error
 * message: control and non-ASCII bytes become '?', long strings are cut with "...". */
#ifndef MYRIAD_IO_QUOTE_H
#define MYRIAD_IO_QUOTE_H

/* Returns a thread-local copy; the last 4 results stay valid (enough for one message). */
const char *io_quote(const char *s);

#endif
