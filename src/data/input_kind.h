/* input_kind.h: is an input of `myriad data prepare` text, or a binary file that would become
 * tokens of noise (a model's weights, token shards, a parquet table, an archive)? Judged from
 * the first 64 KiB, as git and file(1) judge: a known magic number (safetensors, llm.c token
 * shards, parquet, zip, gzip where it is not read through the gzip reader, bzip2, xz, zstd, 7z,
 * tar, ELF, PNG, JPEG, GIF, PDF, numpy, HDF5, Arrow) or a NUL byte (no text encoding but UTF-16/32
 * has one; those are not read as text either). With `gzip_reader` (--tokenizer: gzip is read
 * directly) a gzip file is judged by its decompressed start. */
#ifndef MYRIAD_DATA_INPUT_KIND_H
#define MYRIAD_DATA_INPUT_KIND_H

#include <stddef.h>

/* 0: text; 1: binary, *why says what it is ("a safetensors file", "NUL bytes (binary data or
 * UTF-16 text)"); -1 + myr_error when the file cannot be read. */
int input_is_binary(const char *path, int gzip_reader, char *why, size_t n);

#endif
