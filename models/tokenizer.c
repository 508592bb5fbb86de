/* tokenizer: vocabulary tables, special-token partitioning, the encode/decode
 * drivers of both kinds, and the per-token piece cache. The merging itself is in
 * tok_spm.c and tok_bpe.c. Behaviour follows llama.cpp's src/llama-vocab.cpp. */
#include "tok_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 helpers (llama.cpp's unicode.cpp semantics) ---- */

size_t hs_tok__utf8_len(unsigned char c) {
    static const uint8_t lookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

static bool is_cont(const char *s, size_t len, size_t i) {
    return i < len && ((unsigned char)s[i] & 0xC0) == 0x80;
}

uint32_t hs_tok__utf8_next(const char *s, size_t len, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t p = *i;
    unsigned char c = u[p];
    if (!(c & 0x80)) {
        *i = p + 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0 && is_cont(s, len, p + 1)) {
        *i = p + 2;
        return ((uint32_t)(c & 0x1F) << 6) | (u[p + 1] & 0x3F);
    }
    if ((c & 0xF0) == 0xE0 && is_cont(s, len, p + 1) && is_cont(s, len, p + 2)) {
        *i = p + 3;
        return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(u[p + 1] & 0x3F) << 6) | (u[p + 2] & 0x3F);
    }
    if ((c & 0xF8) == 0xF0 && is_cont(s, len, p + 1) && is_cont(s, len, p + 2) && is_cont(s, len, p + 3)) {
        uint32_t cpt = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(u[p + 1] & 0x3F) << 12) |
                       ((uint32_t)(u[p + 2] & 0x3F) << 6) | (u[p + 3] & 0x3F);
        /* llama.cpp would throw while re-encoding a code point above U+10FFFF
         * (lead bytes F5-F7); we take the sequence as one replacement character. */
        *i = p + 4;
        return cpt <= 0x10FFFF ? cpt : 0xFFFD;
    }
    *i = p + 1; /* continuation byte, bad lead byte or truncated sequence */
    return 0xFFFD;
}

