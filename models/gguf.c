/* gguf — GGUF v2/v3 reader: parsing and validation at open, then read-only accessors. See gguf.h. */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, mmap under strict C11 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

/* ---- ggml types ---- */

/* Block layouts from ggml-common.h (block_q4_0 = f16 scale + 16 bytes of nibbles = 18 bytes per 32, ...). */
static const hs_ggml_type_info k_ggml_types[HS_GGML_TYPE_COUNT] = {
    [HS_GGML_TYPE_F32] = {"F32", 1, 4},
    [HS_GGML_TYPE_F16] = {"F16", 1, 2},
    [HS_GGML_TYPE_Q4_0] = {"Q4_0", 32, 18},
    [HS_GGML_TYPE_Q4_1] = {"Q4_1", 32, 20},
    [HS_GGML_TYPE_Q5_0] = {"Q5_0", 32, 22},
    [HS_GGML_TYPE_Q5_1] = {"Q5_1", 32, 24},
    [HS_GGML_TYPE_Q8_0] = {"Q8_0", 32, 34},
    [HS_GGML_TYPE_Q8_1] = {"Q8_1", 32, 36},
    [HS_GGML_TYPE_Q2_K] = {"Q2_K", 256, 84},
    [HS_GGML_TYPE_Q3_K] = {"Q3_K", 256, 110},
    [HS_GGML_TYPE_Q4_K] = {"Q4_K", 256, 144},
    [HS_GGML_TYPE_Q5_K] = {"Q5_K", 256, 176},
    [HS_GGML_TYPE_Q6_K] = {"Q6_K", 256, 210},
    [HS_GGML_TYPE_Q8_K] = {"Q8_K", 256, 292},
    [HS_GGML_TYPE_IQ2_XXS] = {"IQ2_XXS", 256, 66},
    [HS_GGML_TYPE_IQ2_XS] = {"IQ2_XS", 256, 74},
    [HS_GGML_TYPE_IQ3_XXS] = {"IQ3_XXS", 256, 98},
    [HS_GGML_TYPE_IQ1_S] = {"IQ1_S", 256, 50},
    [HS_GGML_TYPE_IQ4_NL] = {"IQ4_NL", 32, 18},
    [HS_GGML_TYPE_IQ3_S] = {"IQ3_S", 256, 110},
    [HS_GGML_TYPE_IQ2_S] = {"IQ2_S", 256, 82},
    [HS_GGML_TYPE_IQ4_XS] = {"IQ4_XS", 256, 136},
    [HS_GGML_TYPE_I8] = {"I8", 1, 1},
    [HS_GGML_TYPE_I16] = {"I16", 1, 2},
    [HS_GGML_TYPE_I32] = {"I32", 1, 4},
    [HS_GGML_TYPE_I64] = {"I64", 1, 8},
    [HS_GGML_TYPE_F64] = {"F64", 1, 8},
    [HS_GGML_TYPE_IQ1_M] = {"IQ1_M", 256, 56},
    [HS_GGML_TYPE_BF16] = {"BF16", 1, 2},
    [HS_GGML_TYPE_TQ1_0] = {"TQ1_0", 256, 54},
    [HS_GGML_TYPE_TQ2_0] = {"TQ2_0", 256, 66},
    [HS_GGML_TYPE_MXFP4] = {"MXFP4", 32, 17},
};

const hs_ggml_type_info *hs_ggml_type_get(uint32_t t) {
    if (t >= HS_GGML_TYPE_COUNT || !k_ggml_types[t].name) return NULL;
    return &k_ggml_types[t];
}

/* ---- value types ---- */

