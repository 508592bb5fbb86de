/* Tests of RoPE (hs_op_rope) and the fused RoPE + KV-cache write
 * (hs_op_rope_kv) against ref_elem.c: both ggml modes, partial n_rot, odd head
 * counts, positions up to 131071, f32 and f16 caches, cache rows landing
 * exactly where the rows buffer says (every other row untouched), rows past
 * n_ctx skipped, replay of one recording with new positions and rows, and
 * argument checks. The largest difference to the reference is printed. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_elem.h"
#include "ref_elem.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

/* Rotated values are within [-sqrt(2), sqrt(2)] (inputs in [-1, 1]).
 * With a frequency table the angles are bitwise the reference's and only
 * cos/sin differ. Without one the device's f_i may be an ulp off the
 * reference's powf, which moves theta = pos * f_i by up to ~2 ulp of theta:
 * the bound scales with one ulp of the largest angle. */
static double rope_tol(bool table, float max_theta) {
    if (table) return 1e-5;
    return 1e-5 + 4.0 * (double)(nextafterf(max_theta, INFINITY) - max_theta);
}

/* Largest differences seen: [table][positions >= 8192]. */
static double g_max_diff[2][2];

/* The split groups bind the caches in windows (a small maxStorageBufferRange):
 * check_rope_kv then records, or compares with, the bytes of Q and both
 * caches that the first group computed for the same case unsplit. */
#define N_SPLIT_CASES 8
static uint8_t *g_split_ref[N_SPLIT_CASES];
static size_t g_split_ref_bytes[N_SPLIT_CASES];
static int g_split_case = -1;  /* case being recorded or compared; -1: none */
static bool g_split_compare;   /* false: record (first group), true: compare */
static uint32_t g_split_chunks; /* windows of the last check_rope_kv */

/* Positions: random below max_pos, with 0 and max_pos - 1 included. */
static void rand_positions(hs_rng *r, int32_t *pos, uint32_t n, int32_t max_pos) {
    for (uint32_t t = 0; t < n; t++)
        pos[t] = (int32_t)(hs_rng_u32(r) % (uint32_t)max_pos);
    pos[0] = 0;
    if (n > 1) pos[n - 1] = max_pos - 1;
}

static void check_close(const char *what, const float *got, const float *ref, size_t n, bool table,
                        int32_t max_pos, float freq_scale) {
    double d = hs_max_abs_diff(got, ref, n);
    double *track = &g_max_diff[table][max_pos > 8192];
    if (d > *track) *track = d;
    double tol = rope_tol(table, freq_scale * (float)(max_pos - 1));
    if (d > tol)
        fail_msg("%s: max abs diff %g to the reference > %g (positions < %d)", what, d, tol, max_pos);
}

/* Uploads the frequency table of rp and points rp->freqs at it. */
static hs_vk_buffer *freq_table(hs_test_env *env, hs_rope_params *rp, hs_vk_binding *slot) {
    float f[512];
    assert_true(rp->n_rot / 2 <= 512);
    hs_rope_freqs(rp, f);
    hs_vk_buffer *b = hs_test_buffer(env, f, rp->n_rot / 2 * 4 + 8);
    *slot = (hs_vk_binding){b, 0, 0};
    rp->freqs = slot;
    return b;
}

/* ---- hs_op_rope ---- */

typedef struct rope_case {
    uint32_t n_heads, head_dim, n_rot;
    float base, scale;
} rope_case;

static const rope_case k_cases[] = {
    {9, 64, 64, 10000.0f, 1.0f},      /* SmolLM2-135M */
    {3, 128, 64, 10000.0f, 1.0f},     /* partial rotation */
    {1, 2, 2, 10000.0f, 1.0f},        /* smallest head */
    {5, 6, 4, 500000.0f, 1.0f},       /* odd number of pairs rotated, 1 pair passes */
    {4, 256, 256, 1000000.0f, 0.25f}, /* gemma3-like base, linear scaling */
    {7, 96, 32, 10000.0f, 0.5f},
};

