/* Tests of runtime/op_attn: tree mask, tree attention (against a double
 * reference, and bitwise against plain decoding over a compacted cache) and KV
 * compaction (in place, f32 and f16, many layers), and one speculative round
 * chaining all three on the device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_attn.h"
#include "op_matmul.h"
#include "ref_attn.h"
#include "ref_matmul.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

/* ---- helpers ---- */

static size_t elem_size(hs_type t) { return t == HS_TYPE_F16 ? 2 : 4; }

/* count random values in [-1, 1) stored as type (f32, or f16 halves). */
static void *rand_cache(hs_rng *r, hs_type t, size_t count) {
    void *c = malloc(count * elem_size(t) + 16);
    assert_non_null(c);
    for (size_t i = 0; i < count; i++) {
        float x = hs_rng_range(r, -1.0f, 1.0f);
        if (t == HS_TYPE_F16)
            ((uint16_t *)c)[i] = hs_test_f32_to_f16(x);
        else
            ((float *)c)[i] = x;
    }
    return c;
}

/* parent[i] in [-1, i): chains half the time, so trees get deep. */
static void rand_tree(hs_rng *r, int32_t *parents, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        if (i > 0 && (hs_rng_u32(r) & 1))
            parents[i] = (int32_t)i - 1;
        else
            parents[i] = (int32_t)(hs_rng_u32(r) % (i + 1)) - 1;
    }
}

static uint32_t *host_mask(const int32_t *parents, uint32_t n, int32_t *depth) {
    uint32_t *m = malloc((size_t)n * hs_attn_mask_words(n) * 4);
    int32_t *d = depth ? depth : malloc((size_t)n * 4);
    assert_non_null(m);
    ref_tree_mask(parents, n, m, d);
    if (!depth) free(d);
    return m;
}

/* Shapes of one attention layer. */
typedef struct shape {
    uint32_t n_head, n_kv, hd, n_ctx;
    hs_type type;
} shape;

/* Device buffers of one attention call, with every tensor placed at a byte
 * offset inside its buffer (pad) so the aligned-offset path is exercised. */
typedef struct attn_dev {
    hs_vk_buffer *q, *k, *v, *info, *mask, *out;
    hs_vk_binding bq, bout, binfo, bmask;
    hs_kv_layer kv;
    uint32_t n;
} attn_dev;

static hs_vk_buffer *padded(hs_test_env *env, const void *data, size_t n, size_t pad) {
    uint8_t *tmp = calloc(1, n + pad + 16);
    assert_non_null(tmp);
    if (data) memcpy(tmp + pad, data, n);
    hs_vk_buffer *b = hs_test_buffer(env, tmp, n + pad + 16);
    free(tmp);
    return b;
}

static void attn_dev_init(hs_test_env *env, attn_dev *a, const shape *s, uint32_t n, const float *q,
                          const void *k, const void *v, const uint32_t info[2], const uint32_t *mask,
                          bool pads) {
    const size_t qb = (size_t)n * s->n_head * s->hd * 4;
    const size_t kvb = (size_t)s->n_ctx * s->n_kv * s->hd * elem_size(s->type);
    const size_t mb = (size_t)n * hs_attn_mask_words(n) * 4;
    const size_t kpad = pads ? (s->type == HS_TYPE_F16 ? 8 : 16) : 0;
    memset(a, 0, sizeof *a);
    a->n = n;
    a->q = padded(env, q, qb, pads ? 48 : 0);
    a->k = padded(env, k, kvb, kpad);
    a->v = padded(env, v, kvb, kpad);
    a->info = padded(env, info, 8, pads ? 12 : 0);
    a->mask = padded(env, mask, mb, pads ? 4 : 0);
    a->out = padded(env, NULL, qb, pads ? 32 : 0);
    a->bq = (hs_vk_binding){.buf = a->q, .offset = pads ? 48 : 0};
    a->bout = (hs_vk_binding){.buf = a->out, .offset = pads ? 32 : 0};
    a->binfo = (hs_vk_binding){.buf = a->info, .offset = pads ? 12 : 0};
    a->bmask = (hs_vk_binding){.buf = a->mask, .offset = pads ? 4 : 0};
    a->kv = (hs_kv_layer){.k = {.buf = a->k, .offset = kpad},
                          .v = {.buf = a->v, .offset = kpad},
                          .type = s->type,
                          .n_ctx = s->n_ctx,
                          .n_kv_head = s->n_kv,
                          .head_dim = s->hd};
}

static void attn_dev_free(attn_dev *a) {
    hs_vk_buffer_destroy(a->q);
    hs_vk_buffer_destroy(a->k);
    hs_vk_buffer_destroy(a->v);
    hs_vk_buffer_destroy(a->info);
    hs_vk_buffer_destroy(a->mask);
    hs_vk_buffer_destroy(a->out);
}

static float *attn_dev_out(attn_dev *a, const shape *s) {
    const size_t qb = (size_t)a->n * s->n_head * s->hd * 4;
    float *o = malloc(qb);
    assert_non_null(o);
    HS_CHECK(hs_vk_buffer_download(a->out, a->bout.offset, o, qb));
    return o;
}

/* Runs one attention call on the device; returns out [n][n_head][hd]. */
static float *run_attention(hs_test_env *env, const shape *s, const float *q, const void *k, const void *v,
                            uint32_t n_prefix, uint32_t n_used, const uint32_t *mask, uint32_t n, float scale,
                            bool pads) {
    attn_dev a;
    const uint32_t info[2] = {n_prefix, n_used};
    attn_dev_init(env, &a, s, n, q, k, v, info, mask, pads);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    HS_CHECK(hs_op_attention(env->ops, seq, &a.bq, &a.kv, s->n_head, &a.binfo, &a.bmask, n, scale, &a.bout));
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    float *o = attn_dev_out(&a, s);
    hs_vk_seq_destroy(seq);
    attn_dev_free(&a);
    return o;
}

static void check_close(const float *got, const float *ref, size_t count, const char *what) {
    double nmse = hs_nmse(got, ref, count), mad = hs_max_abs_diff(got, ref, count);
    if (!(nmse < 1e-10 && mad < 2e-5)) fail_msg("%s: nmse %.3g, max abs diff %.3g", what, nmse, mad);
}

/* ---- tree mask ---- */

static void check_tree_mask(hs_test_env *env, const int32_t *parents, uint32_t n) {
    const uint32_t words = hs_attn_mask_words(n);
    int32_t *depth = malloc((size_t)n * 4);
    uint32_t *ref = host_mask(parents, n, depth);
    /* Fill the outputs with garbage first: every word must be written. */
    uint32_t *junk = malloc((size_t)n * words * 4);
    for (size_t i = 0; i < (size_t)n * words; i++)
        junk[i] = 0xA5A5A5A5u;
    hs_vk_buffer *bp = padded(env, parents, (size_t)n * 4, 4);
    hs_vk_buffer *bm = padded(env, junk, (size_t)n * words * 4, 8);
    hs_vk_buffer *bd = padded(env, junk, (size_t)n * 4, 0);
    hs_vk_binding p = {.buf = bp, .offset = 4}, m = {.buf = bm, .offset = 8}, d = {.buf = bd};
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    HS_CHECK(hs_op_tree_mask(env->ops, seq, &p, n, &m, &d));
    HS_CHECK(hs_vk_seq_end(seq));
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 1);
    HS_CHECK(hs_vk_seq_submit(seq));
    uint32_t *gm = malloc((size_t)n * words * 4);
    int32_t *gd = malloc((size_t)n * 4);
    HS_CHECK(hs_vk_buffer_download(bm, 8, gm, (size_t)n * words * 4));
    HS_CHECK(hs_vk_buffer_download(bd, 0, gd, (size_t)n * 4));
    assert_memory_equal(gm, ref, (size_t)n * words * 4);
    assert_memory_equal(gd, depth, (size_t)n * 4);
    free(gm);
    free(gd);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(bp);
    hs_vk_buffer_destroy(bm);
    hs_vk_buffer_destroy(bd);
    free(junk);
    free(ref);
    free(depth);
}

static void test_tree_mask(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 1);
    static const uint32_t sizes[] = {1, 2, 5, 31, 32, 33, 64, 100, 257};
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        uint32_t n = sizes[t];
        int32_t *par = malloc((size_t)n * 4);
        rand_tree(&r, par, n);
        check_tree_mask(env, par, n);
        /* The chain is the causal mask; depth[i] = i. */
        for (uint32_t i = 0; i < n; i++)
            par[i] = (int32_t)i - 1;
        check_tree_mask(env, par, n);
        int32_t *depth = malloc((size_t)n * 4);
        uint32_t *m = host_mask(par, n, depth);
        for (uint32_t i = 0; i < n; i++) {
            assert_int_equal(depth[i], (int32_t)i);
            for (uint32_t j = 0; j < n; j++)
                assert_int_equal((m[(size_t)i * hs_attn_mask_words(n) + j / 32] >> (j % 32)) & 1u, j <= i);
        }
        free(m);
        free(depth);
        /* All roots: the identity. */
        for (uint32_t i = 0; i < n; i++)
            par[i] = -1;
        check_tree_mask(env, par, n);
        free(par);
    }
    /* Garbage parents (unused slots) read as roots: no hang, nothing outside. */
    int32_t bad[6] = {7, -5, 1, 3, 2, 100};
    check_tree_mask(env, bad, 6);
}