size_t hs_tok__utf8_put(uint32_t cpt, char buf[4]) {
    if (cpt <= 0x7F) {
        buf[0] = (char)cpt;
        return 1;
    }
    if (cpt <= 0x7FF) {
        buf[0] = (char)(0xC0 | (cpt >> 6));
        buf[1] = (char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt <= 0xFFFF) {
        buf[0] = (char)(0xE0 | (cpt >> 12));
        buf[1] = (char)(0x80 | ((cpt >> 6) & 0x3F));
        buf[2] = (char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    buf[0] = (char)(0xF0 | ((cpt >> 18) & 0x07));
    buf[1] = (char)(0x80 | ((cpt >> 12) & 0x3F));
    buf[2] = (char)(0x80 | ((cpt >> 6) & 0x3F));
    buf[3] = (char)(0x80 | (cpt & 0x3F));
    return 4;
}

/* ---- lookups ---- */

int32_t hs_tok__map_get(const hs_tok_map *map, const char *key) {
    if (!map) return HS_TOK_NONE;
    /* The _ts variant keeps the result in `idx` instead of the map's header, so
     * concurrent lookups do not write shared memory. */
    ptrdiff_t idx = -1;
    stbds_hmget_key_ts((void *)map, sizeof *map, (void *)key, sizeof map->key, &idx, STBDS_HM_STRING);
    return idx < 0 ? HS_TOK_NONE : map[idx].value;
}

int32_t hs_tok__lookup(const hs_tok *tok, const char *s, size_t n, char **scratch) {
    if (n == 0 || n > tok->max_len) return HS_TOK_NONE;
    if (memchr(s, 0, n)) return HS_TOK_NONE; /* token texts never hold NUL bytes */
    stbds_arrsetlen(*scratch, n + 1);
    memcpy(*scratch, s, n);
    (*scratch)[n] = 0;
    return hs_tok__map_get(tok->by_text, *scratch);
}

/* ---- creation ---- */

static bool is_byte_text(const char *t) {
    static const char hex[] = "0123456789ABCDEFabcdef";
    return strlen(t) == 6 && memcmp(t, "<0x", 3) == 0 && t[5] == '>' && strchr(hex, t[3]) &&
           strchr(hex, t[4]);
}

static uint8_t attr_of_type(int32_t type) {
    switch (type) {
    case HS_TOK_TYPE_UNKNOWN: return HS_TOK_ATTR_UNKNOWN;
    case HS_TOK_TYPE_UNUSED: return HS_TOK_ATTR_UNUSED;
    case HS_TOK_TYPE_NORMAL: return HS_TOK_ATTR_NORMAL;
    case HS_TOK_TYPE_CONTROL: return HS_TOK_ATTR_CONTROL;
    case HS_TOK_TYPE_USER_DEFINED: return HS_TOK_ATTR_USER_DEFINED;
    case HS_TOK_TYPE_BYTE: return HS_TOK_ATTR_BYTE;
    default: return 0;
    }
}

/* Copies texts, scores and types; builds the text -> id map. */
static hs_status copy_tokens(hs_tok *tok, const hs_tok_vocab *v) {
    hs_status st = HS_OK;
    uint32_t n = v->n_tokens;
    uint64_t total = 0;
    char empty[32];
    for (uint32_t i = 0; i < n; i++) {
        if (!v->tokens[i]) return HS_FAIL(HS_ERR_FORMAT, "tokenizer: token %u has no text", i);
        size_t l = strlen(v->tokens[i]);
        total += (l ? l : (size_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", i)) + 1;
    }
    if (total > UINT32_MAX)
        return HS_FAIL(HS_ERR_FORMAT, "tokenizer: token texts take %llu bytes (limit 4 GiB)",
                       (unsigned long long)total);
    tok->texts = malloc(total);
    tok->text_off = malloc(n * sizeof *tok->text_off);
    tok->text_len = malloc(n * sizeof *tok->text_len);
    tok->scores = malloc(n * sizeof *tok->scores);
    tok->types = malloc(n);
    tok->attrs = malloc(n);
    if (!tok->texts || !tok->text_off || !tok->text_len || !tok->scores || !tok->types || !tok->attrs)
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory for %u tokens", n);
    uint32_t off = 0;
    for (uint32_t i = 0; i < n; i++) {
        /* llama.cpp names empty tokens "[EMPTY_<id>]" so that every text is unique and non-empty. */
        const char *t = v->tokens[i];
        size_t l = strlen(t);
        if (!l) {
            l = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%u]", i);
            t = empty;
        }
        memcpy(tok->texts + off, t, l + 1);
        tok->text_off[i] = off;
        tok->text_len[i] = (uint32_t)l;
        if (l > tok->max_len) tok->max_len = (uint32_t)l;
        off += (uint32_t)l + 1;
        tok->scores[i] = v->scores ? v->scores[i] : 0.0f;
        int32_t type = v->types ? v->types[i] : HS_TOK_TYPE_NORMAL;
        /* Without types, SPM byte pieces would decode as their literal text; llama.cpp's
         * converters always write types, so we infer BYTE from the text, "<0x" + two hex digits + ">". */
        if (!v->types && tok->kind == HS_TOK_SPM && is_byte_text(t)) type = HS_TOK_TYPE_BYTE;
        tok->types[i] = (uint8_t)(type >= 0 && type <= HS_TOK_TYPE_BYTE ? type : HS_TOK_TYPE_UNDEFINED);
        tok->attrs[i] = attr_of_type(type);
        if (tok->attrs[i] == HS_TOK_ATTR_BYTE && !is_byte_text(t))
            return HS_FAIL(
                HS_ERR_FORMAT,
                "tokenizer: byte token %u has text '%.32s', expected \"<0x\" + two hex digits + \">\"", i, t);
    }
    /* Keys point into the texts arena. A repeated text maps to its last id, as in llama.cpp. */
    for (uint32_t i = 0; i < n; i++)
        stbds_shput(tok->by_text, tok->texts + tok->text_off[i], (int32_t)i);
    return st;
}

static hs_status resolve_id(const hs_tok *tok, const char *what, int32_t given, int32_t fallback,
                            int32_t *out) {
    if (given == HS_TOK_NONE) {
        *out = fallback >= 0 && (uint32_t)fallback < tok->n_tokens ? fallback : HS_TOK_NONE;
        return HS_OK;
    }
    if (given < 0 || (uint32_t)given >= tok->n_tokens)
        return HS_FAIL(HS_ERR_FORMAT, "tokenizer: %s token id %d is outside the vocabulary (%u tokens)", what,
                       given, tok->n_tokens);
    *out = given;
    return HS_OK;
}

static hs_status resolve_flag(const char *what, int8_t given, bool fallback, bool *out) {
    if (given != HS_TOK_DEFAULT && given != 0 && given != 1)
        return HS_FAIL(HS_ERR_INVALID_ARG, "tokenizer: %s is %d (expected 0, 1 or HS_TOK_DEFAULT)", what,
                       given);
    *out = given == HS_TOK_DEFAULT ? fallback : given == 1;
    return HS_OK;
}

static hs_status set_specials(hs_tok *tok, const hs_tok_vocab *v, bool bpe_add_bos) {
    hs_status st = HS_OK;
    bool spm = tok->kind == HS_TOK_SPM;
    HS_TRY(resolve_id(tok, "BOS", v->bos, spm ? 1 : HS_TOK_NONE, &tok->bos));
    HS_TRY(resolve_id(tok, "EOS", v->eos, spm ? 2 : HS_TOK_NONE, &tok->eos));
    HS_TRY(resolve_id(tok, "unknown", v->unk, spm ? 0 : HS_TOK_NONE, &tok->unk));
    HS_TRY(resolve_id(tok, "padding", v->pad, HS_TOK_NONE, &tok->pad));
    HS_TRY(resolve_flag("add_bos", v->add_bos, spm ? true : bpe_add_bos, &tok->add_bos));
    HS_TRY(resolve_flag("add_eos", v->add_eos, false, &tok->add_eos));
    HS_TRY(resolve_flag("add_space_prefix", v->add_space_prefix, spm, &tok->add_space_prefix));
    if (tok->add_bos && tok->bos == HS_TOK_NONE)
        return HS_FAIL(HS_ERR_FORMAT, "tokenizer: the vocabulary asks for a BOS token but has none");
    if (tok->add_eos && tok->eos == HS_TOK_NONE)
        return HS_FAIL(HS_ERR_FORMAT, "tokenizer: the vocabulary asks for an EOS token but has none");
fail:
    return st;
}

typedef struct special_key {
    uint32_t len;
    int32_t id;
} special_key;

static int cmp_special(const void *a, const void *b) {
    const special_key *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Special tokens are matched longest first (llama.cpp's cache_special_tokens). */
static hs_status collect_specials(hs_tok *tok) {
    uint32_t n = 0;
    const uint8_t mask = HS_TOK_ATTR_CONTROL | HS_TOK_ATTR_USER_DEFINED | HS_TOK_ATTR_UNKNOWN;
    for (uint32_t i = 0; i < tok->n_tokens; i++)
        n += (tok->attrs[i] & mask) != 0;
    if (!n) return HS_OK;
    special_key *keys = malloc(n * sizeof *keys);
    tok->specials = malloc(n * sizeof *tok->specials);
    if (!keys || !tok->specials) {
        free(keys);
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    }
    for (uint32_t i = 0; i < tok->n_tokens; i++)
        if (tok->attrs[i] & mask) keys[tok->n_specials++] = (special_key){tok->text_len[i], (int32_t)i};
    qsort(keys, n, sizeof *keys, cmp_special);
    for (uint32_t i = 0; i < n; i++)
        tok->specials[i] = keys[i].id;
    free(keys);
    return HS_OK;
}

/* SPM byte fallback: the byte token "<0x" + two hex digits + ">" (e.g. <0x41>), else the byte itself as a
 * one-byte token (llama.cpp's byte_to_token). */
static void find_byte_tokens(hs_tok *tok) {
    char name[8], *scratch = NULL;
    for (int b = 0; b < 256; b++) {
        snprintf(name, sizeof name, "<0x%02X>", b);
        int32_t id = hs_tok__map_get(tok->by_text, name);
        if (id == HS_TOK_NONE && b > 0) {
            char c = (char)b;
            id = hs_tok__lookup(tok, &c, 1, &scratch);
        }
        tok->byte_ids[b] = id;
    }
    stbds_arrfree(scratch);
}

/* The piece of one token with control tokens rendered (llama.cpp's token_to_piece, special = true). */
static void make_piece(const hs_tok *tok, int32_t id, char **out) {
    const char *t = tok->texts + tok->text_off[id];
    size_t n = tok->text_len[id];
    uint8_t attr = tok->attrs[id];
    if (attr & (HS_TOK_ATTR_UNKNOWN | HS_TOK_ATTR_CONTROL | HS_TOK_ATTR_USER_DEFINED)) {
        memcpy(stbds_arraddnptr(*out, n), t, n);
    } else if (attr & HS_TOK_ATTR_NORMAL) {
        if (tok->kind == HS_TOK_BPE) {
            hs_tok__bpe_decode_text(tok, t, n, out);
            return;
        }
        for (size_t i = 0; i < n; i++) { /* U+2581 -> ' ' */
            if (i + 2 < n && memcmp(t + i, "\xe2\x96\x81", 3) == 0) {
                stbds_arrput(*out, ' ');
                i += 2;
            } else {
                stbds_arrput(*out, t[i]);
            }
        }
    } else if (attr & HS_TOK_ATTR_BYTE) {
        stbds_arrput(*out, (char)strtol((char[3]){t[3], t[4], 0}, NULL, 16));
    }
}

static hs_status build_pieces(hs_tok *tok) {
    char *all = NULL;
    tok->piece_off = malloc(tok->n_tokens * sizeof *tok->piece_off);
    tok->piece_len = malloc(tok->n_tokens * sizeof *tok->piece_len);
    if (!tok->piece_off || !tok->piece_len)
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    for (uint32_t i = 0; i < tok->n_tokens; i++) {
        size_t start = stbds_arrlenu(all);
        make_piece(tok, (int32_t)i, &all);
        if (stbds_arrlenu(all) > UINT32_MAX) {
            stbds_arrfree(all);
            return HS_FAIL(HS_ERR_FORMAT, "tokenizer: decoded pieces exceed 4 GiB");
        }
        tok->piece_off[i] = (uint32_t)start;
        tok->piece_len[i] = (uint32_t)(stbds_arrlenu(all) - start);
    }
    tok->pieces = malloc(stbds_arrlenu(all) + 1);
    if (!tok->pieces) {
        stbds_arrfree(all);
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    }
    if (all) memcpy(tok->pieces, all, stbds_arrlenu(all));
    stbds_arrfree(all);
    return HS_OK;
}

hs_status hs_tok_create(const hs_tok_vocab *v, hs_tok **out) {
    hs_status st = HS_OK;
    hs_tok *tok = NULL;
    if (!v || !out) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_tok_create: NULL argument");
    *out = NULL;
    if (!v->model) return HS_FAIL(HS_ERR_FORMAT, "tokenizer: no tokenizer model given");
    if (!v->n_tokens || !v->tokens) return HS_FAIL(HS_ERR_FORMAT, "tokenizer: the vocabulary has no tokens");
    if (v->n_tokens > INT32_MAX)
        return HS_FAIL(HS_ERR_FORMAT, "tokenizer: %u tokens (limit 2^31 - 1)", v->n_tokens);
    tok = calloc(1, sizeof *tok);
    if (!tok) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    if (strcmp(v->model, "llama") == 0) {
        tok->kind = HS_TOK_SPM;
    } else if (strcmp(v->model, "gpt2") == 0) {
        tok->kind = HS_TOK_BPE;
    } else {
        st = HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "tokenizer: model '%.64s' is not supported (llama, gpt2)",
                     v->model);
        goto fail;
    }
    tok->n_tokens = v->n_tokens;
    HS_TRY(copy_tokens(tok, v));
    if (tok->kind == HS_TOK_BPE) HS_TRY(hs_tok__bpe_init(tok, v)); /* sets the pre-tokenizer's flags */
    HS_TRY(set_specials(tok, v, tok->pre_add_bos));
    HS_TRY(collect_specials(tok));
    if (tok->kind == HS_TOK_SPM) find_byte_tokens(tok);
    HS_TRY(build_pieces(tok));
    *out = tok;
    return HS_OK;
fail:
    hs_tok_destroy(tok);
    return st;
}

void hs_tok_destroy(hs_tok *tok) {
    if (!tok) return;
    hs_tok__bpe_free(tok);
    stbds_shfree(tok->by_text);
    free(tok->texts);
    free(tok->text_off);
    free(tok->text_len);
    free(tok->scores);
    free(tok->types);
    free(tok->attrs);
    free(tok->pieces);
    free(tok->piece_off);
    free(tok->piece_len);
    free(tok->specials);
    free(tok);
}

/* ---- special-token partitioning (llama.cpp's tokenizer_st_partition) ---- */

typedef struct frag {
    int32_t token; /* HS_TOK_NONE: raw text [off, off + len) */
    size_t off, len;
} frag;

static const char *find_bytes(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || m > n) return NULL;
    const char *end = hay + n - m + 1;
    for (const char *p = hay; p < end; p++) {
        p = memchr(p, needle[0], (size_t)(end - p));
        if (!p) return NULL;
        if (memcmp(p, needle, m) == 0) return p;
    }
    return NULL;
}

/* Splits every raw fragment at each occurrence of each special token, longest
 * tokens first. Without parse_special, control and unknown tokens are skipped but
 * user-defined ones are still split off (as llama.cpp and HF tokenizers do). */
static void partition(const hs_tok *tok, const char *text, bool parse_special, frag **frags) {
    frag *next = NULL;
    for (uint32_t s = 0; s < tok->n_specials; s++) {
        int32_t id = tok->specials[s];
        if (!parse_special && (tok->attrs[id] & (HS_TOK_ATTR_CONTROL | HS_TOK_ATTR_UNKNOWN))) continue;
        const char *st = tok->texts + tok->text_off[id];
        size_t sl = tok->text_len[id];
        HS_TOK_ARR_CLEAR(next);
        for (size_t f = 0; f < stbds_arrlenu(*frags); f++) {
            frag fr = (*frags)[f];
            if (fr.token != HS_TOK_NONE) {
                stbds_arrput(next, fr);
                continue;
            }
            size_t pos = fr.off, end = fr.off + fr.len;
            const char *m;
            while ((m = find_bytes(text + pos, end - pos, st, sl))) {
                size_t at = (size_t)(m - text);
                if (at > pos) stbds_arrput(next, ((frag){HS_TOK_NONE, pos, at - pos}));
                stbds_arrput(next, ((frag){id, at, sl}));
                pos = at + sl;
            }
            if (pos < end) stbds_arrput(next, ((frag){HS_TOK_NONE, pos, end - pos}));
        }
        frag *t = *frags;
        *frags = next;
        next = t;
    }
    stbds_arrfree(next);
}

/* ---- encode ---- */

static hs_status encode_spm(const hs_tok *tok, const char *text, const frag *frags, int32_t **out) {
    hs_status st = HS_OK;
    char *buf = NULL;
    bool prev_special = true; /* the first fragment gets the space prefix */
    for (size_t f = 0; f < stbds_arrlenu(frags); f++) {
        if (frags[f].token != HS_TOK_NONE) {
            stbds_arrput(*out, frags[f].token);
            prev_special = true;
            continue;
        }
        HS_TOK_ARR_CLEAR(buf);
        if (tok->add_space_prefix && prev_special) memcpy(stbds_arraddnptr(buf, 3), "\xe2\x96\x81", 3);
        for (size_t i = 0; i < frags[f].len; i++) {
            char c = text[frags[f].off + i];
            if (c == ' ')
                memcpy(stbds_arraddnptr(buf, 3), "\xe2\x96\x81", 3);
            else
                stbds_arrput(buf, c);
        }
        HS_TRY(hs_tok__spm_encode(tok, buf, stbds_arrlenu(buf), out));
        prev_special = false;
    }
fail:
    stbds_arrfree(buf);
    return st;
}

static hs_status encode_bpe(const hs_tok *tok, const char *text, const frag *frags, int32_t **out) {
    hs_status st = HS_OK;
    for (size_t f = 0; f < stbds_arrlenu(frags); f++) {
        if (frags[f].token != HS_TOK_NONE)
            stbds_arrput(*out, frags[f].token);
        else
            HS_TRY(hs_tok__bpe_encode(tok, text + frags[f].off, frags[f].len, out));
    }
fail:
    return st;
}

hs_status hs_tok_encode(const hs_tok *tok, const char *text, size_t len, unsigned flags, int32_t **ids,
                        size_t *n) {
    hs_status st = HS_OK;
    frag *frags = NULL;
    int32_t *res = NULL;
    if (!tok || !ids || !n || (!text && len))
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_tok_encode: NULL argument");
    *ids = NULL;
    *n = 0;
    bool add_special = flags & HS_TOK_ADD_SPECIAL;
    if (len) stbds_arrput(frags, ((frag){HS_TOK_NONE, 0, len}));
    partition(tok, text, (flags & HS_TOK_PARSE_SPECIAL) != 0, &frags);
    if (add_special && tok->add_bos) stbds_arrput(res, tok->bos);
    if (tok->kind == HS_TOK_SPM)
        HS_TRY(encode_spm(tok, text, frags, &res));
    else
        HS_TRY(encode_bpe(tok, text, frags, &res));
    if (add_special && tok->add_eos) stbds_arrput(res, tok->eos);
    if (stbds_arrlenu(res)) {
        *ids = malloc(stbds_arrlenu(res) * sizeof **ids);
        if (!*ids) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_tok_encode: out of memory for %zu ids",
                         (size_t)stbds_arrlenu(res));
            goto fail;
        }
        memcpy(*ids, res, stbds_arrlenu(res) * sizeof **ids);
        *n = stbds_arrlenu(res);
    }
fail:
    stbds_arrfree(frags);
    stbds_arrfree(res);
    return st;
}

/* ---- decode ---- */

/* llama.cpp's clean_spaces passes: " ?" " !" " ." " ," lose the space, a lone
 * apostrophe between spaces loses both, " 's" " 'm" " 're" " 've" lose the space. */
static size_t clean_spaces(char *text, size_t total) {
    size_t t1 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < t1; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) total--;
        text[total++] = x;
    }
    size_t t2 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < t2; i++) {
        char x = text[i];
        if (x == '\'' && i + 1 < t2 && text[i - 1] == ' ' && text[i + 1] == ' ') {
            total--;
            text[++i] = '\0';
        }
        text[total++] = x;
    }
    size_t t3 = total;
    total = total ? 1 : 0;
    for (size_t i = 1; i < t3; i++) {
        char x = text[i];
        if (text[i - 1] == ' ' && x == '\'' && i + 1 < t3) {
            char x1 = text[i + 1];
            if (x1 == 's' || x1 == 'm') {
                total--;
            } else if (x1 != 't' && x1 != 'd' && i + 2 < t3) {
                char x2 = text[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) total--;
            }
        }
        text[total++] = x;
    }
    return total;
}