static void check_rope(hs_test_env *env, hs_rng *r, const rope_case *c, hs_rope_mode mode, uint32_t n,
                       int32_t max_pos, bool table) {
    size_t cnt = (size_t)n * c->n_heads * c->head_dim;
    hs_rope_params rp = {.n_rot = c->n_rot, .mode = mode, .freq_base = c->base, .freq_scale = c->scale};
    hs_vk_binding fslot;
    hs_vk_buffer *bf = table ? freq_table(env, &rp, &fslot) : NULL;
    float *x = hs_test_rand_array(r, cnt + 1, -1.0f, 1.0f);
    int32_t *pos = malloc(n * sizeof *pos);
    rand_positions(r, pos, n, max_pos);
    /* x at byte offset 4 (not 16-aligned), positions at 0. */
    hs_vk_buffer *bx = hs_test_buffer(env, x, (cnt + 1) * 4), *bp = hs_test_buffer(env, pos, n * 4);
    hs_vk_binding X = hs_test_bind(bx, 4), P = hs_test_bind(bp, 0);
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_rope(env->ops, s, &X, &P, n, c->n_heads, c->head_dim, &rp));
    assert_int_equal(hs_vk_seq_dispatch_count(s), 1);
    hs_test_seq_run(s);
    float *got = hs_test_download(bx, (cnt + 1) * 4);
    assert_memory_equal(got, x, 4); /* the float before x is untouched */
    ref_rope(x + 1, pos, n, c->n_heads, c->head_dim, &rp);
    char what[128];
    snprintf(what, sizeof what, "rope mode %d heads %u hd %u n_rot %u n %u table %d", mode, c->n_heads,
             c->head_dim, c->n_rot, n, table);
    check_close(what, got + 1, x + 1, cnt, table, max_pos, c->scale);
    /* Dims past n_rot pass through bitwise (the reference leaves them alone). */
    for (size_t h = 0; h < (size_t)n * c->n_heads; h++)
        assert_memory_equal(got + 1 + h * c->head_dim + c->n_rot, x + 1 + h * c->head_dim + c->n_rot,
                            (c->head_dim - c->n_rot) * 4);
    free(x), free(pos), free(got);
    hs_vk_buffer_destroy(bx), hs_vk_buffer_destroy(bp), hs_vk_buffer_destroy(bf);
}

static void test_rope(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 11);
    const uint32_t ns[] = {1, 7, 33};
    for (int table = 0; table < 2; table++)
        for (int m = 0; m < 2; m++)
            for (size_t c = 0; c < sizeof k_cases / sizeof k_cases[0]; c++)
                for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
                    check_rope(env, &r, &k_cases[c], m ? HS_ROPE_NEOX : HS_ROPE_NORMAL, ns[k], 4096, table);
}

static void test_rope_large_positions(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 12);
    for (int table = 0; table < 2; table++)
        for (int m = 0; m < 2; m++) {
            check_rope(env, &r, &k_cases[0], m ? HS_ROPE_NEOX : HS_ROPE_NORMAL, 33, 32768, table);
            check_rope(env, &r, &k_cases[4], m ? HS_ROPE_NEOX : HS_ROPE_NORMAL, 33, 131072, table);
        }
}

/* ---- hs_op_rope_kv ---- */

typedef struct kv_case {
    uint32_t n_head, n_kv, head_dim, n_rot, n_ctx;
    float base;
} kv_case;

static const kv_case k_kv_cases[] = {
    {9, 3, 64, 64, 40, 10000.0f},  /* SmolLM2-135M */
    {4, 1, 256, 256, 35, 1e6f},    /* gemma3-270m */
    {6, 2, 128, 32, 34, 10000.0f}, /* partial rotation */
    {3, 3, 6, 2, 50, 10000.0f},    /* tiny heads, no GQA */
};

/* Cache contents before the op: a recognisable random pattern. */
static void *sentinel(hs_rng *r, size_t bytes) {
    uint32_t *p = malloc(bytes);
    for (size_t i = 0; i < bytes / 4; i++)
        p[i] = hs_rng_u32(r) & 0x3BFF3BFFu; /* finite as f16 and f32 */
    return p;
}

/* Compares one cache (k or v) with the expected f32 rows: rows in `written`
 * must match (rope tolerance for K, exact for V in f32, one f16 ulp for f16),
 * every other row must still hold the sentinel bytes. */
