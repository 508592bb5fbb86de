/* test_gguf: the GGUF reader (models/gguf.c) and `heterospec info` (host/cli_info.c).
 *
 * - stories260K.gguf against the same model in llama2.c's formats, read independently here: the
 *   hyperparameters of stories260K.bin's header, every weight tensor byte for byte against the .bin's
 *   weights, and the vocabulary and scores against tok512.bin.
 * - Files of versions 2 and 3 made by tests/ref_gguf_writer.c with every value type (scalars, strings with
 *   a NUL inside, arrays of every scalar type and of strings, empty arrays), several tensor types and
 *   alignments, read back through the file and the memory paths; typed getters, conversions, type errors.
 * - One test per kind of malformed file (a single field of a small valid file corrupted), each asserting
 *   HS_ERR_FORMAT and a message substring; truncation at every byte offset; seeded random corruption.
 * - `heterospec info` in text and JSON on stories260K, on a malformed file (exit 1) and with bad options.
 * No Vulkan device is needed.
 */
#define _POSIX_C_SOURCE 200809L /* dup, dup2, fileno */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "hs_cli.h"
#include "testutil.h"

/* ---- helpers ---- */

/* Reads a whole file into a new buffer (NULL if it cannot). */
static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(len > 0 ? (size_t)len + 1 : 1);
    if (b && len > 0 && fread(b, 1, (size_t)len, f) != (size_t)len) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[len > 0 ? len : 0] = 0;
    *n = len > 0 ? (size_t)len : 0;
    return b;
}

static void shared_path(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/models/stories260K/%s", hs_test_shared_dir(), name);
}

/* The bytes of ../shared/models/stories260K/<name> (fails the test if missing). */
static uint8_t *read_shared(const char *name, size_t *n) {
    char path[512];
    shared_path(path, sizeof path, name);
    uint8_t *b = read_all(path, n);
    assert_non_null(b);
    return b;
}

/* stories260K.gguf, opened. */
static hs_gguf *open_stories(void) {
    char path[512];
    hs_gguf *g = NULL;
    shared_path(path, sizeof path, "stories260K.gguf");
    HS_CHECK(hs_gguf_open(path, &g));
    return g;
}

/* A fresh temporary file name (the file exists, empty). */
static void temp_path(char *buf, size_t n) {
    assert_true(hs_test_make_temp(buf, n, "hs_test_gguf", false));
}

/* Opens len bytes from an exactly-sized heap copy, so AddressSanitizer sees any read past the end. */
static hs_status open_copy(const uint8_t *p, size_t len, hs_gguf **g, uint8_t **copy) {
    *copy = malloc(len ? len : 1);
    assert_non_null(*copy);
    if (len) memcpy(*copy, p, len);
    return hs_gguf_open_memory(*copy, len, "test.gguf", g);
}

/* Asserts that the writer's bytes fail to open with HS_ERR_FORMAT and a message containing substr, both from
 * memory and from a file. */
static void expect_format_error(const hs_gw *w, const char *substr) {
    hs_gguf *g = (hs_gguf *)1;
    uint8_t *copy;
    hs_status st = open_copy(w->buf, w->len, &g, &copy);
    if (st != HS_ERR_FORMAT || !strstr(hs_last_error(), substr))
        fail_msg("memory: expected HS_ERR_FORMAT with '%s', got %s: %s", substr, hs_status_string(st),
                 hs_last_error());
    assert_null(g);
    free(copy);
    char path[256];
    temp_path(path, sizeof path);
    assert_int_equal(hs_gw_write_file(w, path), 0);
    g = (hs_gguf *)1;
    st = hs_gguf_open(path, &g);
    if (st != HS_ERR_FORMAT || !strstr(hs_last_error(), substr) || !strstr(hs_last_error(), path))
        fail_msg("file: expected HS_ERR_FORMAT with '%s' and the path, got %s: %s", substr,
                 hs_status_string(st), hs_last_error());
    assert_null(g);
    unlink(path);
}

static void expect_value_error(hs_status st, hs_status want, const char *substr) {
    if (st != want || !strstr(hs_last_error(), substr))
        fail_msg("expected %s with '%s', got %s: %s", hs_status_string(want), substr, hs_status_string(st),
                 hs_last_error());
}

/* ---- stories260K against llama2.c's files ---- */

/* The llama2.c checkpoint header: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len. */
typedef struct l2c {
    int32_t dim, hidden, n_layers, n_heads, n_kv_heads, vocab, seq_len;
} l2c;

static const float *l2c_weights(const uint8_t *bin, size_t n, l2c *h) {
    assert_true(n > 28);
    memcpy(h, bin, 28);
    assert_true(h->dim > 0 && h->n_heads > 0 && h->n_layers > 0 && h->vocab != 0);
    return (const float *)(bin + 28);
}

/* Compares tensor name against n floats of the .bin at *at, then advances *at by n. */
static void expect_tensor_eq(hs_gguf *g, const char *name, const float *w, size_t n) {
    const hs_gguf_tensor *t;
    HS_CHECK(hs_gguf_get_tensor(g, name, &t));
    if (t->type != HS_GGML_TYPE_F32 || t->nbytes != n * 4 || (size_t)hs_gguf_tensor_nelements(t) != n)
        fail_msg("%s: type %d, %zu elements, %llu bytes; the .bin has %zu floats", name, t->type,
                 (size_t)hs_gguf_tensor_nelements(t), (unsigned long long)t->nbytes, n);
    if (memcmp(t->data, w, n * 4) != 0) fail_msg("%s: data differs from the .bin", name);
}

static void test_stories_hparams(void **state) {
    size_t bin_n;
    uint8_t *bin = read_shared("stories260K.bin", &bin_n);
    l2c h;
    l2c_weights(bin, bin_n, &h);
    hs_gguf *g = open_stories();
    assert_int_equal(hs_gguf_version(g), 3); /* README: GGUF v3 */
    assert_int_equal(hs_gguf_alignment(g), HS_GGUF_DEFAULT_ALIGNMENT);
    assert_int_equal(hs_gguf_data_offset(g) % hs_gguf_alignment(g), 0);
    const char *arch;
    HS_CHECK(hs_gguf_architecture(g, &arch));
    assert_string_equal(arch, "llama");
    uint32_t u;
    HS_CHECK(hs_gguf_get_u32(g, "llama.embedding_length", &u));
    assert_int_equal(u, h.dim);
    HS_CHECK(hs_gguf_get_u32(g, "llama.feed_forward_length", &u));
    assert_int_equal(u, h.hidden);
    HS_CHECK(hs_gguf_get_u32(g, "llama.block_count", &u));
    assert_int_equal(u, h.n_layers);
    HS_CHECK(hs_gguf_get_u32(g, "llama.attention.head_count", &u));
    assert_int_equal(u, h.n_heads);
    HS_CHECK(hs_gguf_get_u32(g, "llama.attention.head_count_kv", &u));
    assert_int_equal(u, h.n_kv_heads);
    HS_CHECK(hs_gguf_get_u32(g, "llama.rope.dimension_count", &u));
    assert_int_equal(u, h.dim / h.n_heads); /* RoPE over the whole head */
    /* (llama.context_length is 2048 in the GGUF while the .bin says seq_len 512: not compared.) */
    float eps;
    HS_CHECK(hs_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &eps));
    assert_true(eps > 0 && eps < 1e-3f);
    const hs_gguf_value *tok;
    HS_CHECK(hs_gguf_get_arr(g, "tokenizer.ggml.tokens", HS_GGUF_TYPE_STRING, &tok));
    assert_int_equal(tok->v.arr.n, abs(h.vocab));
    /* llama layout: token_embd, output_norm, output, and 9 tensors per layer. */
    assert_int_equal(hs_gguf_n_tensors(g), 3 + 9 * (uint64_t)h.n_layers);
    hs_gguf_close(g);
    free(bin);
    (void)state;
}