static void test_check_parents(void **state) {
    (void)state;
    int32_t ok[4] = {-1, 0, 0, 2}, bad1[3] = {-1, 1, 0}, bad2[2] = {-2, 0}, bad3[1] = {0};
    assert_int_equal(hs_attn_check_parents(ok, 4), HS_OK);
    assert_int_equal(hs_attn_check_parents(bad1, 3), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "parent[1]"));
    assert_int_equal(hs_attn_check_parents(bad2, 2), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_attn_check_parents(bad3, 1), HS_ERR_INVALID_ARG);
}

/* ---- attention against the double reference ---- */

/* Random q, k, v; mask [n][words] given. */
static void attn_vs_ref_mask(hs_test_env *env, hs_rng *r, const shape *s, uint32_t n, uint32_t n_used,
                             uint32_t n_prefix, const uint32_t *mask, float q_amp, bool pads) {
    const size_t qn = (size_t)n * s->n_head * s->hd;
    float *q = hs_test_rand_array(r, qn, -q_amp, q_amp), *ref = malloc(qn * 4);
    void *k = rand_cache(r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
    void *v = rand_cache(r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
    const float scale = 1.0f / sqrtf((float)s->hd);
    float *got = run_attention(env, s, q, k, v, n_prefix, n_used, mask, n, scale, pads);
    ref_attention(q, k, v, s->type, s->n_ctx, s->n_kv, s->hd, s->n_head, n_prefix, n_used, mask, n, scale,
                  ref);
    char what[160];
    snprintf(what, sizeof what, "attention %s heads %u/%u hd %u n %u used %u prefix %u ctx %u amp %g",
             hs_type_name(s->type), s->n_head, s->n_kv, s->hd, n, n_used, n_prefix, s->n_ctx, q_amp);
    check_close(got, ref, qn, what);
    /* Slots past n_used are zeros exactly. */
    for (size_t i = (size_t)(n_used < n ? n_used : n) * s->n_head * s->hd; i < qn; i++)
        if (got[i] != 0.0f) fail_msg("%s: unused slot not zero", what);
    free(q);
    free(ref);
    free(k);
    free(v);
    free(got);
}

static void attn_vs_ref(hs_test_env *env, hs_rng *r, const shape *s, uint32_t n, uint32_t n_used,
                        uint32_t n_prefix, const int32_t *parents, float q_amp, bool pads) {
    uint32_t *mask = host_mask(parents, n, NULL);
    attn_vs_ref_mask(env, r, s, n, n_used, n_prefix, mask, q_amp, pads);
    free(mask);
}

/* Grouped-query ratios 1, 2, 3, 4; head dims 8, 20 (not a multiple of 8: the
 * f16 cache is then read four halves at a time), 40, 48, 64, 128, 256. */
static const shape k_shapes[] = {
    {4, 4, 8, 0, HS_TYPE_F32},   {6, 2, 48, 0, HS_TYPE_F32},  {9, 3, 64, 0, HS_TYPE_F32},
    {8, 2, 40, 0, HS_TYPE_F32},  {4, 1, 128, 0, HS_TYPE_F32}, {2, 2, 128, 0, HS_TYPE_F32},
    {4, 1, 256, 0, HS_TYPE_F32}, {6, 3, 20, 0, HS_TYPE_F32},
};

static void test_attention_ref(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 2);
    for (int f16 = 0; f16 < 2; f16++)
        for (size_t c = 0; c < sizeof k_shapes / sizeof k_shapes[0]; c++) {
            shape s = k_shapes[c];
            s.type = f16 ? HS_TYPE_F16 : HS_TYPE_F32;
            s.n_ctx = 64;
            int32_t par[20];
            rand_tree(&r, par, 20);
            /* n_prefix 0, 1, 37 with some tree slots unused; offsets padded. */
            attn_vs_ref(env, &r, &s, 20, 17, 0, par, 1.0f, true);
            attn_vs_ref(env, &r, &s, 20, 20, 1, par, 1.0f, false);
            attn_vs_ref(env, &r, &s, 20, 13, 37, par, 1.0f, c % 2 == 0);
            /* One query, one key (itself): out = v row. */
            int32_t root = -1;
            attn_vs_ref(env, &r, &s, 1, 1, 0, &root, 1.0f, false);
        }
    /* Large logits: the running maximum keeps exp() in range. */
    shape s = {9, 3, 64, 80, HS_TYPE_F32};
    int32_t par[33];
    rand_tree(&r, par, 33);
    attn_vs_ref(env, &r, &s, 33, 33, 40, par, 30.0f, false);
    /* n_prefix + n_used beyond n_ctx: clamped, nothing past the cache read. */
    s.n_ctx = 45;
    attn_vs_ref(env, &r, &s, 33, 33, 40, par, 1.0f, false);
    attn_vs_ref(env, &r, &s, 33, 33, 50, par, 1.0f, false);
    /* Any mask, not only a tree's: rows may miss themselves or be empty (zeros
     * when there is no prefix either), and bits of nodes >= n_used and past n
     * in the last word are ignored. */
    s.n_ctx = 80;
    const uint32_t n = 40, words = hs_attn_mask_words(n);
    uint32_t *mask = malloc((size_t)n * words * 4);
    for (uint32_t i = 0; i < n * words; i++)
        mask[i] = hs_rng_u32(&r) & hs_rng_u32(&r);
    mask[3 * words] = mask[3 * words + 1] = 0;
    attn_vs_ref_mask(env, &r, &s, n, 29, 0, mask, 1.0f, false);
    attn_vs_ref_mask(env, &r, &s, n, 40, 3, mask, 1.0f, true);
    free(mask);
}

/* The causal chain is ordinary causal attention (prompt processing). */
static void test_attention_causal(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 3);
    static const shape shapes[] = {{9, 3, 64, 160, HS_TYPE_F32}, {8, 2, 40, 160, HS_TYPE_F16}};
    for (size_t c = 0; c < 2; c++) {
        const shape *s = &shapes[c];
        const uint32_t n = 70, n_prefix = 13;
        int32_t par[70];
        for (uint32_t i = 0; i < n; i++)
            par[i] = (int32_t)i - 1;
        const size_t qn = (size_t)n * s->n_head * s->hd, hn = (size_t)s->n_head * s->hd;
        float *q = hs_test_rand_array(&r, qn, -1, 1), *ref = malloc(qn * 4);
        void *k = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
        void *v = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
        uint32_t *mask = host_mask(par, n, NULL);
        const float scale = 1.0f / sqrtf((float)s->hd);
        float *got = run_attention(env, s, q, k, v, n_prefix, n, mask, n, scale, false);
        /* Ordinary causal attention: query i sees rows 0 .. n_prefix + i,
         * written as n_prefix + i prefix rows and a one-node tree. */
        uint32_t one = 1;
        for (uint32_t i = 0; i < n; i++)
            ref_attention(q + i * hn, k, v, s->type, s->n_ctx, s->n_kv, s->hd, s->n_head, n_prefix + i, 1,
                          &one, 1, scale, ref + i * hn);
        check_close(got, ref, qn, "causal chain");
        /* Batch invariance: each query of the chain equals plain decoding. */
        for (uint32_t i = 0; i < n; i += 3) {
            float *single = run_attention(env, s, q + i * hn, k, v, n_prefix + i, 1, &one, 1, scale, false);
            if (memcmp(single, got + i * hn, hn * 4))
                fail_msg("chain query %u differs from decoding it alone", i);
            free(single);
        }
        free(q);
        free(ref);
        free(k);
        free(v);
        free(mask);
        free(got);
    }
}

/* ---- exactness: tree verification == plain decoding after compaction ---- */

static void tree_vs_compacted(hs_test_env *env, hs_rng *r, shape s, uint32_t n, uint32_t n_prefix) {
    s.n_ctx = n_prefix + n + 3;
    const size_t hn = (size_t)s.n_head * s.hd, qn = n * hn;
    const size_t row = (size_t)s.n_kv * s.hd * elem_size(s.type);
    int32_t *par = malloc(n * 4), *depth = malloc(n * 4);
    rand_tree(r, par, n);
    uint32_t *mask = host_mask(par, n, depth);
    float *q = hs_test_rand_array(r, qn, -2, 2);
    uint8_t *k = rand_cache(r, s.type, (size_t)s.n_ctx * s.n_kv * s.hd);
    uint8_t *v = rand_cache(r, s.type, (size_t)s.n_ctx * s.n_kv * s.hd);
    const float scale = 1.0f / sqrtf((float)s.hd);
    float *tree = run_attention(env, &s, q, k, v, n_prefix, n, mask, n, scale, false);

    uint8_t *k2 = malloc((size_t)s.n_ctx * row), *v2 = malloc((size_t)s.n_ctx * row);
    uint32_t one = 1;
    uint32_t max_depth = 0;
    for (uint32_t i = 0; i < n; i++) {
        /* The prefix, then i's ancestors and i itself in increasing order. */
        memcpy(k2, k, (size_t)s.n_ctx * row);
        memcpy(v2, v, (size_t)s.n_ctx * row);
        uint32_t path[64], len = 0;
        for (int32_t j = (int32_t)i; j >= 0; j = par[j])
            path[len++] = (uint32_t)j;
        assert_int_equal(len, depth[i] + 1);
        for (uint32_t a = 0; a < len; a++) {
            uint32_t node = path[len - 1 - a];
            memcpy(k2 + (n_prefix + a) * row, k + (n_prefix + node) * row, row);
            memcpy(v2 + (n_prefix + a) * row, v + (n_prefix + node) * row, row);
        }
        float *single = run_attention(env, &s, q + i * hn, k2, v2, n_prefix + (uint32_t)depth[i], 1, &one, 1,
                                      scale, false);
        if (memcmp(single, tree + i * hn, hn * 4)) {
            size_t at = 0;
            while (single[at] == tree[i * hn + at])
                at++;
            fail_msg(
                "%s heads %u/%u hd %u: node %u (depth %d) differs from plain decoding at %zu: %.9g vs %.9g",
                hs_type_name(s.type), s.n_head, s.n_kv, s.hd, i, depth[i], at, single[at], tree[i * hn + at]);
        }
        if ((uint32_t)depth[i] > max_depth) max_depth = (uint32_t)depth[i];
        free(single);
    }
    assert_true(max_depth >= 3); /* the tree really had depth */
    free(par);
    free(depth);
    free(mask);
    free(q);
    free(k);
    free(v);
    free(k2);
    free(v2);
    free(tree);
}