static void check_cache(const char *what, const void *got, const void *before, const float *ref_rows,
                        const kv_case *c, hs_type type, const uint32_t *rows, uint32_t n, bool exact,
                        bool table, int32_t max_pos) {
    size_t row_elems = (size_t)c->n_kv * c->head_dim, esize = type == HS_TYPE_F16 ? 2 : 4;
    for (uint32_t row = 0; row < c->n_ctx; row++) {
        int t = -1;
        for (uint32_t j = 0; j < n; j++)
            if (rows[j] == row) t = (int)j;
        const uint8_t *g = (const uint8_t *)got + row * row_elems * esize;
        if (t < 0) {
            if (memcmp(g, (const uint8_t *)before + row * row_elems * esize, row_elems * esize))
                fail_msg("%s: cache row %u was not in rows[] but changed", what, row);
            continue;
        }
        const float *want = ref_rows + row * row_elems;
        if (type == HS_TYPE_F32) {
            if (exact)
                assert_memory_equal(g, want, row_elems * 4);
            else
                check_close(what, (const float *)g, want, row_elems, table, max_pos, 1.0f);
            continue;
        }
        const uint16_t *h = (const uint16_t *)g;
        for (size_t i = 0; i < row_elems; i++) {
            uint16_t expect = hs_test_f32_to_f16(want[i]);
            float gf = hs_test_f16_to_f32(h[i]);
            /* V: the device's own rounding of the same float, so at most one
             * half ulp step away; K: rope tolerance plus the f16 step. */
            double tol = exact ? 0.0 : rope_tol(table, (float)(max_pos - 1));
            double ulp = fabs((double)hs_test_f16_to_f32((uint16_t)(expect | 1)) -
                              hs_test_f16_to_f32((uint16_t)(expect & ~1)));
            if (fabs((double)gf - hs_test_f16_to_f32(expect)) > tol + ulp + 1e-12)
                fail_msg("%s: row %u element %zu is %g, expected %g (f16)", what, row, i, (double)gf,
                         (double)hs_test_f16_to_f32(expect));
        }
    }
}

/* Runs the fused op once (or twice, replaying the recording with new
 * positions and rows) and checks Q and both caches. */
