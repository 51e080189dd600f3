/* load.c: tokenizer_load: reads tokenizer.json, builds the BPE model and the added-token
 * vocabulary exactly as Hugging Face's deserializer does (merge ranks in file order, later
 * duplicates win; added tokens take the id of an existing token with the same text, else the
 * next free id), then hands the pipeline components to load_steps.c and decides whether long
 * documents may be cut for parallel encoding (tokenizer_can_cut). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tokenizer/load_util.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

enum { MAX_ID = (1 << 24) - 1 }; /* ids above 16M would need a larger id table than any model uses */

static int oom(void) { return myr_error("out of memory loading the tokenizer"); }

static int read_file(const char *path, char **text, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return myr_error("cannot read tokenizer %s: %s (give the tokenizer.json file a model ships)", path, strerror(errno));
    ByteBuf b = {0};
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && bytebuf_reserve(&b, (size_t)st.st_size + 1)) {
        fclose(f);
        return oom();
    }
    for (;;) {
        if (bytebuf_reserve(&b, 1 << 20)) {
            fclose(f);
            bytebuf_free(&b);
            return oom();
        }
        size_t got = fread(b.p + b.n, 1, b.cap - b.n, f);
        b.n += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        bytebuf_free(&b);
        return myr_error("reading tokenizer %s failed", path);
    }
    if (b.n == 0) {
        bytebuf_free(&b);
        return myr_error("%s: the file is empty (expected a tokenizer.json object)", path);
    }
    *text = (char *)b.p;
    *len = b.n;
    return 0;
}

/* ---------- model ---------- */

static int model_vocab(LoadCtx *c, const JsonValue *vocab) {
    BpeModel *m = &c->t->bpe;
    if (!vocab || vocab->type != JSON_OBJECT) return load_bad(c, vocab, "model.vocab", "expected an object {token: id}");
    int32_t max_id = -1;
    size_t key_bytes = 0;
    for (size_t i = 0; i < vocab->u.obj.n; i++) key_bytes += vocab->u.obj.members[i].key_len + 1;
    if (strmap_reserve(&m->vocab, vocab->u.obj.n, key_bytes)) return oom();
    for (size_t i = 0; i < vocab->u.obj.n; i++) {
        const JsonMember *e = &vocab->u.obj.members[i];
        double d = e->value.type == JSON_NUMBER ? e->value.u.number : -1;
        if (!(d >= 0 && d <= MAX_ID) || d != (double)(int32_t)d)
            return load_bad(c, &e->value, "model.vocab", "expected an integer id in [0, %d] for token \"%.40s\"", MAX_ID,
                            e->key);
        if (strmap_put(&m->vocab, e->key, e->key_len, (int32_t)d)) return oom();
        if ((int32_t)d > max_id) max_id = (int32_t)d;
    }
    m->n_ids = max_id + 1;
    if (!(m->id_entry = malloc((size_t)(m->n_ids ? m->n_ids : 1) * sizeof *m->id_entry))) return oom();
    for (int32_t i = 0; i < m->n_ids; i++) m->id_entry[i] = -1;
    for (size_t i = 0; i < m->vocab.n; i++) {
        int32_t id = m->vocab.entries[i].value;
        if (m->id_entry[id] >= 0) m->shared_ids = 1;
        m->id_entry[id] = (int32_t)i;
    }
    return 0;
}

static int32_t vocab_id(const BpeModel *m, const char *s, size_t n) { return strmap_get(&m->vocab, s, n); }

static int one_merge(LoadCtx *c, const JsonValue *at, const char *a, size_t an, const char *b, size_t bn, uint32_t rank,
                     ByteBuf *tmp) {
    BpeModel *m = &c->t->bpe;
    int32_t ia = vocab_id(m, a, an), ib = vocab_id(m, b, bn);
    if (ia < 0 || ib < 0)
        return load_bad(c, at, "model.merges", "merge %u: token \"%.*s\" is not in the vocabulary", rank,
                        (int)(ia < 0 ? an : bn), ia < 0 ? a : b);
    tmp->n = 0;
    if (bytebuf_append(tmp, a, an) || bytebuf_append(tmp, b, bn)) return oom();
    int32_t im = vocab_id(m, (const char *)tmp->p, tmp->n);
    if (im < 0)
        return load_bad(c, at, "model.merges", "merge %u: the merged token \"%.*s\" is not in the vocabulary", rank,
                        (int)tmp->n, (const char *)tmp->p);
    if (bpe_add_merge(m, ia, ib, rank, im)) return oom();
    return 0;
}

