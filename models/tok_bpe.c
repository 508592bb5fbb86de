/* tok_bpe: GPT-2 byte-level BPE (llama.cpp's llm_tokenizer_bpe_session).
 *
 * 1. Pre-tokenization: the text is decoded to code points (invalid UTF-8 bytes
 *    become U+FFFD, as in llama.cpp's unicode_cpts_from_utf8) and split into words
 *    by the pre-tokenizer's regexes, applied in turn to every word the previous
 *    one produced; text between matches is a word too (unicode_regex_split). The
 *    regexes are llama.cpp's, run by PCRE2 in UTF + UCP mode, so \p{L}, \p{N} and
 *    \s come from PCRE2's Unicode tables rather than hand-written ones.
 * 2. Byte encoding: every byte of a word maps to a printable code point (GPT-2's
 *    bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68
 *    bytes to U+0100 onwards, in byte order).
 * 3. Merging: adjacent symbols are merged lowest merge rank first (ties: leftmost).
 *    With ignore_merges (llama3), a word that is itself a token is taken whole.
 */
#include "tok_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- pre-tokenizers (regexes copied from llama.cpp's src/llama-vocab.cpp) ---- */

// clang-format off
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define RE_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
/* deepseek's character ranges, verbatim from llama.cpp (UTF-8 literals; PCRE2 reads them in UTF mode) */
#define DEEPSEEK_LLM_LETTERS \
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆ" \
    "Έ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷ" \
    "ᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐ" \
    "ῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄ" \
    "Ⰰ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-" \
    "ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+"
#define DEEPSEEK_LLM_PUNCT "\\s?[!-/:-~！-／：-～‘-‟　-。]+"
#define DEEPSEEK_CJK "[一-龥ࠀ-一가-퟿]+"

static const char *const re_default[] = {
    "[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]", NULL};
static const char *const re_gpt2[] = {RE_GPT2, NULL};
static const char *const re_starcoder[] = {"\\p{N}", RE_GPT2, NULL};
static const char *const re_qwen2[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
                    "|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_qwen35[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*"
                    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_llama3[] = {
    RE_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
                    "|\\s+(?!\\S)|\\s+",
    NULL};
static const char *const re_falcon[] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]", NULL};
static const char *const re_deepseek_llm[] = {
    "[\r\n]", DEEPSEEK_LLM_LETTERS, DEEPSEEK_LLM_PUNCT, "\\s+$", DEEPSEEK_CJK, "\\p{N}+", NULL};
static const char *const re_deepseek_coder[] = {
    "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", DEEPSEEK_CJK, "\\p{N}", NULL};
// clang-format on

struct hs_tok_pre_def {
    const char *name;
    const char *const *regex;
    bool clean_spaces;  /* decode removes spaces before punctuation (llama.cpp's clean_spaces) */
    bool ignore_merges; /* a word that is a token is taken whole */
    bool add_bos;       /* default of add_bos */
};

static const hs_tok_pre_def pre_defs[] = {
    {"default", re_default, true, false, false},
    {"gpt2", re_gpt2, true, false, false},
    {"gpt-2", re_gpt2, true, false, false},
    {"phi-2", re_gpt2, true, false, false},
    {"mpt", re_gpt2, true, false, false},
    {"olmo", re_gpt2, true, false, false},
    {"jais", re_gpt2, true, false, false},
    {"exaone4", re_gpt2, true, false, false},
    {"smollm", re_starcoder, false, false, false},
    {"command-r", re_starcoder, false, false, false},
    {"starcoder", re_starcoder, true, false, false},
    {"refact", re_starcoder, true, false, false},
    {"codeshell", re_starcoder, true, false, false},
    {"exaone", re_starcoder, true, false, false},
    {"minerva-7b", re_starcoder, true, false, false},
    {"qwen2", re_qwen2, false, false, false},
    {"deepseek-r1-qwen", re_qwen2, false, false, false},
    {"megrez", re_qwen2, true, false, false},
    {"stablelm2", re_qwen2, true, false, false},
    {"qwen35", re_qwen35, false, false, false},
    {"llama3", re_llama3, true, true, true},
    {"llama-v3", re_llama3, true, true, true},
    {"llama-bpe", re_llama3, true, true, true},
    {"falcon3", re_llama3, true, true, true},
    {"dbrx", re_llama3, true, false, false},
    {"smaug-bpe", re_llama3, true, false, false},
    {"falcon", re_falcon, true, false, false},
    {"deepseek-llm", re_deepseek_llm, false, false, false},
    {"deepseek-coder", re_deepseek_coder, false, false, false},
};

/* ---- creation ---- */