static void test_stories_weights(void **state) {
    size_t bin_n;
    uint8_t *bin = read_shared("stories260K.bin", &bin_n);
    l2c h;
    const float *w = l2c_weights(bin, bin_n, &h);
    hs_gguf *g = open_stories();
    /* llama2.c's order: token embedding (vocab, dim), then per kind of weight all layers: rms_att (L, dim),
     * wq (L, dim, dim), wk/wv (L, kv_dim, dim), wo (L, dim, dim), rms_ffn (L, dim), w1 (L, hidden, dim),
     * w2 (L, dim, hidden), w3 (L, hidden, dim), rms_final (dim), freq_cis (seq_len * head_size), and a
     * classifier only when vocab_size < 0. Row-major (out, in) equals ggml's ne = {in, out}. */
    size_t D = (size_t)h.dim, H = (size_t)h.hidden, L = (size_t)h.n_layers, V = (size_t)abs(h.vocab);
    size_t KV = D * (size_t)h.n_kv_heads / (size_t)h.n_heads;
    struct {
        const char *kind;
        size_t per_layer;
    } kinds[] = {{"attn_norm", D},    {"attn_q", D * D},      {"attn_k", KV * D},
                 {"attn_v", KV * D},  {"attn_output", D * D}, {"ffn_norm", D},
                 {"ffn_gate", H * D}, {"ffn_down", D * H},    {"ffn_up", H * D}};
    const float *emb = w;
    expect_tensor_eq(g, "token_embd.weight", emb, V * D);
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, "token_embd.weight");
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], D);
    assert_int_equal(t->ne[1], V);
    const float *p = w + V * D;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (size_t l = 0; l < L; l++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%zu.%s.weight", l, kinds[k].kind);
            expect_tensor_eq(g, name, p, kinds[k].per_layer);
            p += kinds[k].per_layer;
        }
    }
    expect_tensor_eq(g, "output_norm.weight", p, D);
    p += D;
    size_t head = D / (size_t)h.n_heads;
    p += (size_t)h.seq_len * head; /* freq_cis_real and _imag, seq_len * head/2 each */
    if (h.vocab > 0) {
        expect_tensor_eq(g, "output.weight", emb, V * D); /* shared classifier, stored again in the GGUF */
    } else {
        expect_tensor_eq(g, "output.weight", p, V * D);
        p += V * D;
    }
    assert_int_equal((const uint8_t *)p - bin, bin_n); /* every byte of the .bin accounted for */
    /* Total parameters: the .bin's weights without freq_cis, plus the GGUF's copy of a shared classifier. */
    uint64_t want = (uint64_t)(p - w) - (uint64_t)h.seq_len * head + (h.vocab > 0 ? V * D : 0), have = 0;
    for (uint64_t i = 0; i < hs_gguf_n_tensors(g); i++)
        have += (uint64_t)hs_gguf_tensor_nelements(hs_gguf_tensor_at(g, i));
    assert_int_equal(have, want);
    hs_gguf_close(g);
    free(bin);
    (void)state;
}

static void test_stories_vocab(void **state) {
    size_t n;
    uint8_t *tb = read_shared("tok512.bin", &n);
    hs_gguf *g = open_stories();
    const hs_gguf_value *tok, *scores;
    HS_CHECK(hs_gguf_get_arr(g, "tokenizer.ggml.tokens", HS_GGUF_TYPE_STRING, &tok));
    HS_CHECK(hs_gguf_get_arr(g, "tokenizer.ggml.scores", HS_GGUF_TYPE_FLOAT32, &scores));
    assert_int_equal(scores->v.arr.n, tok->v.arr.n);
    /* tok512.bin (llama2.c): i32 max_token_length, then per token f32 score, i32 length, bytes. It writes
     * SentencePiece's U+2581 as a space, and BOS/EOS as "\n<s>\n" and "\n</s>\n". */
    size_t at = 4;
    for (uint64_t i = 0; i < tok->v.arr.n; i++) {
        float score;
        int32_t len;
        assert_true(at + 8 <= n);
        memcpy(&score, tb + at, 4);
        memcpy(&len, tb + at + 4, 4);
        at += 8;
        assert_true(len >= 0 && at + (size_t)len <= n);
        char want[64], have[64];
        assert_true(len < (int)sizeof want);
        memcpy(want, tb + at, (size_t)len);
        want[len] = 0;
        at += (size_t)len;
        hs_gguf_str s;
        HS_CHECK(hs_gguf_arr_str(tok, i, &s));
        size_t o = 0;
        for (uint64_t j = 0; j < s.len && o + 1 < sizeof have; j++) {
            if (j + 2 < s.len && !memcmp(s.s + j, "\xe2\x96\x81", 3)) {
                have[o++] = ' ';
                j += 2;
            } else {
                have[o++] = s.s[j];
            }
        }
        have[o] = 0;
        if (i == 1 || i == 2) { /* "\n<s>\n" -> "<s>" */
            memmove(want, want + 1, strlen(want));
            want[strlen(want) - 1] = 0;
        }
        assert_string_equal(have, want);
        float f;
        HS_CHECK(hs_gguf_arr_f32(scores, i, &f));
        assert_true(f == score);
    }
    assert_int_equal(at, n);
    hs_gguf_close(g);
    free(tb);
    (void)state;
}

/* ---- writer-made valid files with every value type ---- */

typedef struct all_tensor {
    const char *name;
    uint32_t type, n_dims;
    uint64_t ne[4];
    /* Bytes from ggml-common.h's block structs, worked out by hand: F32 4 per element; Q8_0 blocks of 32 =
     * f16 scale + 32 int8 = 34; Q4_K blocks of 256 = 2 f16 + 12 scale bytes + 128 nibble bytes = 144; F16 2;
     * IQ4_XS blocks of 256 = f16 + u16 + 4 + 128 = 136; BF16 2. */
    uint64_t nbytes;
    uint64_t offset; /* filled by the builder */
} all_tensor;

static all_tensor g_all_tensors[] = {
    {"t.f32", 0, 2, {3, 2, 1, 1}, 24, 0},        {"t.q8_0", 8, 2, {64, 1, 1, 1}, 68, 0},
    {"t.q4_k", 12, 2, {256, 2, 1, 1}, 288, 0},   {"t.f16", 1, 4, {2, 2, 2, 2}, 32, 0},
    {"t.iq4_xs", 23, 1, {256, 1, 1, 1}, 136, 0}, {"t.bf16", 30, 1, {5, 1, 1, 1}, 10, 0},
};
#define N_ALL_TENSORS (sizeof g_all_tensors / sizeof g_all_tensors[0])
#define N_ALL_KV      30

static uint8_t pattern(size_t tensor, size_t i) { return (uint8_t)(tensor * 31 + i * 7 + 1); }

/* Writes a file with one key per scalar type, special strings, one array per element type, and the tensors
 * above at aligned offsets. alignment 0: no general.alignment key (default 32). Returns the data start. */
