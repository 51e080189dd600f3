/* crc32c.h: CRC-32C (Castagnoli), the checksum of checkpoint blocks.
 * Polynomial 0x1EDC6F41, bit-reflected (0x82F63B78), initial value 0xFFFFFFFF, final XOR
 * 0xFFFFFFFF: the CRC of iSCSI (RFC 3720), ext4 and SSE4.2's crc32 instruction.
 * crc32c("123456789") = 0xE3069283. Software slicing-by-8 everywhere; the SSE4.2 instruction
 * instead when the compiler targets it (-march=native on x86-64). */
#ifndef MYRIAD_CKPT_CRC32C_H
#define MYRIAD_CKPT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC of `n` bytes. */
uint32_t crc32c(const void *data, size_t n);
/* Continue a CRC: crc32c_update(crc32c(a), b) == crc32c(a followed by b); start from 0. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t n);
/* The CRC of A followed by B from the CRCs of both and B's length (for pieces checksummed
 * apart, e.g. by several threads). */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
/* Copy n bytes from src to dst (no overlap) and return crc32c_update(crc, src, n). Large
 * copies bypass the cache (non-temporal stores): for snapshots of state that is not read soon. */
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t n);
/* The portable table-driven version (what crc32c uses without SSE4.2). */
uint32_t crc32c_update_sw(uint32_t crc, const void *data, size_t n);

#endif