static void init_byte_map(hs_tok *tok) {
    int n = 0;
    for (int i = 0; i < 324; i++)
        tok->cpt_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cpt = printable ? (uint32_t)b : 256u + (uint32_t)n++;
        size_t l = hs_tok__utf8_put(cpt, tok->byte_utf8[b]);
        tok->byte_utf8[b][l] = 0;
        tok->cpt_byte[cpt] = (int16_t)b;
    }
}

static hs_status compile_regexes(hs_tok *tok) {
    uint32_t n = 0;
    while (tok->pre->regex[n])
        n++;
    tok->regex = calloc(n, sizeof *tok->regex);
    if (!tok->regex) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory");
    for (uint32_t i = 0; i < n; i++) {
        int err;
        PCRE2_SIZE at;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)tok->pre->regex[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE,
                           "tokenizer: pre-tokenizer '%s' regex %u: PCRE2 error at %zu: %s", tok->pre->name,
                           i, (size_t)at, (const char *)msg);
        }
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is used when JIT is missing */
        tok->regex[tok->n_regex++] = re;
    }
    return HS_OK;
}

/* Merge "left right" (split at the first space after the first byte, as llama.cpp)
 * -> rank, with key "left\xffright" (0xFF never occurs in UTF-8). First rank wins. */
static hs_status load_merges(hs_tok *tok, const hs_tok_vocab *v) {
    if (v->n_merges && !v->merges)
        return HS_FAIL(HS_ERR_FORMAT, "tokenizer: %u merges but no merge texts", v->n_merges);
    if (v->n_merges > INT32_MAX)
        return HS_FAIL(HS_ERR_FORMAT, "tokenizer: %u merges (limit 2^31 - 1)", v->n_merges);
    size_t total = 0;
    for (uint32_t i = 0; i < v->n_merges; i++) {
        const char *m = v->merges[i];
        if (!m) return HS_FAIL(HS_ERR_FORMAT, "tokenizer: merge %u has no text", i);
        if (!m[0] || !strchr(m + 1, ' '))
            return HS_FAIL(HS_ERR_FORMAT,
                           "tokenizer: merge %u ('%.40s') is not two parts separated by a space", i, m);
        total += strlen(m) + 1;
    }
    tok->merge_keys = malloc(total ? total : 1);
    if (!tok->merge_keys) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory for merges");
    char *p = tok->merge_keys;
    for (uint32_t i = 0; i < v->n_merges; i++) {
        size_t l = strlen(v->merges[i]);
        memcpy(p, v->merges[i], l + 1);
        p[strchr(p + 1, ' ') - p] = '\xff';
        if (hs_tok__map_get(tok->merges, p) == HS_TOK_NONE) stbds_shput(tok->merges, p, (int32_t)i);
        p += l + 1;
    }
    return HS_OK;
}

hs_status hs_tok__bpe_init(hs_tok *tok, const hs_tok_vocab *v) {
    hs_status st = HS_OK;
    const char *pre = v->pre && v->pre[0] ? v->pre : "default";
    for (size_t i = 0; i < sizeof pre_defs / sizeof pre_defs[0]; i++)
        if (strcmp(pre, pre_defs[i].name) == 0) tok->pre = &pre_defs[i];
    if (!tok->pre)
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "tokenizer: pre-tokenizer '%.64s' is not supported", pre);
    tok->clean_spaces = tok->pre->clean_spaces;
    tok->ignore_merges = tok->pre->ignore_merges;
    tok->pre_add_bos = tok->pre->add_bos;
    init_byte_map(tok);
    HS_TRY(compile_regexes(tok));
    HS_TRY(load_merges(tok, v));
fail:
    return st;
}

void hs_tok__bpe_free(hs_tok *tok) {
    for (uint32_t i = 0; i < tok->n_regex; i++)
        pcre2_code_free(tok->regex[i]);
    free(tok->regex);
    stbds_shfree(tok->merges);
    free(tok->merge_keys);
}

/* ---- pre-tokenization ---- */

typedef struct span {
    uint32_t start, end; /* code point indices */
} span;

typedef struct bpe_state {
    const hs_tok *tok;
    uint32_t *cpts;   /* code points of the fragment */
    char *subject;    /* valid UTF-8 the regexes run on */
    size_t *boff;     /* (n cpts + 1) byte offset of each code point in subject */
    uint32_t *cpt_at; /* byte offset in subject -> code point index */
    span *words, *next;
    pcre2_match_data *md;
    char *enc; /* byte-encoded word */
    char *key; /* merge lookup key */
    char *scratch;
} bpe_state;

/* Decodes the fragment. The regex subject must be valid UTF-8, so code points that
 * cannot be in it (surrogates from lenient decoding) take U+FFFD's place there, as
 * does U+180E, which PCRE2's \s matches but Unicode's White_Space (llama.cpp's \s)
 * does not; both keep their class for every regex used here (not \s, \p{L/N/M/P}). */
