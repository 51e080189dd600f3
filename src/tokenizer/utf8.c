/* utf8.c: see utf8.h. */
#include "tokenizer/utf8.h"

/* The WHATWG decoder: a lead byte fixes the length and the allowed range of the second byte
 * (no overlongs, no surrogates, nothing past U+10FFFF); the first byte that breaks the pattern
 * ends the invalid subpart (one U+FFFD) and is looked at again as a possible lead byte. */
static int valid_prefix(const uint8_t *s, size_t n, int *need) {
    uint8_t c = s[0];
    uint8_t lo = 0x80, hi = 0xBF;
    int len;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        else if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        else if (c == 0xF4) hi = 0x8F;
    } else {
        *need = 0;
        return 1; /* not a lead byte: a subpart of one byte */
    }
    *need = len;
    size_t k = 1;
    if (k < n && s[k] >= lo && s[k] <= hi) k++;
    else return 1;
    while ((int)k < len && k < n && (s[k] & 0xC0) == 0x80) k++;
    return (int)k; /* == len when complete */
}

int utf8_sanitize(const uint8_t *s, size_t n, ByteBuf *out) {
    if (bytebuf_reserve(out, n + 16)) return -1;
    size_t i = 0;
    while (i < n) {
        /* copy the longest valid run in one go (the common case: all of it) */
        size_t j = i;
        while (j < n) {
            if (s[j] < 0x80) {
                j++;
                continue;
            }
            int need, k = valid_prefix(s + j, n - j, &need);
            if (k != need) break;
            j += k;
        }
        if (bytebuf_append(out, s + i, j - i)) return -1;
        i = j;
        if (i >= n) break;
        int need, k = valid_prefix(s + i, n - i, &need);
        (void)need;
        if (bytebuf_append(out, "\xEF\xBF\xBD", 3)) return -1;
        i += k;
    }
    return 0;
}

int utf8_is_valid(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int need, k = valid_prefix(s + i, n - i, &need);
        if (k != need) return 0;
        i += k;
    }
    return 1;
}

int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t c = s[0];
    if (c < 0x80 || n < 2) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = (uint32_t)(c & 0x1F) << 6 | (s[1] & 0x3F);
        return 2;
    }
    if (c < 0xF0 || n < 4) {
        if (n < 3) { *cp = c; return 1; }
        *cp = (uint32_t)(c & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        return 3;
    }
    *cp = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    return 4;
}

int utf8_decode_last(const uint8_t *s, size_t n, uint32_t *cp) {
    size_t k = n - 1;
    while (k > 0 && n - k < 4 && (s[k] & 0xC0) == 0x80) k--;
    utf8_decode(s + k, n - k, cp);
    return (int)(n - k);
}

int utf8_encode(uint32_t cp, uint8_t o[4]) {
    if (cp < 0x80) { o[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { o[0] = (uint8_t)(0xC0 | cp >> 6); o[1] = (uint8_t)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | cp >> 12);
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | cp >> 18);
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int utf8_is_white_space(uint32_t c) {
    /* PropList.txt, White_Space: 25 code points */
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return 0;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Bytes that are printable Latin-1 stand for themselves; the other 68 take the code points
 * from U+0100 upward, in byte order (GPT-2's bytes_to_unicode). */
static int printable(int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); }

uint32_t byte_level_char(uint8_t b) {
    if (printable(b)) return b;
    uint32_t n = 0;
    for (int k = 0; k < b; k++) n += !printable(k);
    return 0x100 + n;
}

int byte_level_byte(uint32_t cp) {
    if (cp < 0x100) return printable((int)cp) ? (int)cp : -1;
    if (cp >= 0x100 + 68) return -1;
    uint32_t n = cp - 0x100;
    for (int b = 0; b < 256; b++)
        if (!printable(b) && n-- == 0) return b;
    return -1;
}