hs_status hs_tok_decode(const hs_tok *tok, const int32_t *ids, size_t n, unsigned flags, char **text,
                        size_t *len) {
    if (!tok || !text || !len || (!ids && n))
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_tok_decode: NULL argument");
    *text = NULL;
    *len = 0;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= tok->n_tokens)
            return HS_FAIL(HS_ERR_OUT_OF_RANGE,
                           "hs_tok_decode: id %d at position %zu is outside the vocabulary "
                           "(%u tokens)",
                           ids[i], i, tok->n_tokens);
    bool remove_space = tok->add_space_prefix;
    if ((flags & HS_TOK_REMOVE_SPECIAL) && tok->add_bos && n && ids[0] == tok->bos) {
        remove_space = false;
        ids++, n--;
    }
    if ((flags & HS_TOK_REMOVE_SPECIAL) && tok->add_eos && n && ids[n - 1] == tok->eos) n--;
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += tok->piece_len[ids[i]];
    char *out = malloc(total + 1);
    if (!out) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_tok_decode: out of memory for %zu bytes", total);
    total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        bool hidden = !(flags & HS_TOK_UNPARSE_SPECIAL) &&
                      (tok->attrs[id] & (HS_TOK_ATTR_CONTROL | HS_TOK_ATTR_UNKNOWN));
        const char *p = tok->pieces + tok->piece_off[id];
        size_t pl = hidden ? 0 : tok->piece_len[id];
        if (remove_space && pl && p[0] == ' ') p++, pl--; /* the space the encoder prefixed */
        remove_space = false;
        memcpy(out + total, p, pl);
        total += pl;
    }
    if (tok->clean_spaces) total = clean_spaces(out, total);
    out[total] = 0;
    *text = out;
    *len = total;
    return HS_OK;
}