static int model_merges(LoadCtx *c, const JsonValue *merges) {
    if (!merges || merges->type != JSON_ARRAY)
        return load_bad(c, merges, "model.merges", "expected an array of \"a b\" strings or [a, b] pairs");
    ByteBuf tmp = {0};
    uint32_t rank = 0;
    int rc = bpe_reserve_merges(&c->t->bpe, merges->u.arr.n) ? oom() : 0;
    for (size_t i = 0; i < merges->u.arr.n && !rc; i++) {
        const JsonValue *e = &merges->u.arr.items[i];
        if (e->type == JSON_STRING) {
            const char *s = e->u.str.s;
            size_t n = e->u.str.len;
            if (n >= 8 && !memcmp(s, "#version", 8)) continue; /* merges.txt header, skipped by Hugging Face too */
            const char *sp = memchr(s, ' ', n);
            if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)))
                rc = load_bad(c, e, "model.merges", "merge %u: expected two tokens separated by one space, found \"%.*s\"",
                              rank, (int)(n > 60 ? 60 : n), s);
            else rc = one_merge(c, e, s, (size_t)(sp - s), sp + 1, n - (size_t)(sp + 1 - s), rank, &tmp);
        } else if (e->type == JSON_ARRAY && e->u.arr.n == 2 && e->u.arr.items[0].type == JSON_STRING &&
                   e->u.arr.items[1].type == JSON_STRING) {
            const JsonValue *a = &e->u.arr.items[0], *b = &e->u.arr.items[1];
            rc = one_merge(c, e, a->u.str.s, a->u.str.len, b->u.str.s, b->u.str.len, rank, &tmp);
        } else {
            rc = load_bad(c, e, "model.merges", "merge %u: expected \"a b\" or [\"a\", \"b\"], found %s", rank,
                          json_type_name(e->type));
        }
        rank++;
    }
    bytebuf_free(&tmp);
    return rc;
}

static int load_model(LoadCtx *c, const JsonValue *model) {
    BpeModel *m = &c->t->bpe;
    if (!model || model->type != JSON_OBJECT) return load_bad(c, model, "model", "expected an object");
    const JsonValue *type = json_get(model, "type");
    if (type && !json_str_eq(type, "BPE")) {
        if (type->type != JSON_STRING) return load_bad(c, type, "model.type", "expected a string");
        return load_unsupported(c, type, "model type \"%s\" (only BPE models: GPT-2, Llama 2, Llama 3 and their kin)",
                                type->u.str.s);
    }
    if (!type && !json_get(model, "merges"))
        return load_unsupported(c, model, "a model without \"type\" or \"merges\" (only BPE models)");
    const JsonValue *dropout = json_get(model, "dropout");
    if (dropout && dropout->type != JSON_NULL && !(dropout->type == JSON_NUMBER && dropout->u.number == 0))
        return load_unsupported(c, dropout, "BPE dropout (it makes encoding random; set \"dropout\": null)");
    const char *s;
    size_t n;
    if (load_str(c, model, "continuing_subword_prefix", "model", 0, &s, &n)) return -1;
    if (s && n) return load_unsupported(c, json_get(model, "continuing_subword_prefix"), "continuing_subword_prefix \"%s\"", s);
    if (load_str(c, model, "end_of_word_suffix", "model", 0, &s, &n)) return -1;
    if (s && n) return load_unsupported(c, json_get(model, "end_of_word_suffix"), "end_of_word_suffix \"%s\"", s);
    if (load_bool(c, model, "fuse_unk", "model", &m->fuse_unk) ||
        load_bool(c, model, "byte_fallback", "model", &m->byte_fallback) ||
        load_bool(c, model, "ignore_merges", "model", &m->ignore_merges))
        return -1;
    if (model_vocab(c, json_get(model, "vocab")) || model_merges(c, json_get(model, "merges"))) return -1;
    m->unk_id = -1;
    if (load_str(c, model, "unk_token", "model", 0, &s, &n)) return -1;
    if (s && (m->unk_id = vocab_id(m, s, n)) < 0)
        return load_bad(c, json_get(model, "unk_token"), "model.unk_token", "\"%s\" is not in the vocabulary", s);
    return 0;
}

