/* tokenizer.h: a model's own tokenizer, read from a Hugging Face tokenizer.json.
 * Supported: BPE models (merges as "a b" strings or pairs; byte_fallback, fuse_unk,
 * ignore_merges, unk_token), added tokens (special or not; lstrip, rstrip, single_word,
 * normalized), normalizers Prepend / Replace / Sequence, pre-tokenizers ByteLevel / Split /
 * Metaspace / Digits / Sequence, decoders ByteLevel / Metaspace / Replace / ByteFallback /
 * Fuse / Strip / Sequence, and the TemplateProcessing post-processor (for document
 * separators). That covers GPT-2, Llama 2 and Llama 3. Anything else is refused at load with
 * "not supported: ...". Ids equal Hugging Face's `tokenizers` (tests/test_tokenizer.sh).
 *
 * A Tokenizer is read-only once loaded and shared by threads; each thread encodes through its
 * own TokEncoder (scratch buffers, regex state and a word cache). docs/FORMATS.md has the
 * supported subset field by field. */
#ifndef MYRIAD_TOKENIZER_TOKENIZER_H
#define MYRIAD_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer/buf.h"

typedef struct Tokenizer Tokenizer;
typedef struct TokEncoder TokEncoder;

/* Load and check a tokenizer.json. -1 + myr_error ("FILE:LINE:COL: ..." for malformed JSON,
 * "FILE: not supported: ..." for the rest). */
int tokenizer_load(const char *path, Tokenizer **out);
/* The same from text[0, len) in memory (`name` stands for the file in messages). */
int tokenizer_load_json(const char *text, size_t len, const char *name, Tokenizer **out);
void tokenizer_free(Tokenizer *t);

/* One past the largest id (model vocabulary and added tokens): the embedding rows a model needs. */
int32_t tokenizer_vocab_size(const Tokenizer *t);
/* A short description for log lines: "BPE, 50257 ids, byte-level, GPT-2 regex". */
const char *tokenizer_describe(const Tokenizer *t);
/* The id of a token by its text: added tokens first, then the model vocabulary; -1 if none. */
int32_t tokenizer_token_id(const Tokenizer *t, const char *text, size_t len);

/* What `data prepare` puts around each document, as the model family trains: the ids the
 * TemplateProcessing post-processor adds around a single sequence (Llama 2: BOS), else
 * <|endoftext|> before every document (GPT-2, as llm.c), else <|begin_of_text|> or <s> before
 * it (Llama 3). -1 + myr_error when none of these tells. */
int tokenizer_doc_affixes(const Tokenizer *t, IdBuf *prefix, IdBuf *suffix);

/* Can a long document be cut after a '\n' that precedes an ASCII letter or digit and each piece
 * encoded on its own, with the same ids? True when no added token, normalizer pattern or merge
 * spans such a point and every regex stage has no lookbehind past one character; the encoder
 * still verifies each cut (tok_encode_piece). If not, *why says what prevents it. */
int tokenizer_can_cut(const Tokenizer *t, const char **why);

TokEncoder *tok_encoder_new(const Tokenizer *t);
void tok_encoder_free(TokEncoder *e);

/* Append the ids of text[0, len) to out, as Hugging Face's encode(text, add_special_tokens=False):
 * invalid UTF-8 is first replaced by U+FFFD (as Node's and Python's decoders do). */
int tok_encode(TokEncoder *e, const uint8_t *text, size_t len, IdBuf *out);

/* Encode one piece of a document cut at '\n' points (data prepare's work unit). buf holds the
 * piece, bytes [0, len); `doc_start` says it begins the document (else the byte before it was
 * a '\n' ending the previous piece); `lookahead` bytes after it (buf[len, len + lookahead))
 * are the start of the next piece (0 if this piece ends the document). Appends exactly the ids
 * of this piece's share of the document; -1 + myr_error if the cut at `len` is not a boundary
 * of the full text's tokenization (the encoder checks, it never guesses). */
int tok_encode_piece(TokEncoder *e, const uint8_t *buf, size_t len, size_t lookahead, int doc_start, IdBuf *out);

/* Decode ids to text as Hugging Face's decode(ids, skip_special_tokens), appended to out.
 * An id outside the vocabulary is an error (-1 + myr_error) unless TOK_DECODE_LENIENT, which
 * drops it as Hugging Face does (sampled text from a model with a padded vocabulary). */
enum { TOK_DECODE_SKIP_SPECIAL = 1, TOK_DECODE_LENIENT = 2 };
int tok_decode(const Tokenizer *t, const int32_t *ids, size_t n, int flags, ByteBuf *out);

#endif