static size_t build_all(hs_gw *w, uint32_t version, uint32_t alignment) {
    hs_gw_header(w, version, N_ALL_TENSORS, N_ALL_KV + (alignment ? 1 : 0));
    hs_gw_key(w, "v.u8", HS_GW_UINT8), hs_gw_u8(w, 200);
    hs_gw_key(w, "v.i8", HS_GW_INT8), hs_gw_u8(w, (uint8_t)-100);
    hs_gw_key(w, "v.u16", HS_GW_UINT16), hs_gw_u16(w, 60000);
    hs_gw_key(w, "v.i16", HS_GW_INT16), hs_gw_u16(w, (uint16_t)-30000);
    hs_gw_key(w, "v.u32", HS_GW_UINT32), hs_gw_u32(w, 4000000000u);
    hs_gw_key(w, "v.i32", HS_GW_INT32), hs_gw_u32(w, (uint32_t)-2000000000);
    hs_gw_key(w, "v.f32", HS_GW_FLOAT32), hs_gw_f32(w, 1.5f);
    hs_gw_key(w, "v.bool", HS_GW_BOOL), hs_gw_u8(w, 1);
    hs_gw_key(w, "v.str", HS_GW_STRING), hs_gw_str(w, "hello");
    hs_gw_key(w, "v.u64", HS_GW_UINT64), hs_gw_u64(w, (1ull << 40) + 3);
    hs_gw_key(w, "v.i64", HS_GW_INT64), hs_gw_u64(w, (uint64_t)(-(1ll << 40)));
    hs_gw_key(w, "v.f64", HS_GW_FLOAT64), hs_gw_f64(w, 3.25);
    hs_gw_key(w, "v.small_i64", HS_GW_INT64), hs_gw_u64(w, (uint64_t)-5);
    hs_gw_key(w, "v.bool_false", HS_GW_BOOL), hs_gw_u8(w, 0);
    hs_gw_key(w, "s.nul", HS_GW_STRING), hs_gw_strn(w, "a\0b", 3);
    hs_gw_key(w, "s.empty", HS_GW_STRING), hs_gw_str(w, "");
    if (alignment) hs_gw_key(w, "general.alignment", HS_GW_UINT32), hs_gw_u32(w, alignment);
    hs_gw_key(w, "a.u8", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_UINT8, 3), hs_gw_u8(w, 1), hs_gw_u8(w, 2),
        hs_gw_u8(w, 255);
    hs_gw_key(w, "a.i8", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_INT8, 3), hs_gw_u8(w, (uint8_t)-1), hs_gw_u8(w, 0),
        hs_gw_u8(w, 127);
    hs_gw_key(w, "a.u16", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_UINT16, 2), hs_gw_u16(w, 65535), hs_gw_u16(w, 7);
    hs_gw_key(w, "a.i16", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_INT16, 2), hs_gw_u16(w, (uint16_t)-32768),
        hs_gw_u16(w, 32767);
    hs_gw_key(w, "a.u32", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_UINT32, 2), hs_gw_u32(w, 0),
        hs_gw_u32(w, 4294967295u);
    hs_gw_key(w, "a.i32", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_INT32, 2), hs_gw_u32(w, (uint32_t)INT32_MIN),
        hs_gw_u32(w, 12345);
    hs_gw_key(w, "a.f32", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_FLOAT32, 3), hs_gw_f32(w, 1.5f),
        hs_gw_f32(w, -2.25f), hs_gw_f32(w, 1e-5f);
    hs_gw_key(w, "a.bool", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_BOOL, 3), hs_gw_u8(w, 1), hs_gw_u8(w, 0),
        hs_gw_u8(w, 1);
    hs_gw_key(w, "a.str", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_STRING, 3), hs_gw_str(w, "x"), hs_gw_str(w, ""),
        hs_gw_str(w, "yz");
    hs_gw_key(w, "a.u64", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_UINT64, 2), hs_gw_u64(w, UINT64_MAX),
        hs_gw_u64(w, 9);
    hs_gw_key(w, "a.i64", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_INT64, 2), hs_gw_u64(w, (uint64_t)INT64_MIN),
        hs_gw_u64(w, 42);
    hs_gw_key(w, "a.f64", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_FLOAT64, 2), hs_gw_f64(w, -0.5),
        hs_gw_f64(w, 1e300);
    hs_gw_key(w, "a.empty", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_UINT32, 0);
    hs_gw_key(w, "a.empty_str", HS_GW_ARRAY), hs_gw_arr(w, HS_GW_STRING, 0);
    size_t align = alignment ? alignment : 32;
    uint64_t off = 0;
    for (size_t i = 0; i < N_ALL_TENSORS; i++) {
        all_tensor *t = &g_all_tensors[i];
        t->offset = off;
        hs_gw_tensor_info(w, t->name, t->n_dims, t->ne, t->type, off);
        off = (off + t->nbytes + align - 1) / align * align;
    }
    hs_gw_pad(w, align);
    size_t data = w->len;
    for (size_t i = 0; i < N_ALL_TENSORS; i++) {
        all_tensor *t = &g_all_tensors[i];
        assert_int_equal(w->len, data + t->offset);
        for (size_t b = 0; b < t->nbytes; b++)
            hs_gw_u8(w, pattern(i, b));
        if (i + 1 < N_ALL_TENSORS) hs_gw_pad(w, align);
    }
    return data;
}

/* Checks one scalar key: its type and its value as int64 (integers, bool) or double (floats). */
static void expect_scalar(hs_gguf *g, const char *key, hs_gguf_type type, int64_t i, double f) {
    const hs_gguf_value *v = hs_gguf_find_key(g, key);
    if (!v) fail_msg("key %s missing", key);
    assert_string_equal(v->key, key);
    assert_int_equal(v->index, -1);
    assert_int_equal(v->type, type);
    if (type == HS_GGUF_TYPE_FLOAT32 || type == HS_GGUF_TYPE_FLOAT64)
        assert_true(v->v.f == f);
    else if (type == HS_GGUF_TYPE_BOOL)
        assert_int_equal(v->v.b, i);
    else if (type == HS_GGUF_TYPE_UINT64)
        assert_true(v->v.u == (uint64_t)i);
    else if (type == HS_GGUF_TYPE_UINT8 || type == HS_GGUF_TYPE_UINT16 || type == HS_GGUF_TYPE_UINT32)
        assert_true(v->v.u == (uint64_t)i);
    else
        assert_true(v->v.i == i);
}

static void check_all_scalars(hs_gguf *g) {
    expect_scalar(g, "v.u8", HS_GGUF_TYPE_UINT8, 200, 0);
    expect_scalar(g, "v.i8", HS_GGUF_TYPE_INT8, -100, 0);
    expect_scalar(g, "v.u16", HS_GGUF_TYPE_UINT16, 60000, 0);
    expect_scalar(g, "v.i16", HS_GGUF_TYPE_INT16, -30000, 0);
    expect_scalar(g, "v.u32", HS_GGUF_TYPE_UINT32, 4000000000ll, 0);
    expect_scalar(g, "v.i32", HS_GGUF_TYPE_INT32, -2000000000, 0);
    expect_scalar(g, "v.f32", HS_GGUF_TYPE_FLOAT32, 0, 1.5);
    expect_scalar(g, "v.bool", HS_GGUF_TYPE_BOOL, 1, 0);
    expect_scalar(g, "v.bool_false", HS_GGUF_TYPE_BOOL, 0, 0);
    expect_scalar(g, "v.u64", HS_GGUF_TYPE_UINT64, (1ll << 40) + 3, 0);
    expect_scalar(g, "v.i64", HS_GGUF_TYPE_INT64, -(1ll << 40), 0);
    expect_scalar(g, "v.f64", HS_GGUF_TYPE_FLOAT64, 0, 3.25);
    const char *s;
    HS_CHECK(hs_gguf_get_str(g, "v.str", &s));
    assert_string_equal(s, "hello");
    const hs_gguf_value *v = hs_gguf_find_key(g, "s.nul");
    assert_non_null(v);
    assert_int_equal(v->v.s.len, 3);
    assert_memory_equal(v->v.s.s, "a\0b", 4); /* and NUL-terminated after the 3 bytes */
    HS_CHECK(hs_gguf_get_str(g, "s.empty", &s));
    assert_string_equal(s, "");
}