/* ---------- added tokens ---------- */

static int load_added(LoadCtx *c, const JsonValue *list) {
    Tokenizer *t = c->t;
    if (!list || list->type == JSON_NULL) return 0;
    if (list->type != JSON_ARRAY) return load_bad(c, list, "added_tokens", "expected an array");
    if (!(t->added = calloc(list->u.arr.n ? list->u.arr.n : 1, sizeof *t->added))) return oom();
    /* ids as AddedVocabulary::add_tokens assigns them in one call: a token already in the
     * vocabulary keeps its id, a new one takes the next id after the model's entry count */
    int32_t next_id = (int32_t)t->bpe.vocab.n;
    for (size_t i = 0; i < list->u.arr.n; i++) {
        const JsonValue *e = &list->u.arr.items[i];
        if (e->type != JSON_OBJECT) return load_bad(c, e, "added_tokens", "expected an object, found %s", json_type_name(e->type));
        const char *content;
        size_t len;
        int single_word = 0, lstrip = 0, rstrip = 0, special = 0, normalized = -1;
        long long file_id = -1;
        if (load_str(c, e, "content", "added_tokens[]", 1, &content, &len) ||
            load_bool(c, e, "single_word", "added_tokens[]", &single_word) ||
            load_bool(c, e, "lstrip", "added_tokens[]", &lstrip) || load_bool(c, e, "rstrip", "added_tokens[]", &rstrip) ||
            load_bool(c, e, "special", "added_tokens[]", &special) ||
            load_bool(c, e, "normalized", "added_tokens[]", &normalized) ||
            load_int(c, e, "id", "added_tokens[]", 0, MAX_ID, &file_id))
            return -1;
        if (normalized < 0) normalized = !special;
        if (len == 0) continue; /* ignored by Hugging Face */
        int32_t id = -1;
        int dup = -1;
        for (int k = 0; k < t->n_added; k++)
            if (t->added[k].len == len && !memcmp(t->added[k].text, content, len)) dup = k;
        if (dup >= 0) id = t->added[dup].id;
        else id = vocab_id(&t->bpe, content, len);
        if (id < 0) {
            id = next_id++;
            if (id > MAX_ID) return load_bad(c, e, "added_tokens[]", "too many tokens (ids above %d)", MAX_ID);
        }
        AddedToken *a = dup >= 0 ? &t->added[dup] : &t->added[t->n_added++];
        free(a->text);
        if (a->match != a->text) free(a->match);
        memset(a, 0, sizeof *a);
        if (!(a->text = load_dup(content, len))) return oom();
        a->len = len;
        a->id = id;
        a->single_word = (uint8_t)single_word;
        a->lstrip = (uint8_t)lstrip;
        a->rstrip = (uint8_t)rstrip;
        a->special = (uint8_t)special;
        a->normalized = (uint8_t)normalized;
        (void)file_id; /* Hugging Face only warns when the file's id differs from the assigned one */
    }
    return 0;
}

/* Normalized tokens are searched for in their normalized form; build both tries. */
static int build_added_matchers(Tokenizer *t) {
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].single_word && !t->word_char) {
            static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]";
            if (tok_regex_compile(word, strlen(word), 0, "the word-character class", &t->word_char)) return -1;
        }
    ByteBuf out = {0}, tmp = {0};
    for (int i = 0; i < t->n_added; i++) {
        AddedToken *a = &t->added[i];
        a->match = a->text;
        a->match_len = a->len;
        if (a->normalized && t->n_norm) {
            out.n = 0;
            if (normalize_run(t, NULL, a->text, a->len, 1, &out, &tmp)) {
                bytebuf_free(&out);
                bytebuf_free(&tmp);
                return -1;
            }
            if (out.n != a->len || memcmp(out.p, a->text, a->len)) {
                if (!(a->match = load_dup(out.p, out.n))) return oom();
                a->match_len = out.n;
            }
        }
        if (a->match_len && added_matcher_add(a->normalized ? &t->norm_match : &t->raw_match, a->match, a->match_len, i))
            return oom();
    }
    bytebuf_free(&out);
    bytebuf_free(&tmp);
    return 0;
}