static const char *const k_type_names[HS_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64",
};
/* Bytes per value in the file; 0 for the variable-size STRING and ARRAY. */
static const uint8_t k_type_size[HS_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *hs_gguf_type_name(hs_gguf_type t) {
    return (unsigned)t < HS_GGUF_TYPE_COUNT ? k_type_names[t] : "?";
}

static bool is_uint(hs_gguf_type t) {
    return t == HS_GGUF_TYPE_UINT8 || t == HS_GGUF_TYPE_UINT16 || t == HS_GGUF_TYPE_UINT32 ||
           t == HS_GGUF_TYPE_UINT64;
}

static bool is_sint(hs_gguf_type t) {
    return t == HS_GGUF_TYPE_INT8 || t == HS_GGUF_TYPE_INT16 || t == HS_GGUF_TYPE_INT32 ||
           t == HS_GGUF_TYPE_INT64;
}

/* Little-endian loads that do not depend on the host's byte order or on alignment. */
static uint64_t load_le(const uint8_t *p, unsigned n) {
    uint64_t x = 0;
    for (unsigned i = 0; i < n; i++)
        x |= (uint64_t)p[i] << (8 * i);
    return x;
}

/* Decodes a fixed-size scalar of type t (not STRING/ARRAY) at p into v. */
static void decode_scalar(hs_gguf_type t, const uint8_t *p, hs_gguf_value *v) {
    uint64_t x = load_le(p, k_type_size[t]);
    v->type = t;
    switch (t) {
    case HS_GGUF_TYPE_INT8: v->v.i = (int8_t)x; break;
    case HS_GGUF_TYPE_INT16: v->v.i = (int16_t)x; break;
    case HS_GGUF_TYPE_INT32: v->v.i = (int32_t)x; break;
    case HS_GGUF_TYPE_INT64: v->v.i = (int64_t)x; break;
    case HS_GGUF_TYPE_FLOAT32: {
        uint32_t b = (uint32_t)x;
        float f;
        memcpy(&f, &b, 4);
        v->v.f = f;
        break;
    }
    case HS_GGUF_TYPE_FLOAT64: memcpy(&v->v.f, &x, 8); break;
    case HS_GGUF_TYPE_BOOL: v->v.b = x != 0; break;
    default: v->v.u = x; break; /* unsigned types */
    }
}

/* ---- the object ---- */

typedef struct str_ref { /* a string copied into the arena, by offset while the arena still grows */
    size_t off;
    uint64_t len;
} str_ref;

typedef struct kv_rec { /* parse-time parts of a key/value that point into the arena */
    str_ref key;
    str_ref str;      /* STRING values */
    size_t first_str; /* STRING arrays: first element in str_refs */
} kv_rec;

typedef struct name_map { /* stb_ds string hash map: name -> index */
    char *key;
    uint64_t value;
} name_map;

struct hs_gguf {
    const uint8_t *base;
    size_t size;
    void *map; /* the mmap'ed file (NULL for open_memory and empty files) */
    char name[256];
    uint32_t version, alignment;
    uint64_t data_offset;
    uint64_t n_kv, n_tensors;
    hs_gguf_value *kvs;      /* n_kv */
    hs_gguf_tensor *tensors; /* n_tensors */
    hs_gguf_str *strs;       /* elements of all string arrays, in file order */
    name_map *kv_map, *tensor_map;
    /* parse time only */
    char *arena;          /* stb_ds array: every string, NUL-terminated */
    kv_rec *kv_recs;      /* n_kv */
    str_ref *tensor_refs; /* n_tensors */
    str_ref *str_refs;    /* stb_ds array */
};

/* ---- the cursor ---- */

typedef struct cursor {
    const uint8_t *p;
    size_t size, pos;
    const char *file;
    char where[192]; /* the item being read, for messages: "metadata 3 ('general.name')" */
} cursor;

static hs_status need(cursor *c, uint64_t n, const char *field) {
    if (n <= c->size - c->pos) return HS_OK;
    return HS_FAIL(HS_ERR_FORMAT,
                   "%s: truncated file at %s%s%s (offset %zu: needs %" PRIu64 " bytes, %zu left)", c->file,
                   c->where, *c->where ? ": " : "", field, c->pos, n, c->size - c->pos);
}

static hs_status rd_u32(cursor *c, const char *field, uint32_t *out) {
    hs_status st = need(c, 4, field);
    if (st != HS_OK) return st;
    *out = (uint32_t)load_le(c->p + c->pos, 4);
    c->pos += 4;
    return HS_OK;
}

static hs_status rd_u64(cursor *c, const char *field, uint64_t *out) {
    hs_status st = need(c, 8, field);
    if (st != HS_OK) return st;
    *out = load_le(c->p + c->pos, 8);
    c->pos += 8;
    return HS_OK;
}

/* Reads a GGUF string (u64 length + bytes) and copies it into the arena. field names it in messages. */
static hs_status rd_str(hs_gguf *g, cursor *c, const char *field, str_ref *out) {
    uint64_t len;
    char what[64];
    snprintf(what, sizeof what, "%s length", field);
    hs_status st = rd_u64(c, what, &len);
    if (st != HS_OK) return st;
    if (len > c->size - c->pos)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: %s%s%s length %" PRIu64
                       " runs past the end of the file (offset %zu, %zu bytes left)",
                       c->file, c->where, *c->where ? ": " : "", field, len, c->pos, c->size - c->pos);
    size_t off = stbds_arrlenu(g->arena);
    stbds_arrsetlen(g->arena, off + (size_t)len + 1);
    memcpy(g->arena + off, c->p + c->pos, (size_t)len);
    g->arena[off + len] = '\0';
    c->pos += (size_t)len;
    *out = (str_ref){off, len};
    return HS_OK;
}

/* ---- metadata ---- */

