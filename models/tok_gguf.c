/* tok_gguf: the tokenizer of a GGUF file (see tok_gguf.h). */
#include "tok_gguf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KEY_PREFIX "tokenizer.ggml."

/* Temporary arrays handed to hs_tok_create, freed after it has copied them. */
typedef struct tok_tmp {
    const char **tokens; /* (n_tokens) point into the hs_gguf */
    const char **merges; /* (n_merges) point into the hs_gguf */
    float *scores;       /* (n_tokens) or NULL */
    int32_t *types;      /* (n_tokens) or NULL */
} tok_tmp;

static bool is_int_type(hs_gguf_type t) {
    return t <= HS_GGUF_TYPE_INT32 || t == HS_GGUF_TYPE_UINT64 || t == HS_GGUF_TYPE_INT64;
}

/* The array under key, or NULL when absent (required: absent is an error). */
static hs_status find_array(const hs_gguf *g, const char *key, bool required, const hs_gguf_value **out) {
    *out = hs_gguf_find_key(g, key);
    if (!*out) {
        if (!required) return HS_OK;
        if (!strcmp(key, KEY_PREFIX "tokens")) {
            const char *arch = NULL;
            if (hs_gguf_architecture(g, &arch) == HS_OK && !strcmp(arch, "eagle3"))
                return HS_FAIL(HS_ERR_FORMAT,
                               "%s: this is an EAGLE-3 draft head (architecture 'eagle3'), not a model: give it "
                               "with --head and its target with -m",
                               hs_gguf_name(g));
            return HS_FAIL(HS_ERR_FORMAT, "%s: %s missing: this GGUF has no tokenizer", hs_gguf_name(g), key);
        }
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s missing: a BPE (gpt2) tokenizer needs its merges",
                       hs_gguf_name(g), key);
    }
    if ((*out)->type != HS_GGUF_TYPE_ARRAY)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s has type %s, expected an array", hs_gguf_name(g), key,
                       hs_gguf_type_name((*out)->type));
    return HS_OK;
}

/* Pointers to the NUL-terminated texts of a string array (NULL when absent and not required). */
static hs_status str_array(const hs_gguf *g, const char *key, bool required, const char ***out, uint32_t *n) {
    const hs_gguf_value *v;
    *out = NULL;
    *n = 0;
    hs_status st = find_array(g, key, required, &v);
    if (st != HS_OK || !v) return st;
    if (v->v.arr.type != HS_GGUF_TYPE_STRING)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s is an array of %s, expected an array of strings",
                       hs_gguf_name(g), key, hs_gguf_type_name(v->v.arr.type));
    /* ids are int32_t */
    if (v->v.arr.n > INT32_MAX || v->v.arr.n > SIZE_MAX / sizeof **out)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s has %llu entries (limit %d)", hs_gguf_name(g), key,
                       (unsigned long long)v->v.arr.n, INT32_MAX);
    *n = (uint32_t)v->v.arr.n;
    *out = malloc((*n ? *n : 1) * sizeof **out);
    if (!*out) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory for %s", hs_gguf_name(g), key);
    const hs_gguf_str *s = v->v.arr.data;
    for (uint32_t i = 0; i < *n; i++)
        (*out)[i] = s[i].s;
    return HS_OK;
}

/* A numeric array of at least n entries converted to float (scores) or int32_t (types); NULL when absent. */
static hs_status num_array(const hs_gguf *g, const char *key, uint32_t n, bool as_float, void **out) {
    hs_status st = HS_OK;
    const hs_gguf_value *v;
    *out = NULL;
    HS_TRY(find_array(g, key, false, &v));
    if (!v) return HS_OK;
    hs_gguf_type et = v->v.arr.type;
    bool is_float = et == HS_GGUF_TYPE_FLOAT32 || et == HS_GGUF_TYPE_FLOAT64;
    if (!is_int_type(et) && !(as_float && is_float))
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s is an array of %s, expected an array of %s", hs_gguf_name(g),
                       key, hs_gguf_type_name(et), as_float ? "numbers" : "integers");
    if (v->v.arr.n < n)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s has %llu entries for %u tokens", hs_gguf_name(g), key,
                       (unsigned long long)v->v.arr.n, n);
    float *f = as_float ? malloc((n ? n : 1) * sizeof *f) : NULL;
    int32_t *t = as_float ? NULL : malloc((n ? n : 1) * sizeof *t);
    if (!f && !t) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory for %s", hs_gguf_name(g), key);
    *out = as_float ? (void *)f : (void *)t;
    for (uint32_t i = 0; i < n; i++) {
        hs_gguf_value e;
        int64_t x;
        HS_TRY(hs_gguf_arr_elem(v, i, &e));
        if (t) {
            HS_TRY(hs_gguf_value_i32(&e, &t[i]));
        } else if (is_float) {
            HS_TRY(hs_gguf_value_f32(&e, &f[i]));
        } else {
            HS_TRY(hs_gguf_value_i64(&e, &x));
            f[i] = (float)x;
        }
    }
    return HS_OK;
