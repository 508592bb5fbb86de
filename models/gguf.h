/* gguf — a read-only, memory-mapped reader of GGUF model files (versions 2 and 3, little-endian).
 *
 * hs_gguf_open() maps the file and validates the whole header before it returns: the magic, the version,
 * every metadata key and value (all value types, arrays of any scalar type and of strings; nested arrays are
 * rejected), general.alignment (default 32, a power of two), and every tensor info (name, 1..4 dimensions,
 * known ggml type, element count a multiple of the block size, aligned offset, data inside the file). Every
 * length, count, offset and size is checked against the file size and every multiplication against overflow,
 * so a malformed file gives HS_ERR_FORMAT with a specific message (hs_last_error()) and never a crash, and
 * after a successful open every accessor below is safe.
 *
 * Usage:
 *   hs_gguf *g = NULL;
 *   HS_TRY(hs_gguf_open("model.gguf", &g));
 *   uint32_t n_layer;
 *   HS_TRY(hs_gguf_get_u32(g, "llama.block_count", &n_layer));      // any integer type that fits
 *   const hs_gguf_value *tok = hs_gguf_find_key(g, "tokenizer.ggml.tokens");   // NULL if absent
 *   hs_gguf_str s;
 *   HS_TRY(hs_gguf_arr_str(tok, 5, &s));                            // s.s is NUL-terminated, s.len bytes
 *   const hs_gguf_tensor *t;
 *   HS_TRY(hs_gguf_get_tensor(g, "token_embd.weight", &t));          // t->data points into the mapping
 *   ...
 *   hs_gguf_close(g);
 *
 * Layout conventions: a tensor's ne[0] is the fastest-varying dimension (ggml order); unused dimensions
 * are 1. Tensor data and numeric array elements are little-endian bytes inside the mapping and may be
 * unaligned for their type (GGUF only aligns tensor data to general.alignment); read array elements with the
 * accessors.
 *
 * Ownership: hs_gguf_open/hs_gguf_open_memory give ownership of the hs_gguf to the caller; hs_gguf_close
 * accepts NULL. Every pointer handed out (keys, strings, value views, tensor infos, tensor data) is borrowed
 * from the hs_gguf and valid until hs_gguf_close. hs_gguf_open_memory borrows the caller's bytes, which must
 * outlive the hs_gguf. String values are copied once at open into one NUL-terminated arena; nothing else is.
 * The file is mapped read-only and private; like every mmap reader, reads fault (SIGBUS) if another process
 * truncates the file while it is open.
 *
 * Thread-safety: an open hs_gguf is never modified, so any number of threads may read it at once (lookups do
 * not write to the hash maps). Error messages are per thread (hs_status.h).
 */
#ifndef HS_GGUF_H
#define HS_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hs_status.h"

#define HS_GGUF_MAX_DIMS          4
#define HS_GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types, numbered as in the file. */
typedef enum hs_gguf_type {
    HS_GGUF_TYPE_UINT8 = 0,
    HS_GGUF_TYPE_INT8 = 1,
    HS_GGUF_TYPE_UINT16 = 2,
    HS_GGUF_TYPE_INT16 = 3,
    HS_GGUF_TYPE_UINT32 = 4,
    HS_GGUF_TYPE_INT32 = 5,
    HS_GGUF_TYPE_FLOAT32 = 6,
    HS_GGUF_TYPE_BOOL = 7,
    HS_GGUF_TYPE_STRING = 8,
    HS_GGUF_TYPE_ARRAY = 9,
    HS_GGUF_TYPE_UINT64 = 10,
    HS_GGUF_TYPE_INT64 = 11,
    HS_GGUF_TYPE_FLOAT64 = 12,
    HS_GGUF_TYPE_COUNT = 13,
} hs_gguf_type;

/* Short name of a value type ("u32", "str", "arr", ...; "?" if out of range). */
const char *hs_gguf_type_name(hs_gguf_type t);