static void decode_fragment(bpe_state *s, const char *text, size_t len) {
    for (size_t i = 0; i < len;) {
        uint32_t c = hs_tok__utf8_next(text, len, &i);
        stbds_arrput(s->cpts, c);
        stbds_arrput(s->boff, stbds_arrlenu(s->subject));
        bool bad = (c >= 0xD800 && c <= 0xDFFF) || c == 0x180E;
        char buf[4];
        size_t l = hs_tok__utf8_put(bad ? 0xFFFD : c, buf);
        memcpy(stbds_arraddnptr(s->subject, l), buf, l);
    }
    stbds_arrput(s->boff, stbds_arrlenu(s->subject));
    stbds_arrsetlen(s->cpt_at, stbds_arrlenu(s->subject) + 1);
    for (size_t i = 0; i < stbds_arrlenu(s->boff); i++)
        s->cpt_at[s->boff[i]] = (uint32_t)i;
}

/* Splits word w by one regex into matches and the text between them. */
static hs_status split_word(bpe_state *s, const pcre2_code *re, span w) {
    const char *subj = s->subject + s->boff[w.start];
    size_t base = s->boff[w.start], n = s->boff[w.end] - base, pos = 0, last = 0;
    while (pos < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)subj, n, pos, PCRE2_NO_UTF_CHECK, s->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return HS_FAIL(HS_ERR_INVALID_ARG, "tokenizer: pre-tokenizer '%s' failed on a %zu-byte word: %s",
                           s->tok->pre->name, n, (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* none of llama.cpp's regexes matches empty; skip a character if one does */
            pos = ms + hs_tok__utf8_len((unsigned char)subj[ms]);
            continue;
        }
        if (ms > last) stbds_arrput(s->next, ((span){s->cpt_at[base + last], s->cpt_at[base + ms]}));
        stbds_arrput(s->next, ((span){s->cpt_at[base + ms], s->cpt_at[base + me]}));
        last = pos = me;
    }
    if (last < n) stbds_arrput(s->next, ((span){s->cpt_at[base + last], w.end}));
    return HS_OK;
}

static hs_status pretokenize(bpe_state *s, const char *text, size_t len) {
    hs_status st = HS_OK;
    decode_fragment(s, text, len);
    stbds_arrput(s->words, ((span){0, (uint32_t)stbds_arrlenu(s->cpts)}));
    for (uint32_t r = 0; r < s->tok->n_regex; r++) {
        HS_TOK_ARR_CLEAR(s->next);
        for (size_t w = 0; w < stbds_arrlenu(s->words); w++)
            HS_TRY(split_word(s, s->tok->regex[r], s->words[w]));
        span *t = s->words;
        s->words = s->next;
        s->next = t;
    }
fail:
    return st;
}

/* ---- merging ---- */

typedef struct bsym {
    int prev, next;
    size_t off, n;
} bsym;

typedef struct bbigram {
    int left, right;
    int32_t rank;
    size_t size;
} bbigram;