fail:
    free(*out);
    *out = NULL;
    return st;
}

/* An optional string (NULL when absent). */
static hs_status opt_str(const hs_gguf *g, const char *key, bool required, const char **out) {
    *out = NULL;
    if (!hs_gguf_find_key(g, key)) {
        if (!required) return HS_OK;
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s missing: the tokenizer kind is unknown", hs_gguf_name(g), key);
    }
    return hs_gguf_get_str(g, key, out);
}

/* An optional special token id: HS_TOK_NONE when absent, and (as llama.cpp does) when outside the
 * vocabulary, so that the model's default applies. */
static hs_status opt_id(const hs_gguf *g, const char *key, uint32_t n_tokens, int32_t *out) {
    const hs_gguf_value *v = hs_gguf_find_key(g, key);
    int64_t x;
    *out = HS_TOK_NONE;
    if (!v) return HS_OK;
    if (!is_int_type(v->type))
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s has type %s, expected an integer token id", hs_gguf_name(g),
                       key, hs_gguf_type_name(v->type));
    if (v->type == HS_GGUF_TYPE_UINT64 && v->v.u > (uint64_t)INT64_MAX) return HS_OK; /* out of range */
    hs_status st = hs_gguf_value_i64(v, &x);
    if (st != HS_OK) return st;
    if (x >= 0 && x < (int64_t)n_tokens) *out = (int32_t)x;
    return HS_OK;
}

/* An optional flag: HS_TOK_DEFAULT when absent. */
static hs_status opt_flag(const hs_gguf *g, const char *key, int8_t *out) {
    const hs_gguf_value *v = hs_gguf_find_key(g, key);
    bool b;
    *out = HS_TOK_DEFAULT;
    if (!v) return HS_OK;
    if (v->type != HS_GGUF_TYPE_BOOL)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s has type %s, expected bool", hs_gguf_name(g), key,
                       hs_gguf_type_name(v->type));
    hs_status st = hs_gguf_value_bool(v, &b);
    if (st == HS_OK) *out = (int8_t)b;
    return st;
}

static hs_status fill_specials(const hs_gguf *g, hs_tok_vocab *v) {
    hs_status st = HS_OK;
    HS_TRY(opt_id(g, KEY_PREFIX "bos_token_id", v->n_tokens, &v->bos));
    HS_TRY(opt_id(g, KEY_PREFIX "eos_token_id", v->n_tokens, &v->eos));
    HS_TRY(opt_id(g, KEY_PREFIX "unknown_token_id", v->n_tokens, &v->unk));
    HS_TRY(opt_id(g, KEY_PREFIX "padding_token_id", v->n_tokens, &v->pad));
    HS_TRY(opt_flag(g, KEY_PREFIX "add_bos_token", &v->add_bos));
    HS_TRY(opt_flag(g, KEY_PREFIX "add_eos_token", &v->add_eos));
    HS_TRY(opt_flag(g, KEY_PREFIX "add_space_prefix", &v->add_space_prefix));
fail:
    return st;
}

hs_status hs_tok_from_gguf(const hs_gguf *g, hs_tok **out) {
    hs_status st = HS_OK;
    tok_tmp tmp = {0};
    hs_tok_vocab v = {0};
    void *scores = NULL, *types = NULL;
    if (!out) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_tok_from_gguf: out is NULL");
    *out = NULL;
    if (!g) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_tok_from_gguf: no GGUF file given");
    HS_TRY(str_array(g, KEY_PREFIX "tokens", true, &tmp.tokens, &v.n_tokens));
    HS_TRY(opt_str(g, KEY_PREFIX "model", true, &v.model));
    HS_TRY(opt_str(g, KEY_PREFIX "pre", false, &v.pre));
    HS_TRY(num_array(g, KEY_PREFIX "scores", v.n_tokens, true, &scores));
    tmp.scores = scores;
    HS_TRY(num_array(g, KEY_PREFIX "token_type", v.n_tokens, false, &types));
    tmp.types = types;
    /* llama.cpp refuses a BPE vocabulary without merges ("cannot find tokenizer merges") */
    HS_TRY(str_array(g, KEY_PREFIX "merges", !strcmp(v.model, "gpt2"), &tmp.merges, &v.n_merges));
    HS_TRY(fill_specials(g, &v));
    v.tokens = tmp.tokens;
    v.scores = tmp.scores;
    v.types = tmp.types;
    v.merges = tmp.merges;
    st = hs_tok_create(&v, out);
fail:
    free(tmp.tokens);
    free(tmp.merges);
    free(tmp.scores);
    free(tmp.types);
    return st;
}