/* ---------- derived tables ---------- */

static void build_symbol_tables(Tokenizer *t) {
    BpeModel *m = &t->bpe;
    m->byte_level = t->n_pt > 0 && t->pt[t->n_pt - 1].kind == PT_BYTELEVEL;
    for (int b = 0; b < 256; b++) {
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        m->fallback_id[b] = vocab_id(m, hex, 6);
        uint8_t u[4];
        int n = utf8_encode(byte_level_char((uint8_t)b), u);
        m->byte_id[b] = vocab_id(m, (const char *)u, (size_t)n);
        if (b < 128) {
            char ch = (char)b;
            m->ascii_id[b] = vocab_id(m, &ch, 1);
        }
    }
}

static void set_cut(Tokenizer *t, const char *why) {
    if (!t->can_cut) return;
    t->can_cut = 0;
    snprintf(t->cut_why, sizeof t->cut_why, "%s", why);
}

/* Documents are cut only after a '\n' followed by [A-Za-z0-9]. Such a cut is invisible to the
 * tokenization when nothing can reach across it: see tokenizer.h. */
static void decide_cuts(Tokenizer *t) {
    t->can_cut = 1;
    for (int i = 0; i < t->n_added; i++) {
        const AddedToken *a = &t->added[i];
        if (memchr(a->text, '\n', a->len) || memchr(a->match, '\n', a->match_len))
            set_cut(t, "an added token contains a line break");
        if (a->rstrip) set_cut(t, "an added token has rstrip (it can end exactly at a cut)");
        uint8_t f = a->match_len ? a->match[0] : 0;
        if (a->lstrip && ((f >= 'a' && f <= 'z') || (f >= 'A' && f <= 'Z') || (f >= '0' && f <= '9')))
            set_cut(t, "an lstrip added token starts with a letter or digit");
    }
    for (int i = 0; i < t->n_norm; i++) {
        if (t->norm[i].re) set_cut(t, "a Replace normalizer uses a regex");
        if (t->norm[i].pat && memchr(t->norm[i].pat, '\n', t->norm[i].pat_len))
            set_cut(t, "a Replace normalizer pattern contains a line break");
    }
    int word_crosses = 1; /* does the BPE word run across the cut (no regex stage first)? */
    if (t->n_pt > 0) {
        const PtStage *p = &t->pt[0];
        if (p->re && (p->kind == PT_BYTELEVEL || p->behavior == SPLIT_ISOLATED || p->behavior == SPLIT_REMOVED)) {
            word_crosses = 0;
            for (int i = 0; i < t->n_pt; i++)
                if (t->pt[i].re && (tok_regex_max_lookbehind(t->pt[i].re) > 0 || tok_regex_can_match_empty(t->pt[i].re)))
                    set_cut(t, "a pre-tokenizer regex has a lookbehind or can match the empty string");
        } else if (!(t->n_pt == 1 && (p->kind == PT_METASPACE || (p->kind == PT_BYTELEVEL && !p->re)))) {
            set_cut(t, "the first pre-tokenizer splits with merged delimiters or a non-regex rule");
        }
    }
    if (word_crosses && t->bpe.shared_ids) set_cut(t, "two vocabulary tokens share an id");
    if (word_crosses && t->can_cut) {
        /* a merge whose left token ends with '\n' could join across the cut */
        const BpeModel *m = &t->bpe;
        int32_t nl_ids[3] = {m->fallback_id['\n'], m->byte_level ? m->byte_id['\n'] : m->ascii_id['\n'], -1};
        int full_fallback = m->byte_fallback;
        for (int b = 0; b < 256; b++) full_fallback &= m->fallback_id[b] >= 0;
        /* an unknown character before the cut stays pending through byte-fallback tokens and
         * would fuse with one after it */
        if (m->fuse_unk && m->unk_id >= 0 && !full_fallback)
            set_cut(t, "characters can become unk_token and unknowns are fused");
        if (!m->byte_level && m->ascii_id['\n'] < 0 && !(m->byte_fallback && m->fallback_id['\n'] >= 0))
            nl_ids[2] = m->unk_id;
        uint8_t nl_char[4];
        int nl_len = utf8_encode(m->byte_level ? byte_level_char('\n') : '\n', nl_char);
        for (size_t s = 0; m->merge_key && s <= m->merge_mask && t->can_cut; s++) {
            if (m->merge_key[s] == MERGE_EMPTY) continue;
            int32_t left = (int32_t)(m->merge_key[s] >> 32);
            size_t len;
            const uint8_t *txt = bpe_id_text(m, left, &len);
            if (left == nl_ids[0] || left == nl_ids[1] || left == nl_ids[2] ||
                (txt && len >= (size_t)nl_len && !memcmp(txt + len - nl_len, nl_char, nl_len)))
                set_cut(t, "a merge joins a line break with what follows");
        }
        if (m->ignore_merges)
            for (size_t i = 0; i < m->vocab.n && t->can_cut; i++) {
                const uint8_t *k = strmap_key(&m->vocab, i);
                size_t len = m->vocab.entries[i].len;
                for (size_t j = 0; j + nl_len < len; j++)
                    if (!memcmp(k + j, nl_char, nl_len)) {
                        set_cut(t, "ignore_merges with a vocabulary token that holds a line break");
                        break;
                    }
            }
    }
}