static void test_attention_exact(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 4);
    static const shape shapes[] = {
        {9, 3, 64, 0, HS_TYPE_F32},  {9, 3, 64, 0, HS_TYPE_F16}, {8, 2, 40, 0, HS_TYPE_F32},
        {4, 1, 128, 0, HS_TYPE_F16}, {2, 2, 8, 0, HS_TYPE_F32},  {4, 1, 256, 0, HS_TYPE_F32},
        {6, 3, 20, 0, HS_TYPE_F16}, /* f16 read four halves at a time */
    };
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++)
        tree_vs_compacted(env, &r, shapes[c], 20, 37);
    /* A bigger tree over no prefix, and over a prefix shorter than the lanes. */
    tree_vs_compacted(env, &r, shapes[0], 45, 0);
    tree_vs_compacted(env, &r, shapes[1], 33, 5);
}

/* ---- long context ---- */

static void test_attention_long(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 5);
    for (int f16 = 0; f16 < 2; f16++) {
        shape s = {9, 3, 64, 2048, f16 ? HS_TYPE_F16 : HS_TYPE_F32};
        int32_t par[24];
        rand_tree(&r, par, 24);
        attn_vs_ref(env, &r, &s, 24, 24, 2024, par, 1.0f, false);
        int32_t root = -1;
        attn_vs_ref(env, &r, &s, 1, 1, 2047, &root, 1.0f, false);
    }
    /* A prompt chunk: a 96-token chain after 1900 cached rows. */
    shape s = {8, 2, 128, 2048, HS_TYPE_F16};
    int32_t par[96];
    for (uint32_t i = 0; i < 96; i++)
        par[i] = (int32_t)i - 1;
    attn_vs_ref(env, &r, &s, 96, 96, 1900, par, 1.0f, false);
    /* 20000 rows: lavapipe ends an invocation's loops after 65535 trips in
     * total, which only the outer key loop may use (2500 trips here; inner
     * loops over head_dim must be unrolled, or this result comes out wrong). */
    shape big = {2, 1, 128, 20000, HS_TYPE_F16};
    int32_t par2[3] = {-1, 0, 1};
    if ((uint64_t)big.n_ctx * big.n_kv * big.hd * 2 > HS_KV_MAX_CHUNKS * hs_vk_ctx_caps(env->vk)->max_storage_buffer_range) {
        /* The layer's cache needs more windows than the kernels bind: a device
         * limit too small for it (forced by HS_VK_MAX_BUFFER_RANGE) must give
         * a clear error. */
        attn_dev a;
        const uint32_t info[2] = {19990, 3}, mask[3] = {1, 3, 7};
        float *q = calloc((size_t)3 * big.n_head * big.hd, 4);
        uint16_t *kv = calloc((size_t)big.n_ctx * big.n_kv * big.hd, 2);
        attn_dev_init(env, &a, &big, 3, q, kv, kv, info, mask, false);
        hs_vk_seq *seq = NULL;
        HS_CHECK(hs_vk_seq_create(env->vk, &seq));
        HS_CHECK(hs_vk_seq_begin(seq));
        assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &a.kv, big.n_head, &a.binfo, &a.bmask, 3, 1.0f, &a.bout),
                         HS_ERR_VK_UNSUPPORTED);
        assert_non_null(strstr(hs_last_error(), "windows"));
        assert_non_null(strstr(hs_last_error(), "maxStorageBufferRange"));
        HS_CHECK(hs_vk_seq_end(seq));
        hs_vk_seq_destroy(seq);
        attn_dev_free(&a);
        free(q);
        free(kv);
        return;
    }
    attn_vs_ref(env, &r, &big, 3, 3, 19990, par2, 1.0f, false);
}

/* ---- replay: per-step values are read on the device ---- */

static void test_attention_replay(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 6);
    const shape s = {6, 2, 48, 96, HS_TYPE_F16};
    const uint32_t n = 16;
    const size_t qn = (size_t)n * s.n_head * s.hd;
    float *q = hs_test_rand_array(&r, qn, -1, 1), *ref = malloc(qn * 4);
    void *k = rand_cache(&r, s.type, (size_t)s.n_ctx * s.n_kv * s.hd);
    void *v = rand_cache(&r, s.type, (size_t)s.n_ctx * s.n_kv * s.hd);
    int32_t par[16];
    rand_tree(&r, par, n);
    uint32_t *mask = host_mask(par, n, NULL);
    const uint32_t info0[2] = {0, 0};
    attn_dev a;
    attn_dev_init(env, &a, &s, n, q, k, v, info0, mask, true);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    const float scale = 0.125f;
    HS_CHECK(hs_op_attention(env->ops, seq, &a.bq, &a.kv, s.n_head, &a.binfo, &a.bmask, n, scale, &a.bout));
    HS_CHECK(hs_vk_seq_end(seq));
    /* The last step asks for more nodes than n: clamped to n. */
    static const uint32_t steps[][2] = {{5, 16}, {21, 7}, {0, 1}, {80, 16}, {47, 12}, {10, 1000}};
    for (size_t t = 0; t < sizeof steps / sizeof steps[0]; t++) {
        rand_tree(&r, par, n);
        free(mask);
        mask = host_mask(par, n, NULL);
        HS_CHECK(hs_vk_buffer_upload(a.mask, a.bmask.offset, mask, (size_t)n * 4));
        HS_CHECK(hs_vk_buffer_upload(a.info, a.binfo.offset, steps[t], 8));
        HS_CHECK(hs_vk_seq_submit(seq));
        float *got = attn_dev_out(&a, &s);
        ref_attention(q, k, v, s.type, s.n_ctx, s.n_kv, s.hd, s.n_head, steps[t][0], steps[t][1], mask, n,
                      scale, ref);
        check_close(got, ref, qn, "replayed attention");
        free(got);
    }
    hs_vk_seq_destroy(seq);
    attn_dev_free(&a);
    free(q);
    free(ref);
    free(k);
    free(v);
    free(mask);
}

/* ---- queries apart from the tree's columns (hs_op_attention_cols) ---- */

/* Runs hs_op_attention_cols: n queries, mask [n][words(n_cols)]; returns out. */
static float *run_attention_cols(hs_test_env *env, const shape *s, const float *q, const void *k,
                                 const void *v, const uint32_t info[3], const uint32_t *mask, uint32_t n,
                                 uint32_t n_cols, float scale, bool pads) {
    const size_t qb = (size_t)n * s->n_head * s->hd * 4;
    const size_t kvb = (size_t)s->n_ctx * s->n_kv * s->hd * elem_size(s->type);
    const size_t mb = (size_t)n * hs_attn_mask_words(n_cols) * 4;
    const size_t pad = pads ? 16 : 0;
    hs_vk_buffer *bq = padded(env, q, qb, pad), *bk = padded(env, k, kvb, pad),
                 *bv = padded(env, v, kvb, pad);
    hs_vk_buffer *binfo = padded(env, info, 12, pads ? 4 : 0), *bmask = padded(env, mask, mb, pads ? 8 : 0);
    hs_vk_buffer *bout = padded(env, NULL, qb, pad);
    hs_vk_binding Q = {bq, pad, 0}, O = {bout, pad, 0}, I = {binfo, pads ? 4 : 0, 0},
                  M = {bmask, pads ? 8 : 0, 0};
    hs_kv_layer kv = {.k = {bk, pad, 0},
                      .v = {bv, pad, 0},
                      .type = s->type,
                      .n_ctx = s->n_ctx,
                      .n_kv_head = s->n_kv,
                      .head_dim = s->hd};
    hs_vk_seq *seq = hs_test_seq_begin(env);
    HS_CHECK(hs_op_attention_cols(env->ops, seq, &Q, &kv, s->n_head, &I, &M, n, n_cols, scale, &O));
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 1);
    hs_test_seq_run(seq);
    float *o = malloc(qb);
    HS_CHECK(hs_vk_buffer_download(bout, pad, o, qb));
    hs_vk_buffer *bufs[] = {bq, bk, bv, binfo, bmask, bout};
    for (int i = 0; i < 6; i++)
        hs_vk_buffer_destroy(bufs[i]);
    return o;
}

/* A level of a draft tree: few queries whose mask rows span more tree columns
 * than there are queries. Live queries match the double reference and give
 * bitwise what hs_op_attention gives the same visibility (as the only query
 * of a call whose nodes are the columns, and alone); the rest are zeros. */
