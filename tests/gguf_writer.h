/* gguf_writer — a tiny GGUF writer for the tests only: it builds files byte by byte in memory, so tests can
 * write valid files of any version with every value type, and then corrupt single fields to make malformed
 * ones. It shares no code with models/gguf.c (it encodes the format from the specification independently).
 *
 * Usage:
 *   hs_gw w;
 *   hs_gw_init(&w);
 *   hs_gw_header(&w, 3, n_tensors, n_kv);
 *   hs_gw_key(&w, "general.architecture", HS_GW_STRING); hs_gw_str(&w, "llama");
 *   hs_gw_key(&w, "llama.block_count", HS_GW_UINT32);    hs_gw_u32(&w, 5);
 *   hs_gw_tinfo pos = hs_gw_tensor_info(&w, "w", 2, (uint64_t[]){4, 2}, 0, 0);   // F32, offset 0
 *   hs_gw_pad(&w, 32);                                    // data section
 *   hs_gw_bytes(&w, data, 32);
 *   hs_gw_patch_u32(&w, pos.type, 99);                    // corrupt the tensor type
 *   ... w.buf / w.len, or hs_gw_write_file(&w, path) ...
 *   hs_gw_free(&w);
 * Every writer returns the offset at which it wrote, for later patching. Out of memory aborts (tests only).
 * Ownership: hs_gw owns buf until hs_gw_free. Thread-safety: none needed (one writer per test).
 */
#ifndef HS_GGUF_WRITER_H
#define HS_GGUF_WRITER_H

#include <stddef.h>
#include <stdint.h>

/* Value type numbers of the GGUF specification (deliberately not taken from models/gguf.h). */
enum {
    HS_GW_UINT8 = 0,
    HS_GW_INT8 = 1,
    HS_GW_UINT16 = 2,
    HS_GW_INT16 = 3,
    HS_GW_UINT32 = 4,
    HS_GW_INT32 = 5,
    HS_GW_FLOAT32 = 6,
    HS_GW_BOOL = 7,
    HS_GW_STRING = 8,
    HS_GW_ARRAY = 9,
    HS_GW_UINT64 = 10,
    HS_GW_INT64 = 11,
    HS_GW_FLOAT64 = 12,
};

typedef struct hs_gw {
    uint8_t *buf;
    size_t len, cap;
} hs_gw;

/* Offsets of the fields of one tensor info. */
typedef struct hs_gw_tinfo {
    size_t name_len, name, n_dims, dims, type, offset;
} hs_gw_tinfo;

void hs_gw_init(hs_gw *w);
void hs_gw_free(hs_gw *w);

size_t hs_gw_u8(hs_gw *w, uint8_t v);
size_t hs_gw_u16(hs_gw *w, uint16_t v);
size_t hs_gw_u32(hs_gw *w, uint32_t v);
size_t hs_gw_u64(hs_gw *w, uint64_t v);
size_t hs_gw_f32(hs_gw *w, float v);
size_t hs_gw_f64(hs_gw *w, double v);
size_t hs_gw_bytes(hs_gw *w, const void *p, size_t n);
size_t hs_gw_str(hs_gw *w, const char *s);                /* u64 length + bytes (no NUL) */
size_t hs_gw_strn(hs_gw *w, const char *s, uint64_t len); /* same with an explicit length */
size_t hs_gw_pad(hs_gw *w, size_t align);                 /* zero bytes up to a multiple of align */

/* "GGUF", version, then the counts: u64 for versions >= 2, u32 for version 1. Returns the offset of the
 * version field. */
size_t hs_gw_header(hs_gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv);
/* A key and its value type; the value follows with the primitives above. Returns the offset of the type. */
size_t hs_gw_key(hs_gw *w, const char *key, uint32_t type);
/* An array header (element type, length); the elements follow. Returns the offset of the element type. */
size_t hs_gw_arr(hs_gw *w, uint32_t elem_type, uint64_t n);
hs_gw_tinfo hs_gw_tensor_info(hs_gw *w, const char *name, uint32_t n_dims, const uint64_t *dims,
                              uint32_t type, uint64_t offset);

void hs_gw_patch_u8(hs_gw *w, size_t at, uint8_t v);
void hs_gw_patch_u32(hs_gw *w, size_t at, uint32_t v);
void hs_gw_patch_u64(hs_gw *w, size_t at, uint64_t v);

/* Writes the bytes to path; 0 on success, -1 on failure. */
int hs_gw_write_file(const hs_gw *w, const char *path);

#endif
