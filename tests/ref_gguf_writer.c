/* gguf_writer — the tests' GGUF writer. See gguf_writer.h. */
#include "gguf_writer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void hs_gw_init(hs_gw *w) { memset(w, 0, sizeof *w); }

void hs_gw_free(hs_gw *w) {
    free(w->buf);
    memset(w, 0, sizeof *w);
}

/* Appends n bytes (zeroes if p is NULL) and returns their offset. */
static size_t put(hs_gw *w, const void *p, size_t n) {
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n)
            cap *= 2;
        uint8_t *b = realloc(w->buf, cap);
        if (!b) {
            fprintf(stderr, "gguf_writer: out of memory\n");
            abort();
        }
        w->buf = b;
        w->cap = cap;
    }
    size_t at = w->len;
    if (p)
        memcpy(w->buf + at, p, n);
    else
        memset(w->buf + at, 0, n);
    w->len += n;
    return at;
}

/* Little-endian encoding, byte by byte. */
static void le(uint8_t *dst, uint64_t v, int n) {
    for (int i = 0; i < n; i++)
        dst[i] = (uint8_t)(v >> (8 * i));
}

static size_t put_le(hs_gw *w, uint64_t v, int n) {
    uint8_t b[8];
    le(b, v, n);
    return put(w, b, (size_t)n);
}

size_t hs_gw_u8(hs_gw *w, uint8_t v) { return put_le(w, v, 1); }
size_t hs_gw_u16(hs_gw *w, uint16_t v) { return put_le(w, v, 2); }
size_t hs_gw_u32(hs_gw *w, uint32_t v) { return put_le(w, v, 4); }
size_t hs_gw_u64(hs_gw *w, uint64_t v) { return put_le(w, v, 8); }

size_t hs_gw_f32(hs_gw *w, float v) {
    uint32_t b;
    memcpy(&b, &v, 4);
    return hs_gw_u32(w, b);
}

size_t hs_gw_f64(hs_gw *w, double v) {
    uint64_t b;
    memcpy(&b, &v, 8);
    return hs_gw_u64(w, b);
}

size_t hs_gw_bytes(hs_gw *w, const void *p, size_t n) { return put(w, p, n); }

size_t hs_gw_strn(hs_gw *w, const char *s, uint64_t len) {
    size_t at = hs_gw_u64(w, len);
    put(w, s, (size_t)len);
    return at;
}

size_t hs_gw_str(hs_gw *w, const char *s) { return hs_gw_strn(w, s, strlen(s)); }

size_t hs_gw_pad(hs_gw *w, size_t align) {
    size_t at = w->len;
    if (w->len % align) put(w, NULL, align - w->len % align);
    return at;
}

size_t hs_gw_header(hs_gw *w, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    put(w, "GGUF", 4);
    size_t at = hs_gw_u32(w, version);
    if (version >= 2) {
        hs_gw_u64(w, n_tensors);
        hs_gw_u64(w, n_kv);
    } else {
        hs_gw_u32(w, (uint32_t)n_tensors);
        hs_gw_u32(w, (uint32_t)n_kv);
    }
    return at;
}

size_t hs_gw_key(hs_gw *w, const char *key, uint32_t type) {
    hs_gw_str(w, key);
    return hs_gw_u32(w, type);
}

size_t hs_gw_arr(hs_gw *w, uint32_t elem_type, uint64_t n) {
    size_t at = hs_gw_u32(w, elem_type);
    hs_gw_u64(w, n);
    return at;
}

hs_gw_tinfo hs_gw_tensor_info(hs_gw *w, const char *name, uint32_t n_dims, const uint64_t *dims,
                              uint32_t type, uint64_t offset) {
    hs_gw_tinfo t;
    t.name_len = hs_gw_str(w, name);
    t.name = t.name_len + 8;
    t.n_dims = hs_gw_u32(w, n_dims);
    t.dims = w->len;
    for (uint32_t d = 0; d < n_dims; d++)
        hs_gw_u64(w, dims[d]);
    t.type = hs_gw_u32(w, type);
    t.offset = hs_gw_u64(w, offset);
    return t;
}

static void patch(hs_gw *w, size_t at, uint64_t v, int n) {
    if (at + (size_t)n > w->len) {
        fprintf(stderr, "gguf_writer: patch at %zu past the end (%zu bytes)\n", at, w->len);
        abort();
    }
    le(w->buf + at, v, n);
}

void hs_gw_patch_u8(hs_gw *w, size_t at, uint8_t v) { patch(w, at, v, 1); }
void hs_gw_patch_u32(hs_gw *w, size_t at, uint32_t v) { patch(w, at, v, 4); }
void hs_gw_patch_u64(hs_gw *w, size_t at, uint64_t v) { patch(w, at, v, 8); }

int hs_gw_write_file(const hs_gw *w, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = w->len ? fwrite(w->buf, 1, w->len, f) : 0;
    int ok = n == w->len;
    ok = (fclose(f) == 0) && ok;
    return ok ? 0 : -1;
}
