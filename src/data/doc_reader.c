/* doc_reader.c: see doc_reader.h. zlib's gzread reads plain files as they are, so one path
 * serves compressed and uncompressed input; truncated or corrupt gzip data is an error, never
 * a silently short document. */
#include "data/doc_reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tokenizer/json.h"
#include "util/error.h"

enum { READ_CHUNK = 1 << 20, MAX_LINE = 256 << 20 };

struct DocReader {
    char *const *paths;
    int n_paths, cur;    /* cur: index of the open file (-1 before the first) */
    gzFile gz;
    int file_done;       /* the open file is at its end */
    const char *field;   /* JSON-lines field, or NULL */
    size_t field_len;
    /* JSON lines: raw bytes read ahead, and the current document's text */
    ByteBuf raw;
    size_t raw_pos;
    uint64_t line;
    ByteBuf text;
    size_t text_pos;
    int in_doc;          /* a document is open */
    uint64_t done_bytes; /* compressed bytes of files already finished */
    char where[4200];
};

int doc_reader_open(DocReader **out, char *const *paths, int n, const char *jsonl_field) {
    DocReader *r = calloc(1, sizeof *r);
    if (!r) return myr_error("out of memory");
    r->paths = paths;
    r->n_paths = n;
    r->cur = -1;
    r->field = jsonl_field;
    r->field_len = jsonl_field ? strlen(jsonl_field) : 0;
    *out = r;
    return 0;
}

static void close_file(DocReader *r) {
    if (r->gz) {
        r->done_bytes += (uint64_t)gzoffset(r->gz);
        gzclose(r->gz);
    }
    r->gz = NULL;
}

void doc_reader_close(DocReader *r) {
    if (!r) return;
    close_file(r);
    bytebuf_free(&r->raw);
    bytebuf_free(&r->text);
    free(r);
}

uint64_t doc_input_bytes(const DocReader *r) { return r->done_bytes + (r->gz ? (uint64_t)gzoffset(r->gz) : 0); }

const char *doc_where(const DocReader *r) { return r->where; }

static int open_next_file(DocReader *r) {
    close_file(r);
    if (++r->cur >= r->n_paths) return 0;
    const char *path = r->paths[r->cur];
    if (!(r->gz = gzopen(path, "rb"))) return myr_error("cannot open input %s: %s", path, strerror(errno));
    gzbuffer(r->gz, 256 * 1024);
    r->file_done = 0;
    r->raw.n = r->raw_pos = 0;
    r->line = 0;
    snprintf(r->where, sizeof r->where, "%s", path);
    return 1;
}

/* gzread up to max bytes into out; sets file_done at the end. */
static int read_file(DocReader *r, ByteBuf *out, size_t max) {
    if (bytebuf_reserve(out, max)) return myr_error("out of memory reading %s", r->paths[r->cur]);
    int got = gzread(r->gz, out->p + out->n, (unsigned)max);
    if (got < 0) {
        int err;
        const char *msg = gzerror(r->gz, &err);
        return myr_error("reading %s failed: %s", r->paths[r->cur], err == Z_ERRNO ? strerror(errno) : msg);
    }
    out->n += (size_t)got;
    if ((size_t)got < max) {
        /* zlib reports a truncated stream only as an error state after a short read */
        int err;
        const char *msg = gzerror(r->gz, &err);
        if (err != Z_OK && err != Z_STREAM_END)
            return myr_error("%s: corrupt or truncated gzip data (%s)", r->paths[r->cur], msg);
        r->file_done = 1;
    }
    return 0;
}

/* JSON lines: the next non-blank line into r->raw[line_start, line_end). 1, or 0 at end of file. */
static int next_line(DocReader *r, size_t *start, size_t *end) {
    for (;;) {
        uint8_t *nl = r->raw.n > r->raw_pos ? memchr(r->raw.p + r->raw_pos, '\n', r->raw.n - r->raw_pos) : NULL;
        if (!nl && !r->file_done) {
            /* keep the partial line, read more */
            memmove(r->raw.p, r->raw.p + r->raw_pos, r->raw.n - r->raw_pos);
            r->raw.n -= r->raw_pos;
            r->raw_pos = 0;
            if (r->raw.n > MAX_LINE)
                return myr_error("%s line %llu is longer than %d MiB; split such documents before preparing them",
                                 r->paths[r->cur], (unsigned long long)r->line + 1, MAX_LINE >> 20);
            if (read_file(r, &r->raw, READ_CHUNK)) return -1;
            continue;
        }
        size_t s = r->raw_pos, e = nl ? (size_t)(nl - r->raw.p) : r->raw.n;
        if (s == e && !nl) return 0;
        r->raw_pos = nl ? e + 1 : e;
        r->line++;
        size_t k = s;
        while (k < e && (r->raw.p[k] == ' ' || r->raw.p[k] == '\t' || r->raw.p[k] == '\r')) k++;
        if (k == e) continue; /* blank line */
        *start = s;
        *end = e;
        return 1;
    }
}

static int parse_line(DocReader *r, size_t s, size_t e) {
    snprintf(r->where, sizeof r->where, "%s line %llu", r->paths[r->cur], (unsigned long long)r->line);
    JsonDoc doc;
    if (json_parse_lenient((const char *)r->raw.p + s, e - s, r->where, &doc)) return -1;
    const JsonValue *v = json_get(doc.root, r->field);
    int rc = 0;
    if (doc.root->type != JSON_OBJECT) rc = myr_error("%s: expected a JSON object, found %s", r->where, json_type_name(doc.root->type));
    else if (!v) {
        char keys[256] = "";
        size_t k = 0;
        for (size_t i = 0; i < doc.root->u.obj.n && k + 40 < sizeof keys; i++)
            k += (size_t)snprintf(keys + k, sizeof keys - k, "%s\"%.30s\"", i ? ", " : "", doc.root->u.obj.members[i].key);
        rc = myr_error("%s: no field \"%s\" (the object has %s; choose the text field with --jsonl-field)", r->where,
                       r->field, k ? keys : "no fields");
    } else if (v->type != JSON_STRING)
        rc = myr_error("%s: field \"%s\" is %s, not a string", r->where, r->field, json_type_name(v->type));
    else {
        r->text.n = r->text_pos = 0;
        if (bytebuf_append(&r->text, v->u.str.s, v->u.str.len)) rc = myr_error("out of memory");
    }
    json_free(&doc);
    return rc;
}

int doc_next(DocReader *r) {
    if (!r->field) { /* text: the next file */
        int rc = open_next_file(r);
        if (rc > 0) r->in_doc = 1;
        return rc;
    }
    for (;;) {
        if (r->cur >= 0 && r->gz) {
            size_t s = 0, e = 0;
            int rc = next_line(r, &s, &e);
            if (rc < 0) return -1;
            if (rc > 0) {
                if (parse_line(r, s, e)) return -1;
                r->in_doc = 1;
                return 1;
            }
        }
        int rc = open_next_file(r);
        if (rc <= 0) return rc;
    }
}

int doc_read(DocReader *r, ByteBuf *out, size_t max) {
    if (!r->in_doc) return 0;
    if (r->field) {
        size_t n = r->text.n - r->text_pos < max ? r->text.n - r->text_pos : max;
        if (bytebuf_append(out, r->text.p + r->text_pos, n)) return myr_error("out of memory");
        r->text_pos += n;
        if (r->text_pos < r->text.n) return 1;
        r->in_doc = 0;
        return 0;
    }
    if (!r->file_done && read_file(r, out, max)) return -1;
    if (r->file_done) {
        r->in_doc = 0;
        return 0;
    }
    return 1;
}