/* Every array element through hs_gguf_arr_elem, as int64 / double / string. */
static void check_all_arrays(hs_gguf *g) {
    static const struct {
        const char *key;
        hs_gguf_type et;
        uint64_t n;
        int64_t i[3];
        double f[3];
    } arrs[] = {
        {"a.u8", HS_GGUF_TYPE_UINT8, 3, {1, 2, 255}, {0}},
        {"a.i8", HS_GGUF_TYPE_INT8, 3, {-1, 0, 127}, {0}},
        {"a.u16", HS_GGUF_TYPE_UINT16, 2, {65535, 7}, {0}},
        {"a.i16", HS_GGUF_TYPE_INT16, 2, {-32768, 32767}, {0}},
        {"a.u32", HS_GGUF_TYPE_UINT32, 2, {0, 4294967295ll}, {0}},
        {"a.i32", HS_GGUF_TYPE_INT32, 2, {INT32_MIN, 12345}, {0}},
        {"a.f32", HS_GGUF_TYPE_FLOAT32, 3, {0}, {1.5, -2.25, (double)1e-5f}},
        {"a.bool", HS_GGUF_TYPE_BOOL, 3, {1, 0, 1}, {0}},
        {"a.u64", HS_GGUF_TYPE_UINT64, 2, {-1 /* UINT64_MAX */, 9}, {0}},
        {"a.i64", HS_GGUF_TYPE_INT64, 2, {INT64_MIN, 42}, {0}},
        {"a.f64", HS_GGUF_TYPE_FLOAT64, 2, {0}, {-0.5, 1e300}},
        {"a.empty", HS_GGUF_TYPE_UINT32, 0, {0}, {0}},
        {"a.empty_str", HS_GGUF_TYPE_STRING, 0, {0}, {0}},
    };
    for (size_t k = 0; k < sizeof arrs / sizeof arrs[0]; k++) {
        const hs_gguf_value *a;
        HS_CHECK(hs_gguf_get_arr(g, arrs[k].key, arrs[k].et, &a));
        assert_int_equal(a->v.arr.n, arrs[k].n);
        for (uint64_t i = 0; i < arrs[k].n; i++) {
            hs_gguf_value e;
            HS_CHECK(hs_gguf_arr_elem(a, i, &e));
            assert_int_equal(e.type, arrs[k].et);
            assert_int_equal(e.index, i);
            if (e.type == HS_GGUF_TYPE_FLOAT32 || e.type == HS_GGUF_TYPE_FLOAT64)
                assert_true(e.v.f == arrs[k].f[i]);
            else if (e.type == HS_GGUF_TYPE_BOOL)
                assert_int_equal(e.v.b, arrs[k].i[i]);
            else if (e.type == HS_GGUF_TYPE_INT8 || e.type == HS_GGUF_TYPE_INT16 ||
                     e.type == HS_GGUF_TYPE_INT32 || e.type == HS_GGUF_TYPE_INT64)
                assert_true(e.v.i == arrs[k].i[i]);
            else
                assert_true(e.v.u == (uint64_t)arrs[k].i[i]);
        }
        hs_gguf_value e;
        expect_value_error(hs_gguf_arr_elem(a, arrs[k].n, &e), HS_ERR_OUT_OF_RANGE, "out of range");
    }
    const hs_gguf_value *a;
    HS_CHECK(hs_gguf_get_arr(g, "a.str", HS_GGUF_TYPE_STRING, &a));
    const char *want[] = {"x", "", "yz"};
    for (uint64_t i = 0; i < 3; i++) {
        hs_gguf_str s;
        HS_CHECK(hs_gguf_arr_str(a, i, &s));
        assert_int_equal(s.len, strlen(want[i]));
        assert_string_equal(s.s, want[i]);
    }
    expect_value_error(hs_gguf_get_arr(g, "a.u8", HS_GGUF_TYPE_STRING, &a), HS_ERR_FORMAT,
                       "is an array of u8, expected an array of str");
    expect_value_error(hs_gguf_get_arr(g, "v.u8", HS_GGUF_TYPE_COUNT, &a), HS_ERR_FORMAT,
                       "has type u8, expected arr");
}

/* Tensor infos and data against what build_all wrote. */
static void check_all_tensors(hs_gguf *g, const hs_gw *w, size_t data) {
    assert_int_equal(hs_gguf_n_tensors(g), N_ALL_TENSORS);
    assert_int_equal(hs_gguf_data_offset(g), data);
    for (size_t i = 0; i < N_ALL_TENSORS; i++) {
        const all_tensor *want = &g_all_tensors[i];
        const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
        assert_non_null(t);
        assert_ptr_equal(t, hs_gguf_find_tensor(g, want->name));
        assert_string_equal(t->name, want->name);
        assert_int_equal(t->type, want->type);
        assert_int_equal(t->n_dims, want->n_dims);
        for (int d = 0; d < 4; d++)
            assert_int_equal(t->ne[d], want->ne[d]);
        assert_int_equal(t->offset, want->offset);
        assert_int_equal(t->nbytes, want->nbytes);
        assert_memory_equal(t->data, w->buf + data + want->offset, want->nbytes);
        for (size_t b = 0; b < want->nbytes; b++)
            assert_int_equal(((const uint8_t *)t->data)[b], pattern(i, b));
        const hs_ggml_type_info *ti = hs_ggml_type_get(t->type);
        assert_non_null(ti);
        assert_int_equal(t->nbytes, (uint64_t)hs_gguf_tensor_nelements(t) / ti->block_size * ti->type_size);
    }
    assert_null(hs_gguf_tensor_at(g, N_ALL_TENSORS));
    assert_null(hs_gguf_find_tensor(g, "t.none"));
    const hs_gguf_tensor *t;
    expect_value_error(hs_gguf_get_tensor(g, "t.none", &t), HS_ERR_FORMAT, "tensor 't.none' not found");
}

static void check_all(hs_gguf *g, const hs_gw *w, uint32_t version, uint32_t alignment, size_t data) {
    assert_int_equal(hs_gguf_version(g), version);
    assert_int_equal(hs_gguf_alignment(g), alignment ? alignment : 32);
    assert_int_equal(hs_gguf_n_kv(g), N_ALL_KV + (alignment ? 1 : 0));
    assert_int_equal(hs_gguf_file_size(g), w->len);
    assert_string_equal(hs_gguf_kv_at(g, 0)->key, "v.u8"); /* file order */
    assert_null(hs_gguf_kv_at(g, hs_gguf_n_kv(g)));
    assert_null(hs_gguf_find_key(g, "v.none"));
    check_all_scalars(g);
    check_all_arrays(g);
    check_all_tensors(g, w, data);
}