hs_status hs_tok_piece(const hs_tok *tok, int32_t id, const char **piece, size_t *len) {
    if (!tok || !piece || !len) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_tok_piece: NULL argument");
    if (id < 0 || (uint32_t)id >= tok->n_tokens)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_tok_piece: id %d is outside the vocabulary (%u tokens)", id,
                       tok->n_tokens);
    *piece = tok->pieces + tok->piece_off[id];
    *len = tok->piece_len[id];
    return HS_OK;
}

/* ---- accessors ---- */

hs_tok_kind hs_tok_get_kind(const hs_tok *tok) { return tok->kind; }
uint32_t hs_tok_n_tokens(const hs_tok *tok) { return tok->n_tokens; }
int32_t hs_tok_bos(const hs_tok *tok) { return tok->bos; }
int32_t hs_tok_eos(const hs_tok *tok) { return tok->eos; }
int32_t hs_tok_unk(const hs_tok *tok) { return tok->unk; }
int32_t hs_tok_pad(const hs_tok *tok) { return tok->pad; }
bool hs_tok_add_bos(const hs_tok *tok) { return tok->add_bos; }
bool hs_tok_add_eos(const hs_tok *tok) { return tok->add_eos; }

const char *hs_tok_token_text(const hs_tok *tok, int32_t id) {
    if (id < 0 || (uint32_t)id >= tok->n_tokens) return NULL;
    return tok->texts + tok->text_off[id];
}

hs_tok_type hs_tok_token_type(const hs_tok *tok, int32_t id) {
    if (id < 0 || (uint32_t)id >= tok->n_tokens) return HS_TOK_TYPE_UNDEFINED;
    return (hs_tok_type)tok->types[id];
}

int32_t hs_tok_find(const hs_tok *tok, const char *text) {
    return text ? hs_tok__map_get(tok->by_text, text) : HS_TOK_NONE;
}