static void check_rope_kv(hs_test_env *env, hs_rng *r, const kv_case *c, hs_rope_mode mode, hs_type type,
                          uint32_t n, int32_t max_pos, bool replay, bool table) {
    hs_rope_params rp = {.n_rot = c->n_rot, .mode = mode, .freq_base = c->base, .freq_scale = 1.0f};
    hs_vk_binding fslot;
    hs_vk_buffer *bf = table ? freq_table(env, &rp, &fslot) : NULL;
    const size_t hd = c->head_dim, n_slot = c->n_head + 2 * (size_t)c->n_kv;
    const size_t row_elems = (size_t)c->n_kv * hd, esize = type == HS_TYPE_F16 ? 2 : 4;
    const size_t cache_bytes = c->n_ctx * row_elems * esize;
    assert_true(n <= c->n_ctx);

    float *qkv = hs_test_rand_array(r, n * n_slot * hd + 1, -1.0f, 1.0f);
    int32_t *pos = malloc(n * 4);
    uint32_t *rows = malloc(n * 4);
    /* Both caches in one buffer: k at 0, v right after it (4-byte aligned only). */
    void *init = sentinel(r, 2 * cache_bytes + 4);
    hs_vk_buffer *bq = hs_test_buffer(env, qkv, (n * n_slot * hd + 1) * 4);
    hs_vk_buffer *bp = hs_test_buffer(env, NULL, n * 4), *br = hs_test_buffer(env, NULL, n * 4);
    hs_vk_buffer *bo = hs_test_buffer(env, NULL, n * c->n_head * hd * 4);
    hs_vk_buffer *bc = hs_test_buffer(env, init, 2 * cache_bytes + 4);
    hs_vk_binding QKV = hs_test_bind(bq, 4), P = hs_test_bind(bp, 0), R = hs_test_bind(br, 0), Q = hs_test_bind(bo, 0);
    hs_kv_layer kv = {.k = hs_test_bind(bc, 0),
                      .v = hs_test_bind(bc, cache_bytes + 4),
                      .type = type,
                      .n_ctx = c->n_ctx,
                      .n_kv_head = c->n_kv,
                      .head_dim = c->head_dim};

    hs_kv_split sp;
    HS_CHECK(hs_kv_split_plan(env->ops, &kv, &sp));
    g_split_chunks = sp.chunks;
    hs_vk_seq *s = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &s));
    HS_CHECK(hs_vk_seq_begin(s));
    HS_CHECK(hs_op_rope_kv(env->ops, s, &QKV, &P, &R, &Q, &kv, n, c->n_head, &rp));
    /* One dispatch however the cache is bound (the split groups' small range
     * may cut the tokens' qkv into several). */
    if (g_split_case < 0) assert_int_equal(hs_vk_seq_dispatch_count(s), 1);
    HS_CHECK(hs_vk_seq_end(s));

    float *kref = malloc(c->n_ctx * row_elems * 4), *vref = malloc(c->n_ctx * row_elems * 4);
    float *qref = malloc(n * c->n_head * hd * 4);
    uint8_t *before = malloc(2 * cache_bytes + 4);
    memcpy(before, init, 2 * cache_bytes + 4);
    uint32_t *all_rows = malloc(2 * n * 4);
    uint32_t n_all = 0;
    for (int run = 0; run < (replay ? 2 : 1); run++) {
        /* Distinct rows out of a shuffled [0, n_ctx); in the replay, rows not
         * used by the first run. The last token of a batch goes past n_ctx. */
        uint32_t *perm = malloc(c->n_ctx * 4);
        for (uint32_t i = 0; i < c->n_ctx; i++)
            perm[i] = i;
        for (uint32_t i = c->n_ctx - 1; i > 0; i--) {
            uint32_t j = hs_rng_u32(r) % (i + 1), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        uint32_t k = 0;
        for (uint32_t i = 0; i < c->n_ctx && k < n; i++) {
            bool used = false;
            for (uint32_t j = 0; j < n_all; j++)
                used |= all_rows[j] == perm[i];
            if (!used) rows[k++] = perm[i];
        }
        assert_int_equal(k, n);
        if (n > 2) rows[n - 1] = c->n_ctx + (uint32_t)run * 7; /* skipped on the device */
        free(perm);
        rand_positions(r, pos, n, max_pos);
        HS_CHECK(hs_vk_buffer_upload(bp, 0, pos, n * 4));
        HS_CHECK(hs_vk_buffer_upload(br, 0, rows, n * 4));
        HS_CHECK(hs_vk_seq_submit(s));

        /* Rows written before (first run) keep their values in the reference. */
        ref_rope_kv(qkv + 1, pos, rows, qref, kref, vref, n, c->n_head, c->n_kv, c->head_dim, c->n_ctx, &rp);
        for (uint32_t j = 0; j < n; j++)
            all_rows[n_all++] = rows[j];

        char what[160];
        snprintf(what, sizeof what, "rope_kv %s mode %d heads %u/%u hd %u n_rot %u n %u table %d run %d",
                 hs_type_name(type), mode, c->n_head, c->n_kv, c->head_dim, c->n_rot, n, table, run);
        float *q = hs_test_download(bo, n * c->n_head * hd * 4);
        check_close(what, q, qref, n * c->n_head * hd, table, max_pos, 1.0f);
        uint8_t *cache = hs_test_download(bc, 2 * cache_bytes + 4);
        char wk[176], wv[176];
        snprintf(wk, sizeof wk, "%s (K)", what);
        snprintf(wv, sizeof wv, "%s (V)", what);
        check_cache(wk, cache, before, kref, c, type, all_rows, n_all, false, table, max_pos);
        check_cache(wv, cache + cache_bytes + 4, before + cache_bytes + 4, vref, c, type, all_rows, n_all,
                    true, table, max_pos);
        assert_memory_equal(cache + cache_bytes, before + cache_bytes, 4); /* the gap between k and v */
        if (g_split_case >= 0) {
            /* Q then both caches, bitwise. */
            const size_t qb = n * c->n_head * hd * 4, bytes = qb + 2 * cache_bytes + 4;
            uint8_t *all = malloc(bytes);
            assert_non_null(all);
            memcpy(all, q, qb);
            memcpy(all + qb, cache, 2 * cache_bytes + 4);
            if (!g_split_compare) {
                free(g_split_ref[g_split_case]);
                g_split_ref[g_split_case] = all;
                g_split_ref_bytes[g_split_case] = bytes;
            } else {
                if (!g_split_ref[g_split_case]) fail_msg("%s: the unsplit reference did not run", what);
                assert_int_equal(g_split_ref_bytes[g_split_case], bytes);
                if (memcmp(all, g_split_ref[g_split_case], qb))
                    fail_msg("%s: Q differs from the unsplit cache's", what);
                if (memcmp(all + qb, g_split_ref[g_split_case] + qb, bytes - qb))
                    fail_msg("%s: the cache in %u windows differs from the unsplit cache", what, g_split_chunks);
                free(all);
            }
        }
        free(q), free(cache);
    }
    hs_vk_seq_destroy(s);
    free(qkv), free(pos), free(rows), free(init), free(kref), free(vref), free(qref), free(before),
        free(all_rows);
    hs_vk_buffer_destroy(bq), hs_vk_buffer_destroy(bp), hs_vk_buffer_destroy(br), hs_vk_buffer_destroy(bo);
    hs_vk_buffer_destroy(bc), hs_vk_buffer_destroy(bf);
}