/* Tensor data types, numbered as ggml's enum ggml_type (gaps are types ggml removed). */
typedef enum hs_ggml_type {
    HS_GGML_TYPE_F32 = 0,
    HS_GGML_TYPE_F16 = 1,
    HS_GGML_TYPE_Q4_0 = 2,
    HS_GGML_TYPE_Q4_1 = 3,
    HS_GGML_TYPE_Q5_0 = 6,
    HS_GGML_TYPE_Q5_1 = 7,
    HS_GGML_TYPE_Q8_0 = 8,
    HS_GGML_TYPE_Q8_1 = 9,
    HS_GGML_TYPE_Q2_K = 10,
    HS_GGML_TYPE_Q3_K = 11,
    HS_GGML_TYPE_Q4_K = 12,
    HS_GGML_TYPE_Q5_K = 13,
    HS_GGML_TYPE_Q6_K = 14,
    HS_GGML_TYPE_Q8_K = 15,
    HS_GGML_TYPE_IQ2_XXS = 16,
    HS_GGML_TYPE_IQ2_XS = 17,
    HS_GGML_TYPE_IQ3_XXS = 18,
    HS_GGML_TYPE_IQ1_S = 19,
    HS_GGML_TYPE_IQ4_NL = 20,
    HS_GGML_TYPE_IQ3_S = 21,
    HS_GGML_TYPE_IQ2_S = 22,
    HS_GGML_TYPE_IQ4_XS = 23,
    HS_GGML_TYPE_I8 = 24,
    HS_GGML_TYPE_I16 = 25,
    HS_GGML_TYPE_I32 = 26,
    HS_GGML_TYPE_I64 = 27,
    HS_GGML_TYPE_F64 = 28,
    HS_GGML_TYPE_IQ1_M = 29,
    HS_GGML_TYPE_BF16 = 30,
    HS_GGML_TYPE_TQ1_0 = 34,
    HS_GGML_TYPE_TQ2_0 = 35,
    HS_GGML_TYPE_MXFP4 = 39,
    HS_GGML_TYPE_COUNT = 40,
} hs_ggml_type;

/* Size facts of a ggml type: block_size elements are stored in type_size bytes. */
typedef struct hs_ggml_type_info {
    const char *name; /* "F32", "Q4_K", "IQ4_XS", "BF16", ... */
    uint32_t block_size;
    uint32_t type_size;
} hs_ggml_type_info;

/* Facts of ggml type t, or NULL if t is unknown (out of range or a removed type). */
const hs_ggml_type_info *hs_ggml_type_get(uint32_t t);

/* A string inside the file: s is NUL-terminated, len bytes long (GGUF strings may contain NUL bytes; len is
 * the truth). */
typedef struct hs_gguf_str {
    const char *s;
    uint64_t len;
} hs_gguf_str;

/* A typed view of one metadata value (or of one array element, see hs_gguf_arr_elem). */
typedef struct hs_gguf_value {
    const char *key; /* the key (for array elements: the array's key) */
    int64_t index;   /* -1 for a key's value; the element index for an array element */
    hs_gguf_type type;
    union {
        uint64_t u;    /* UINT8, UINT16, UINT32, UINT64 */
        int64_t i;     /* INT8, INT16, INT32, INT64 */
        double f;      /* FLOAT32, FLOAT64 (float32 converted exactly) */
        bool b;        /* BOOL */
        hs_gguf_str s; /* STRING */
        struct {
            hs_gguf_type type; /* element type: any type but ARRAY */
            uint64_t n;
            /* STRING elements: an array of n hs_gguf_str; otherwise n packed little-endian elements inside
             * the mapping (possibly unaligned). */
            const void *data;
        } arr; /* ARRAY */
    } v;
} hs_gguf_value;

/* One tensor info. */
typedef struct hs_gguf_tensor {
    const char *name;
    hs_ggml_type type;
    uint32_t n_dims;              /* 1..4 */
    int64_t ne[HS_GGUF_MAX_DIMS]; /* elements per dimension, ne[0] fastest; unused dimensions are 1 */
    uint64_t offset;              /* from the start of the data section */
    uint64_t nbytes;
    const void *data; /* inside the mapping, aligned to general.alignment from the file start */
} hs_gguf_tensor;

typedef struct hs_gguf hs_gguf;

/* Maps and validates the file at path. HS_ERR_IO if it cannot be opened or mapped, HS_ERR_FORMAT if it is not
 * a valid GGUF v2/v3 file. */
hs_status hs_gguf_open(const char *path, hs_gguf **out);

/* Same over size bytes at data, borrowed (they must stay valid until hs_gguf_close). name is used in messages
 * (may be NULL). */
hs_status hs_gguf_open_memory(const void *data, size_t size, const char *name, hs_gguf **out);

void hs_gguf_close(hs_gguf *g);