static void describe(Tokenizer *t) {
    const char *pre = "no pre-tokenizer";
    if (t->n_pt) {
        const PtStage *p = &t->pt[0];
        pre = p->kind == PT_METASPACE ? "Metaspace" : p->kind == PT_BYTELEVEL ? (p->re ? "ByteLevel (GPT-2 regex)" : "ByteLevel")
                                                                              : "Split regex";
    }
    snprintf(t->desc, sizeof t->desc, "BPE, %d ids (%d added), %s%s%s", t->vocab_size, t->n_added, pre,
             t->bpe.byte_level && t->pt[0].kind != PT_BYTELEVEL ? " + ByteLevel" : "",
             t->bpe.byte_fallback ? ", byte fallback" : "");
}

int tokenizer_load(const char *path, Tokenizer **out) {
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    if (read_file(path, &text, &len)) return -1;
    int rc = tokenizer_load_json(text, len, path, out);
    free(text);
    return rc;
}

int tokenizer_load_json(const char *text, size_t len, const char *path, Tokenizer **out) {
    *out = NULL;
    JsonDoc doc;
    if (json_parse(text, len, path, &doc)) return -1;
    Tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        json_free(&doc);
        return oom();
    }
    LoadCtx c = {.doc = &doc, .path = path, .t = t};
    const JsonValue *root = doc.root;
    int rc = 0;
    if (root->type != JSON_OBJECT) rc = load_bad(&c, root, "tokenizer.json", "expected an object at the top level");
    const JsonValue *version = rc ? NULL : json_get(root, "version");
    if (!rc && version && !json_str_eq(version, "1.0"))
        rc = load_unsupported(&c, version, "tokenizer.json version other than \"1.0\"");
    if (!rc && !json_get(root, "model")) rc = load_bad(&c, root, "tokenizer.json", "no \"model\" (is this a tokenizer.json?)");
    if (!rc) rc = load_model(&c, json_get(root, "model"));
    if (!rc) rc = load_normalizer(&c, json_get(root, "normalizer"));
    if (!rc) rc = load_pre_tokenizer(&c, json_get(root, "pre_tokenizer"));
    if (!rc) rc = load_decoder(&c, json_get(root, "decoder"));
    if (!rc) rc = load_post_processor(&c, json_get(root, "post_processor"));
    if (!rc) rc = load_added(&c, json_get(root, "added_tokens"));
    if (!rc) rc = build_added_matchers(t);
    if (!rc && !(t->path = strdup(path))) rc = oom();
    if (!rc) {
        t->vocab_size = t->bpe.n_ids;
        for (int i = 0; i < t->n_added; i++)
            if (t->added[i].id + 1 > t->vocab_size) t->vocab_size = t->added[i].id + 1;
        if (!(t->added_of_id = malloc((size_t)(t->vocab_size ? t->vocab_size : 1) * sizeof *t->added_of_id))) rc = oom();
    }
    if (!rc) {
        for (int32_t i = 0; i < t->vocab_size; i++) t->added_of_id[i] = -1;
        for (int i = 0; i < t->n_added; i++) t->added_of_id[t->added[i].id] = i;
        for (size_t i = 0; i < t->tmpl_prefix.n + t->tmpl_suffix.n; i++) {
            int32_t id = i < t->tmpl_prefix.n ? t->tmpl_prefix.p[i] : t->tmpl_suffix.p[i - t->tmpl_prefix.n];
            if (id >= t->vocab_size)
                rc = load_bad(&c, json_get(root, "post_processor"), "post_processor", "id %d is outside the vocabulary (%d ids)",
                              id, t->vocab_size);
        }
    }
    if (!rc) {
        build_symbol_tables(t);
        if (bpe_build_joins(&t->bpe)) rc = oom();
    }
    if (!rc) {
        decide_cuts(t);
        describe(t);
    }
    json_free(&doc);
    if (rc) {
        tokenizer_free(t);
        return -1;
    }
    *out = t;
    return 0;
}