/* Reads the elements of an array value (the element type and length are already read). */
static hs_status rd_array_elems(hs_gguf *g, cursor *c, kv_rec *rec, hs_gguf_value *v) {
    hs_gguf_type et = v->v.arr.type;
    uint64_t n = v->v.arr.n;
    size_t left = c->size - c->pos;
    if (et == HS_GGUF_TYPE_STRING) {
        if (n > left / 8) /* every string takes at least its 8-byte length */
            return HS_FAIL(HS_ERR_FORMAT,
                           "%s: %s: array of %" PRIu64
                           " strings runs past the end of the file (%zu bytes left)",
                           c->file, c->where, n, left);
        rec->first_str = stbds_arrlenu(g->str_refs);
        for (uint64_t i = 0; i < n; i++) {
            str_ref r;
            hs_status st = rd_str(g, c, "array string", &r);
            if (st != HS_OK) return st;
            stbds_arrput(g->str_refs, r);
        }
        return HS_OK;
    }
    unsigned esz = k_type_size[et];
    if (n > left / esz)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: %s: array of %" PRIu64 " %s elements runs past the end of the file "
                       "(offset %zu, %zu bytes left)",
                       c->file, c->where, n, k_type_names[et], c->pos, left);
    v->v.arr.data = c->p + c->pos;
    if (et == HS_GGUF_TYPE_BOOL) {
        for (uint64_t i = 0; i < n; i++)
            if (c->p[c->pos + i] > 1)
                return HS_FAIL(HS_ERR_FORMAT, "%s: %s: bool element %" PRIu64 " is %u (must be 0 or 1)",
                               c->file, c->where, i, c->p[c->pos + i]);
    }
    c->pos += (size_t)(n * esz);
    return HS_OK;
}

static hs_status rd_value(hs_gguf *g, cursor *c, kv_rec *rec, hs_gguf_value *v) {
    uint32_t t;
    hs_status st = rd_u32(c, "value type", &t);
    if (st != HS_OK) return st;
    if (t >= HS_GGUF_TYPE_COUNT)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s: unknown value type %" PRIu32 " (known: 0..12)", c->file,
                       c->where, t);
    v->type = (hs_gguf_type)t;
    if (t == HS_GGUF_TYPE_STRING) return rd_str(g, c, "string value", &rec->str);
    if (t == HS_GGUF_TYPE_ARRAY) {
        uint32_t et;
        if ((st = rd_u32(c, "array element type", &et)) != HS_OK) return st;
        if (et == HS_GGUF_TYPE_ARRAY)
            return HS_FAIL(HS_ERR_FORMAT, "%s: %s: nested arrays are not supported", c->file, c->where);
        if (et >= HS_GGUF_TYPE_COUNT)
            return HS_FAIL(HS_ERR_FORMAT,
                           "%s: %s: unknown value type %" PRIu32 " of array elements (known: 0..12)", c->file,
                           c->where, et);
        v->v.arr.type = (hs_gguf_type)et;
        if ((st = rd_u64(c, "array length", &v->v.arr.n)) != HS_OK) return st;
        return rd_array_elems(g, c, rec, v);
    }
    if ((st = need(c, k_type_size[t], "value")) != HS_OK) return st;
    const uint8_t *p = c->p + c->pos;
    if (t == HS_GGUF_TYPE_BOOL && *p > 1)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s: bool value is %u (must be 0 or 1)", c->file, c->where, *p);
    decode_scalar(v->type, p, v);
    c->pos += k_type_size[t];
    return HS_OK;
}

/* general.alignment: an integer that fits 32 bits, a power of two. */
static hs_status set_alignment(hs_gguf *g, const hs_gguf_value *v) {
    uint32_t a;
    if (!is_uint(v->type) && !is_sint(v->type))
        return HS_FAIL(HS_ERR_FORMAT, "%s: general.alignment has type %s, expected an unsigned integer",
                       g->name, hs_gguf_type_name(v->type));
    if (hs_gguf_value_u32(v, &a) != HS_OK || a == 0 || (a & (a - 1)) != 0)
        return HS_FAIL(HS_ERR_FORMAT, "%s: general.alignment %" PRId64 " is not a power of two", g->name,
                       is_uint(v->type) ? (int64_t)v->v.u : v->v.i);
    g->alignment = a;
    return HS_OK;
}