static void test_valid_all_types(void **state) {
    const uint32_t versions[] = {2, 3}, alignments[] = {0, 32, 64, 8};
    for (size_t vi = 0; vi < 2; vi++) {
        for (size_t ai = 0; ai < 4; ai++) {
            hs_gw w;
            hs_gw_init(&w);
            size_t data = build_all(&w, versions[vi], alignments[ai]);
            hs_gguf *g = NULL;
            uint8_t *copy;
            HS_CHECK(open_copy(w.buf, w.len, &g, &copy));
            check_all(g, &w, versions[vi], alignments[ai], data);
            hs_gguf_close(g);
            free(copy);
            char path[256];
            temp_path(path, sizeof path);
            assert_int_equal(hs_gw_write_file(&w, path), 0);
            HS_CHECK(hs_gguf_open(path, &g));
            check_all(g, &w, versions[vi], alignments[ai], data);
            assert_string_equal(hs_gguf_name(g), path);
            assert_int_equal(
                (uintptr_t)hs_gguf_tensor_at(g, 1)->data % (alignments[ai] ? alignments[ai] : 32), 0);
            hs_gguf_close(g);
            unlink(path);
            hs_gw_free(&w);
        }
    }
    (void)state;
}

/* Integer getters accept any integer type whose value fits; other types and values give clear errors. */
static void test_getters(void **state) {
    hs_gw w;
    hs_gw_init(&w);
    build_all(&w, 3, 0);
    hs_gguf *g = NULL;
    uint8_t *copy;
    HS_CHECK(open_copy(w.buf, w.len, &g, &copy));
    uint32_t u;
    int32_t i;
    uint64_t u64;
    float f;
    bool b;
    const char *s;
    HS_CHECK(hs_gguf_get_u32(g, "v.u8", &u));
    assert_int_equal(u, 200);
    HS_CHECK(hs_gguf_get_u32(g, "v.u32", &u));
    assert_int_equal(u, 4000000000u);
    HS_CHECK(hs_gguf_get_i32(g, "v.i16", &i));
    assert_int_equal(i, -30000);
    HS_CHECK(hs_gguf_get_i32(g, "v.small_i64", &i));
    assert_int_equal(i, -5);
    HS_CHECK(hs_gguf_get_i32(g, "v.u16", &i));
    assert_int_equal(i, 60000);
    HS_CHECK(hs_gguf_get_u64(g, "v.u64", &u64));
    assert_true(u64 == (1ull << 40) + 3);
    HS_CHECK(hs_gguf_get_f32(g, "v.f32", &f));
    assert_true(f == 1.5f);
    HS_CHECK(hs_gguf_get_f32(g, "v.f64", &f));
    assert_true(f == 3.25f);
    HS_CHECK(hs_gguf_get_bool(g, "v.bool", &b));
    assert_true(b);
    expect_value_error(hs_gguf_get_u32(g, "v.i8", &u), HS_ERR_FORMAT,
                       "key 'v.i8' = -100 (i8) does not fit u32");
    expect_value_error(hs_gguf_get_u32(g, "v.u64", &u), HS_ERR_FORMAT, "does not fit u32");
    expect_value_error(hs_gguf_get_i32(g, "v.u32", &i), HS_ERR_FORMAT, "= 4000000000 (u32) does not fit i32");
    expect_value_error(hs_gguf_get_i32(g, "v.i64", &i), HS_ERR_FORMAT, "does not fit i32");
    expect_value_error(hs_gguf_get_u64(g, "v.i64", &u64), HS_ERR_FORMAT, "does not fit u64");
    expect_value_error(hs_gguf_get_u32(g, "v.str", &u), HS_ERR_FORMAT,
                       "key 'v.str' has type str, expected an integer");
    expect_value_error(hs_gguf_get_u32(g, "v.f32", &u), HS_ERR_FORMAT, "has type f32, expected an integer");
    expect_value_error(hs_gguf_get_f32(g, "v.u32", &f), HS_ERR_FORMAT, "has type u32, expected a float");
    expect_value_error(hs_gguf_get_bool(g, "v.u8", &b), HS_ERR_FORMAT, "has type u8, expected bool");
    expect_value_error(hs_gguf_get_str(g, "v.u32", &s), HS_ERR_FORMAT, "has type u32, expected str");
    expect_value_error(hs_gguf_get_str(g, "a.str", &s), HS_ERR_FORMAT, "has type arr, expected str");
    expect_value_error(hs_gguf_get_u32(g, "v.none", &u), HS_ERR_FORMAT, "key 'v.none' not found");
    expect_value_error(hs_gguf_architecture(g, &s), HS_ERR_FORMAT, "general.architecture' not found");
    /* Array elements convert the same way and name their index. */
    const hs_gguf_value *a;
    HS_CHECK(hs_gguf_get_arr(g, "a.i8", HS_GGUF_TYPE_COUNT, &a));
    HS_CHECK(hs_gguf_arr_i32(a, 0, &i));
    assert_int_equal(i, -1);
    HS_CHECK(hs_gguf_arr_u32(a, 2, &u));
    assert_int_equal(u, 127);
    expect_value_error(hs_gguf_arr_u32(a, 0, &u), HS_ERR_FORMAT,
                       "key 'a.i8' element 0 = -1 (i8) does not fit u32");
    expect_value_error(hs_gguf_arr_f32(a, 0, &f), HS_ERR_FORMAT, "element 0 has type i8, expected a float");
    HS_CHECK(hs_gguf_get_arr(g, "a.u64", HS_GGUF_TYPE_UINT64, &a));
    expect_value_error(hs_gguf_arr_u32(a, 0, &u), HS_ERR_FORMAT, "does not fit u32");
    HS_CHECK(hs_gguf_arr_u32(a, 1, &u));
    assert_int_equal(u, 9);
    hs_gguf_str str;
    expect_value_error(hs_gguf_arr_str(a, 1, &str), HS_ERR_FORMAT, "has type u64, expected str");
    expect_value_error(hs_gguf_arr_u32(hs_gguf_find_key(g, "v.u8"), 0, &u), HS_ERR_FORMAT, "expected arr");
    hs_gguf_close(g);
    free(copy);
    hs_gw_free(&w);
    (void)state;
}