static void test_attention_cols(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 11);
    static const shape shapes[] = {{9, 3, 64, 80, HS_TYPE_F32}, {8, 2, 40, 80, HS_TYPE_F16}};
    for (size_t c = 0; c < 2; c++) {
        const shape *s = &shapes[c];
        const uint32_t n = 8, n_cols = 40, words = hs_attn_mask_words(n_cols), n_prefix = 13, n_used = 29;
        const size_t hn = (size_t)s->n_head * s->hd;
        float *q = hs_test_rand_array(&r, n * hn, -1, 1);
        void *k = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
        void *v = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
        uint32_t *mask = malloc((size_t)n * words * 4);
        for (uint32_t i = 0; i < n * words; i++)
            mask[i] = hs_rng_u32(&r) & hs_rng_u32(&r);
        mask[1 * words] = mask[1 * words + 1] = 0; /* query 1 sees the prefix only */
        const float scale = 1.0f / sqrtf((float)s->hd);
        for (uint32_t n_live = 5; n_live <= 100; n_live += 95) { /* 100: clamped to n */
            const uint32_t info[3] = {n_prefix, n_used, n_live}, live = n_live < n ? n_live : n;
            float *got = run_attention_cols(env, s, q, k, v, info, mask, n, n_cols, scale, n_live == 5);
            float *q40 = calloc((size_t)n_cols * hn, 4), *ref = malloc((size_t)n_cols * hn * 4);
            uint32_t *m40 = calloc((size_t)n_cols * words, 4);
            for (uint32_t i = 0; i < n; i++) {
                if (i >= live) {
                    for (size_t e = 0; e < hn; e++)
                        if (got[i * hn + e] != 0.0f)
                            fail_msg("query %u past n_live %u is not zero", i, n_live);
                    continue;
                }
                /* The same visibility as query 0 of a call whose nodes are the columns. */
                memcpy(q40, q + i * hn, hn * 4);
                memcpy(m40, mask + (size_t)i * words, words * 4);
                ref_attention(q40, k, v, s->type, s->n_ctx, s->n_kv, s->hd, s->n_head, n_prefix, n_used, m40,
                              n_cols, scale, ref);
                char what[96];
                snprintf(what, sizeof what, "attention_cols %s query %u", hs_type_name(s->type), i);
                check_close(got + i * hn, ref, hn, what);
                float *tree = run_attention(env, s, q40, k, v, n_prefix, n_used, m40, n_cols, scale, false);
                if (memcmp(tree, got + i * hn, hn * 4)) fail_msg("%s differs from hs_op_attention's", what);
                free(tree);
                const uint32_t one[3] = {n_prefix, n_used, 1};
                float *alone = run_attention_cols(env, s, q + i * hn, k, v, one, mask + (size_t)i * words, 1,
                                                  n_cols, scale, false);
                if (memcmp(alone, got + i * hn, hn * 4)) fail_msg("%s differs from the query alone", what);
                free(alone);
            }
            free(q40), free(ref), free(m40), free(got);
        }
        free(q), free(k), free(v), free(mask);
    }
}

/* hs_op_attention_q8 writes bitwise the 8-bit activations the q4_1 product's
 * own pass makes of hs_op_attention's f32 output (dead slots included), so
 * the output projection reading them (x_q8) gives bitwise its result. With
 * n_live > 0 the same of hs_op_attention_cols_q8 and hs_op_attention_cols
 * (a draft head's level: queries past n_live dead). */
