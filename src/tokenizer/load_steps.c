/* load_steps.c: the pipeline components of a tokenizer.json: normalizer, pre_tokenizer,
 * decoder and post_processor, each flattened from its (possibly nested) Sequence into the
 * step arrays of struct Tokenizer. Unsupported types are refused by name with the list of
 * supported ones, so the user learns what to change. */
#include <stdio.h>
#include <string.h>

#include "tokenizer/load_util.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

/* The pattern GPT-2's ByteLevel pre-tokenizer splits with (use_regex: true). */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int is(const char *type, const char *name) { return !strcmp(type, name); }

static int oom(void) { return myr_error("out of memory loading the tokenizer"); }

/* ---------- normalizer ---------- */

static int add_norm(LoadCtx *c, const JsonValue *v, int depth) {
    Tokenizer *t = c->t;
    const char *type;
    if (load_type(c, v, "normalizer", &type)) return -1;
    if (is(type, "Sequence")) return load_sequence(c, v, "normalizers", "normalizer", depth, add_norm);
    if (t->n_norm == MAX_NORM) return load_unsupported(c, v, "more than %d normalizers", MAX_NORM);
    NormStep *n = &t->norm[t->n_norm];
    memset(n, 0, sizeof *n);
    if (is(type, "Prepend")) {
        const char *s;
        size_t len;
        if (load_str(c, v, "prepend", "normalizer Prepend", 1, &s, &len)) return -1;
        n->kind = NORM_PREPEND;
        if (!(n->text = load_dup(s, len))) return oom();
        n->len = len;
    } else if (is(type, "Replace")) {
        const char *pat, *content;
        size_t pat_len, content_len;
        int regex;
        if (load_pattern(c, v, "normalizer Replace", &pat, &pat_len, &regex)) return -1;
        if (load_str(c, v, "content", "normalizer Replace", 1, &content, &content_len)) return -1;
        n->kind = NORM_REPLACE;
        if (!(n->text = load_dup(content, content_len))) return oom();
        n->len = content_len;
        if (regex || pat_len == 0) {
            if (tok_regex_compile(pat, pat_len, !regex, "normalizer Replace pattern", &n->re)) return -1;
        } else {
            if (!(n->pat = load_dup(pat, pat_len))) return oom();
            n->pat_len = pat_len;
        }
    } else {
        return load_unsupported(c, v, "normalizer \"%s\" (supported: Prepend, Replace, Sequence of these; "
                                      "Hugging Face's NFC/NFKC/Lowercase/BertNormalizer/Precompiled are not)", type);
    }
    t->n_norm++;
    return 0;
}

int load_normalizer(LoadCtx *c, const JsonValue *v) {
    if (!v || v->type == JSON_NULL) return 0;
    return add_norm(c, v, 0);
}

/* ---------- pre-tokenizer ---------- */

static int behavior_of(const LoadCtx *c, const JsonValue *v, int *out) {
    const char *s;
    size_t n;
    if (load_str(c, v, "behavior", "pre_tokenizer Split", 1, &s, &n)) return -1;
    static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    return load_bad(c, json_get(v, "behavior"), "pre_tokenizer Split.behavior",
                    "expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous, found \"%s\"", s);
}

static int prepend_scheme_of(const LoadCtx *c, const JsonValue *v, const char *what, int *scheme) {
    const char *s;
    size_t n;
    *scheme = PREPEND_ALWAYS;
    if (load_str(c, v, "prepend_scheme", what, 0, &s, &n)) return -1;
    if (s) {
        if (!strcmp(s, "always")) *scheme = PREPEND_ALWAYS;
        else if (!strcmp(s, "first")) *scheme = PREPEND_FIRST;
        else if (!strcmp(s, "never")) *scheme = PREPEND_NEVER;
        else return load_bad(c, json_get(v, "prepend_scheme"), what, "prepend_scheme: expected always, first or never, found \"%s\"", s);
    }
    int add = -1;
    if (load_bool(c, v, "add_prefix_space", what, &add)) return -1;
    if (add == 0) {
        if (s && *scheme != PREPEND_NEVER)
            return load_bad(c, json_get(v, "add_prefix_space"), what, "add_prefix_space false contradicts prepend_scheme \"%s\"", s);
        *scheme = PREPEND_NEVER;
    }
    return 0;
}