static void test_type_table(void **state) {
    /* Sizes worked out from ggml-common.h's block structs (see all_tensor) plus: Q4_0 = f16 + 16 = 18 per 32,
     * Q6_K = 128 + 64 + 16 + f16 = 210 per 256, Q2_K = 16 + 64 + 2 f16 = 84 per 256. */
    static const struct {
        uint32_t t;
        const char *name;
        uint32_t block, size;
    } want[] = {{0, "F32", 1, 4},       {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
                {8, "Q8_0", 32, 34},    {10, "Q2_K", 256, 84},    {12, "Q4_K", 256, 144},
                {14, "Q6_K", 256, 210}, {23, "IQ4_XS", 256, 136}, {30, "BF16", 1, 2}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const hs_ggml_type_info *ti = hs_ggml_type_get(want[i].t);
        assert_non_null(ti);
        assert_string_equal(ti->name, want[i].name);
        assert_int_equal(ti->block_size, want[i].block);
        assert_int_equal(ti->type_size, want[i].size);
    }
    /* Every type ggml numbers up to BF16 is known except the removed ones (4, 5). */
    for (uint32_t t = 0; t <= 30; t++)
        assert_true((hs_ggml_type_get(t) == NULL) == (t == 4 || t == 5));
    const uint32_t unknown[] = {31, 32, 33, 36, 37, 38, 40, 1000, UINT32_MAX};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        assert_null(hs_ggml_type_get(unknown[i]));
    assert_string_equal(hs_gguf_type_name(HS_GGUF_TYPE_STRING), "str");
    assert_string_equal(hs_gguf_type_name((hs_gguf_type)99), "?");
    (void)state;
}

/* ---- malformed files: a small valid file, then one field corrupted per test ---- */

typedef struct small_pos {
    size_t version, n_tensors, n_kv;
    size_t key0_len; /* length field of the first key */
    size_t align_type, align_val;
    size_t ax_type, ay_key;   /* type of "a.x"; bytes of the key "a.y" */
    size_t flag_val;          /* the bool of "a.flag" */
    size_t arr_type, arr_str; /* element type of "a.arr"; length field of its first string */
    hs_gw_tinfo ta, tb;
    size_t data;
} small_pos;

/* v3; keys general.architecture, general.alignment (u32 32), a.x (u32), a.y (i32), a.flag (bool), a.arr
 * (2 strings); tensors t.a F32 [8] at 0 and t.b F32 [8, 2] at 32, the last one ending at the end of file. */
static void build_small(hs_gw *w, small_pos *p) {
    hs_gw_init(w);
    p->version = hs_gw_header(w, 3, 2, 6);
    p->n_tensors = p->version + 4;
    p->n_kv = p->version + 12;
    p->key0_len = w->len;
    hs_gw_key(w, "general.architecture", HS_GW_STRING), hs_gw_str(w, "test");
    p->align_type = hs_gw_key(w, "general.alignment", HS_GW_UINT32);
    p->align_val = hs_gw_u32(w, 32);
    p->ax_type = hs_gw_key(w, "a.x", HS_GW_UINT32);
    hs_gw_u32(w, 7);
    p->ay_key = w->len + 8;
    hs_gw_key(w, "a.y", HS_GW_INT32), hs_gw_u32(w, (uint32_t)-7);
    hs_gw_key(w, "a.flag", HS_GW_BOOL);
    p->flag_val = hs_gw_u8(w, 1);
    hs_gw_key(w, "a.arr", HS_GW_ARRAY);
    p->arr_type = hs_gw_arr(w, HS_GW_STRING, 2);
    p->arr_str = hs_gw_str(w, "p");
    hs_gw_str(w, "qq");
    p->ta = hs_gw_tensor_info(w, "t.a", 1, (uint64_t[]){8}, 0, 0);
    p->tb = hs_gw_tensor_info(w, "t.b", 2, (uint64_t[]){8, 2}, 0, 32);
    hs_gw_pad(w, 32);
    p->data = w->len;
    for (int i = 0; i < 24; i++)
        hs_gw_f32(w, (float)i);
}

static void test_small_is_valid(void **state) {
    hs_gw w;
    small_pos p;
    build_small(&w, &p);
    hs_gguf *g = NULL;
    uint8_t *copy;
    HS_CHECK(open_copy(w.buf, w.len, &g, &copy));
    assert_int_equal(hs_gguf_n_tensors(g), 2);
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, "t.b");
    assert_non_null(t);
    assert_int_equal(p.data + t->offset + t->nbytes, w.len); /* the data ends at the end of the file */
    float x;
    memcpy(&x, (const uint8_t *)t->data + 4 * 15, 4);
    assert_true(x == 23.0f);
    hs_gguf_close(g);
    free(copy);
    hs_gw_free(&w);
    (void)state;
}

/* Builds the small file, lets patch corrupt it, and expects HS_ERR_FORMAT with substr. */
#define MALFORMED(test_name, substr, ...)                                                                    \
    static void test_name(void **state) {                                                                    \
        hs_gw w;                                                                                             \
        small_pos p;                                                                                         \
        build_small(&w, &p);                                                                                 \
        __VA_ARGS__;                                                                                         \
        expect_format_error(&w, substr);                                                                     \
        hs_gw_free(&w);                                                                                      \
        (void)state;                                                                                         \
    }

MALFORMED(test_bad_magic, "bad magic", hs_gw_patch_u8(&w, 0, 'X'))
MALFORMED(test_version_1, "version 1 is not supported", hs_gw_patch_u32(&w, p.version, 1))
MALFORMED(test_version_4, "unsupported GGUF version 4", hs_gw_patch_u32(&w, p.version, 4))
MALFORMED(test_version_0, "unsupported GGUF version 0", hs_gw_patch_u32(&w, p.version, 0))
MALFORMED(test_big_endian, "big-endian", hs_gw_patch_u32(&w, p.version, 0x03000000u))
MALFORMED(test_absurd_tensor_count, "tensor count 1099511627776 is larger than the file could hold",
          hs_gw_patch_u64(&w, p.n_tensors, 1ull << 40))
MALFORMED(test_absurd_kv_count, "metadata count 1099511627776 is larger than the file could hold",
          hs_gw_patch_u64(&w, p.n_kv, 1ull << 40))
MALFORMED(test_key_length_past_end, "key length 1099511627776 runs past the end of the file",
          hs_gw_patch_u64(&w, p.key0_len, 1ull << 40))
MALFORMED(test_array_string_past_end, "array string length 18446744073709551615 runs past the end",
          hs_gw_patch_u64(&w, p.arr_str, UINT64_MAX))
MALFORMED(test_array_length_past_end, "array of 1152921504606846976 strings runs past the end",
          hs_gw_patch_u64(&w, p.arr_type + 4, 1ull << 60))
MALFORMED(test_numeric_array_past_end, "array of 1152921504606846976 u64 elements runs past the end",
          hs_gw_patch_u32(&w, p.arr_type, 10);
          hs_gw_patch_u64(&w, p.arr_type + 4, 1ull << 60))
MALFORMED(test_unknown_value_type, "metadata 2 ('a.x'): unknown value type 13",
          hs_gw_patch_u32(&w, p.ax_type, 13))
MALFORMED(test_unknown_array_type, "unknown value type 4000 of array elements",
          hs_gw_patch_u32(&w, p.arr_type, 4000))
MALFORMED(test_nested_array, "('a.arr'): nested arrays are not supported", hs_gw_patch_u32(&w, p.arr_type, 9))
MALFORMED(test_bad_bool, "bool value is 2", hs_gw_patch_u8(&w, p.flag_val, 2))
MALFORMED(test_key_with_nul, "key contains a NUL byte", hs_gw_patch_u8(&w, p.ay_key + 1, 0))
MALFORMED(test_duplicate_key, "duplicate key 'a.x' (entries 2 and 3)", hs_gw_patch_u8(&w, p.ay_key + 2, 'x'))
MALFORMED(test_alignment_not_pow2, "general.alignment 24 is not a power of two",
          hs_gw_patch_u32(&w, p.align_val, 24))
MALFORMED(test_alignment_zero, "general.alignment 0 is not a power of two",
          hs_gw_patch_u32(&w, p.align_val, 0))
MALFORMED(test_alignment_type, "general.alignment has type f32", hs_gw_patch_u32(&w, p.align_type, 6))
MALFORMED(test_unknown_tensor_type, "tensor 1 ('t.b'): unknown ggml type 99",
          hs_gw_patch_u32(&w, p.tb.type, 99))
