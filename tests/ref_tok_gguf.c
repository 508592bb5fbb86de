/* ref_tok_gguf: test-only GGUF metadata reader (see ref_tok_gguf.h). */
#include "ref_tok_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ref_kv {
    char *key;
    uint32_t type;     /* HS_REF_GGUF_* */
    uint32_t arr_type; /* element type of arrays */
    uint64_t n;        /* array length */
    int64_t i;         /* integer and bool scalars */
    char *str;         /* string scalar */
    char **strs;       /* (n) string array, pointing into str_block */
    char *str_block;
    void *arr; /* numeric array, aligned copy */
} ref_kv;

struct hs_ref_gguf {
    ref_kv *kvs;
    uint64_t n_kv;
    float *scores_f32; /* integer scores converted for hs_tok_vocab */
};

typedef struct cur {
    const uint8_t *base, *p;
    size_t left;
} cur;

static size_t type_size(uint32_t t) {
    switch (t) {
    case HS_REF_GGUF_U8:
    case HS_REF_GGUF_I8:
    case HS_REF_GGUF_BOOL: return 1;
    case HS_REF_GGUF_U16:
    case HS_REF_GGUF_I16: return 2;
    case HS_REF_GGUF_U32:
    case HS_REF_GGUF_I32:
    case HS_REF_GGUF_F32: return 4;
    case HS_REF_GGUF_U64:
    case HS_REF_GGUF_I64:
    case HS_REF_GGUF_F64: return 8;
    default: return 0;
    }
}

static hs_status take(cur *c, void *dst, size_t n, const char *what) {
    if (n > c->left)
        return HS_FAIL(HS_ERR_FORMAT, "gguf: truncated at byte %zu reading %s (%zu bytes wanted, %zu left)",
                       (size_t)(c->p - c->base), what, n, c->left);
    if (dst) memcpy(dst, c->p, n);
    c->p += n;
    c->left -= n;
    return HS_OK;
}

static hs_status read_str(cur *c, char **out, const char *what) {
    hs_status st = HS_OK;
    uint64_t len = 0;
    HS_TRY(take(c, &len, 8, what));
    if (len > c->left)
        return HS_FAIL(HS_ERR_FORMAT, "gguf: %s of %llu bytes runs past the end of the file", what,
                       (unsigned long long)len);
    *out = malloc(len + 1);
    if (!*out) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "gguf: out of memory");
    HS_TRY(take(c, *out, len, what));
    (*out)[len] = 0;
fail:
    return st;
}

/* Strings of an array: one block for all texts, plus the pointer array. */
static hs_status read_str_arr(cur *c, ref_kv *kv) {
    hs_status st = HS_OK;
    cur scan = *c;
    uint64_t total = 0;
    if (kv->n > c->left / 8) /* every string takes at least its 8-byte length */
        return HS_FAIL(HS_ERR_FORMAT, "gguf: string array %s of %llu elements runs past the end of the file",
                       kv->key, (unsigned long long)kv->n);
    for (uint64_t i = 0; i < kv->n; i++) {
        uint64_t len = 0;
        HS_TRY(take(&scan, &len, 8, kv->key));
        HS_TRY(take(&scan, NULL, len > SIZE_MAX ? SIZE_MAX : (size_t)len, kv->key));
        total += len + 1;
    }
    kv->strs = malloc((size_t)kv->n * sizeof *kv->strs + 1);
    kv->str_block = malloc((size_t)total + 1);
    if (!kv->strs || !kv->str_block) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "gguf: out of memory");
    char *p = kv->str_block;
    for (uint64_t i = 0; i < kv->n; i++) {
        uint64_t len = 0;
        HS_TRY(take(c, &len, 8, kv->key));
        HS_TRY(take(c, p, (size_t)len, kv->key));
        p[len] = 0;
        kv->strs[i] = p;
        p += len + 1;
    }
fail:
    return st;
}

static int64_t scalar_int(uint32_t t, const uint8_t *b) {
    switch (t) {
    case HS_REF_GGUF_U8:
    case HS_REF_GGUF_BOOL: return b[0];
    case HS_REF_GGUF_I8: return (int8_t)b[0];
    case HS_REF_GGUF_U16: {
        uint16_t v;
        memcpy(&v, b, 2);
        return v;
    }
    case HS_REF_GGUF_I16: {
        int16_t v;
        memcpy(&v, b, 2);
        return v;
    }
    case HS_REF_GGUF_U32: {
        uint32_t v;
        memcpy(&v, b, 4);
        return v;
    }
    case HS_REF_GGUF_I32: {
        int32_t v;
        memcpy(&v, b, 4);
        return v;
    }
    case HS_REF_GGUF_U64:
    case HS_REF_GGUF_I64: {
        int64_t v;
        memcpy(&v, b, 8);
        return v;
    }
    default: return 0;
    }
}