static int add_pt(LoadCtx *c, const JsonValue *v, int depth) {
    Tokenizer *t = c->t;
    const char *type;
    if (load_type(c, v, "pre_tokenizer", &type)) return -1;
    if (is(type, "Sequence")) return load_sequence(c, v, "pretokenizers", "pre_tokenizer", depth, add_pt);
    if (t->n_pt == MAX_STAGES) return load_unsupported(c, v, "more than %d pre-tokenizers", MAX_STAGES);
    PtStage *p = &t->pt[t->n_pt];
    memset(p, 0, sizeof *p);
    if (is(type, "ByteLevel")) {
        int add_prefix = 1, use_regex = 1;
        if (load_bool(c, v, "add_prefix_space", "pre_tokenizer ByteLevel", &add_prefix) ||
            load_bool(c, v, "use_regex", "pre_tokenizer ByteLevel", &use_regex))
            return -1;
        p->kind = PT_BYTELEVEL;
        p->add_prefix_space = add_prefix;
        if (use_regex && tok_regex_compile(gpt2_pattern, strlen(gpt2_pattern), 0, "ByteLevel's GPT-2 pattern", &p->re))
            return -1;
    } else if (is(type, "Split")) {
        const char *pat;
        size_t len;
        int regex, invert = 0;
        if (load_pattern(c, v, "pre_tokenizer Split", &pat, &len, &regex) || behavior_of(c, v, &p->behavior) ||
            load_bool(c, v, "invert", "pre_tokenizer Split", &invert))
            return -1;
        p->kind = PT_SPLIT;
        p->invert = invert;
        if (tok_regex_compile(pat, len, !regex, "pre_tokenizer Split pattern", &p->re)) return -1;
    } else if (is(type, "Digits")) {
        int individual = 0;
        if (load_bool(c, v, "individual_digits", "pre_tokenizer Digits", &individual)) return -1;
        /* Rust's char::is_numeric is \p{N}; a run of them is one piece unless individual */
        const char *pat = individual ? "\\p{N}" : "\\p{N}+";
        p->kind = PT_SPLIT;
        p->behavior = SPLIT_ISOLATED;
        if (tok_regex_compile(pat, strlen(pat), 0, "pre_tokenizer Digits", &p->re)) return -1;
    } else if (is(type, "Metaspace")) {
        uint32_t cp;
        int split = 1;
        p->kind = PT_METASPACE;
        if (load_char(c, v, "replacement", "pre_tokenizer Metaspace", &cp, p->rep, &p->rep_len) ||
            prepend_scheme_of(c, v, "pre_tokenizer Metaspace", &p->prepend_scheme) ||
            load_bool(c, v, "split", "pre_tokenizer Metaspace", &split))
            return -1;
        p->split = split;
    } else {
        return load_unsupported(c, v, "pre_tokenizer \"%s\" (supported: ByteLevel, Split, Metaspace, Digits, "
                                      "Sequence of these)", type);
    }
    t->n_pt++;
    return 0;
}

int load_pre_tokenizer(LoadCtx *c, const JsonValue *v) {
    if (!v || v->type == JSON_NULL) return 0;
    if (add_pt(c, v, 0)) return -1;
    /* ByteLevel turns the text into its byte alphabet: later stages would split that, which
     * this implementation does not model (it keeps raw bytes until the BPE model) */
    for (int i = 0; i + 1 < c->t->n_pt; i++)
        if (c->t->pt[i].kind == PT_BYTELEVEL)
            return load_unsupported(c, v, "a ByteLevel pre-tokenizer followed by other pre-tokenizers (it must be "
                                          "the last one, as in GPT-2 and Llama 3)");
    return 0;
}

/* ---------- decoder ---------- */

static int add_dec(LoadCtx *c, const JsonValue *v, int depth) {
    Tokenizer *t = c->t;
    const char *type;
    if (load_type(c, v, "decoder", &type)) return -1;
    if (is(type, "Sequence")) return load_sequence(c, v, "decoders", "decoder", depth, add_dec);
    if (t->n_dec == MAX_DEC) return load_unsupported(c, v, "more than %d decoders", MAX_DEC);
    DecStep *d = &t->dec[t->n_dec];
    memset(d, 0, sizeof *d);
    if (is(type, "ByteLevel")) d->kind = DEC_BYTELEVEL;
    else if (is(type, "ByteFallback")) d->kind = DEC_BYTEFALLBACK;
    else if (is(type, "Fuse")) d->kind = DEC_FUSE;
    else if (is(type, "Metaspace")) {
        uint32_t cp;
        d->kind = DEC_METASPACE;
        if (load_char(c, v, "replacement", "decoder Metaspace", &cp, d->rep, &d->rep_len) ||
            prepend_scheme_of(c, v, "decoder Metaspace", &d->prepend_scheme))
            return -1;
    } else if (is(type, "Replace")) {
        const char *pat, *content;
        size_t pat_len, content_len;
        int regex;
        if (load_pattern(c, v, "decoder Replace", &pat, &pat_len, &regex) ||
            load_str(c, v, "content", "decoder Replace", 1, &content, &content_len))
            return -1;
        d->kind = DEC_REPLACE;
        if (!(d->text = load_dup(content, content_len))) return oom();
        d->len = content_len;
        if (regex || pat_len == 0) {
            if (tok_regex_compile(pat, pat_len, !regex, "decoder Replace pattern", &d->re)) return -1;
        } else {
            if (!(d->pat = load_dup(pat, pat_len))) return oom();
            d->pat_len = pat_len;
        }
    } else if (is(type, "Strip")) {
        uint8_t u[4];
        int ul;
        long long start = 0, stop = 0;
        d->kind = DEC_STRIP;
        if (load_char(c, v, "content", "decoder Strip", &d->strip_char, u, &ul) ||
            load_int(c, v, "start", "decoder Strip", 0, 1 << 20, &start) ||
            load_int(c, v, "stop", "decoder Strip", 0, 1 << 20, &stop))
            return -1;
        d->start = (int)start;
        d->stop = (int)stop;
    } else {
        return load_unsupported(c, v, "decoder \"%s\" (supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, "
                                      "Strip, Sequence of these)", type);
    }
    t->n_dec++;
    return 0;
}