static void attn_q8_case(hs_test_env *env, hs_rng *r, const shape *s, uint32_t n, uint32_t n_used,
                         uint32_t n_live) {
    const size_t qn = (size_t)n * s->n_head * s->hd;
    const uint32_t cols = s->n_head * s->hd, rows = 37;
    const size_t x8_bytes = (size_t)n * cols / 32 * 80;
    float *q = hs_test_rand_array(r, qn, -1.5f, 1.5f);
    void *k = rand_cache(r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
    void *v = rand_cache(r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
    int32_t parents[16];
    rand_tree(r, parents, n);
    uint32_t *mask = host_mask(parents, n, NULL);
    const uint32_t info[2] = {s->n_ctx - n, n_used};
    attn_dev a;
    attn_dev_init(env, &a, s, n, q, k, v, info, mask, true);
    if (n_live) { /* info word 2 too */
        const uint32_t info3[3] = {info[0], info[1], n_live};
        hs_vk_buffer_destroy(a.info);
        a.info = padded(env, info3, 12, 0);
        a.binfo = (hs_vk_binding){.buf = a.info};
    }
    hs_vk_buffer *o8 = hs_test_buffer(env, NULL, x8_bytes + 16), *xs = hs_test_buffer(env, NULL, qn * 4);
    hs_vk_buffer *ya = hs_test_buffer(env, NULL, (size_t)n * rows * 4),
                 *yb = hs_test_buffer(env, NULL, (size_t)n * rows * 4);
    void *wd = ref_random_weight(r, HS_TYPE_Q4_1, rows, cols);
    hs_weight *w = NULL;
    HS_CHECK(hs_weight_create(env->ops, HS_TYPE_Q4_1, rows, cols, wd, &w));
    const float scale = 1.0f / sqrtf((float)s->hd);
    hs_vk_seq *seq = hs_test_seq_begin(env);
    const hs_vk_binding b8 = hs_test_bind(o8, 16); /* an offset the op must honour */
    if (n_live) {
        HS_CHECK(hs_op_attention_cols(env->ops, seq, &a.bq, &a.kv, s->n_head, &a.binfo, &a.bmask, n, n, scale,
                                      &a.bout));
        HS_CHECK(hs_op_attention_cols_q8(env->ops, seq, &a.bq, &a.kv, s->n_head, &a.binfo, &a.bmask, n, n,
                                         scale, &b8));
    } else {
        HS_CHECK(
            hs_op_attention(env->ops, seq, &a.bq, &a.kv, s->n_head, &a.binfo, &a.bmask, n, scale, &a.bout));
        HS_CHECK(
            hs_op_attention_q8(env->ops, seq, &a.bq, &a.kv, s->n_head, &a.binfo, &a.bmask, n, scale, &b8));
    }
    hs_matmul_opts oa = {.scratch = hs_test_bind(xs, 0), .act_q8 = true};
    HS_CHECK(hs_op_matmul(env->ops, seq, w, a.bout, n, hs_test_bind(ya, 0), &oa));
    hs_matmul_opts ob = {.act_q8 = true, .x_q8 = true};
    HS_CHECK(hs_op_matmul(env->ops, seq, w, b8, n, hs_test_bind(yb, 0), &ob));
    hs_test_seq_run(seq);
    uint8_t *got8 = malloc(x8_bytes), *want8 = malloc(x8_bytes);
    HS_CHECK(hs_vk_buffer_download(o8, 16, got8, x8_bytes));
    HS_CHECK(hs_vk_buffer_download(xs, 0, want8, x8_bytes));
    char what[128];
    snprintf(what, sizeof what, "attention%s_q8 %s heads %u/%u hd %u n %u used %u live %u",
             n_live ? "_cols" : "", hs_type_name(s->type), s->n_head, s->n_kv, s->hd, n, n_used, n_live);
    if (memcmp(got8, want8, x8_bytes)) fail_msg("%s: 8-bit output differs from the product's own pass", what);
    float *fa = hs_test_download(ya, (size_t)n * rows * 4), *fb = hs_test_download(yb, (size_t)n * rows * 4);
    if (memcmp(fa, fb, (size_t)n * rows * 4)) fail_msg("%s: the product on it differs", what);
    free(fa);
    free(fb);
    free(got8);
    free(want8);
    free(wd);
    hs_weight_destroy(w);
    hs_vk_buffer_destroy(o8);
    hs_vk_buffer_destroy(xs);
    hs_vk_buffer_destroy(ya);
    hs_vk_buffer_destroy(yb);
    attn_dev_free(&a);
    free(mask);
    free(q);
    free(k);
    free(v);
}

static void test_attention_q8(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 44);
    const shape shapes[] = {
        {9, 3, 64, 40, HS_TYPE_F32}, {4, 2, 32, 24, HS_TYPE_F16}, {2, 2, 96, 33, HS_TYPE_F16}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        attn_q8_case(env, &r, &shapes[i], 7, 7, 0);
        attn_q8_case(env, &r, &shapes[i], 9, 5, 0); /* slots past the live tree: x8 of zeros */
        attn_q8_case(env, &r, &shapes[i], 9, 9, 4); /* the cols form: queries past n_live are zeros */
    }
    /* head_dim 48 is no whole number of 32-element blocks */
    const shape bad = {2, 1, 48, 8, HS_TYPE_F32};
    attn_dev a;
    const uint32_t info[2] = {4, 2};
    uint32_t mask[2] = {1, 3};
    float q[2 * 2 * 48] = {0};
    void *k = rand_cache(&r, HS_TYPE_F32, 8 * 48), *v = rand_cache(&r, HS_TYPE_F32, 8 * 48);
    attn_dev_init(env, &a, &bad, 2, q, k, v, info, mask, false);
    hs_vk_seq *seq = hs_test_seq_begin(env);
    assert_int_equal(hs_op_attention_q8(env->ops, seq, &a.bq, &a.kv, 2, &a.binfo, &a.bmask, 2, 0.1f, &a.bout),
                     HS_ERR_INVALID_ARG);
    hs_test_seq_run(seq);
    attn_dev_free(&a);
    free(k);
    free(v);
}

static void test_attention_bad_args(void **state) {
    hs_test_env *env = *state;
    const shape s = {4, 2, 16, 32, HS_TYPE_F32};
    const uint32_t info[2] = {0, 1}, mask[1] = {1};
    float q[4 * 16] = {0};
    float kv[32 * 2 * 16] = {0};
    attn_dev a;
    attn_dev_init(env, &a, &s, 1, q, kv, kv, info, mask, false);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    hs_kv_layer kv2 = a.kv;
    kv2.head_dim = 18;
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &kv2, 4, &a.binfo, &a.bmask, 1, 0.25f, &a.bout),
                     HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "head_dim"));
    kv2.head_dim = HS_ATTN_MAX_HEAD_DIM + 4;
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &kv2, 4, &a.binfo, &a.bmask, 1, 0.25f, &a.bout),
                     HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &a.kv, 3, &a.binfo, &a.bmask, 1, 0.25f, &a.bout),
                     HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "multiple of n_kv_head"));
    kv2 = a.kv;
    kv2.type = HS_TYPE_Q4_0;
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &kv2, 4, &a.binfo, &a.bmask, 1, 0.25f, &a.bout),
                     HS_ERR_UNSUPPORTED_TYPE);
    kv2 = a.kv;
    kv2.n_ctx = 33; /* the cache buffer holds only 32 rows */
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &kv2, 4, &a.binfo, &a.bmask, 1, 0.25f, &a.bout),
                     HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "k cache"));
    /* Two queries do not fit the q and mask buffers made for one. */
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &a.kv, 4, &a.binfo, &a.bmask, 2, 0.25f, &a.bout),
                     HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &a.kv, 4, &a.binfo, &a.bmask, 1, NAN, &a.bout),
                     HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &a.kv, 4, &a.binfo, &a.bmask, 1, 0.25f, &a.bq),
                     HS_ERR_INVALID_ARG);
    hs_vk_binding odd = {.buf = a.q, .offset = 4};
    assert_int_equal(hs_op_attention(env->ops, seq, &odd, &a.kv, 4, &a.binfo, &a.bmask, 1, 0.25f, &a.bout),
                     HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "multiple of 16"));
    hs_vk_binding none = {0};
    assert_int_equal(hs_op_tree_mask(env->ops, seq, &none, 1, &a.bmask, &a.binfo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_tree_mask(env->ops, seq, &a.binfo, 0, &a.bmask, &a.binfo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 0);
    HS_CHECK(hs_vk_seq_end(seq));
    hs_vk_seq_destroy(seq);
    attn_dev_free(&a);
}

/* ---- query blocks (tuning attnqb) ---- */

/* One attention call of the given kind (0: f32 out, 1: 8-bit out, 2: the cols
 * form with live queries from info word 2) on the current tuning; returns the
 * raw output bytes. */
static uint8_t *qblock_run(hs_test_env *env, hs_ops *ops, attn_dev *a, const shape *s, uint32_t n,
                           uint32_t n_cols, int kind, size_t *bytes) {
    const float scale = 1.0f / sqrtf((float)s->hd);
    *bytes = kind == 1 ? (size_t)n * s->n_head * s->hd / 32 * 80 : (size_t)n * s->n_head * s->hd * 4;
    /* NaN bytes first: an output this call does not write cannot pass for the last call's */
    uint8_t *o = malloc(*bytes);
    assert_non_null(o);
    memset(o, 0xff, *bytes);
    HS_CHECK(hs_vk_buffer_upload(a->out, a->bout.offset, o, *bytes));
    hs_vk_seq *seq = hs_test_seq_begin(env);
    if (kind == 0)
        HS_CHECK(hs_op_attention(ops, seq, &a->bq, &a->kv, s->n_head, &a->binfo, &a->bmask, n, scale,
                                 &a->bout));
    else if (kind == 1)
        HS_CHECK(hs_op_attention_q8(ops, seq, &a->bq, &a->kv, s->n_head, &a->binfo, &a->bmask, n, scale,
                                    &a->bout));
    else
        HS_CHECK(hs_op_attention_cols(ops, seq, &a->bq, &a->kv, s->n_head, &a->binfo, &a->bmask, n, n_cols,
                                      scale, &a->bout));
    hs_test_seq_run(seq);
    HS_CHECK(hs_vk_buffer_download(a->out, a->bout.offset, o, *bytes));
    return o;
}

/* Query blocks that share the prefix rows' loads (attention.comp QBLOCK,
 * tuning attnqb) give bitwise the one-query kernel's outputs, and that
 * kernel gives the same bits with its lanes merged through subgroup shuffles
 * (SG_MERGE) as through shared memory: several block
 * sizes, storage and texel cache reads, n not a multiple of the block and n
 * below it (a block of the next power of two), slots past the tree and past
 * the live queries, an empty prefix, random masks,
 * the 8-bit and the cols forms; causal chains (whose blocks share the tree
 * rows' loads too), also over two mask words, past the live nodes and with a
 * branch after a chain (blocks of both kinds in one dispatch). The blocked
 * kernel must have run (its pipeline was made) wherever the tuning asks for
 * it and the device allows. */
static void test_attention_qblock(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 61);
    /* Ops of its own: which pipelines were made says which kernels ran. */
    hs_ops *ops = NULL;
    HS_CHECK(hs_ops_create(env->vk, &ops));
    const hs_tuning saved = *hs_ops_tuning(ops);
    const hs_vk_caps *c = hs_ops_caps(ops);
    static const struct {
        shape s;
        uint32_t n, n_prefix, n_used, n_live;
        int kind;
        int chain; /* 1: a causal chain; 2: a chain with node 6 a child of node 3 */
    } cases[] = {
        {{9, 3, 64, 400, HS_TYPE_F32}, 13, 300, 13, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F32}, 64, 270, 60, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F32}, 7, 0, 7, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F32}, 11, 37, 9, 0, 1, 0},
        {{9, 3, 64, 400, HS_TYPE_F32}, 10, 41, 30, 6, 2, 0},
        {{4, 1, 128, 200, HS_TYPE_F32}, 9, 150, 9, 0, 0, 0},
        {{6, 2, 48, 200, HS_TYPE_F32}, 6, 77, 5, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F32}, 29, 250, 29, 0, 0, 1},
        {{9, 3, 64, 400, HS_TYPE_F32}, 20, 0, 17, 0, 0, 1},
        {{9, 3, 64, 400, HS_TYPE_F32}, 16, 40, 16, 0, 1, 1},
        {{9, 3, 64, 400, HS_TYPE_F32}, 40, 120, 37, 0, 0, 1},
        {{9, 3, 64, 400, HS_TYPE_F32}, 24, 100, 24, 0, 0, 2},
        /* fewer queries than the block: one block of 4 (n = 3) or 8 (n = 5) with dead slots */
        {{9, 3, 64, 400, HS_TYPE_F32}, 3, 260, 3, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F32}, 5, 90, 5, 0, 0, 1},
        /* an f16 cache: blocks where it is read eight halves per unit (the cases with ci % 3 == 1 place
         * it off the 16-byte units, where the one-query kernel reads four halves at a time) */
        {{9, 3, 64, 400, HS_TYPE_F16}, 13, 300, 13, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F16}, 64, 270, 60, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F16}, 11, 37, 9, 0, 1, 0},
        {{9, 3, 64, 400, HS_TYPE_F16}, 10, 41, 30, 6, 2, 0},
        {{9, 3, 64, 400, HS_TYPE_F16}, 29, 250, 29, 0, 1, 1},
        {{4, 1, 128, 200, HS_TYPE_F16}, 9, 150, 9, 0, 0, 0},
        {{6, 2, 48, 200, HS_TYPE_F16}, 6, 77, 5, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F16}, 16, 40, 16, 0, 0, 1},
        {{9, 3, 64, 400, HS_TYPE_F16}, 3, 260, 3, 0, 0, 0},
        {{9, 3, 64, 400, HS_TYPE_F16}, 24, 100, 24, 20, 2, 2},
        {{9, 3, 64, 400, HS_TYPE_F16}, 4, 700, 4, 0, 0, 1},
    };
    static const uint32_t qbs[] = {2, 4, 8};
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const shape *s = &cases[ci].s;
        const uint32_t n = cases[ci].n, n_cols = cases[ci].kind == 2 ? 40 : n;
        const uint32_t words = hs_attn_mask_words(n_cols);
        const size_t hn = (size_t)s->n_head * s->hd;
        float *q = hs_test_rand_array(&r, n * hn, -1.5f, 1.5f);
        void *k = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
        void *v = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
        uint32_t *mask = malloc((size_t)n * words * 4);
        if (cases[ci].chain || ci % 2 == 0) { /* a tree: its mask rows (words of n) in rows of n_cols */
            int32_t parents[64];
            rand_tree(&r, parents, n);
            if (cases[ci].chain)
                for (uint32_t i = 0; i < n; i++)
                    parents[i] = cases[ci].chain == 2 && i == 6 ? 3 : (int32_t)i - 1;
            uint32_t *m = host_mask(parents, n, NULL);
            const uint32_t mw = hs_attn_mask_words(n);
            memset(mask, 0, (size_t)n * words * 4);
            for (uint32_t i = 0; i < n; i++)
                memcpy(mask + (size_t)i * words, m + (size_t)i * mw, (size_t)mw * 4);
            free(m);
        } else {
            for (uint32_t i = 0; i < n * words; i++)
                mask[i] = hs_rng_u32(&r) & hs_rng_u32(&r);
        }
        const uint32_t info[3] = {cases[ci].n_prefix, cases[ci].n_used, cases[ci].n_live};
        attn_dev a;
        attn_dev_init(env, &a, s, n, q, k, v, info, mask, ci % 3 == 1);
        if (cases[ci].kind == 2) { /* info word 2 too, mask rows of n_cols columns */
            hs_vk_buffer_destroy(a.info);
            a.info = padded(env, info, 12, 0);
            a.binfo = (hs_vk_binding){.buf = a.info};
            hs_vk_buffer_destroy(a.mask);
            a.mask = padded(env, mask, (size_t)n * words * 4, 0);
            a.bmask = (hs_vk_binding){.buf = a.mask};
        }
        hs_tuning t = saved;
        t.attn_qb = 0;
        HS_CHECK(hs_ops_set_tuning(ops, &t));
        size_t bytes = 0;
        uint8_t *want = qblock_run(env, ops, &a, s, n, n_cols, cases[ci].kind, &bytes);
        /* One query per workgroup both ways: the lanes merged through shuffles (texel reads, where the
         * lanes are one subgroup) and through shared memory (storage reads) */
        t.texel_weights = !saved.texel_weights;
        HS_CHECK(hs_ops_set_tuning(ops, &t));
        {
            size_t b2 = 0;
            uint8_t *got = qblock_run(env, ops, &a, s, n, n_cols, cases[ci].kind, &b2);
            if (memcmp(got, want, bytes))
                fail_msg("attention kind %d heads %u/%u hd %u n %u prefix %u: one query per workgroup differs "
                         "between texel=0 and 1",
                         cases[ci].kind, s->n_head, s->n_kv, s->hd, n, cases[ci].n_prefix);
            free(got);
        }
        for (size_t qi = 0; qi < sizeof qbs / sizeof qbs[0]; qi++)
            for (uint32_t tx = 0; tx < 2; tx++) {
                t = saved;
                t.attn_qb = qbs[qi];
                t.texel_weights = tx;
                HS_CHECK(hs_ops_set_tuning(ops, &t));
                size_t b2 = 0;
                uint8_t *got = qblock_run(env, ops, &a, s, n, n_cols, cases[ci].kind, &b2);
                if (memcmp(got, want, bytes))
                    fail_msg("attention kind %d heads %u/%u hd %u n %u prefix %u: attnqb=%u texel=%u differs "
                             "from one query per workgroup",
                             cases[ci].kind, s->n_head, s->n_kv, s->hd, n, cases[ci].n_prefix, qbs[qi], tx);
                free(got);
            }
        /* Which kernels ran: the blocked one wherever a block of 2 fits the subgroup and the 16-byte
         * units of a head's cache row (an f16 cache at an offset of whole units only), and (split
         * execution) leaves a block of queries for each part. */
        const bool f16 = s->type == HS_TYPE_F16, x8 = !f16 || (s->hd % 8 == 0 && ci % 3 != 1);
        const char *names[2][3] = {{"attention_f32_qb", "attention_f32_tx_qb", "attention_f32_tx_sg"},
                                   {"attention_f16x8_qb", "attention_f16x8_tx_qb", "attention_f16x8_tx_sg"}};
        const bool can = x8 && c->subgroup_ops && c->subgroup_size % 2 == 0 && (s->hd / (f16 ? 8 : 4)) % 2 == 0 &&
                         n >= 2 && (n + 1) / 2 >= c->parts;
        if (can && !hs_ops_made_pipeline(ops, names[f16][0]) && !hs_ops_made_pipeline(ops, names[f16][1]))
            fail_msg("attention %s n %u hd %u: attnqb made no query-block pipeline", f16 ? "f16" : "f32", n,
                     s->hd);
        /* ... and the merge through shuffles wherever texel reads are on and the lanes are one subgroup */
        const bool sg = x8 && c->max_texel_elements && c->subgroup_ops && c->subgroup_size_control &&
                        saved.reduce_wg_size == c->subgroup_size;
        if (sg && !hs_ops_made_pipeline(ops, names[f16][2]))
            fail_msg("attention %s n %u hd %u: no one-query pipeline merging through shuffles", f16 ? "f16" : "f32",
                     n, s->hd);
        free(want);
        attn_dev_free(&a);
        free(q), free(k), free(v), free(mask);
    }
    hs_ops_destroy(ops);
    printf("attention: query blocks of 2, 4 and 8 equal one query per workgroup bitwise, f32 and f16 caches (%s)\n",
           c->subgroup_ops ? "with subgroups" : "no subgroups: the one-query kernel throughout");
}