static void test_rope_kv(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 13);
    const uint32_t ns[] = {1, 5, 33};
    for (int t = 0; t < 2; t++)
        for (int m = 0; m < 2; m++)
            for (size_t c = 0; c < sizeof k_kv_cases / sizeof k_kv_cases[0]; c++)
                for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
                    check_rope_kv(env, &r, &k_kv_cases[c], m ? HS_ROPE_NEOX : HS_ROPE_NORMAL,
                                  t ? HS_TYPE_F16 : HS_TYPE_F32, ns[k], 4096, false, (c + k) % 2);
}

/* One recording replayed with new positions and rows (read at run time). */
static void test_rope_kv_replay(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 14);
    for (int t = 0; t < 2; t++)
        for (int m = 0; m < 2; m++)
            check_rope_kv(env, &r, &k_kv_cases[t * 2], m ? HS_ROPE_NEOX : HS_ROPE_NORMAL,
                          t ? HS_TYPE_F16 : HS_TYPE_F32, 13, 100000, true, m == t);
}

/* The fused op's Q equals hs_op_rope applied to the Q part. */
static void test_rope_kv_matches_rope(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 15);
    const kv_case *c = &k_kv_cases[2];
    const uint32_t n = 4;
    const size_t hd = c->head_dim, n_slot = c->n_head + 2 * (size_t)c->n_kv, qn = n * c->n_head * hd;
    for (int m = 0; m < 2; m++) {
        hs_rope_params rp = {.n_rot = c->n_rot,
                             .mode = m ? HS_ROPE_NEOX : HS_ROPE_NORMAL,
                             .freq_base = c->base,
                             .freq_scale = 1.0f};
        float *qkv = hs_test_rand_array(&r, n * n_slot * hd, -1.0f, 1.0f), *q = malloc(qn * 4);
        for (uint32_t t = 0; t < n; t++)
            memcpy(q + t * c->n_head * hd, qkv + t * n_slot * hd, c->n_head * hd * 4);
        int32_t pos[4] = {3, 1000, 77, 4095};
        uint32_t rows[4] = {0, 1, 2, 3};
        hs_vk_buffer *bq = hs_test_buffer(env, qkv, n * n_slot * hd * 4),
                     *bx = hs_test_buffer(env, q, qn * 4);
        hs_vk_buffer *bp = hs_test_buffer(env, pos, sizeof pos), *br = hs_test_buffer(env, rows, sizeof rows);
        hs_vk_buffer *bo = hs_test_buffer(env, NULL, qn * 4);
        hs_vk_buffer *bc = hs_test_buffer(env, NULL, c->n_ctx * c->n_kv * hd * 4 * 2);
        hs_vk_binding QKV = hs_test_bind(bq, 0), X = hs_test_bind(bx, 0), P = hs_test_bind(bp, 0), R = hs_test_bind(br, 0), O = hs_test_bind(bo, 0);
        hs_kv_layer kv = {hs_test_bind(bc, 0), hs_test_bind(bc, c->n_ctx * c->n_kv * hd * 4), HS_TYPE_F32, c->n_ctx, c->n_kv,
                          c->head_dim};
        hs_vk_seq *s = hs_test_seq_begin(env);
        HS_CHECK(hs_op_rope_kv(env->ops, s, &QKV, &P, &R, &O, &kv, n, c->n_head, &rp));
        HS_CHECK(hs_op_rope(env->ops, s, &X, &P, n, c->n_head, c->head_dim, &rp));
        hs_test_seq_run(s);
        float *a = hs_test_download(bo, qn * 4), *b = hs_test_download(bx, qn * 4);
        double d = hs_max_abs_diff(a, b, qn);
        if (d > 1e-6) fail_msg("mode %d: fused Q differs from hs_op_rope by %g", m, d);
        free(qkv), free(q), free(a), free(b);
        hs_vk_buffer_destroy(bq), hs_vk_buffer_destroy(bx), hs_vk_buffer_destroy(bp);
        hs_vk_buffer_destroy(br), hs_vk_buffer_destroy(bo), hs_vk_buffer_destroy(bc);
    }
}

