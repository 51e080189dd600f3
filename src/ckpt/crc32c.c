/* crc32c.c: CRC-32C by slicing-by-8 (eight 256-entry tables; 8 input bytes per step), or by
 * the SSE4.2 crc32 instruction when the build targets it (same function, tested against both).
 * Table k maps a byte to the CRC of that byte followed by k zero bytes, so eight lookups
 * XORed together advance the CRC by 8 bytes at once. Tables are built on first use. */
#include "ckpt/crc32c.h"

#include <pthread.h>
#include <string.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (CRC32C_POLY_REFLECTED & (0u - (c & 1u)));
        table[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int t = 1; t < 8; t++) table[t][b] = (table[t - 1][b] >> 8) ^ table[0][table[t - 1][b] & 0xFF];
}

uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t n) {
    pthread_once(&table_once, build_tables);
    const uint8_t *p = data;
    uint32_t c = ~crc;
    while (n >= 8) {
        uint32_t lo, hi; /* little-endian host (as the checkpoint format itself) */
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^ table[4][lo >> 24] ^
            table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^ table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ table[0][(c ^ *p++) & 0xFF];
    return ~c;
}

#if defined(__SSE4_2__) && defined(__x86_64__)
#include <nmmintrin.h>
/* The SSE4.2 crc32 instruction computes the same CRC-32C, 8 bytes per instruction. */
static uint32_t crc32c_update_hw(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
uint32_t crc32c_update(uint32_t crc, const void *data, size_t n) { return crc32c_update_hw(crc, data, n); }
#else
uint32_t crc32c_update(uint32_t crc, const void *data, size_t n) { return crc32c_update_sw(crc, data, n); }
#endif

uint32_t crc32c(const void *data, size_t n) { return crc32c_update(0, data, n); }