MALFORMED(test_removed_tensor_type, "unknown ggml type 4", hs_gw_patch_u32(&w, p.ta.type, 4))
MALFORMED(test_misaligned_offset, "tensor 1 ('t.b'): misaligned offset 33 (alignment 32)",
          hs_gw_patch_u64(&w, p.tb.offset, 33))
MALFORMED(test_data_out_of_bounds, "tensor 1 ('t.b'): data (offset 1048576, 64 bytes) is out of bounds",
          hs_gw_patch_u64(&w, p.tb.offset, 1u << 20))
MALFORMED(test_data_offset_huge, "is out of bounds", hs_gw_patch_u64(&w, p.tb.offset, UINT64_MAX & ~31ull))
MALFORMED(test_data_one_past, "is out of bounds", hs_gw_patch_u64(&w, p.tb.dims, 9))
MALFORMED(test_duplicate_tensor, "duplicate tensor name 't.a' (entries 0 and 1)",
          hs_gw_patch_u8(&w, p.tb.name + 2, 'a'))
MALFORMED(test_tensor_name_nul, "tensor 1: name contains a NUL byte", hs_gw_patch_u8(&w, p.tb.name + 1, 0))
MALFORMED(test_n_dims_5, "tensor 1 ('t.b'): n_dims 5 is out of range", hs_gw_patch_u32(&w, p.tb.n_dims, 5))
MALFORMED(test_n_dims_0, "tensor 0 ('t.a'): n_dims 0 is out of range", hs_gw_patch_u32(&w, p.ta.n_dims, 0))
MALFORMED(test_zero_dim, "dimension 1 is 0 (must be positive)", hs_gw_patch_u64(&w, p.tb.dims + 8, 0))
MALFORMED(test_negative_dim, "dimension 0 is -1 (must be positive)",
          hs_gw_patch_u64(&w, p.tb.dims, UINT64_MAX))
MALFORMED(test_not_block_multiple, "ne[0] = 8 (of 8 elements) is not a multiple of the block size 32 of Q4_0",
          hs_gw_patch_u32(&w, p.ta.type, 2))
MALFORMED(test_element_overflow, "element count overflows", hs_gw_patch_u64(&w, p.tb.dims, 1ull << 62);
          hs_gw_patch_u64(&w, p.tb.dims + 8, 1ull << 62))
MALFORMED(test_byte_overflow, "byte size overflows", hs_gw_patch_u64(&w, p.tb.dims, 1ull << 61);
          hs_gw_patch_u32(&w, p.tb.type, 28 /* F64: 8 bytes per element */))

static void test_empty_and_tiny(void **state) {
    hs_gw w;
    hs_gw_init(&w);
    expect_format_error(&w, "truncated file at header: magic");
    hs_gw_bytes(&w, "GGU", 3);
    expect_format_error(&w, "truncated file at header: magic (offset 0: needs 4 bytes, 3 left)");
    hs_gw_bytes(&w, "F", 1);
    expect_format_error(&w, "truncated file at header: version");
    hs_gw_u32(&w, 3);
    hs_gw_u64(&w, 0);
    expect_format_error(&w, "truncated file at header: metadata count");
    hs_gw_u64(&w, 0);
    hs_gguf *g = NULL;
    uint8_t *copy;
    HS_CHECK(open_copy(w.buf, w.len, &g, &copy)); /* an empty model is a valid file */
    assert_int_equal(hs_gguf_n_kv(g), 0);
    assert_int_equal(hs_gguf_n_tensors(g), 0);
    assert_null(hs_gguf_find_key(g, "x"));
    assert_null(hs_gguf_find_tensor(g, "x"));
    hs_gguf_close(g);
    free(copy);
    hs_gw_free(&w);
    hs_gguf_close(NULL);
    g = (hs_gguf *)1;
    expect_value_error(hs_gguf_open("/nonexistent/x.gguf", &g), HS_ERR_IO, "cannot open /nonexistent/x.gguf");
    assert_null(g);
    expect_value_error(hs_gguf_open(hs_test_shared_dir(), &g), HS_ERR_IO, "is not a regular file");
    (void)state;
}

/* Every proper prefix of the small file fails with HS_ERR_FORMAT, from memory (exact-size buffers, so
 * AddressSanitizer catches any over-read) and from a file. */
static void test_truncated_everywhere(void **state) {
    hs_gw w;
    small_pos p;
    build_small(&w, &p);
    char path[256];
    temp_path(path, sizeof path);
    const char *kinds[] = {"truncated file at", "runs past the end of the file",
                           "larger than the file could hold", "is out of bounds"};
    for (size_t len = 0; len < w.len; len++) {
        for (int from_file = 0; from_file < 2; from_file++) {
            hs_gguf *g = (hs_gguf *)1;
            uint8_t *copy = NULL;
            hs_status st;
            if (from_file) {
                hs_gw cut = {w.buf, len, len};
                assert_int_equal(hs_gw_write_file(&cut, path), 0);
                st = hs_gguf_open(path, &g);
            } else {
                st = open_copy(w.buf, len, &g, &copy);
            }
            bool known = false;
            for (size_t k = 0; k < 4; k++)
                known = known || strstr(hs_last_error(), kinds[k]);
            if (st != HS_ERR_FORMAT || !known)
                fail_msg("prefix of %zu/%zu bytes (%s): %s: %s", len, w.len, from_file ? "file" : "memory",
                         hs_status_string(st), hs_last_error());
            assert_null(g);
            free(copy);
        }
    }
    unlink(path);
    hs_gw_free(&w);
    (void)state;
}

/* Seeded random corruption (1-4 bytes set to random or boundary values): never a crash; either the file
 * still opens and every accessor works, or HS_ERR_FORMAT with a message. */
static void test_random_corruption(void **state) {
    hs_gw w;
    small_pos p;
    build_small(&w, &p);
    hs_rng r;
    hs_rng_seed(&r, 1234);
    const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x20, 0x09};
    int ok = 0, bad = 0;
    for (int iter = 0; iter < 4000; iter++) {
        uint8_t *b = malloc(w.len);
        assert_non_null(b);
        memcpy(b, w.buf, w.len);
        int n = 1 + (int)(hs_rng_u32(&r) % 4);
        for (int k = 0; k < n; k++) {
            size_t at = hs_rng_u32(&r) % w.len;
            b[at] = (hs_rng_u32(&r) & 1) ? (uint8_t)hs_rng_u32(&r) : special[hs_rng_u32(&r) % sizeof special];
        }
        hs_gguf *g = NULL;
        hs_status st = hs_gguf_open_memory(b, w.len, "fuzz.gguf", &g);
        if (st == HS_OK) {
            ok++;
            for (uint64_t i = 0; i < hs_gguf_n_kv(g); i++) {
                const hs_gguf_value *v = hs_gguf_kv_at(g, i);
                assert_ptr_equal(hs_gguf_find_key(g, v->key), v);
                for (uint64_t j = 0; v->type == HS_GGUF_TYPE_ARRAY && j < v->v.arr.n; j++) {
                    hs_gguf_value e;
                    HS_CHECK(hs_gguf_arr_elem(v, j, &e));
                }
            }
            for (uint64_t i = 0; i < hs_gguf_n_tensors(g); i++) {
                const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
                volatile uint8_t sum = 0;
                for (uint64_t k = 0; k < t->nbytes; k++)
                    sum += ((const uint8_t *)t->data)[k];
                (void)sum;
            }
            hs_gguf_close(g);
        } else {
            bad++;
            if (st != HS_ERR_FORMAT || !*hs_last_error())
                fail_msg("%s: %s", hs_status_string(st), hs_last_error());
            assert_null(g);
        }
        free(b);
    }
    assert_true(ok > 0 && bad > 0); /* both outcomes exercised */
    hs_gw_free(&w);
    (void)state;
}