int load_decoder(LoadCtx *c, const JsonValue *v) {
    if (!v || v->type == JSON_NULL) return 0;
    c->t->has_decoder = 1;
    return add_dec(c, v, 0);
}

/* ---------- post-processor: only what it adds around one sequence ---------- */

static int template_ids(LoadCtx *c, const JsonValue *specials, const JsonValue *item, IdBuf *out) {
    const JsonValue *st = json_get(item, "SpecialToken");
    const JsonValue *name = st ? json_get(st, "id") : NULL;
    if (!name || name->type != JSON_STRING)
        return load_bad(c, item, "post_processor TemplateProcessing.single", "expected {\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}");
    const JsonValue *spec = NULL;
    if (specials && specials->type == JSON_OBJECT)
        for (size_t i = 0; i < specials->u.obj.n; i++) {
            const JsonMember *m = &specials->u.obj.members[i];
            if (m->key_len == name->u.str.len && !memcmp(m->key, name->u.str.s, m->key_len)) spec = &m->value;
        }
    const JsonValue *ids = spec ? json_get(spec, "ids") : NULL;
    if (!ids || ids->type != JSON_ARRAY)
        return load_bad(c, item, "post_processor TemplateProcessing", "special token \"%s\" has no entry with \"ids\" in "
                        "special_tokens", name->u.str.s);
    for (size_t i = 0; i < ids->u.arr.n; i++) {
        const JsonValue *x = &ids->u.arr.items[i];
        if (x->type != JSON_NUMBER || x->u.number < 0 || x->u.number > INT32_MAX || x->u.number != (int32_t)x->u.number)
            return load_bad(c, x, "post_processor TemplateProcessing.special_tokens", "expected a non-negative integer id");
        if (idbuf_push(out, (int32_t)x->u.number)) return oom();
    }
    return 0;
}

static int add_post(LoadCtx *c, const JsonValue *v, int depth) {
    Tokenizer *t = c->t;
    const char *type;
    if (load_type(c, v, "post_processor", &type)) return -1;
    if (is(type, "Sequence")) return load_sequence(c, v, "processors", "post_processor", depth, add_post);
    if (is(type, "TemplateProcessing")) {
        const JsonValue *single = json_get(v, "single"), *specials = json_get(v, "special_tokens");
        if (!single || single->type != JSON_ARRAY)
            return load_bad(c, single ? single : v, "post_processor TemplateProcessing.single", "expected an array");
        t->tmpl_prefix.n = t->tmpl_suffix.n = 0;
        int seen_a = 0;
        for (size_t i = 0; i < single->u.arr.n; i++) {
            const JsonValue *item = &single->u.arr.items[i];
            if (json_get(item, "Sequence")) {
                seen_a = 1;
                continue;
            }
            if (template_ids(c, specials, item, seen_a ? &t->tmpl_suffix : &t->tmpl_prefix)) return -1;
        }
        t->has_template = 1;
        return 0;
    }
    if (is(type, "BertProcessing") || is(type, "RobertaProcessing")) {
        /* cls $A sep, each given as [token, id] */
        const JsonValue *cls = json_get(v, "cls"), *sep = json_get(v, "sep");
        if (!cls || cls->type != JSON_ARRAY || cls->u.arr.n != 2 || cls->u.arr.items[1].type != JSON_NUMBER || !sep ||
            sep->type != JSON_ARRAY || sep->u.arr.n != 2 || sep->u.arr.items[1].type != JSON_NUMBER)
            return load_bad(c, v, "post_processor", "expected \"cls\" and \"sep\" as [token, id]");
        t->tmpl_prefix.n = t->tmpl_suffix.n = 0;
        if (idbuf_push(&t->tmpl_prefix, (int32_t)cls->u.arr.items[1].u.number) ||
            idbuf_push(&t->tmpl_suffix, (int32_t)sep->u.arr.items[1].u.number))
            return oom();
        t->has_template = 1;
        return 0;
    }
    return 0; /* ByteLevel (offsets only) and others add no tokens to a single sequence we use */
}

int load_post_processor(LoadCtx *c, const JsonValue *v) {
    if (!v || v->type == JSON_NULL) return 0;
    return add_post(c, v, 0);
}