void tokenizer_free(Tokenizer *t) {
    if (!t) return;
    bpe_free(&t->bpe);
    for (int i = 0; i < t->n_added; i++) {
        if (t->added[i].match != t->added[i].text) free(t->added[i].match);
        free(t->added[i].text);
    }
    free(t->added);
    added_matcher_free(&t->raw_match);
    added_matcher_free(&t->norm_match);
    tok_regex_free(t->word_char);
    for (int i = 0; i < t->n_norm; i++) {
        free(t->norm[i].text);
        free(t->norm[i].pat);
        tok_regex_free(t->norm[i].re);
    }
    for (int i = 0; i < t->n_pt; i++) tok_regex_free(t->pt[i].re);
    for (int i = 0; i < t->n_dec; i++) {
        free(t->dec[i].text);
        free(t->dec[i].pat);
        tok_regex_free(t->dec[i].re);
    }
    free(t->added_of_id);
    idbuf_free(&t->tmpl_prefix);
    idbuf_free(&t->tmpl_suffix);
    free(t->path);
    free(t);
}

int32_t tokenizer_vocab_size(const Tokenizer *t) { return t->vocab_size; }
const char *tokenizer_describe(const Tokenizer *t) { return t->desc; }

int tokenizer_can_cut(const Tokenizer *t, const char **why) {
    if (why) *why = t->can_cut ? "" : t->cut_why;
    return t->can_cut;
}

int32_t tokenizer_token_id(const Tokenizer *t, const char *text, size_t len) {
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && !memcmp(t->added[i].text, text, len)) return t->added[i].id;
    return vocab_id(&t->bpe, text, len);
}

int tokenizer_doc_affixes(const Tokenizer *t, IdBuf *prefix, IdBuf *suffix) {
    prefix->n = suffix->n = 0;
    if (t->has_template && (t->tmpl_prefix.n || t->tmpl_suffix.n)) {
        for (size_t i = 0; i < t->tmpl_prefix.n; i++)
            if (idbuf_push(prefix, t->tmpl_prefix.p[i])) return oom();
        for (size_t i = 0; i < t->tmpl_suffix.n; i++)
            if (idbuf_push(suffix, t->tmpl_suffix.p[i])) return oom();
        return 0;
    }
    static const char *const starts[] = {"<|endoftext|>", "<|begin_of_text|>", "<s>"};
    for (int i = 0; i < 3; i++) {
        int32_t id = tokenizer_token_id(t, starts[i], strlen(starts[i]));
        if (id >= 0) return idbuf_push(prefix, id) ? oom() : 0;
    }
    return myr_error("%s: cannot tell what separates documents (no TemplateProcessing post-processor and no "
                     "<|endoftext|>, <|begin_of_text|> or <s> token); give --doc-prefix TOKEN or --doc-prefix none",
                     t->path);
}
