/* utf8.h: the UTF-8 facts the tokenizer needs: decoding, replacing invalid bytes exactly as
 * browsers, Node and Rust's from_utf8_lossy do (one U+FFFD per maximal invalid subpart, the
 * WHATWG rule), Unicode White_Space, and GPT-2's byte <-> character table. */
#ifndef MYRIAD_TOKENIZER_UTF8_H
#define MYRIAD_TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/buf.h"

/* Append s[0, n) to out with every invalid sequence replaced by U+FFFD. Returns -1 on OOM. */
int utf8_sanitize(const uint8_t *s, size_t n, ByteBuf *out);
/* Is s[0, n) valid UTF-8? */
int utf8_is_valid(const uint8_t *s, size_t n);
/* Decode the character at s[0] of valid UTF-8 (n >= 1 bytes left); returns its length. */
int utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Length of the character starting with lead byte b (1 for a stray continuation byte). */
static inline int utf8_len(uint8_t b) { return b < 0x80 ? 1 : b < 0xE0 ? (b < 0xC0 ? 1 : 2) : b < 0xF0 ? 3 : 4; }
/* Decode the character ending at s[n-1] of valid UTF-8; returns its length. */
int utf8_decode_last(const uint8_t *s, size_t n, uint32_t *cp);
int utf8_encode(uint32_t cp, uint8_t out[4]);
/* Unicode White_Space (as Rust's char::is_whitespace and regex \s). */
int utf8_is_white_space(uint32_t cp);

/* GPT-2's byte-level alphabet: byte b is written as the character byte_char[b] (U+0021..U+0143),
 * so that every byte string is a printable string. byte_of_char inverts it (-1: not in it). */
uint32_t byte_level_char(uint8_t b);
int byte_level_byte(uint32_t cp);

#endif