static hs_status rd_metadata(hs_gguf *g, cursor *c) {
    hs_status st = HS_OK;
    for (uint64_t i = 0; i < g->n_kv; i++) {
        kv_rec *rec = &g->kv_recs[i];
        hs_gguf_value *v = &g->kvs[i];
        v->index = -1;
        snprintf(c->where, sizeof c->where, "metadata %" PRIu64, i);
        HS_TRY(rd_str(g, c, "key", &rec->key));
        const char *key = g->arena + rec->key.off;
        if (strlen(key) != rec->key.len)
            return HS_FAIL(HS_ERR_FORMAT, "%s: metadata %" PRIu64 ": key contains a NUL byte", c->file, i);
        snprintf(c->where, sizeof c->where, "metadata %" PRIu64 " ('%.120s')", i, key);
        HS_TRY(rd_value(g, c, rec, v));
        if (!strcmp(g->arena + rec->key.off, "general.alignment")) HS_TRY(set_alignment(g, v));
    }
fail:
    return st;
}

/* ---- tensor infos ---- */

/* Element count and byte size of t (dimensions already checked positive); HS_ERR_FORMAT on overflow or a row
 * that is not a whole number of blocks. */
static hs_status tensor_size(const cursor *c, hs_gguf_tensor *t) {
    const hs_ggml_type_info *ti = hs_ggml_type_get(t->type);
    uint64_t n = 1;
    for (int d = 0; d < HS_GGUF_MAX_DIMS; d++) {
        if ((uint64_t)t->ne[d] > (uint64_t)INT64_MAX / n)
            return HS_FAIL(HS_ERR_FORMAT, "%s: %s: element count overflows 64 bits", c->file, c->where);
        n *= (uint64_t)t->ne[d];
    }
    if (t->ne[0] % ti->block_size != 0)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: %s: ne[0] = %" PRId64 " (of %" PRIu64
                       " elements) is not a multiple of the block size "
                       "%" PRIu32 " of %s",
                       c->file, c->where, t->ne[0], n, ti->block_size, ti->name);
    uint64_t row = (uint64_t)t->ne[0] / ti->block_size, rows = n / (uint64_t)t->ne[0];
    if (row > UINT64_MAX / ti->type_size || row * ti->type_size > UINT64_MAX / rows)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s: byte size overflows 64 bits", c->file, c->where);
    t->nbytes = row * ti->type_size * rows;
    return HS_OK;
}

static hs_status rd_tensor_info(hs_gguf *g, cursor *c, uint64_t i) {
    hs_status st = HS_OK;
    hs_gguf_tensor *t = &g->tensors[i];
    snprintf(c->where, sizeof c->where, "tensor %" PRIu64, i);
    HS_TRY(rd_str(g, c, "name", &g->tensor_refs[i]));
    const char *name = g->arena + g->tensor_refs[i].off;
    if (strlen(name) != g->tensor_refs[i].len)
        return HS_FAIL(HS_ERR_FORMAT, "%s: tensor %" PRIu64 ": name contains a NUL byte", c->file, i);
    snprintf(c->where, sizeof c->where, "tensor %" PRIu64 " ('%.120s')", i, name);
    HS_TRY(rd_u32(c, "n_dims", &t->n_dims));
    if (t->n_dims == 0 || t->n_dims > HS_GGUF_MAX_DIMS)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s: n_dims %" PRIu32 " is out of range (1..%d)", c->file, c->where,
                       t->n_dims, HS_GGUF_MAX_DIMS);
    for (uint32_t d = 0; d < HS_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if (d < t->n_dims) HS_TRY(rd_u64(c, "dimension", &ne));
        if ((int64_t)ne <= 0)
            return HS_FAIL(HS_ERR_FORMAT, "%s: %s: dimension %" PRIu32 " is %" PRId64 " (must be positive)",
                           c->file, c->where, d, (int64_t)ne);
        t->ne[d] = (int64_t)ne;
    }
    uint32_t type;
    HS_TRY(rd_u32(c, "type", &type));
    if (!hs_ggml_type_get(type))
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s: unknown ggml type %" PRIu32, c->file, c->where, type);
    t->type = (hs_ggml_type)type;
    HS_TRY(rd_u64(c, "offset", &t->offset));
    if (t->offset % g->alignment != 0)
        return HS_FAIL(HS_ERR_FORMAT, "%s: %s: misaligned offset %" PRIu64 " (alignment %" PRIu32 ")",
                       c->file, c->where, t->offset, g->alignment);
    HS_TRY(tensor_size(c, t));
fail:
    return st;
}

/* Places every tensor in the data section and checks it lies inside the file. */
static hs_status place_tensors(hs_gguf *g) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        hs_gguf_tensor *t = &g->tensors[i];
        uint64_t avail = g->data_offset <= g->size ? g->size - g->data_offset : 0;
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return HS_FAIL(HS_ERR_FORMAT,
                           "%s: tensor %" PRIu64 " ('%s'): data (offset %" PRIu64 ", %" PRIu64
                           " bytes) is out of bounds: the data section starts at %" PRIu64
                           " and the file has %zu bytes",
                           g->name, i, t->name, t->offset, t->nbytes, g->data_offset, g->size);
        t->data = g->base + g->data_offset + t->offset;
    }
    return HS_OK;
}

