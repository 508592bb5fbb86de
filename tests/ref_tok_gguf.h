/* ref_tok_gguf — a minimal, test-only GGUF metadata reader for the tokenizer
 * tests, until the real reader (models/gguf.h) lands: it parses the header and
 * the key/value section (scalars, strings, arrays of scalars or strings; every
 * length bounds-checked against the file) and ignores the tensors.
 *
 * Usage:
 *   hs_ref_gguf *g;  HS_CHECK(hs_ref_gguf_open(path, &g));
 *   hs_tok_vocab v;  HS_CHECK(hs_ref_gguf_tok_vocab(g, &v));
 *   hs_tok *tok;     HS_CHECK(hs_tok_create(&v, &tok));
 *   hs_ref_gguf_close(g);   (v's pointers point into g: create the tokenizer first)
 *
 * Ownership: everything returned points into g and lives until hs_ref_gguf_close.
 * Thread-safety: none needed (tests).
 */
#ifndef HS_REF_TOK_GGUF_H
#define HS_REF_TOK_GGUF_H

#include <stdbool.h>
#include <stdint.h>

#include "hs_status.h"
#include "tokenizer.h"

typedef struct hs_ref_gguf hs_ref_gguf;

/* GGUF value types. */
enum {
    HS_REF_GGUF_U8 = 0,
    HS_REF_GGUF_I8 = 1,
    HS_REF_GGUF_U16 = 2,
    HS_REF_GGUF_I16 = 3,
    HS_REF_GGUF_U32 = 4,
    HS_REF_GGUF_I32 = 5,
    HS_REF_GGUF_F32 = 6,
    HS_REF_GGUF_BOOL = 7,
    HS_REF_GGUF_STRING = 8,
    HS_REF_GGUF_ARRAY = 9,
    HS_REF_GGUF_U64 = 10,
    HS_REF_GGUF_I64 = 11,
    HS_REF_GGUF_F64 = 12,
};

hs_status hs_ref_gguf_open(const char *path, hs_ref_gguf **out);
/* Parses a GGUF image held in memory (copied). */
hs_status hs_ref_gguf_parse(const void *data, size_t size, hs_ref_gguf **out);
void hs_ref_gguf_close(hs_ref_gguf *g);

/* Typed getters: false when the key is missing or has another type. */
bool hs_ref_gguf_str(const hs_ref_gguf *g, const char *key, const char **s);
bool hs_ref_gguf_int(const hs_ref_gguf *g, const char *key, int64_t *v); /* any integer type */
bool hs_ref_gguf_bool(const hs_ref_gguf *g, const char *key, bool *v);
bool hs_ref_gguf_str_arr(const hs_ref_gguf *g, const char *key, const char *const **s, uint64_t *n);
bool hs_ref_gguf_f32_arr(const hs_ref_gguf *g, const char *key, const float **v, uint64_t *n);
bool hs_ref_gguf_i32_arr(const hs_ref_gguf *g, const char *key, const int32_t **v, uint64_t *n);

/* Fills v from the tokenizer.ggml.* keys (model, pre, tokens, scores, token_type,
 * merges, bos/eos/unknown/padding ids, add_bos/add_eos/add_space_prefix). */
hs_status hs_ref_gguf_tok_vocab(hs_ref_gguf *g, hs_tok_vocab *v);

#endif