/* ---- KV compaction ---- */

/* Windows per cache of the last check_kv_gather's layer 0. */
static uint32_t g_gather_chunks;

/* One gather over n_layers layers of both caches, in place, against the
 * sequential reference; every byte of the buffers is compared. */
static void check_kv_gather(hs_test_env *env, hs_rng *r, hs_type type, uint32_t row_elems, uint32_t n_ctx,
                            uint32_t n_layers, size_t stride, size_t k_off, const uint32_t *g, uint32_t cap) {
    const size_t row = row_elems * elem_size(type);
    const size_t bytes = k_off + (size_t)(n_layers - 1) * stride + n_ctx * row;
    uint8_t *k = malloc(bytes), *v = malloc(bytes);
    for (size_t i = 0; i < bytes; i++) {
        k[i] = (uint8_t)hs_rng_u32(r);
        v[i] = (uint8_t)hs_rng_u32(r);
    }
    hs_vk_buffer *bk = hs_test_buffer(env, k, bytes), *bv = hs_test_buffer(env, v, bytes);
    hs_vk_buffer *bg = hs_test_buffer(env, g, (HS_KV_GATHER_SRC + cap) * 4);
    hs_vk_binding kb = {.buf = bk, .offset = k_off}, vb = {.buf = bv, .offset = k_off}, gb = {.buf = bg};
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    HS_CHECK(hs_op_kv_gather(env->ops, seq, &kb, &vb, type, n_layers, stride, n_ctx, row_elems, &gb, cap));
    HS_CHECK(hs_vk_seq_end(seq));
    /* One dispatch for all layers when they fit one binding; one per layer
     * when a layer does not (its caches bound in windows). */
    const hs_vk_caps *c = hs_ops_caps(env->ops);
    const hs_kv_layer l0 = {.k = kb, .v = vb, .type = type, .n_ctx = n_ctx, .n_kv_head = 1, .head_dim = row_elems};
    hs_kv_split sp;
    HS_CHECK(hs_kv_split_plan(env->ops, &l0, &sp));
    g_gather_chunks = sp.chunks;
    if (k_off % c->min_storage_offset_align + bytes - k_off <= c->max_storage_buffer_range)
        assert_int_equal(hs_vk_seq_dispatch_count(seq), 1);
    else if (sp.chunks > 1)
        assert_int_equal(hs_vk_seq_dispatch_count(seq), n_layers);
    HS_CHECK(hs_vk_seq_submit(seq));
    ref_kv_gather(k + k_off, row, n_layers, stride, n_ctx, g[0], g[1], cap, g + 2);
    ref_kv_gather(v + k_off, row, n_layers, stride, n_ctx, g[0], g[1], cap, g + 2);
    uint8_t *gk = hs_test_download(bk, bytes), *gv = hs_test_download(bv, bytes);
    assert_memory_equal(gk, k, bytes);
    assert_memory_equal(gv, v, bytes);
    free(gk);
    free(gv);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(bk);
    hs_vk_buffer_destroy(bv);
    hs_vk_buffer_destroy(bg);
    free(k);
    free(v);
}

static void test_kv_gather(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 7);
    /* Accepted path: increasing sources, dst_base + i <= src[i], overlapping
     * (row 23 is both read and, later, written). */
    uint32_t g1[2 + 8] = {20, 6, 21, 23, 24, 27, 28, 35, 0, 0};
    for (int f16 = 0; f16 < 2; f16++) {
        hs_type t = f16 ? HS_TYPE_F16 : HS_TYPE_F32;
        /* uvec4 path: 3 x 64 elements a row, 30 layers with padding between. */
        check_kv_gather(env, &r, t, 192, 48, 30, 48 * 192 * elem_size(t) + 64, 0, g1, 8);
        /* uint path: an f16 row of 6 halves (12 bytes), an odd offset. */
        check_kv_gather(env, &r, t, 6, 40, 3, 40 * 6 * elem_size(t) + 4, 4, g1, 8);
        /* One layer, a chain that is already in place except its tail. */
        uint32_t g2[2 + 4] = {10, 4, 10, 11, 13, 14};
        check_kv_gather(env, &r, t, 40, 16, 1, 0, 0, g2, 4);
    }
    /* m beyond cap is clamped; rows past n_ctx are skipped; m = 0 is a no-op. */
    uint32_t g3[2 + 3] = {5, 9, 6, 50, 7};
    check_kv_gather(env, &r, HS_TYPE_F32, 16, 12, 2, 12 * 64, 0, g3, 3);
    uint32_t g4[2 + 2] = {11, 2, 11, 11};
    check_kv_gather(env, &r, HS_TYPE_F32, 16, 12, 2, 12 * 64, 0, g4, 2);
    uint32_t g5[2 + 1] = {0, 0, 3};
    check_kv_gather(env, &r, HS_TYPE_F16, 8, 12, 2, 12 * 16, 0, g5, 1);

    /* Bad arguments. */
    hs_vk_buffer *b = hs_test_buffer(env, NULL, 4096);
    hs_vk_binding bb = {.buf = b};
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    assert_int_equal(hs_op_kv_gather(env->ops, seq, &bb, &bb, HS_TYPE_F16, 1, 0, 8, 3, &bb, 4),
                     HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_kv_gather(env->ops, seq, &bb, &bb, HS_TYPE_F32, 2, 100, 8, 8, &bb, 4),
                     HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "stride"));
    assert_int_equal(hs_op_kv_gather(env->ops, seq, &bb, &bb, HS_TYPE_F32, 3, 2048, 8, 8, &bb, 4),
                     HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_op_kv_gather(env->ops, seq, &bb, &bb, HS_TYPE_Q8_0, 1, 0, 8, 32, &bb, 4),
                     HS_ERR_UNSUPPORTED_TYPE);
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 0);
    HS_CHECK(hs_vk_seq_end(seq));
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(b);
}