/* ---- finishing ---- */

/* Builds name -> index for n names (stride bytes apart, first at names); HS_ERR_FORMAT on a duplicate. */
static hs_status build_map(hs_gguf *g, name_map **map, const char *const *names, size_t stride, uint64_t n,
                           const char *what) {
    for (uint64_t i = 0; i < n; i++) {
        const char *name = *(const char *const *)((const char *)names + i * stride);
        ptrdiff_t at = stbds_shgeti(*map, name);
        if (at >= 0)
            return HS_FAIL(HS_ERR_FORMAT, "%s: duplicate %s '%s' (entries %" PRIu64 " and %" PRIu64 ")",
                           g->name, what, name, (*map)[at].value, i);
        stbds_shput(*map, (char *)name, i);
    }
    return HS_OK;
}

/* Resolves arena offsets to pointers (the arena no longer grows), then indexes keys and tensor names. */
static hs_status finish(hs_gguf *g) {
    hs_status st = HS_OK;
    size_t n_strs = stbds_arrlenu(g->str_refs);
    if (n_strs) {
        g->strs = calloc(n_strs, sizeof *g->strs);
        if (!g->strs)
            return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "%s: out of memory for %zu strings", g->name, n_strs);
    }
    for (size_t i = 0; i < n_strs; i++)
        g->strs[i] = (hs_gguf_str){g->arena + g->str_refs[i].off, g->str_refs[i].len};
    for (uint64_t i = 0; i < g->n_kv; i++) {
        hs_gguf_value *v = &g->kvs[i];
        kv_rec *r = &g->kv_recs[i];
        v->key = g->arena + r->key.off;
        if (v->type == HS_GGUF_TYPE_STRING) v->v.s = (hs_gguf_str){g->arena + r->str.off, r->str.len};
        if (v->type == HS_GGUF_TYPE_ARRAY && v->v.arr.type == HS_GGUF_TYPE_STRING)
            v->v.arr.data = v->v.arr.n ? (const void *)&g->strs[r->first_str] : NULL;
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        g->tensors[i].name = g->arena + g->tensor_refs[i].off;
    HS_TRY(build_map(g, &g->kv_map, &g->kvs[0].key, sizeof *g->kvs, g->n_kv, "key"));
    HS_TRY(
        build_map(g, &g->tensor_map, &g->tensors[0].name, sizeof *g->tensors, g->n_tensors, "tensor name"));
    HS_TRY(place_tensors(g));
fail:
    return st;
}

static hs_status rd_header(hs_gguf *g, cursor *c) {
    hs_status st = HS_OK;
    snprintf(c->where, sizeof c->where, "header");
    HS_TRY(need(c, 4, "magic"));
    if (memcmp(c->p, "GGUF", 4) != 0)
        return HS_FAIL(HS_ERR_FORMAT, "%s: bad magic 0x%08" PRIx32 " (expected \"GGUF\"): not a GGUF file",
                       g->name, (uint32_t)load_le(c->p, 4));
    c->pos = 4;
    HS_TRY(rd_u32(c, "version", &g->version));
    uint32_t swapped = (g->version >> 24) | ((g->version >> 8) & 0xFF00u) | ((g->version << 8) & 0xFF0000u) |
                       (g->version << 24);
    if (g->version == 1)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: GGUF version 1 is not supported (only versions 2 and 3); re-convert it", g->name);
    if (g->version != 2 && g->version != 3 && swapped >= 1 && swapped <= 3)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: big-endian GGUF file (version %" PRIu32 " byte-swapped) is not supported",
                       g->name, swapped);
    if (g->version != 2 && g->version != 3)
        return HS_FAIL(HS_ERR_FORMAT, "%s: unsupported GGUF version %" PRIu32 " (only versions 2 and 3)",
                       g->name, g->version);
    HS_TRY(rd_u64(c, "tensor count", &g->n_tensors));
    HS_TRY(rd_u64(c, "metadata count", &g->n_kv));
    /* Smallest possible entries: a key/value is a key length (8), a type (4) and a u8 (1); a tensor info a
     * name length (8), n_dims (4), one dimension (8), a type (4) and an offset (8). Larger counts cannot be
     * real, and rejecting them here bounds every allocation by the file size. */
    size_t left = c->size - c->pos;
    if (g->n_kv > left / 13)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: metadata count %" PRIu64 " is larger than the file could hold (%zu bytes left)",
                       g->name, g->n_kv, left);
    if (g->n_tensors > (left - g->n_kv * 13) / 32)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: tensor count %" PRIu64 " is larger than the file could hold (%zu bytes left)",
                       g->name, g->n_tensors, left);
