/* input_kind.c: text or binary input (see input_kind.h). */
#include "data/input_kind.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "util/error.h"

enum { PEEK = 64 * 1024 };

static int starts(const unsigned char *b, size_t n, const char *magic, size_t len) {
    return n >= len && !memcmp(b, magic, len);
}

static uint32_t le32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* What the first bytes say, or NULL when they name no binary format. */
static const char *magic_kind(const unsigned char *b, size_t n, uint64_t file_size, int gzip_reader) {
    if (n >= 9 && b[8] == '{') { /* safetensors: u64 header length, then the JSON header */
        uint64_t len = 0;
        for (int i = 7; i >= 0; i--) len = len << 8 | b[i];
        if (len >= 2 && len + 8 <= file_size) return "a safetensors file";
    }
    if (n >= 8) {
        uint32_t m = le32(b), v = le32(b + 4);
        if ((m == 20240520 && v == 1) || (m == 20240801 && v == 7)) return "an llm.c token shard";
    }
    if (starts(b, n, "PAR1", 4)) return "a Parquet file";
    if (starts(b, n, "PK\x03\x04", 4) || starts(b, n, "PK\x05\x06", 4) || starts(b, n, "PK\x07\x08", 4))
        return "a zip archive (or a file in a zip container: .pt, .npz, .docx, ...)";
    if (!gzip_reader && starts(b, n, "\x1f\x8b", 2))
        return "gzip-compressed (read directly only with --tokenizer; else decompress it first)";
    if (n >= 10 && starts(b, n, "BZh", 3) && b[3] >= '1' && b[3] <= '9' && !memcmp(b + 4, "1AY&SY", 6))
        return "bzip2-compressed";
    if (starts(b, n, "\xfd" "7zXZ\0", 6)) return "xz-compressed";
    if (starts(b, n, "\x28\xb5\x2f\xfd", 4)) return "zstd-compressed";
    if (starts(b, n, "7z\xbc\xaf\x27\x1c", 6)) return "a 7-Zip archive";
    if (n >= 262 && !memcmp(b + 257, "ustar", 5)) return "a tar archive";
    if (starts(b, n, "\x7f" "ELF", 4)) return "an ELF executable or library";
    if (starts(b, n, "\x89PNG\r\n\x1a\n", 8)) return "a PNG image";
    if (starts(b, n, "\xff\xd8\xff", 3)) return "a JPEG image";
    if (starts(b, n, "GIF87a", 6) || starts(b, n, "GIF89a", 6)) return "a GIF image";
    if (starts(b, n, "%PDF-", 5)) return "a PDF document";
    if (starts(b, n, "\x93NUMPY", 6)) return "a NumPy array (.npy)";
    if (starts(b, n, "\x89HDF\r\n\x1a\n", 8)) return "an HDF5 file";
    if (starts(b, n, "ARROW1", 6)) return "an Arrow file";
    if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5) return "a Python pickle (a PyTorch .bin?)";
    return NULL;
}

int input_is_binary(const char *path, int gzip_reader, char *why, size_t n) {
    static unsigned char buf[PEEK];
    struct stat st;
    if (stat(path, &st)) return myr_error("cannot open input %s: %s", path, strerror(errno));
    FILE *f = fopen(path, "rb");
    if (!f) return myr_error("cannot open input %s: %s", path, strerror(errno));
    size_t got = fread(buf, 1, sizeof buf, f);
    int bad = ferror(f);
    fclose(f);
    if (bad) return myr_error("reading %s failed", path);
    const char *kind = magic_kind(buf, got, (uint64_t)st.st_size, gzip_reader);
    if (kind) {
        snprintf(why, n, "%s", kind);
        return 1;
    }
    if (gzip_reader && got >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) { /* what the gzip reader will read */
        gzFile gz = gzopen(path, "rb");
        int dn = gz ? gzread(gz, buf, sizeof buf) : -1;
        if (gz) gzclose(gz);
        if (dn < 0) return 0; /* a damaged gzip stream: the reader says what is wrong with it */
        got = (size_t)dn;
        kind = magic_kind(buf, got, UINT64_MAX, 1);
        if (kind) {
            snprintf(why, n, "%s, gzip-compressed", kind);
            return 1;
        }
    }
    const unsigned char *nul = memchr(buf, 0, got);
    if (nul) {
        snprintf(why, n, "a NUL byte at offset %zu (binary data, or UTF-16/32 text: convert it to UTF-8)",
                 (size_t)(nul - buf));
        return 1;
    }
    return 0;
}