/* ---- heterospec info ---- */

/* Runs hs_cli_info with stdout sent to a file; returns the exit code and the output (caller frees). */
static int run_info(char **argv, int argc, char **out) {
    char path[256];
    temp_path(path, sizeof path);
    fflush(stdout);
    int saved = dup(fileno(stdout));
    int fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, fileno(stdout));
    close(fd);
    int rc = hs_cli_info(argc, argv);
    fflush(stdout);
    dup2(saved, fileno(stdout));
    close(saved);
    size_t n;
    *out = (char *)read_all(path, &n);
    assert_non_null(*out);
    unlink(path);
    return rc;
}

/* Total parameters of stories260K as the GGUF stores them, from the .bin header alone: every weight of the
 * llama2.c layout (see test_stories_weights) plus the GGUF's copy of the shared classifier. */
static uint64_t stories_params(void) {
    size_t n;
    uint8_t *bin = read_shared("stories260K.bin", &n);
    l2c h;
    l2c_weights(bin, n, &h);
    free(bin);
    uint64_t D = (uint64_t)h.dim, H = (uint64_t)h.hidden, L = (uint64_t)h.n_layers,
             V = (uint64_t)abs(h.vocab);
    uint64_t KV = D * (uint64_t)h.n_kv_heads / (uint64_t)h.n_heads;
    return 2 * V * D + L * (2 * D + 2 * D * D + 2 * KV * D + 3 * H * D) + D;
}

static void test_cli_info_text(void **state) {
    char path[512], *out;
    shared_path(path, sizeof path, "stories260K.gguf");
    char *argv[] = {"info", "-m", path};
    assert_int_equal(run_info(argv, 3, &out), 0);
    char want[128];
    snprintf(want, sizeof want, "total: %llu parameters", (unsigned long long)stories_params());
    if (!strstr(out, want)) fail_msg("'%s' not in:\n%s", want, out);
    const char *parts[] = {"GGUF version 3, alignment 32",
                           "llama.block_count",
                           "general.architecture",
                           "512 items: [\"<unk>\", \"<s>\"",
                           ", ...]",
                           "blk.4.ffn_norm.weight",
                           "[64, 512]",
                           "F32"};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (!strstr(out, parts[i])) fail_msg("'%s' not in:\n%s", parts[i], out);
    free(out);
    (void)state;
}

static void test_cli_info_json(void **state) {
    char path[512], *out;
    shared_path(path, sizeof path, "stories260K.gguf");
    char *argv[] = {"info", "--json", "--model", path};
    assert_int_equal(run_info(argv, 4, &out), 0);
    cJSON *root = cJSON_Parse(out);
    if (!root) fail_msg("not JSON:\n%s", out);
    assert_int_equal(cJSON_GetObjectItem(root, "version")->valuedouble, 3);
    assert_true(cJSON_GetObjectItem(root, "n_params")->valuedouble == (double)stories_params());
    cJSON *ts = cJSON_GetObjectItem(root, "tensors");
    assert_int_equal(cJSON_GetArraySize(ts), 48);
    cJSON *t0 = cJSON_GetArrayItem(ts, 0);
    assert_string_equal(cJSON_GetObjectItem(t0, "name")->valuestring, "token_embd.weight");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t0, "shape")), 2);
    bool seen = false;
    cJSON *kv;
    cJSON_ArrayForEach(kv, cJSON_GetObjectItem(root, "metadata")) {
        if (strcmp(cJSON_GetObjectItem(kv, "key")->valuestring, "tokenizer.ggml.tokens") != 0) continue;
        seen = true;
        assert_int_equal(cJSON_GetObjectItem(kv, "length")->valuedouble, 512);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(kv, "value")), 8);
        assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(kv, "value"), 1)->valuestring, "<s>");
    }
    assert_true(seen);
    cJSON_Delete(root);
    free(out);
    (void)state;
}

static void test_cli_info_errors(void **state) {
    hs_gw w;
    small_pos p;
    build_small(&w, &p);
    hs_gw_patch_u32(&w, p.version, 1);
    char path[256], *out;
    temp_path(path, sizeof path);
    assert_int_equal(hs_gw_write_file(&w, path), 0);
    char *bad[] = {"info", "-m", path};
    assert_int_equal(run_info(bad, 3, &out), 1);
    free(out);
    unlink(path);
    hs_gw_free(&w);
    char *none[] = {"info"};
    assert_int_equal(run_info(none, 1, &out), 2);
    free(out);
    char *unknown[] = {"info", "--bogus"};
    assert_int_equal(run_info(unknown, 2, &out), 2);
    free(out);
    char *missing_arg[] = {"info", "-m"};
    assert_int_equal(run_info(missing_arg, 2, &out), 2);
    free(out);
    char *help[] = {"info", "--help"};
    assert_int_equal(run_info(help, 2, &out), 0);
    assert_non_null(strstr(out, "usage: heterospec info"));
    free(out);
    (void)state;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_hparams),
        cmocka_unit_test(test_stories_weights),
        cmocka_unit_test(test_stories_vocab),
        cmocka_unit_test(test_valid_all_types),
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_type_table),
        cmocka_unit_test(test_small_is_valid),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_version_1),
        cmocka_unit_test(test_version_4),
        cmocka_unit_test(test_version_0),
        cmocka_unit_test(test_big_endian),
        cmocka_unit_test(test_absurd_tensor_count),
        cmocka_unit_test(test_absurd_kv_count),
        cmocka_unit_test(test_key_length_past_end),
        cmocka_unit_test(test_array_string_past_end),
        cmocka_unit_test(test_array_length_past_end),
        cmocka_unit_test(test_numeric_array_past_end),
        cmocka_unit_test(test_unknown_value_type),
        cmocka_unit_test(test_unknown_array_type),
        cmocka_unit_test(test_nested_array),
        cmocka_unit_test(test_bad_bool),
        cmocka_unit_test(test_key_with_nul),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_alignment_not_pow2),
        cmocka_unit_test(test_alignment_zero),
        cmocka_unit_test(test_alignment_type),
        cmocka_unit_test(test_unknown_tensor_type),
        cmocka_unit_test(test_removed_tensor_type),
        cmocka_unit_test(test_misaligned_offset),
        cmocka_unit_test(test_data_out_of_bounds),
        cmocka_unit_test(test_data_offset_huge),
        cmocka_unit_test(test_data_one_past),
        cmocka_unit_test(test_duplicate_tensor),
        cmocka_unit_test(test_tensor_name_nul),
        cmocka_unit_test(test_n_dims_5),
        cmocka_unit_test(test_n_dims_0),
        cmocka_unit_test(test_zero_dim),
        cmocka_unit_test(test_negative_dim),
        cmocka_unit_test(test_not_block_multiple),
        cmocka_unit_test(test_element_overflow),
        cmocka_unit_test(test_byte_overflow),
        cmocka_unit_test(test_empty_and_tiny),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_random_corruption),
        cmocka_unit_test(test_cli_info_text),
        cmocka_unit_test(test_cli_info_json),
        cmocka_unit_test(test_cli_info_errors),
    };
    return hs_test_run_group("gguf", tests, NULL, NULL);
}