/* ---- one speculative round on the device ---- */

/* Tree mask -> tree attention -> compaction of the accepted path (all layers)
 * -> plain decoding of each accepted node over the compacted cache: bitwise
 * the tree's output, for two layers sharing one cache buffer. */
static void test_round(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 8);
    const uint32_t n = 24, n_prefix = 29, n_layers = 2;
    const shape s = {9, 3, 64, 64, HS_TYPE_F16};
    const size_t hn = (size_t)s.n_head * s.hd, qn = n * hn;
    const size_t row = (size_t)s.n_kv * s.hd * 2, layer = s.n_ctx * row;
    int32_t par[24];
    rand_tree(&r, par, n);
    float *q = hs_test_rand_array(&r, qn, -1, 1);
    uint8_t *k = rand_cache(&r, s.type, n_layers * layer / 2),
            *v = rand_cache(&r, s.type, n_layers * layer / 2);
    hs_vk_buffer *bk = hs_test_buffer(env, k, n_layers * layer),
                 *bv = hs_test_buffer(env, v, n_layers * layer);
    hs_vk_buffer *bp = hs_test_buffer(env, par, n * 4), *bm = hs_test_buffer(env, NULL, n * 4);
    hs_vk_buffer *bd = hs_test_buffer(env, NULL, n * 4), *bq = hs_test_buffer(env, q, qn * 4);
    hs_vk_buffer *bo = hs_test_buffer(env, NULL, n_layers * qn * 4);
    const uint32_t info[2] = {n_prefix, n};
    hs_vk_buffer *bi = hs_test_buffer(env, info, 8);
    hs_kv_layer kv[2];
    for (uint32_t l = 0; l < n_layers; l++)
        kv[l] = (hs_kv_layer){.k = {.buf = bk, .offset = l * layer},
                              .v = {.buf = bv, .offset = l * layer},
                              .type = s.type,
                              .n_ctx = s.n_ctx,
                              .n_kv_head = s.n_kv,
                              .head_dim = s.hd};
    hs_vk_binding p = {.buf = bp}, m = {.buf = bm}, d = {.buf = bd}, qb = {.buf = bq}, ib = {.buf = bi};
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    HS_CHECK(hs_op_tree_mask(env->ops, seq, &p, n, &m, &d));
    for (uint32_t l = 0; l < n_layers; l++) {
        hs_vk_binding ob = {.buf = bo, .offset = l * qn * 4};
        HS_CHECK(hs_op_attention(env->ops, seq, &qb, &kv[l], s.n_head, &ib, &m, n, 0.125f, &ob));
    }
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    float *tree = hs_test_download(bo, n_layers * qn * 4);
    int32_t *depth = hs_test_download(bd, n * 4);

    /* Accept the path to the deepest node. */
    uint32_t leaf = 0;
    for (uint32_t i = 1; i < n; i++)
        if (depth[i] > depth[leaf]) leaf = i;
    uint32_t path[24], len = 0;
    for (int32_t j = (int32_t)leaf; j >= 0; j = par[j])
        path[len++] = (uint32_t)j;
    uint32_t g[2 + 24] = {n_prefix, len};
    for (uint32_t a = 0; a < len; a++)
        g[2 + a] = n_prefix + path[len - 1 - a];
    hs_vk_buffer *bg = hs_test_buffer(env, g, sizeof g);
    hs_vk_binding gb = {.buf = bg}, kb = {.buf = bk}, vb = {.buf = bv};
    HS_CHECK(hs_vk_seq_begin(seq));
    HS_CHECK(
        hs_op_kv_gather(env->ops, seq, &kb, &vb, s.type, n_layers, layer, s.n_ctx, s.n_kv * s.hd, &gb, 24));
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));

    /* Decode each accepted node alone over the compacted cache. */
    hs_vk_buffer *b1q = hs_test_buffer(env, NULL, hn * 4), *b1o = hs_test_buffer(env, NULL, hn * 4);
    const uint32_t one = 1;
    hs_vk_buffer *b1m = hs_test_buffer(env, &one, 4), *b1i = hs_test_buffer(env, NULL, 8);
    hs_vk_binding q1 = {.buf = b1q}, o1 = {.buf = b1o}, m1 = {.buf = b1m}, i1 = {.buf = b1i};
    for (uint32_t l = 0; l < n_layers; l++) {
        HS_CHECK(hs_vk_seq_begin(seq));
        HS_CHECK(hs_op_attention(env->ops, seq, &q1, &kv[l], s.n_head, &i1, &m1, 1, 0.125f, &o1));
        HS_CHECK(hs_vk_seq_end(seq));
        for (uint32_t a = 0; a < len; a++) {
            uint32_t node = path[len - 1 - a];
            const uint32_t info1[2] = {n_prefix + a, 1};
            HS_CHECK(hs_vk_buffer_upload(b1i, 0, info1, 8));
            HS_CHECK(hs_vk_buffer_upload(b1q, 0, q + node * hn, hn * 4));
            HS_CHECK(hs_vk_seq_submit(seq));
            float *single = hs_test_download(b1o, hn * 4);
            if (memcmp(single, tree + l * qn + node * hn, hn * 4))
                fail_msg("layer %u: accepted node %u (depth %u) differs after device compaction", l, node, a);
            free(single);
        }
    }
    assert_true(len >= 3);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer *bufs[] = {bk, bv, bp, bm, bd, bq, bo, bi, bg, b1q, b1o, b1m, b1i};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        hs_vk_buffer_destroy(bufs[i]);
    free(q);
    free(k);
    free(v);
    free(tree);
    free(depth);
}

/* ---- caches bound in windows: a group with a small maxStorageBufferRange ---- */

#define SPLIT_RANGE 16384
static int setup_split(void **state) { return hs_test_setup_range(state, SPLIT_RANGE); }

/* Attention cases of the split group: tree rows (n_prefix .. n_prefix +
 * n_used - 1) and prefix rows straddle window boundaries there; f32, f16 read
 * as uvec4 and as uvec2, offsets with and without alignment slack. */
#define N_SPLIT_ATTN 3
static const struct {
    shape s;
    uint32_t n, n_used, n_prefix, chunks;
    bool pads;
} k_split_attn[N_SPLIT_ATTN] = {
    {{9, 3, 64, 64, HS_TYPE_F32}, 24, 24, 29, 4, true},   /* 768-byte rows, 21 per window */
    {{8, 2, 40, 300, HS_TYPE_F16}, 20, 17, 95, 3, false}, /* 160-byte rows, 102 per window */
    {{6, 3, 20, 300, HS_TYPE_F16}, 20, 20, 130, 3, true}, /* 120-byte rows, slack 8: 136 */
};
static float *g_split_attn_ref[N_SPLIT_ATTN];

/* Runs split case i; returns the output and the windows of its cache. */
static float *split_attention_case(hs_test_env *env, int i, hs_kv_split *sp) {
    const shape *s = &k_split_attn[i].s;
    const uint32_t n = k_split_attn[i].n, n_used = k_split_attn[i].n_used, n_prefix = k_split_attn[i].n_prefix;
    hs_rng r;
    hs_rng_seed(&r, 400 + i);
    int32_t par[32];
    rand_tree(&r, par, n);
    uint32_t *mask = host_mask(par, n, NULL);
    const size_t qn = (size_t)n * s->n_head * s->hd;
    float *q = hs_test_rand_array(&r, qn, -2, 2), *ref = malloc(qn * 4);
    void *k = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
    void *v = rand_cache(&r, s->type, (size_t)s->n_ctx * s->n_kv * s->hd);
    const float scale = 1.0f / sqrtf((float)s->hd);
    /* The plan depends on the offsets' alignment, not on the buffers. */
    const uint64_t kpad = k_split_attn[i].pads ? (s->type == HS_TYPE_F16 ? 8 : 16) : 0;
    const hs_kv_layer kv = {.k = {.offset = kpad}, .v = {.offset = kpad}, .type = s->type, .n_ctx = s->n_ctx,
                            .n_kv_head = s->n_kv, .head_dim = s->hd};
    HS_CHECK(hs_kv_split_plan(env->ops, &kv, sp));
    float *got = run_attention(env, s, q, k, v, n_prefix, n_used, mask, n, scale, k_split_attn[i].pads);
    ref_attention(q, k, v, s->type, s->n_ctx, s->n_kv, s->hd, s->n_head, n_prefix, n_used, mask, n, scale, ref);
    char what[96];
    snprintf(what, sizeof what, "split case %d (%s, %u windows)", i, hs_type_name(s->type), sp->chunks);
    check_close(got, ref, qn, what);
    free(mask), free(q), free(ref), free(k), free(v);
    return got;
}

/* First group: the cases with unsplit caches, kept for the split group. */
static void test_attention_split_ref(void **state) {
    hs_test_env *env = *state;
    for (int i = 0; i < N_SPLIT_ATTN; i++) {
        hs_kv_split sp;
        free(g_split_attn_ref[i]);
        g_split_attn_ref[i] = split_attention_case(env, i, &sp);
        assert_int_equal(sp.chunks, 1);
    }
}

