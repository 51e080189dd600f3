/* crc32c.c: CRC-32C by slicing-by-8 (eight 256-entry tables; 8 input bytes per step), or by
 * the SSE4.2 crc32 instruction in three parallel lanes when the build targets it (same
 * function, tested against both); and a copy that checksums what it copies.
 * Table k maps a byte to the CRC of that byte followed by k zero bytes, so eight lookups
 * XORed together advance the CRC by 8 bytes at once. Tables are built on first use. */
#include "ckpt/crc32c.h"

#include <pthread.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

/* a * b modulo the polynomial, reflected (bit 31 holds x^0): b is multiplied by x once per
 * coefficient of a, and the product collects b * x^i for each x^i present in a */
static uint32_t mul_mod(uint32_t a, uint32_t b) {
    uint32_t prod = 0;
    for (int i = 0; i < 32; i++, a <<= 1) {
        if (a & 0x80000000u) prod ^= b;
        b = (b >> 1) ^ (CRC32C_POLY_REFLECTED & (0u - (b & 1u)));
    }
    return prod;
}

/* x^(8 * 2^k) mod P for k = 0..63: appending 2^k zero bytes multiplies a CRC state by it */
static uint32_t zero_bytes_pow[64];
static pthread_once_t pow_once = PTHREAD_ONCE_INIT;

static void build_pow(void) {
    uint32_t x8 = 0x80000000u >> 8; /* x^8 */
    for (int k = 0; k < 64; k++) zero_bytes_pow[k] = x8, x8 = mul_mod(x8, x8);
}

/* A raw CRC state after n zero bytes follow it: the state times x^(8n), by squaring. */
static uint32_t zeros_after(uint32_t c, uint64_t n) {
    pthread_once(&pow_once, build_pow);
    for (int k = 0; n; k++, n >>= 1)
        if (n & 1) c = mul_mod(c, zero_bytes_pow[k]);
    return c;
}

#if defined(__SSE4_2__) && defined(__x86_64__)
#include <nmmintrin.h>

/* Raw CRC state (no pre/post inversion) after LANE zero bytes follow it, as 4 byte-indexed
 * tables: appending zeros is linear over GF(2), so the image of a 32-bit state is the XOR of the
 * images of its bytes. Lets independent lanes be computed side by side and joined:
 * state(A B) = zeros_after(state(A), |B|) ^ state_from_0(B); the tables make that one step cheap. */
enum { LANE = 4096 };
static uint32_t lane_shift[4][256];
static pthread_once_t shift_once = PTHREAD_ONCE_INIT;

static void build_shift(void) {
    uint32_t basis[32];
    for (int i = 0; i < 32; i++) basis[i] = zeros_after(1u << i, LANE);
    for (int k = 0; k < 4; k++)
        for (int b = 0; b < 256; b++) {
            uint32_t v = 0;
            for (int i = 0; i < 8; i++)
                if (b >> i & 1) v ^= basis[8 * k + i];
            lane_shift[k][b] = v;
        }
}

static uint32_t after_lane(uint32_t c) {
    return lane_shift[0][c & 0xFF] ^ lane_shift[1][(c >> 8) & 0xFF] ^ lane_shift[2][(c >> 16) & 0xFF] ^
           lane_shift[3][c >> 24];
}

/* The SSE4.2 crc32 instruction computes the same CRC-32C, 8 bytes per instruction. One chain
 * is bound by the instruction's latency (3 cycles); three lanes of LANE bytes run in parallel
 * and are joined by after_lane, about 3x the throughput on long buffers. */
static uint32_t crc32c_update_hw(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    uint64_t c = ~crc;
    if (n >= 3 * LANE) pthread_once(&shift_once, build_shift);
    while (n >= 3 * LANE) {
        uint64_t a = c, b = 0, d = 0, x, y, z;
        for (size_t i = 0; i < LANE; i += 8) {
            memcpy(&x, p + i, 8);
            memcpy(&y, p + LANE + i, 8);
            memcpy(&z, p + 2 * LANE + i, 8);
            a = _mm_crc32_u64(a, x);
            b = _mm_crc32_u64(b, y);
            d = _mm_crc32_u64(d, z);
        }
        c = after_lane(after_lane((uint32_t)a) ^ (uint32_t)b) ^ (uint32_t)d;
        p += 3 * LANE;
        n -= 3 * LANE;
    }
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

/* With standard CRCs the initial and final inversions cancel: crc(A B) = crc(A) * x^(8|B|) ^ crc(B). */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) { return zeros_after(crc_a, len_b) ^ crc_b; }

/* Copy in blocks of a few lanes: the CRC reads a block from the source (into cache), the copy
 * then reads it again from cache and writes with non-temporal stores where the CPU has them, so
 * a copy of gigabytes neither evicts the caller's working set nor reads the destination first. */
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n) {
    enum { BLOCK = 24576 }; /* six lanes of the three-lane CRC */
    uint8_t *d = dst;
    const uint8_t *s = src;
#if defined(__AVX__) && defined(__x86_64__)
    size_t head = (32 - ((uintptr_t)d & 31)) & 31;
    if (n < BLOCK || head > n) head = n; /* short copies: plain memcpy */
    crc = crc32c_update(crc, s, head);
    memcpy(d, s, head);
    d += head, s += head, n -= head;
    while (n >= 32) {
        size_t take = n < BLOCK ? n & ~(size_t)31 : BLOCK;
        crc = crc32c_update(crc, s, take);
        for (size_t i = 0; i < take; i += 32)
            _mm256_stream_si256((__m256i *)(d + i), _mm256_loadu_si256((const __m256i *)(s + i)));
        d += take, s += take, n -= take;
    }
    _mm_sfence(); /* streamed stores are ordered before whatever the caller publishes next */
#endif
    crc = crc32c_update(crc, s, n);
    memcpy(d, s, n);
    return crc;
}
