/* quote.c: sanitised copies of untrusted strings for error messages (see quote.h). */
#include "io/quote.h"

#include <string.h>

enum { QUOTE_SLOTS = 4, QUOTE_MAX = 80 };

const char *io_quote(const char *s) {
    static _Thread_local char slots[QUOTE_SLOTS][QUOTE_MAX + 4];
    static _Thread_local int next;
    char *out = slots[next++ % QUOTE_SLOTS];
    if (!s) s = "(null)";
    size_t n = 0;
    for (; s[n] && n < QUOTE_MAX; n++) out[n] = (s[n] >= 0x20 && s[n] < 0x7f) ? s[n] : '?';
    if (s[n]) memcpy(out + n, "...", 3), n += 3;
    out[n] = 0;
    return out;
}