static hs_status read_value(cur *c, ref_kv *kv) {
    hs_status st = HS_OK;
    if (kv->type == HS_REF_GGUF_STRING) return read_str(c, &kv->str, kv->key);
    if (kv->type == HS_REF_GGUF_ARRAY) {
        HS_TRY(take(c, &kv->arr_type, 4, kv->key));
        HS_TRY(take(c, &kv->n, 8, kv->key));
        if (kv->arr_type == HS_REF_GGUF_STRING) return read_str_arr(c, kv);
        size_t es = type_size(kv->arr_type);
        if (!es)
            return HS_FAIL(HS_ERR_FORMAT, "gguf: key %s is an array of type %u (unsupported)", kv->key,
                           kv->arr_type);
        if (kv->n > c->left / es)
            return HS_FAIL(HS_ERR_FORMAT, "gguf: array %s of %llu elements runs past the end of the file",
                           kv->key, (unsigned long long)kv->n);
        kv->arr = malloc((size_t)kv->n * es + 1);
        if (!kv->arr) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "gguf: out of memory");
        return take(c, kv->arr, (size_t)kv->n * es, kv->key);
    }
    size_t es = type_size(kv->type);
    if (!es) return HS_FAIL(HS_ERR_FORMAT, "gguf: key %s has unknown type %u", kv->key, kv->type);
    uint8_t b[8];
    HS_TRY(take(c, b, es, kv->key));
    kv->i = scalar_int(kv->type, b);
fail:
    return st;
}

hs_status hs_ref_gguf_parse(const void *data, size_t size, hs_ref_gguf **out) {
    hs_status st = HS_OK;
    cur c = {data, data, size};
    hs_ref_gguf *g = calloc(1, sizeof *g);
    if (!g) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "gguf: out of memory");
    char magic[4];
    uint32_t version;
    uint64_t n_tensors, n_kv;
    HS_TRY(take(&c, magic, 4, "the magic"));
    if (memcmp(magic, "GGUF", 4) != 0) {
        st = HS_FAIL(HS_ERR_FORMAT, "gguf: bad magic (not a GGUF file)");
        goto fail;
    }
    HS_TRY(take(&c, &version, 4, "the version"));
    if (version < 2 || version > 3) {
        st = HS_FAIL(HS_ERR_FORMAT, "gguf: version %u not supported (2, 3)", version);
        goto fail;
    }
    HS_TRY(take(&c, &n_tensors, 8, "the tensor count"));
    HS_TRY(take(&c, &n_kv, 8, "the key count"));
    if (n_kv > c.left / 13) { /* a key/value takes at least 8 + 1 + 4 bytes */
        st = HS_FAIL(HS_ERR_FORMAT, "gguf: %llu keys cannot fit in the file", (unsigned long long)n_kv);
        goto fail;
    }
    g->kvs = calloc((size_t)n_kv + 1, sizeof *g->kvs);
    if (!g->kvs) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "gguf: out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        ref_kv *kv = &g->kvs[i];
        g->n_kv = i + 1;
        HS_TRY(read_str(&c, &kv->key, "a key"));
        HS_TRY(take(&c, &kv->type, 4, kv->key));
        HS_TRY(read_value(&c, kv));
    }
    *out = g;
    return HS_OK;
fail:
    hs_ref_gguf_close(g);
    return st;
}

hs_status hs_ref_gguf_open(const char *path, hs_ref_gguf **out) {
    hs_status st = HS_OK;
    uint8_t *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return HS_FAIL(HS_ERR_IO, "gguf: cannot open %s", path);
    if (fseek(f, 0, SEEK_END) != 0) {
        st = HS_FAIL(HS_ERR_IO, "gguf: cannot seek %s", path);
        goto fail;
    }
    long size = ftell(f);
    rewind(f);
    buf = malloc(size > 0 ? (size_t)size : 1);
    if (size < 0 || !buf || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        st = HS_FAIL(HS_ERR_IO, "gguf: cannot read %s", path);
        goto fail;
    }
    st = hs_ref_gguf_parse(buf, (size_t)size, out);
fail:
    free(buf);
    fclose(f);
    return st;
}

void hs_ref_gguf_close(hs_ref_gguf *g) {
    if (!g) return;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        free(g->kvs[i].key);
        free(g->kvs[i].str);
        free(g->kvs[i].strs);
        free(g->kvs[i].str_block);
        free(g->kvs[i].arr);
    }
    free(g->kvs);
    free(g->scores_f32);
    free(g);
}

static const ref_kv *find(const hs_ref_gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kvs[i].key, key) == 0) return &g->kvs[i];
    return NULL;
}

bool hs_ref_gguf_str(const hs_ref_gguf *g, const char *key, const char **s) {
    const ref_kv *kv = find(g, key);
    if (!kv || kv->type != HS_REF_GGUF_STRING) return false;
    *s = kv->str;
    return true;
}

bool hs_ref_gguf_int(const hs_ref_gguf *g, const char *key, int64_t *v) {
    const ref_kv *kv = find(g, key);
    if (!kv || kv->type == HS_REF_GGUF_F32 || kv->type == HS_REF_GGUF_F64 || kv->type == HS_REF_GGUF_BOOL ||
        !type_size(kv->type))
        return false;
    *v = kv->i;
    return true;
}