fail:
    return st;
}

static hs_status parse(hs_gguf *g) {
    hs_status st = HS_OK;
    cursor c = {.p = g->base, .size = g->size, .file = g->name};
    HS_TRY(rd_header(g, &c));
    g->kvs = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kvs);
    g->kv_recs = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv_recs);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    g->tensor_refs = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensor_refs);
    if (!g->kvs || !g->kv_recs || !g->tensors || !g->tensor_refs)
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY,
                       "%s: out of memory for %" PRIu64 " keys and %" PRIu64 " tensors", g->name, g->n_kv,
                       g->n_tensors);
    g->alignment = HS_GGUF_DEFAULT_ALIGNMENT;
    HS_TRY(rd_metadata(g, &c));
    for (uint64_t i = 0; i < g->n_tensors; i++)
        HS_TRY(rd_tensor_info(g, &c, i));
    g->data_offset = ((uint64_t)c.pos + g->alignment - 1) / g->alignment * g->alignment;
    HS_TRY(finish(g));
    /* Parse-time bookkeeping is no longer needed (the arena stays: strings point into it). */
    free(g->kv_recs);
    free(g->tensor_refs);
    stbds_arrfree(g->str_refs);
    g->kv_recs = NULL;
    g->tensor_refs = NULL;
fail:
    return st;
}

/* ---- open / close ---- */

static hs_status open_common(hs_gguf *g, hs_gguf **out) {
    hs_status st = parse(g);
    if (st != HS_OK) {
        hs_gguf_close(g);
        return st;
    }
    *out = g;
    return HS_OK;
}

static hs_gguf *alloc_gguf(const char *name) {
    hs_gguf *g = calloc(1, sizeof *g);
    if (g) snprintf(g->name, sizeof g->name, "%s", name ? name : "<memory>");
    return g;
}

hs_status hs_gguf_open_memory(const void *data, size_t size, const char *name, hs_gguf **out) {
    if (!out || (!data && size)) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_gguf_open_memory: NULL argument");
    *out = NULL;
    hs_gguf *g = alloc_gguf(name);
    if (!g) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_gguf_open_memory: out of memory");
    g->base = data;
    g->size = size;
    return open_common(g, out);
}