static bool bbefore(const bbigram *a, const bbigram *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void bheap_push(bbigram **h, bbigram b) {
    stbds_arrput(*h, b);
    size_t i = stbds_arrlenu(*h) - 1;
    while (i > 0 && bbefore(&(*h)[i], &(*h)[(i - 1) / 2])) {
        bbigram t = (*h)[i];
        (*h)[i] = (*h)[(i - 1) / 2];
        (*h)[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
}

static bbigram bheap_pop(bbigram *h) {
    bbigram top = h[0];
    size_t n = stbds_arrlenu(h) - 1, i = 0;
    h[0] = h[n];
    stbds_arrsetlen(h, n);
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && bbefore(&h[l], &h[m])) m = l;
        if (r < n && bbefore(&h[r], &h[m])) m = r;
        if (m == i) break;
        bbigram t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

typedef struct merge_state {
    bpe_state *s;
    bsym *syms;
    bbigram *heap;
} merge_state;

static void add_bigram(merge_state *m, int left, int right) {
    if (left < 0 || right < 0) return;
    const char *w = m->s->enc;
    bsym *l = &m->syms[left], *r = &m->syms[right];
    stbds_arrsetlen(m->s->key, l->n + r->n + 2);
    memcpy(m->s->key, w + l->off, l->n);
    m->s->key[l->n] = '\xff';
    memcpy(m->s->key + l->n + 1, w + r->off, r->n);
    m->s->key[l->n + r->n + 1] = 0;
    int32_t rank = hs_tok__map_get(m->s->tok->merges, m->s->key);
    if (rank != HS_TOK_NONE) bheap_push(&m->heap, (bbigram){left, right, rank, l->n + r->n});
}

/* Merges the byte-encoded word s->enc and appends its ids. */
static void merge_word(bpe_state *s, merge_state *m, int32_t **out) {
    const hs_tok *tok = s->tok;
    const char *w = s->enc;
    size_t len = stbds_arrlenu(s->enc);
    HS_TOK_ARR_CLEAR(m->syms);
    HS_TOK_ARR_CLEAR(m->heap);
    int32_t whole = tok->ignore_merges ? hs_tok__lookup(tok, w, len, &s->scratch) : HS_TOK_NONE;
    if (whole != HS_TOK_NONE) {
        stbds_arrput(*out, whole);
        return;
    }
    for (size_t off = 0; off < len;) {
        size_t n = hs_tok__utf8_len((unsigned char)w[off]);
        if (n > len - off) n = len - off;
        int idx = (int)stbds_arrlen(m->syms);
        stbds_arrput(m->syms, ((bsym){idx - 1, off + n == len ? -1 : idx + 1, off, n}));
        off += n;
    }
    for (int i = 1; i < (int)stbds_arrlen(m->syms); i++)
        add_bigram(m, i - 1, i);
    while (stbds_arrlenu(m->heap)) {
        bbigram b = bheap_pop(m->heap);
        bsym *l = &m->syms[b.left], *r = &m->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) m->syms[r->next].prev = b.left;
        add_bigram(m, l->prev, b.left);
        add_bigram(m, b.left, l->next);
    }
    for (size_t i = 0; i < stbds_arrlenu(m->syms); i++) {
        const bsym *y = &m->syms[i];
        if (!y->n) continue;
        int32_t id = hs_tok__lookup(tok, w + y->off, y->n, &s->scratch);
        if (id != HS_TOK_NONE) {
            stbds_arrput(*out, id);
            continue;
        }
        /* a symbol that is no token: llama.cpp emits the tokens of its single bytes, if any */
        for (size_t j = 0; j < y->n; j++) {
            id = hs_tok__lookup(tok, w + y->off + j, 1, &s->scratch);
            if (id != HS_TOK_NONE) stbds_arrput(*out, id);
        }
    }
}

hs_status hs_tok__bpe_encode(const hs_tok *tok, const char *text, size_t len, int32_t **out) {
    hs_status st = HS_OK;
    bpe_state s = {.tok = tok};
    merge_state m = {.s = &s};
    if (len > UINT32_MAX / 2)
        return HS_FAIL(HS_ERR_INVALID_ARG, "tokenizer: text of %zu bytes too long", len);
    s.md = pcre2_match_data_create(1, NULL);
    if (!s.md) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "tokenizer: out of memory for PCRE2 match data");
    HS_TRY(pretokenize(&s, text, len));
    for (size_t w = 0; w < stbds_arrlenu(s.words); w++) {
        HS_TOK_ARR_CLEAR(s.enc);
        for (uint32_t i = s.words[w].start; i < s.words[w].end; i++) {
            char buf[4];
            size_t l = hs_tok__utf8_put(s.cpts[i], buf);
            for (size_t j = 0; j < l; j++) {
                const char *e = tok->byte_utf8[(unsigned char)buf[j]];
                size_t el = strlen(e);
                memcpy(stbds_arraddnptr(s.enc, el), e, el);
            }
        }
        merge_word(&s, &m, out);
    }
fail:
    pcre2_match_data_free(s.md);
    stbds_arrfree(s.cpts);
    stbds_arrfree(s.subject);
    stbds_arrfree(s.boff);
    stbds_arrfree(s.cpt_at);
    stbds_arrfree(s.words);
    stbds_arrfree(s.next);
    stbds_arrfree(s.enc);
    stbds_arrfree(s.key);
    stbds_arrfree(s.scratch);
    stbds_arrfree(m.syms);
    stbds_arrfree(m.heap);
    return st;
}

/* ---- decoding (llama.cpp's llama_decode_text) ---- */

void hs_tok__bpe_decode_text(const hs_tok *tok, const char *text, size_t len, char **out) {
    for (size_t i = 0; i < len;) {
        uint32_t c = hs_tok__utf8_next(text, len, &i);
        if (c < 324 && tok->cpt_byte[c] >= 0) {
            stbds_arrput(*out, (char)tok->cpt_byte[c]);
            continue;
        }
        /* not a byte-level code point: llama.cpp writes a marker with the token text */
        char buf[4], hex[3];
        size_t l = hs_tok__utf8_put(c, buf);
        memcpy(stbds_arraddnptr(*out, 12), "[UNK_BYTE_0x", 12);
        for (size_t j = 0; j < l; j++) {
            snprintf(hex, sizeof hex, "%02x", (unsigned char)buf[j]);
            memcpy(stbds_arraddnptr(*out, 2), hex, 2);
        }
        memcpy(stbds_arraddnptr(*out, len), text, len);
        stbds_arrput(*out, ']');
    }
}