/* Cases of the split groups (range SPLIT_RANGE): how many windows each
 * cache needs there (1: it fits one binding and keeps the unsplit kernel). */
#define SPLIT_RANGE 12288
static const struct {
    uint32_t c;
    hs_type type;
    hs_rope_mode mode;
    uint32_t n;
    uint32_t chunks;
} k_split_cases[N_SPLIT_CASES] = {
    {0, HS_TYPE_F32, HS_ROPE_NORMAL, 33, 3}, /* 768-byte rows, 15 per window */
    {0, HS_TYPE_F16, HS_ROPE_NEOX, 33, 2},
    {1, HS_TYPE_F32, HS_ROPE_NEOX, 30, 4}, /* 35 rows of 1 KiB: 11 + 11 + 11 + 2 */
    {1, HS_TYPE_F16, HS_ROPE_NORMAL, 30, 2},
    {2, HS_TYPE_F32, HS_ROPE_NORMAL, 20, 4},
    {2, HS_TYPE_F16, HS_ROPE_NEOX, 33, 2},
    {3, HS_TYPE_F32, HS_ROPE_NEOX, 40, 1},
    {3, HS_TYPE_F16, HS_ROPE_NORMAL, 40, 1},
};

/* Runs the split cases; the first group records them unsplit, the split
 * groups compare (bitwise) and check against the C reference. */
static void run_split_cases(hs_test_env *env, bool compare) {
    for (int i = 0; i < N_SPLIT_CASES; i++) {
        hs_rng r;
        hs_rng_seed(&r, 300 + i);
        g_split_case = i;
        g_split_compare = compare;
        check_rope_kv(env, &r, &k_kv_cases[k_split_cases[i].c], k_split_cases[i].mode, k_split_cases[i].type,
                      k_split_cases[i].n, 8192, false, true);
        g_split_case = -1;
        if (!compare) assert_int_equal(g_split_chunks, 1);
        else if (g_split_chunks != k_split_cases[i].chunks)
            fail_msg("split case %d: %u windows, expected %u", i, g_split_chunks, k_split_cases[i].chunks);
    }
}

static void test_rope_kv_split_ref(void **state) { run_split_cases(*state, false); }

static void test_rope_kv_split(void **state) {
    hs_test_env *env = *state;
    assert_true(hs_ops_caps(env->ops)->max_storage_buffer_range <= SPLIT_RANGE);
    run_split_cases(env, true);
}

static int setup_split(void **state) { return hs_test_setup_range(state, SPLIT_RANGE); }

