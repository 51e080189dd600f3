/* doc_reader.h: the documents of `data prepare --tokenizer`, read from a list of input files
 * in order: a text file is one document; with a JSON-lines field name, every non-blank line
 * of every file is one document (that field's string). Files may be gzip-compressed (either
 * kind; detected by content, through zlib). A document is handed out in slices, so a huge
 * one never has to be in memory at once (JSON lines are read a line at a time). */
#ifndef MYRIAD_DATA_DOC_READER_H
#define MYRIAD_DATA_DOC_READER_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/buf.h"

typedef struct DocReader DocReader;

/* paths[0..n) are read in order; jsonl_field NULL for text files. -1 + myr_error on failure. */
int doc_reader_open(DocReader **out, char *const *paths, int n, const char *jsonl_field);
void doc_reader_close(DocReader *r);

/* Start the next document: 1 if there is one, 0 at the end of the input, -1 on error. */
int doc_next(DocReader *r);
/* Append up to `max` bytes of the current document to out: 1 if more may follow, 0 once the
 * document is complete (possibly with bytes appended), -1 on error. */
int doc_read(DocReader *r, ByteBuf *out, size_t max);

/* Where the current document comes from, for messages: "FILE" or "FILE line N". */
const char *doc_where(const DocReader *r);
/* Input bytes consumed so far (compressed bytes for gzip files), for the progress line. */
uint64_t doc_input_bytes(const DocReader *r);

#endif