/* File facts. */
uint32_t hs_gguf_version(const hs_gguf *g);
uint32_t hs_gguf_alignment(const hs_gguf *g);
uint64_t hs_gguf_data_offset(const hs_gguf *g); /* start of the data section in the file */
uint64_t hs_gguf_file_size(const hs_gguf *g);
const char *hs_gguf_name(const hs_gguf *g); /* path or name given at open */

/* ---- metadata ---- */

uint64_t hs_gguf_n_kv(const hs_gguf *g);
/* The i-th key/value in file order (i < hs_gguf_n_kv), or NULL if out of range. */
const hs_gguf_value *hs_gguf_kv_at(const hs_gguf *g, uint64_t i);
/* The value of key, or NULL if the file has no such key. */
const hs_gguf_value *hs_gguf_find_key(const hs_gguf *g, const char *key);

/* Typed getters: HS_ERR_FORMAT if the key is missing or its value does not have the type asked for (the
 * message names the key, the type found and the type expected). Integer getters accept any integer type
 * whose value fits; get_f32 accepts FLOAT32 and FLOAT64; get_bool only BOOL; get_str only STRING. */
hs_status hs_gguf_get_u32(const hs_gguf *g, const char *key, uint32_t *out);
hs_status hs_gguf_get_i32(const hs_gguf *g, const char *key, int32_t *out);
hs_status hs_gguf_get_u64(const hs_gguf *g, const char *key, uint64_t *out);
hs_status hs_gguf_get_f32(const hs_gguf *g, const char *key, float *out);
hs_status hs_gguf_get_bool(const hs_gguf *g, const char *key, bool *out);
hs_status hs_gguf_get_str(const hs_gguf *g, const char *key, const char **out); /* NUL-terminated */
/* The array under key; elem_type is checked unless it is HS_GGUF_TYPE_COUNT (any). */
hs_status hs_gguf_get_arr(const hs_gguf *g, const char *key, hs_gguf_type elem_type,
                          const hs_gguf_value **out);

/* The same conversions on a value view (from hs_gguf_find_key, hs_gguf_kv_at or hs_gguf_arr_elem). */
hs_status hs_gguf_value_u32(const hs_gguf_value *v, uint32_t *out);
hs_status hs_gguf_value_i32(const hs_gguf_value *v, int32_t *out);
hs_status hs_gguf_value_u64(const hs_gguf_value *v, uint64_t *out);
hs_status hs_gguf_value_i64(const hs_gguf_value *v, int64_t *out);
hs_status hs_gguf_value_f32(const hs_gguf_value *v, float *out);
hs_status hs_gguf_value_bool(const hs_gguf_value *v, bool *out);
hs_status hs_gguf_value_str(const hs_gguf_value *v, hs_gguf_str *out);

/* Arrays. arr must be an ARRAY value; HS_ERR_FORMAT if it is not, HS_ERR_OUT_OF_RANGE if i >= length. */
hs_status hs_gguf_arr_elem(const hs_gguf_value *arr, uint64_t i, hs_gguf_value *out); /* scalar view */
hs_status hs_gguf_arr_u32(const hs_gguf_value *arr, uint64_t i, uint32_t *out);
hs_status hs_gguf_arr_i32(const hs_gguf_value *arr, uint64_t i, int32_t *out);
hs_status hs_gguf_arr_f32(const hs_gguf_value *arr, uint64_t i, float *out);
hs_status hs_gguf_arr_str(const hs_gguf_value *arr, uint64_t i, hs_gguf_str *out);

/* general.architecture ("llama", "qwen2", ...); HS_ERR_FORMAT if missing or not a string. */
hs_status hs_gguf_architecture(const hs_gguf *g, const char **out);

/* ---- tensors ---- */

uint64_t hs_gguf_n_tensors(const hs_gguf *g);
/* The i-th tensor in file order, or NULL if out of range. */
const hs_gguf_tensor *hs_gguf_tensor_at(const hs_gguf *g, uint64_t i);
/* The tensor called name, or NULL if there is none. */
const hs_gguf_tensor *hs_gguf_find_tensor(const hs_gguf *g, const char *name);
/* Same, with HS_ERR_FORMAT ("tensor 'x' not found in file") when it is missing. */
hs_status hs_gguf_get_tensor(const hs_gguf *g, const char *name, const hs_gguf_tensor **out);
/* ne[0] * ne[1] * ne[2] * ne[3]. */
int64_t hs_gguf_tensor_nelements(const hs_gguf_tensor *t);

#endif