static void test_rope_bad_args(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *b = hs_test_buffer(env, NULL, 4096);
    hs_vk_binding B = hs_test_bind(b, 0);
    hs_rope_params rp = {.n_rot = 64, .mode = HS_ROPE_NORMAL, .freq_base = 10000.0f, .freq_scale = 1.0f};
    hs_kv_layer kv = {B, B, HS_TYPE_F32, 4, 1, 64};
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_rope(env->ops, s, &B, &B, 2, 2, 64, &rp));
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 2, 2, 63, &rp), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 1, 1, 32, &rp),
                     HS_ERR_INVALID_ARG); /* n_rot > head_dim */
    assert_non_null(strstr(hs_last_error(), "n_rot"));
    rp.n_rot = 63;
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 1, 1, 64, &rp), HS_ERR_INVALID_ARG);
    rp.n_rot = 64;
    rp.mode = (hs_rope_mode)1;
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 1, 1, 64, &rp), HS_ERR_INVALID_ARG);
    rp.mode = HS_ROPE_NEOX;
    rp.freq_base = 0.0f;
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 1, 1, 64, &rp), HS_ERR_INVALID_ARG);
    rp.freq_base = 10000.0f;
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 9, 2, 64, &rp), HS_ERR_OUT_OF_RANGE); /* x too small */
    assert_int_equal(hs_op_rope(env->ops, s, &B, NULL, 1, 1, 64, &rp), HS_ERR_INVALID_ARG);
    rp.n_rot = 1024; /* more rotations than the shared cos/sin table holds */
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 1, 1, 1024, &rp), HS_ERR_INVALID_ARG);
    rp.n_rot = 64;
    hs_vk_binding small = {b, 0, 64}; /* 16 floats; the table needs 32 */
    rp.freqs = &small;
    assert_int_equal(hs_op_rope(env->ops, s, &B, &B, 1, 1, 64, &rp), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "freqs"));
    rp.freqs = NULL;

    /* Fused: 1 token of 3 heads (1 Q, 1 K, 1 V) x 64 = 768 bytes. */
    HS_CHECK(hs_op_rope_kv(env->ops, s, &B, &B, &B, &B, &kv, 1, 1, &rp));
    kv.type = HS_TYPE_Q4_0;
    assert_int_equal(hs_op_rope_kv(env->ops, s, &B, &B, &B, &B, &kv, 1, 1, &rp), HS_ERR_UNSUPPORTED_TYPE);
    kv.type = HS_TYPE_F32;
    kv.n_ctx = 17; /* 17 x 64 x 4 bytes > 4096 */
    assert_int_equal(hs_op_rope_kv(env->ops, s, &B, &B, &B, &B, &kv, 1, 1, &rp), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "k cache"));
    kv.n_ctx = 4;
    kv.v = hs_test_bind(b, 2);
    assert_int_equal(hs_op_rope_kv(env->ops, s, &B, &B, &B, &B, &kv, 1, 1, &rp), HS_ERR_INVALID_ARG);
    kv.v = B;
    kv.n_kv_head = 0;
    assert_int_equal(hs_op_rope_kv(env->ops, s, &B, &B, &B, &B, &kv, 1, 1, &rp), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_rope_kv(env->ops, s, &B, &B, &B, &B, NULL, 1, 1, &rp), HS_ERR_INVALID_ARG);
    /* Only argument checks here: the recorded dispatches are never run. */
    HS_CHECK(hs_vk_seq_end(s));
    hs_vk_seq_destroy(s);
    hs_vk_buffer_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_rope_large_positions),
        cmocka_unit_test(test_rope_kv),
        cmocka_unit_test(test_rope_kv_replay),
        cmocka_unit_test(test_rope_kv_matches_rope),
        cmocka_unit_test(test_rope_bad_args),
        cmocka_unit_test(test_rope_kv_split_ref),
    };
    const struct CMUnitTest split_tests[] = {cmocka_unit_test(test_rope_kv_split)};
    int fails = hs_test_run_group("rope", tests, setup, teardown);
    fails += hs_test_run_group("rope_split", split_tests, setup_split, teardown);
    for (int i = 0; i < N_SPLIT_CASES; i++)
        free(g_split_ref[i]);
    printf("rope: max abs diff to the C reference, with frequency table: %.3g (positions < 8192), %.3g "
           "(positions up to 131071); f computed on the device: %.3g, %.3g\n",
           g_max_diff[1][0], g_max_diff[1][1], g_max_diff[0][0], g_max_diff[0][1]);
    return fails;
}