/* Split group: the same outputs, bitwise, from caches in windows. */
static void test_split_attention(void **state) {
    hs_test_env *env = *state;
    assert_true(hs_ops_caps(env->ops)->max_storage_buffer_range <= SPLIT_RANGE);
    for (int i = 0; i < N_SPLIT_ATTN; i++) {
        hs_kv_split sp;
        float *got = split_attention_case(env, i, &sp);
        const uint32_t first = k_split_attn[i].n_prefix, last = first + k_split_attn[i].n_used - 1;
        assert_int_equal(sp.chunks, k_split_attn[i].chunks);
        assert_true(first / sp.chunk_rows != last / sp.chunk_rows); /* tree rows straddle a boundary */
        if (!g_split_attn_ref[i]) fail_msg("split case %d: the unsplit reference did not run", i);
        const size_t qn = (size_t)k_split_attn[i].n * k_split_attn[i].s.n_head * k_split_attn[i].s.hd;
        if (memcmp(got, g_split_attn_ref[i], qn * 4))
            fail_msg("split case %d: attention over %u windows differs from the unsplit cache", i, sp.chunks);
        free(got);
        free(g_split_attn_ref[i]);
        g_split_attn_ref[i] = NULL;
    }
}

/* Tree node == the node decoded alone after compaction, with both caches in
 * windows and the tree rows straddling a boundary (rows 37 .. 56; windows of
 * 21 rows (f32) and 42 rows (f16)). */
static void test_split_exact(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 41);
    static const shape shapes[] = {{9, 3, 64, 0, HS_TYPE_F32}, {9, 3, 64, 0, HS_TYPE_F16}};
    for (size_t c = 0; c < 2; c++) {
        shape s = shapes[c];
        s.n_ctx = 37 + 20 + 3;
        const hs_kv_layer kv = {.type = s.type, .n_ctx = s.n_ctx, .n_kv_head = s.n_kv, .head_dim = s.hd};
        hs_kv_split sp;
        HS_CHECK(hs_kv_split_plan(env->ops, &kv, &sp));
        assert_true(sp.chunks > 1 && 37 / sp.chunk_rows != 56 / sp.chunk_rows);
        tree_vs_compacted(env, &r, shapes[c], 20, 37);
    }
}

/* Compaction with every layer's caches in windows: rows move across window
 * boundaries (uvec4 and uint units, a layer stride whose slack changes from
 * layer to layer), bytewise as the sequential reference. */
static void test_split_kv_gather(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 42);
    /* 48 rows of 768 bytes (f32) / 384 (f16): 21 / 42 rows per window. */
    uint32_t g1[2 + 8] = {18, 8, 19, 21, 22, 30, 40, 41, 43, 47};
    for (int f16 = 0; f16 < 2; f16++) {
        hs_type t = f16 ? HS_TYPE_F16 : HS_TYPE_F32;
        check_kv_gather(env, &r, t, 192, 48, 3, 48 * 192 * elem_size(t) + 64, 0, g1, 8);
        assert_true(g_gather_chunks > 1);
        /* uint units: an f16 row of 150 halves (300 bytes), stride 4 bytes
         * past the layer, offset 4. */
        check_kv_gather(env, &r, t, 150, 80, 2, 80 * 150 * elem_size(t) + 4, 4, g1, 8);
        assert_true(g_gather_chunks > 1);
    }
}

/* Bad inputs: a layer needing more windows than the kernels bind, and one
 * row larger than the range; nothing is recorded. */
static void test_split_too_many(void **state) {
    hs_test_env *env = *state;
    /* 5 windows of 21 rows of 768 bytes. */
    const shape s = {9, 3, 64, 21 * 4 + 1, HS_TYPE_F32};
    const uint32_t info[2] = {0, 1}, mask[1] = {1};
    float q[9 * 64] = {0};
    void *kv = calloc((size_t)s.n_ctx * s.n_kv * s.hd, 4);
    attn_dev a;
    attn_dev_init(env, &a, &s, 1, q, kv, kv, info, mask, false);
    hs_vk_seq *seq = hs_test_seq_begin(env);
    hs_kv_split sp;
    assert_int_equal(hs_kv_split_plan(env->ops, &a.kv, &sp), HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "needs 5 windows"));
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &a.kv, s.n_head, &a.binfo, &a.bmask, 1, 0.1f, &a.bout),
                     HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "needs 5 windows"));
    assert_int_equal(hs_op_kv_gather(env->ops, seq, &a.kv.k, &a.kv.v, s.type, 1, 0, s.n_ctx, s.n_kv * s.hd,
                                     &a.binfo, 1),
                     HS_ERR_VK_UNSUPPORTED);
    hs_rope_params rp = {.n_rot = 64, .mode = HS_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f};
    hs_vk_binding qkv = {.buf = a.k}, pos = {.buf = a.info};
    assert_int_equal(hs_op_rope_kv(env->ops, seq, &qkv, &pos, &pos, &a.bout, &a.kv, 1, s.n_head, &rp),
                     HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "needs 5 windows"));
    /* One row of 16 KiB + 1 KiB: not even one row fits a window. */
    hs_kv_layer wide = {.k = {.buf = a.k}, .v = {.buf = a.v}, .type = HS_TYPE_F32, .n_ctx = 2, .n_kv_head = 17,
                        .head_dim = 256};
    assert_int_equal(hs_kv_split_plan(env->ops, &wide, &sp), HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "maxStorageBufferRange"));
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 0);
    hs_test_seq_run(seq);
    attn_dev_free(&a);
    free(kv);
}

/* A device that cannot bind the windows (maxPerStageDescriptorStorageBuffers
 * 8, pretended): each KV op refuses a split cache with the numbers, records
 * nothing and leaks nothing (the group teardown counts live objects); unsplit
 * caches still work. */
static int setup_few_bindings(void **state) {
    return hs_test_setup_env(state, SPLIT_RANGE, "HS_VK_MAX_STORAGE_BUFFERS", "8");
}

static void test_split_binding_limit(void **state) {
    hs_test_env *env = *state;
    assert_int_equal(hs_ops_caps(env->ops)->max_storage_buffers, 8);
    const shape s = {9, 3, 64, 40, HS_TYPE_F32}; /* 30 KiB: 2 windows */
    const uint32_t info[2] = {0, 1}, mask[1] = {1};
    float q[9 * 64] = {0};
    void *kv = calloc((size_t)s.n_ctx * s.n_kv * s.hd, 4);
    attn_dev a;
    attn_dev_init(env, &a, &s, 1, q, kv, kv, info, mask, false);
    hs_vk_seq *seq = hs_test_seq_begin(env);
    assert_int_equal(hs_op_attention(env->ops, seq, &a.bq, &a.kv, s.n_head, &a.binfo, &a.bmask, 1, 0.1f, &a.bout),
                     HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "needs 12 storage buffers"));
    assert_non_null(strstr(hs_last_error(), "maxPerStageDescriptorStorageBuffers 8"));
    hs_rope_params rp = {.n_rot = 64, .mode = HS_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f};
    hs_vk_binding qkv = {.buf = a.k}, pos = {.buf = a.info};
    assert_int_equal(hs_op_rope_kv(env->ops, seq, &qkv, &pos, &pos, &a.bout, &a.kv, 1, s.n_head, &rp),
                     HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "needs 13 storage buffers"));
    assert_int_equal(hs_op_kv_gather(env->ops, seq, &a.kv.k, &a.kv.v, s.type, 1, 0, s.n_ctx, s.n_kv * s.hd,
                                     &a.binfo, 1),
                     HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "needs 9 storage buffers"));
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 0);
    /* A cache of 10 rows fits one binding: today's kernel, 6 bindings. */
    hs_kv_layer small = a.kv;
    small.n_ctx = 10;
    HS_CHECK(hs_op_attention(env->ops, seq, &a.bq, &small, s.n_head, &a.binfo, &a.bmask, 1, 0.1f, &a.bout));
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 1);
    hs_test_seq_run(seq);
    attn_dev_free(&a);
    free(kv);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tree_mask),           cmocka_unit_test(test_check_parents),
        cmocka_unit_test(test_attention_ref),       cmocka_unit_test(test_attention_causal),
        cmocka_unit_test(test_attention_exact),     cmocka_unit_test(test_attention_long),
        cmocka_unit_test(test_attention_replay),    cmocka_unit_test(test_attention_bad_args),
        cmocka_unit_test(test_attention_q8),        cmocka_unit_test(test_attention_cols),
        cmocka_unit_test(test_kv_gather),           cmocka_unit_test(test_round),
        cmocka_unit_test(test_attention_split_ref), cmocka_unit_test(test_attention_qblock),
    };
    /* test_round again: tree, compaction and decoding over caches in windows. */
    const struct CMUnitTest split_tests[] = {
        cmocka_unit_test(test_split_attention), cmocka_unit_test(test_split_exact),
        cmocka_unit_test(test_split_kv_gather), cmocka_unit_test(test_round),
        cmocka_unit_test(test_split_too_many),
    };
    const struct CMUnitTest limit_tests[] = {cmocka_unit_test(test_split_binding_limit)};
    int fails = hs_test_run_group("attn", tests, setup, teardown);
    fails += hs_test_run_group("attn_split", split_tests, setup_split, teardown);
    fails += hs_test_run_group("attn_few_bindings", limit_tests, setup_few_bindings, teardown);
    for (int i = 0; i < N_SPLIT_ATTN; i++)
        free(g_split_attn_ref[i]);
    return fails;
}