bool hs_ref_gguf_bool(const hs_ref_gguf *g, const char *key, bool *v) {
    const ref_kv *kv = find(g, key);
    if (!kv || kv->type != HS_REF_GGUF_BOOL) return false;
    *v = kv->i != 0;
    return true;
}

bool hs_ref_gguf_str_arr(const hs_ref_gguf *g, const char *key, const char *const **s, uint64_t *n) {
    const ref_kv *kv = find(g, key);
    if (!kv || kv->type != HS_REF_GGUF_ARRAY || kv->arr_type != HS_REF_GGUF_STRING) return false;
    *s = (const char *const *)kv->strs;
    *n = kv->n;
    return true;
}

static bool num_arr(const hs_ref_gguf *g, const char *key, uint32_t type, const void **v, uint64_t *n) {
    const ref_kv *kv = find(g, key);
    if (!kv || kv->type != HS_REF_GGUF_ARRAY || kv->arr_type != type) return false;
    *v = kv->arr;
    *n = kv->n;
    return true;
}

bool hs_ref_gguf_f32_arr(const hs_ref_gguf *g, const char *key, const float **v, uint64_t *n) {
    return num_arr(g, key, HS_REF_GGUF_F32, (const void **)v, n);
}

bool hs_ref_gguf_i32_arr(const hs_ref_gguf *g, const char *key, const int32_t **v, uint64_t *n) {
    return num_arr(g, key, HS_REF_GGUF_I32, (const void **)v, n);
}

static int8_t flag(const hs_ref_gguf *g, const char *key) {
    bool b;
    return hs_ref_gguf_bool(g, key, &b) ? (int8_t)b : (int8_t)HS_TOK_DEFAULT;
}

static int32_t id(const hs_ref_gguf *g, const char *key) {
    int64_t v;
    return hs_ref_gguf_int(g, key, &v) && v >= 0 && v <= INT32_MAX ? (int32_t)v : HS_TOK_NONE;
}

hs_status hs_ref_gguf_tok_vocab(hs_ref_gguf *g, hs_tok_vocab *v) {
    uint64_t n = 0, m = 0;
    memset(v, 0, sizeof *v);
    if (!hs_ref_gguf_str(g, "tokenizer.ggml.model", &v->model))
        return HS_FAIL(HS_ERR_FORMAT, "gguf: no tokenizer.ggml.model string");
    if (!hs_ref_gguf_str(g, "tokenizer.ggml.pre", &v->pre)) v->pre = NULL;
    if (!hs_ref_gguf_str_arr(g, "tokenizer.ggml.tokens", &v->tokens, &n) || n > UINT32_MAX)
        return HS_FAIL(HS_ERR_FORMAT, "gguf: no tokenizer.ggml.tokens string array");
    v->n_tokens = (uint32_t)n;
    const int32_t *iscores;
    if (hs_ref_gguf_f32_arr(g, "tokenizer.ggml.scores", &v->scores, &m)) {
        if (m < n)
            return HS_FAIL(HS_ERR_FORMAT, "gguf: %llu scores for %llu tokens", (unsigned long long)m,
                           (unsigned long long)n);
    } else if (hs_ref_gguf_i32_arr(g, "tokenizer.ggml.scores", &iscores, &m)) {
        if (m < n)
            return HS_FAIL(HS_ERR_FORMAT, "gguf: %llu scores for %llu tokens", (unsigned long long)m,
                           (unsigned long long)n);
        free(g->scores_f32);
        g->scores_f32 = malloc((size_t)n * sizeof *g->scores_f32 + 1);
        if (!g->scores_f32) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "gguf: out of memory");
        for (uint64_t i = 0; i < n; i++)
            g->scores_f32[i] = (float)iscores[i];
        v->scores = g->scores_f32;
    }
    if (hs_ref_gguf_i32_arr(g, "tokenizer.ggml.token_type", &v->types, &m) && m < n)
        return HS_FAIL(HS_ERR_FORMAT, "gguf: %llu token types for %llu tokens", (unsigned long long)m,
                       (unsigned long long)n);
    if (hs_ref_gguf_str_arr(g, "tokenizer.ggml.merges", &v->merges, &m)) {
        if (m > UINT32_MAX) return HS_FAIL(HS_ERR_FORMAT, "gguf: too many merges");
        v->n_merges = (uint32_t)m;
    }
    v->bos = id(g, "tokenizer.ggml.bos_token_id");
    v->eos = id(g, "tokenizer.ggml.eos_token_id");
    v->unk = id(g, "tokenizer.ggml.unknown_token_id");
    v->pad = id(g, "tokenizer.ggml.padding_token_id");
    v->add_bos = flag(g, "tokenizer.ggml.add_bos_token");
    v->add_eos = flag(g, "tokenizer.ggml.add_eos_token");
    v->add_space_prefix = flag(g, "tokenizer.ggml.add_space_prefix");
    return HS_OK;
}