hs_status hs_gguf_open(const char *path, hs_gguf **out) {
    if (!path || !out) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_gguf_open: NULL argument");
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return HS_FAIL(HS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return HS_FAIL(HS_ERR_IO, "cannot stat %s: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return HS_FAIL(HS_ERR_IO, "%s is not a regular file", path);
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return HS_FAIL(HS_ERR_IO, "%s: file of %" PRIu64 " bytes does not fit the address space", path,
                       (uint64_t)sb.st_size);
    }
    hs_gguf *g = alloc_gguf(path);
    if (!g) {
        close(fd);
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_gguf_open: out of memory");
    }
    g->size = (size_t)sb.st_size;
    if (g->size > 0) { /* mmap refuses length 0; an empty file then fails as truncated */
        void *m = mmap(NULL, g->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            hs_gguf_close(g);
            return HS_FAIL(HS_ERR_IO, "cannot map %s (%zu bytes): %s", path, (size_t)sb.st_size, strerror(e));
        }
        g->map = m;
        g->base = m;
    }
    close(fd); /* the mapping keeps the file */
    return open_common(g, out);
}

void hs_gguf_close(hs_gguf *g) {
    if (!g) return;
    if (g->map) munmap(g->map, g->size);
    free(g->kvs);
    free(g->tensors);
    free(g->strs);
    stbds_shfree(g->kv_map);
    stbds_shfree(g->tensor_map);
    stbds_arrfree(g->arena);
    free(g->kv_recs);
    free(g->tensor_refs);
    stbds_arrfree(g->str_refs);
    free(g);
}

/* ---- accessors ---- */

uint32_t hs_gguf_version(const hs_gguf *g) { return g->version; }
uint32_t hs_gguf_alignment(const hs_gguf *g) { return g->alignment; }
uint64_t hs_gguf_data_offset(const hs_gguf *g) { return g->data_offset; }
uint64_t hs_gguf_file_size(const hs_gguf *g) { return g->size; }
const char *hs_gguf_name(const hs_gguf *g) { return g->name; }
uint64_t hs_gguf_n_kv(const hs_gguf *g) { return g->n_kv; }
uint64_t hs_gguf_n_tensors(const hs_gguf *g) { return g->n_tensors; }

const hs_gguf_value *hs_gguf_kv_at(const hs_gguf *g, uint64_t i) { return i < g->n_kv ? &g->kvs[i] : NULL; }

const hs_gguf_tensor *hs_gguf_tensor_at(const hs_gguf *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

/* Thread-safe lookup: stb_ds's shgeti writes its result into the map header, the _ts form does not (and it
 * only reads a non-empty map). */
static int64_t map_find(name_map *map, const char *name) {
    if (!map || !name) return -1;
    ptrdiff_t slot = -1;
    stbds_hmget_key_ts(map, sizeof *map, (void *)name, sizeof map->key, &slot, STBDS_HM_STRING);
    return slot < 0 ? -1 : (int64_t)map[slot].value;
}

const hs_gguf_value *hs_gguf_find_key(const hs_gguf *g, const char *key) {
    int64_t i = map_find(g->kv_map, key);
    return i < 0 ? NULL : &g->kvs[i];
}

const hs_gguf_tensor *hs_gguf_find_tensor(const hs_gguf *g, const char *name) {
    int64_t i = map_find(g->tensor_map, name);
    return i < 0 ? NULL : &g->tensors[i];
}

hs_status hs_gguf_get_tensor(const hs_gguf *g, const char *name, const hs_gguf_tensor **out) {
    *out = hs_gguf_find_tensor(g, name);
    if (!*out)
        return HS_FAIL(HS_ERR_FORMAT, "%s: tensor '%s' not found in file", g->name, name ? name : "(null)");
    return HS_OK;
}

int64_t hs_gguf_tensor_nelements(const hs_gguf_tensor *t) {
    return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* ---- typed conversions ---- */

/* "key 'x'" or "key 'x' element 3", for messages. */
static const char *describe(const hs_gguf_value *v, char *buf, size_t n) {
    if (v->index >= 0)
        snprintf(buf, n, "key '%s' element %" PRId64, v->key ? v->key : "?", v->index);
    else
        snprintf(buf, n, "key '%s'", v->key ? v->key : "?");
    return buf;
}

static hs_status type_error(const hs_gguf_value *v, const char *expected) {
    char d[200];
    return HS_FAIL(HS_ERR_FORMAT, "metadata %s has type %s, expected %s", describe(v, d, sizeof d),
                   hs_gguf_type_name(v->type), expected);
}

static hs_status range_error(const hs_gguf_value *v, const char *expected) {
    char d[200], val[32];
    if (is_uint(v->type))
        snprintf(val, sizeof val, "%" PRIu64, v->v.u);
    else
        snprintf(val, sizeof val, "%" PRId64, v->v.i);
    return HS_FAIL(HS_ERR_FORMAT, "metadata %s = %s (%s) does not fit %s", describe(v, d, sizeof d), val,
                   hs_gguf_type_name(v->type), expected);
}

hs_status hs_gguf_value_u64(const hs_gguf_value *v, uint64_t *out) {
    if (is_uint(v->type)) {
        *out = v->v.u;
        return HS_OK;
    }
    if (!is_sint(v->type)) return type_error(v, "an integer (u64)");
    if (v->v.i < 0) return range_error(v, "u64");
    *out = (uint64_t)v->v.i;
    return HS_OK;
}

hs_status hs_gguf_value_i64(const hs_gguf_value *v, int64_t *out) {
    if (is_sint(v->type)) {
        *out = v->v.i;
        return HS_OK;
    }
    if (!is_uint(v->type)) return type_error(v, "an integer (i64)");
    if (v->v.u > (uint64_t)INT64_MAX) return range_error(v, "i64");
    *out = (int64_t)v->v.u;
    return HS_OK;
}

hs_status hs_gguf_value_u32(const hs_gguf_value *v, uint32_t *out) {
    uint64_t x = 0;
    if (!is_uint(v->type) && !is_sint(v->type)) return type_error(v, "an integer (u32)");
    if (hs_gguf_value_u64(v, &x) != HS_OK || x > UINT32_MAX) return range_error(v, "u32");
    *out = (uint32_t)x;
    return HS_OK;
}

hs_status hs_gguf_value_i32(const hs_gguf_value *v, int32_t *out) {
    int64_t x = 0;
    if (!is_uint(v->type) && !is_sint(v->type)) return type_error(v, "an integer (i32)");
    if (hs_gguf_value_i64(v, &x) != HS_OK || x < INT32_MIN || x > INT32_MAX) return range_error(v, "i32");
    *out = (int32_t)x;
    return HS_OK;
}

hs_status hs_gguf_value_f32(const hs_gguf_value *v, float *out) {
    if (v->type != HS_GGUF_TYPE_FLOAT32 && v->type != HS_GGUF_TYPE_FLOAT64)
        return type_error(v, "a float (f32 or f64)");
    *out = (float)v->v.f;
    return HS_OK;
}

hs_status hs_gguf_value_bool(const hs_gguf_value *v, bool *out) {
    if (v->type != HS_GGUF_TYPE_BOOL) return type_error(v, "bool");
    *out = v->v.b;
    return HS_OK;
}

hs_status hs_gguf_value_str(const hs_gguf_value *v, hs_gguf_str *out) {
    if (v->type != HS_GGUF_TYPE_STRING) return type_error(v, "str");
    *out = v->v.s;
    return HS_OK;
}

/* ---- getters by key ---- */

static hs_status find(const hs_gguf *g, const char *key, const hs_gguf_value **v) {
    *v = hs_gguf_find_key(g, key);
    if (!*v) return HS_FAIL(HS_ERR_FORMAT, "%s: metadata key '%s' not found", g->name, key ? key : "(null)");
    return HS_OK;
}

#define HS_GGUF_GETTER(fn, T, conv)                                                                          \
    hs_status fn(const hs_gguf *g, const char *key, T *out) {                                                \
        const hs_gguf_value *v;                                                                              \
        hs_status st = find(g, key, &v);                                                                     \
        return st != HS_OK ? st : conv(v, out);                                                              \
    }
HS_GGUF_GETTER(hs_gguf_get_u32, uint32_t, hs_gguf_value_u32)
HS_GGUF_GETTER(hs_gguf_get_i32, int32_t, hs_gguf_value_i32)
HS_GGUF_GETTER(hs_gguf_get_u64, uint64_t, hs_gguf_value_u64)
HS_GGUF_GETTER(hs_gguf_get_f32, float, hs_gguf_value_f32)
HS_GGUF_GETTER(hs_gguf_get_bool, bool, hs_gguf_value_bool)

hs_status hs_gguf_get_str(const hs_gguf *g, const char *key, const char **out) {
    const hs_gguf_value *v;
    hs_gguf_str s = {0};
    hs_status st = find(g, key, &v);
    if (st == HS_OK) st = hs_gguf_value_str(v, &s);
    if (st == HS_OK) *out = s.s;
    return st;
}

hs_status hs_gguf_get_arr(const hs_gguf *g, const char *key, hs_gguf_type elem_type,
                          const hs_gguf_value **out) {
    const hs_gguf_value *v;
    hs_status st = find(g, key, &v);
    if (st != HS_OK) return st;
    if (v->type != HS_GGUF_TYPE_ARRAY) return type_error(v, "arr");
    if (elem_type != HS_GGUF_TYPE_COUNT && v->v.arr.type != elem_type)
        return HS_FAIL(HS_ERR_FORMAT, "metadata key '%s' is an array of %s, expected an array of %s", key,
                       hs_gguf_type_name(v->v.arr.type), hs_gguf_type_name(elem_type));
    *out = v;
    return HS_OK;
}

hs_status hs_gguf_architecture(const hs_gguf *g, const char **out) {
    return hs_gguf_get_str(g, "general.architecture", out);
}

/* ---- arrays ---- */

hs_status hs_gguf_arr_elem(const hs_gguf_value *arr, uint64_t i, hs_gguf_value *out) {
    if (arr->type != HS_GGUF_TYPE_ARRAY) return type_error(arr, "arr");
    if (i >= arr->v.arr.n)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE,
                       "index %" PRIu64 " out of range: array '%s' has %" PRIu64 " elements", i,
                       arr->key ? arr->key : "?", arr->v.arr.n);
    memset(out, 0, sizeof *out);
    out->key = arr->key;
    out->index = (int64_t)i;
    if (arr->v.arr.type == HS_GGUF_TYPE_STRING) {
        out->type = HS_GGUF_TYPE_STRING;
        out->v.s = ((const hs_gguf_str *)arr->v.arr.data)[i];
    } else {
        decode_scalar(arr->v.arr.type, (const uint8_t *)arr->v.arr.data + i * k_type_size[arr->v.arr.type],
                      out);
    }
    return HS_OK;
}

#define HS_GGUF_ARR_GETTER(fn, T, conv)                                                                      \
    hs_status fn(const hs_gguf_value *arr, uint64_t i, T *out) {                                             \
        hs_gguf_value e = {0};                                                                               \
        hs_status st = hs_gguf_arr_elem(arr, i, &e);                                                         \
        return st != HS_OK ? st : conv(&e, out);                                                             \
    }
HS_GGUF_ARR_GETTER(hs_gguf_arr_u32, uint32_t, hs_gguf_value_u32)
HS_GGUF_ARR_GETTER(hs_gguf_arr_i32, int32_t, hs_gguf_value_i32)
HS_GGUF_ARR_GETTER(hs_gguf_arr_f32, float, hs_gguf_value_f32)
HS_GGUF_ARR_GETTER(hs_gguf_arr_str, hs_gguf_str, hs_gguf_value_str)
