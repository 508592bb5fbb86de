/* Tests of the weight formats (runtime/hs_quant.h) and the weight products
 * (runtime/op_matmul.h): f16 conversion and ggml dequantization against blocks
 * written out by hand, the quantizers, matmul for every type on odd shapes
 * against the double reference of ref_matmul.c, the RMSNorm / SwiGLU prologues
 * and the residual epilogue (also in place), unaligned offsets, stacked
 * weights, argument checks, bitwise batch invariance (every column of n = 1,
 * 2, 3, 4, 5, 8, 16, 17, 33, 64 equals that column computed alone), and a
 * second group whose maxStorageBufferRange is 64 KiB so that weights are split
 * into row chunks (results must be bitwise those of the unsplit weights), and
 * a third with subgroup operations off (the portable kernels must give bitwise
 * the results of the subgroup kernels). Strided outputs and other tunings
 * (HS_TUNING) must not change a result either. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_quant.h"
#include "op_matmul.h"
#include "ref_elem.h"
#include "ref_matmul.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

static int setup_small_range(void **state) { return hs_test_setup_range(state, 65536); }

/* ---- f16 and dequantization of hand-written blocks ---- */

static void test_f16(void **state) {
    (void)state;
    assert_true(hs_f16_to_f32(0x3C00) == 1.0f);
    assert_true(hs_f16_to_f32(0xC000) == -2.0f);
    assert_true(hs_f16_to_f32(0x7BFF) == 65504.0f);
    assert_true(hs_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    assert_true(hs_f16_to_f32(0x03FF) == ldexpf(1023.0f, -24));
    assert_true(hs_f16_to_f32(0x3555) == 0.333251953125f);
    assert_true(isinf(hs_f16_to_f32(0x7C00)) && isnan(hs_f16_to_f32(0x7E00)));
    assert_int_equal(hs_f32_to_f16(1.0f), 0x3C00);
    assert_int_equal(hs_f32_to_f16(1.0f + ldexpf(1.0f, -10)), 0x3C01);
    assert_int_equal(hs_f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3C00);     /* tie to even */
    assert_int_equal(hs_f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3C02); /* tie to even */
    assert_int_equal(hs_f32_to_f16(65520.0f), 0x7C00);                      /* rounds to inf */
    assert_int_equal(hs_f32_to_f16(ldexpf(1.0f, -25)), 0x0000);             /* tie to even 0 */
    assert_int_equal(hs_f32_to_f16(ldexpf(3.0f, -25)), 0x0002);
    assert_int_equal(hs_f32_to_f16(-0.0f), 0x8000);
    for (uint32_t h = 0; h < 0x7C00; h++) assert_int_equal(hs_f32_to_f16(hs_f16_to_f32((uint16_t)h)), h);
}

static void test_dequant_f32_f16(void **state) {
    (void)state;
    const float a[3] = {1.5f, -0.25f, 3e-8f};
    float y[3];
    HS_CHECK(hs_dequantize_row(HS_TYPE_F32, a, y, 3));
    assert_memory_equal(a, y, sizeof a);
    const uint16_t h[4] = {0x3C00, 0xB800, 0x0001, 0x4248}; /* 1, -0.5, 2^-24, 3.140625 */
    float z[4];
    HS_CHECK(hs_dequantize_row(HS_TYPE_F16, h, z, 4));
    assert_true(z[0] == 1.0f && z[1] == -0.5f && z[2] == ldexpf(1.0f, -24) && z[3] == 3.140625f);
}

static void test_dequant_q4_0(void **state) {
    (void)state;
    hs_block_q4_0 b = {.d = 0x3800}; /* d = 0.5 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (15 - j) << 4);
    float y[32];
    HS_CHECK(hs_dequantize_row(HS_TYPE_Q4_0, &b, y, 32));
    /* element j: (j - 8) * 0.5; element j + 16: (15 - j - 8) * 0.5 */
    assert_true(y[0] == -4.0f && y[1] == -3.5f && y[8] == 0.0f && y[15] == 3.5f);
    assert_true(y[16] == 3.5f && y[17] == 3.0f && y[23] == 0.0f && y[31] == -4.0f);
}

static void test_dequant_q4_1(void **state) {
    (void)state;
    hs_block_q4_1 b = {.d = 0x3400, .m = 0xBC00}; /* d = 0.25, m = -1 */
    for (int j = 0; j < 16; j++) b.qs[j] = (uint8_t)(j | (j ^ 5) << 4);
    float y[32];
    HS_CHECK(hs_dequantize_row(HS_TYPE_Q4_1, &b, y, 32));
    /* element j: j * 0.25 - 1; element j + 16: (j ^ 5) * 0.25 - 1 */
    assert_true(y[0] == -1.0f && y[4] == 0.0f && y[15] == 2.75f);
    assert_true(y[16] == 0.25f && y[21] == -1.0f && y[31] == 1.5f); /* 5, 0, 10 */
}

static void test_dequant_q8_0(void **state) {
    (void)state;
    hs_block_q8_0 b = {.d = 0x3000}; /* d = 0.125 */
    for (int j = 0; j < 32; j++) b.qs[j] = (int8_t)(j - 16);
    b.qs[31] = -128;
    float y[32];
    HS_CHECK(hs_dequantize_row(HS_TYPE_Q8_0, &b, y, 32));
    assert_true(y[0] == -2.0f && y[16] == 0.0f && y[17] == 0.125f && y[30] == 1.75f && y[31] == -16.0f);
}

static void test_dequant_q4_K(void **state) {
    (void)state;
    hs_block_q4_K b = {.d = 0x4000, .dmin = 0x3800}; /* d = 2, dmin = 0.5 */
    /* 6-bit scales sc[0..7] = 1 2 3 4 1 3 5 23, mins m[0..7] = 5 6 7 8 2 4 6 40:
     * sub-blocks 4..7 take their low 4 bits from bytes 8..11 and their top 2
     * bits from the top bits of bytes 0..3 (scales) and 4..7 (mins). */
    const uint8_t sc[12] = {1, 2, 3, 0x40 | 4, 5, 6, 7, 0x80 | 8, 0x21, 0x43, 0x65, 0x87};
    memcpy(b.scales, sc, 12);
    /* chunk c, byte l: low nibble l & 15 (sub-block 2c), high nibble 15 - (l & 15) (2c + 1) */
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b.qs[32 * c + l] = (uint8_t)((l & 15) | (15 - (l & 15)) << 4);
    float y[256];
    HS_CHECK(hs_dequantize_row(HS_TYPE_Q4_K, &b, y, 256));
    /* y = 2 sc q - 0.5 m */
    assert_true(y[0] == -2.5f);         /* s0, q0 */
    assert_true(y[5] == 7.5f);          /* s0, q5: 10 - 2.5 */
    assert_true(y[32] == 57.0f);        /* s1, q15: 60 - 3 */
    assert_true(y[40] == 25.0f);        /* s1, q7: 28 - 3 */
    assert_true(y[64 + 17] == 2.5f);    /* s2, q1: 6 - 3.5 */
    assert_true(y[96 + 3] == 92.0f);    /* s3, q12: 96 - 4 */
    assert_true(y[128 + 2] == 3.0f);    /* s4, q2: 4 - 1 */
    assert_true(y[160 + 31] == -2.0f);  /* s5, q0: 0 - 2 */
    assert_true(y[192 + 10] == 97.0f);  /* s6, q10: 100 - 3 */
    assert_true(y[224] == 670.0f);      /* s7, q15: 690 - 20 */
    assert_true(y[255] == -20.0f);      /* s7, q0 */
}

static void test_dequant_q6_K(void **state) {
    (void)state;
    hs_block_q6_K b = {.d = 0x3800}; /* d = 0.5 */
    for (int i = 0; i < 128; i++) b.ql[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++) b.qh[i] = (uint8_t)i;
    for (int i = 0; i < 16; i++) b.scales[i] = (int8_t)(i % 2 ? -(i + 1) : i + 1); /* 1 -2 3 -4 ... */
    float y[256];
    HS_CHECK(hs_dequantize_row(HS_TYPE_Q6_K, &b, y, 256));
    /* y = 0.5 * sc[e / 16] * (q - 32), q = low 4 bits | high 2 bits << 4 */
    assert_true(y[0] == -16.0f);          /* ql[0] lo 0, qh[0] bits 0-1 = 0: q 0, sc 1 */
    assert_true(y[1] == -7.5f);           /* lo 1, hi 1: q 17, sc 1 */
    assert_true(y[35] == -43.5f);         /* ql[35] lo 3, qh[3] bits 2-3 = 0: q 3, sc 3 */
    assert_true(y[70] == -80.0f);         /* ql[6] hi 0, qh[6] bits 4-5 = 0: q 0, sc 5 */
    assert_true(y[127] == 116.0f);        /* ql[63] hi 3, qh[31] bits 6-7 = 0: q 3, sc -8 */
    assert_true(y[128 + 45] == 159.5f);   /* ql[109] lo 13, qh[45] bits 2-3 = 3: q 61, sc 11 */
    assert_true(y[255] == 200.0f);        /* ql[127] hi 7, qh[63] bits 6-7 = 0: q 7, sc -16 */
}

static void test_dequant_args(void **state) {
    (void)state;
    float y[32];
    hs_block_q4_0 b = {0};
    assert_int_equal(hs_dequantize_row(HS_TYPE_Q4_0, &b, y, 31), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_dequantize_row((hs_type)7, &b, y, 32), HS_ERR_UNSUPPORTED_TYPE);
    assert_int_equal(hs_quantize_row(HS_TYPE_Q4_K, y, &b, 256), HS_ERR_UNSUPPORTED_TYPE);
}

/* Quantize -> dequantize stays within half a quantization step, and a block
 * whose max is 127 quantizes to q = round(x) with d = 1 (q8_0). */
static void test_quantize(void **state) {
    (void)state;
    float x[64], y[64];
    uint8_t buf[256];
    for (int i = 0; i < 32; i++) x[i] = (float)(i * 8 - 127) + 0.25f * (i % 3 == 0);
    x[31] = 127.0f;
    HS_CHECK(hs_quantize_row(HS_TYPE_Q8_0, x, buf, 32));
    const hs_block_q8_0 *q8 = (const hs_block_q8_0 *)buf;
    assert_int_equal(q8->d, 0x3C00);
    for (int i = 0; i < 32; i++) assert_int_equal(q8->qs[i], (int)roundf(x[i]));

    hs_rng r;
    hs_rng_seed(&r, 5);
    hs_rng_fill(&r, x, 64, -3.0f, 2.0f);
    const hs_type ts[3] = {HS_TYPE_Q8_0, HS_TYPE_Q4_0, HS_TYPE_Q4_1};
    for (int t = 0; t < 3; t++) {
        HS_CHECK(hs_quantize_row(ts[t], x, buf, 64));
        HS_CHECK(hs_dequantize_row(ts[t], buf, y, 64));
        for (int blk = 0; blk < 2; blk++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < 32; i++) {
                lo = fminf(lo, x[32 * blk + i]);
                hi = fmaxf(hi, x[32 * blk + i]);
            }
            const float range = fmaxf(fabsf(lo), fabsf(hi));
            const float step = ts[t] == HS_TYPE_Q8_0 ? range / 127 : ts[t] == HS_TYPE_Q4_0 ? range / 8 : (hi - lo) / 15;
            for (int i = 0; i < 32; i++)
                assert_true(fabsf(y[32 * blk + i] - x[32 * blk + i]) <= 0.5f * step * 1.01f + 1e-3f);
        }
    }
}

/* ---- device products ---- */

/* One weight and its reference data. */
typedef struct tw {
    hs_type t;
    uint32_t rows, cols;
    void *gguf;
    float *w; /* dequantized [rows][cols] */
    hs_weight *dev;
} tw;

static tw tw_make(hs_test_env *env, hs_rng *r, hs_type t, uint32_t rows, uint32_t cols) {
    tw w = {t, rows, cols, NULL, NULL, NULL};
    w.gguf = ref_random_weight(r, t, rows, cols);
    assert_non_null(w.gguf);
    w.w = ref_dequantize(t, w.gguf, rows, cols);
    assert_non_null(w.w);
    HS_CHECK(hs_weight_create(env->ops, t, rows, cols, w.gguf, &w.dev));
    assert_int_equal(hs_weight_rows(w.dev), rows);
    assert_int_equal(hs_weight_cols(w.dev), cols);
    assert_int_equal(hs_weight_type(w.dev), t);
    assert_true(hs_weight_device_bytes(w.dev) >= hs_type_row_bytes(t, cols) * rows);
    return w;
}

static void tw_free(tw *w) {
    hs_weight_destroy(w->dev);
    free(w->gguf);
    free(w->w);
}

/* Runs the product for each n in ns (one sequence) and checks every result
 * against the double reference: NMSE below 1e-9 (f32 rounding gives ~1e-13;
 * one wrong weight or element gives far more). */
static void check_products(hs_test_env *env, hs_rng *r, const tw *w, const uint32_t *ns, int nn,
                           hs_matmul_prologue pro, bool residual, bool in_place) {
    const uint32_t stride = pro == HS_MATMUL_SWIGLU ? 2 * w->cols : w->cols;
    uint32_t nmax = 0;
    for (int i = 0; i < nn; i++) nmax = ns[i] > nmax ? ns[i] : nmax;
    float *x = hs_test_rand_array(r, (size_t)nmax * stride, -1.0f, 1.0f);
    float *g = hs_test_rand_array(r, w->cols, 0.5f, 1.5f);
    float *res = hs_test_rand_array(r, (size_t)nmax * w->rows, -1.0f, 1.0f);
    hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)nmax * stride * 4);
    hs_vk_buffer *bg = hs_test_buffer(env, g, w->cols * 4);
    hs_vk_buffer *by[8], *bres = hs_test_buffer(env, res, (size_t)nmax * w->rows * 4);
    assert_true(nn <= 8);
    hs_vk_seq *s = hs_test_seq_begin(env);
    for (int i = 0; i < nn; i++) {
        by[i] = hs_test_buffer(env, in_place ? res : NULL, (size_t)ns[i] * w->rows * 4);
        hs_matmul_opts o = {.prologue = pro, .norm = hs_test_bind(bg, 0), .eps = 1e-5f, .residual = residual,
                            .res = in_place ? hs_test_bind(by[i], 0) : hs_test_bind(bres, 0)};
        HS_CHECK(hs_op_matmul(env->ops, s, w->dev, hs_test_bind(bx, 0), ns[i], hs_test_bind(by[i], 0), &o));
    }
    hs_test_seq_run(s);
    for (int i = 0; i < nn; i++) {
        const size_t cnt = (size_t)ns[i] * w->rows;
        float *y = hs_test_download(by[i], cnt * 4);
        double *ref = malloc(cnt * sizeof *ref);
        ref_matmul(w->w, w->rows, w->cols, x, ns[i], pro, g, 1e-5f, residual ? res : NULL, ref);
        const double e = ref_nmse(y, ref, cnt);
        if (!(e < 1e-9))
            fail_msg("%s rows %u cols %u n %u prologue %d residual %d: nmse %g", hs_type_name(w->t), w->rows, w->cols,
                     ns[i], (int)pro, residual, e);
        free(y);
        free(ref);
        hs_vk_buffer_destroy(by[i]);
    }
    hs_vk_buffer_destroy(bx);
    hs_vk_buffer_destroy(bg);
    hs_vk_buffer_destroy(bres);
    free(x);
    free(g);
    free(res);
}

static void test_matmul_shapes(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 11);
    const uint32_t rows[] = {1, 7, 33, 257};
    const uint32_t cols[] = {32, 96, 256, 768, 2816}, kcols[] = {256, 512, 768};
    const uint32_t ns[] = {1, 3, 17};
    for (size_t t = 0; t < REF_N_WEIGHT_TYPES; t++) {
        const uint32_t *cl = ref_is_k_quant(ref_weight_types[t]) ? kcols : cols;
        const size_t ncl = ref_is_k_quant(ref_weight_types[t]) ? 3 : 5;
        for (size_t ri = 0; ri < 4; ri++)
            for (size_t ci = 0; ci < ncl; ci++) {
                tw w = tw_make(env, &r, ref_weight_types[t], rows[ri], cl[ci]);
                check_products(env, &r, &w, ns, 3, HS_MATMUL_PLAIN, false, false);
                tw_free(&w);
            }
    }
}

/* f32 and f16 rows of any length (stories260K's ffn_down has 172 columns),
 * including lengths that are not a multiple of 4 (scalar activation loads). */
static void test_matmul_odd_cols(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 12);
    const uint32_t cols[] = {1, 10, 33, 172};
    const uint32_t ns[] = {1, 6}; /* one column; two tiles of three */
    for (int t = 0; t < 2; t++)
        for (int ci = 0; ci < 4; ci++) {
            tw w = tw_make(env, &r, t ? HS_TYPE_F16 : HS_TYPE_F32, 9, cols[ci]);
            check_products(env, &r, &w, ns, 2, HS_MATMUL_PLAIN, false, false);
            check_products(env, &r, &w, ns, 2, HS_MATMUL_RMSNORM, true, false);
            check_products(env, &r, &w, ns, 2, HS_MATMUL_SWIGLU, false, false);
            tw_free(&w);
        }
}

/* Every prologue (none, RMSNorm, SwiGLU) with and without the residual epilogue, and in place (y = y + W x'),
 * for one column and for two tiles of four with a surplus column (n = 7). x' and the epilogue are the same code
 * for every weight type (matmul_x.glsl), so the whole matrix runs for f32 (four weights per load), q4_1 (the
 * models' type) and q6_K (a K-quant: eight sub-blocks per block); the other types run the two combinations the
 * models use with a residual (RMSNorm in place, SwiGLU) and test_matmul_shapes their plain products. Each
 * combination is a pipeline of its own, which lavapipe compiles cold in several CI passes. */
static void test_matmul_prologues(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 13);
    const uint32_t ns[] = {1, 7};
    for (size_t t = 0; t < REF_N_WEIGHT_TYPES; t++) {
        const hs_type type = ref_weight_types[t];
        const bool full = type == HS_TYPE_F32 || type == HS_TYPE_Q4_1 || type == HS_TYPE_Q6_K;
        const uint32_t shapes[2][2] = {{33, ref_is_k_quant(type) ? 512u : 768u},
                                       {257, ref_is_k_quant(type) ? 256u : 96u}};
        for (int si = 0; si < 2; si++) {
            tw w = tw_make(env, &r, type, shapes[si][0], shapes[si][1]);
            for (int pro = 0; pro < 3 && full; pro++) {
                check_products(env, &r, &w, ns, 2, (hs_matmul_prologue)pro, false, false);
                check_products(env, &r, &w, ns, 2, (hs_matmul_prologue)pro, true, false);
            }
            if (!full) check_products(env, &r, &w, ns, 2, HS_MATMUL_SWIGLU, true, false);
            check_products(env, &r, &w, ns, 2, HS_MATMUL_RMSNORM, true, true); /* y = y + W x' */
            tw_free(&w);
        }
    }
}

/* Bindings at offsets that are multiples of 4 but not of 16 bytes: the
 * activations are then read as scalars; the results must not change at all. */
static void test_matmul_offsets(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 14);
    for (size_t t = 0; t < REF_N_WEIGHT_TYPES; t++) {
        const uint32_t rows = 19, cols = ref_is_k_quant(ref_weight_types[t]) ? 256 : 64, n = 3;
        tw w = tw_make(env, &r, ref_weight_types[t], rows, cols);
        for (int pro = 0; pro < 3; pro++) {
            const uint32_t stride = pro == HS_MATMUL_SWIGLU ? 2 * cols : cols;
            float *x = hs_test_rand_array(&r, (size_t)n * stride + 1, -1, 1), *g = hs_test_rand_array(&r, cols + 3, 0.5f, 1.5f);
            float *res = hs_test_rand_array(&r, (size_t)n * rows + 2, -1, 1);
            hs_vk_buffer *bx = hs_test_buffer(env, x, ((size_t)n * stride + 1) * 4);
            hs_vk_buffer *bg = hs_test_buffer(env, g, (cols + 3) * 4);
            hs_vk_buffer *bres = hs_test_buffer(env, res, ((size_t)n * rows + 2) * 4);
            hs_vk_buffer *ya = hs_test_buffer(env, NULL, (size_t)n * rows * 4);
            hs_vk_buffer *yb = hs_test_buffer(env, NULL, ((size_t)n * rows + 3) * 4);
            hs_vk_buffer *xa = hs_test_buffer(env, x + 1, (size_t)n * stride * 4);
            hs_vk_buffer *ga = hs_test_buffer(env, g + 3, cols * 4);
            hs_vk_buffer *ra = hs_test_buffer(env, res + 2, (size_t)n * rows * 4);
            hs_vk_seq *s = hs_test_seq_begin(env);
            hs_matmul_opts oa = {.prologue = pro, .norm = hs_test_bind(ga, 0), .eps = 1e-6f, .residual = true, .res = hs_test_bind(ra, 0)};
            hs_matmul_opts ob = {.prologue = pro, .norm = hs_test_bind(bg, 12), .eps = 1e-6f, .residual = true,
                                 .res = hs_test_bind(bres, 8)};
            HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(xa, 0), n, hs_test_bind(ya, 0), &oa));
            HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(bx, 4), n, hs_test_bind(yb, 12), &ob));
            hs_test_seq_run(s);
            float *a = hs_test_download(ya, (size_t)n * rows * 4), *b = hs_test_download(yb, ((size_t)n * rows + 3) * 4);
            assert_memory_equal(a, b + 3, (size_t)n * rows * 4);
            double *ref = malloc((size_t)n * rows * sizeof *ref);
            ref_matmul(w.w, rows, cols, x + 1, n, (hs_matmul_prologue)pro, g + 3, 1e-6f, res + 2, ref);
            assert_true(ref_nmse(a, ref, (size_t)n * rows) < 1e-9);
            free(ref);
            free(a);
            free(b);
            hs_vk_buffer *bufs[] = {bx, bg, bres, ya, yb, xa, ga, ra};
            for (int i = 0; i < 8; i++) hs_vk_buffer_destroy(bufs[i]);
            free(x);
            free(g);
            free(res);
        }
        tw_free(&w);
    }
}

/* A stacked weight gives bitwise the outputs of its parts, one after the other. */
static void test_matmul_stacked(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 15);
    const uint32_t parts[3] = {5, 40, 9}, cols = 256, n = 3;
    for (size_t t = 0; t < REF_N_WEIGHT_TYPES; t++) {
        tw w[3];
        for (int i = 0; i < 3; i++)
            w[i] = tw_make(env, &r, ref_weight_types[t], parts[i], cols);
        const void *data[3] = {w[0].gguf, w[1].gguf, w[2].gguf};
        hs_weight *st = NULL;
        HS_CHECK(hs_weight_create_stacked(env->ops, ref_weight_types[t], cols, 3, parts, data, &st));
        assert_int_equal(hs_weight_rows(st), 54);
        float *x = hs_test_rand_array(&r, (size_t)n * cols, -1, 1);
        hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)n * cols * 4), *ys = hs_test_buffer(env, NULL, n * 54 * 4);
        hs_vk_buffer *yp[3];
        hs_vk_seq *s = hs_test_seq_begin(env);
        HS_CHECK(hs_op_matmul(env->ops, s, st, hs_test_bind(bx, 0), n, hs_test_bind(ys, 0), NULL));
        for (int i = 0; i < 3; i++) {
            yp[i] = hs_test_buffer(env, NULL, n * parts[i] * 4);
            HS_CHECK(hs_op_matmul(env->ops, s, w[i].dev, hs_test_bind(bx, 0), n, hs_test_bind(yp[i], 0), NULL));
        }
        hs_test_seq_run(s);
        float *a = hs_test_download(ys, n * 54 * 4);
        for (uint32_t j = 0, off = 0; j < 3; off += parts[j], j++) {
            float *b = hs_test_download(yp[j], n * parts[j] * 4);
            for (uint32_t c = 0; c < n; c++) assert_memory_equal(a + c * 54 + off, b + c * parts[j], parts[j] * 4);
            free(b);
            hs_vk_buffer_destroy(yp[j]);
        }
        free(a);
        free(x);
        hs_vk_buffer_destroy(bx);
        hs_vk_buffer_destroy(ys);
        hs_weight_destroy(st);
        for (int i = 0; i < 3; i++) tw_free(&w[i]);
    }
}

/* ---- batch invariance ---- */

static const uint32_t k_batch_ns[] = {1, 2, 3, 4, 5, 8, 16, 17, 33, 64};
#define N_BATCH (sizeof k_batch_ns / sizeof k_batch_ns[0])

/* Column j of every batch size must equal the product of column j alone. The
 * columns alone run with the prologue fused into the product; the batches get
 * a scratch buffer, so those of the tuning's split_n columns or more compute
 * x' in a pass of their own (matmul_pro) and must still agree bit for bit. */
static void check_invariance(hs_test_env *env, hs_rng *r, const tw *w, hs_matmul_prologue pro, bool residual,
                             bool q8) {
    const uint32_t nmax = 64, stride = pro == HS_MATMUL_SWIGLU ? 2 * w->cols : w->cols;
    float *x = hs_test_rand_array(r, (size_t)nmax * stride, -2.0f, 2.0f);
    float *g = hs_test_rand_array(r, w->cols, 0.5f, 1.5f);
    float *res = hs_test_rand_array(r, (size_t)nmax * w->rows, -1.0f, 1.0f);
    hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)nmax * stride * 4);
    hs_vk_buffer *bg = hs_test_buffer(env, g, w->cols * 4);
    hs_vk_buffer *bres = hs_test_buffer(env, res, (size_t)nmax * w->rows * 4);
    hs_vk_buffer *y1 = hs_test_buffer(env, NULL, (size_t)nmax * w->rows * 4);
    hs_vk_buffer *yn = hs_test_buffer(env, NULL, (size_t)N_BATCH * nmax * w->rows * 4);
    hs_vk_buffer *xs = hs_test_buffer(env, NULL, (size_t)nmax * w->cols * 4);
    hs_vk_seq *s = hs_test_seq_begin(env);
    for (uint32_t j = 0; j < nmax; j++) {
        /* 8-bit activations always take a pass of their own: a scratch slot per column */
        hs_matmul_opts o = {.prologue = pro,
                            .norm = hs_test_bind(bg, 0),
                            .eps = 1e-5f,
                            .residual = residual,
                            .res = hs_test_bind(bres, (uint64_t)j * w->rows * 4),
                            .scratch = q8 ? hs_test_bind(xs, (uint64_t)j * w->cols * 4) : (hs_vk_binding){0},
                            .act_q8 = q8};
        HS_CHECK(hs_op_matmul(env->ops, s, w->dev, hs_test_bind(bx, (uint64_t)j * stride * 4), 1,
                              hs_test_bind(y1, (uint64_t)j * w->rows * 4), &o));
    }
    for (size_t i = 0; i < N_BATCH; i++) {
        hs_matmul_opts o = {.prologue = pro,
                            .norm = hs_test_bind(bg, 0),
                            .eps = 1e-5f,
                            .residual = residual,
                            .res = hs_test_bind(bres, 0),
                            .scratch = hs_test_bind(xs, 0),
                            .act_q8 = q8};
        /* NaN in the scratch first: x' must be written whole, not found there from the batch before. */
        HS_CHECK(hs_vk_seq_fill(s, xs, 0, (uint64_t)nmax * w->cols * 4, 0x7fc00000u));
        HS_CHECK(hs_op_matmul(env->ops, s, w->dev, hs_test_bind(bx, 0), k_batch_ns[i],
                              hs_test_bind(yn, (uint64_t)i * nmax * w->rows * 4), &o));
    }
    hs_test_seq_run(s);
    float *a = hs_test_download(y1, (size_t)nmax * w->rows * 4);
    float *b = hs_test_download(yn, (size_t)N_BATCH * nmax * w->rows * 4);
    for (size_t i = 0; i < N_BATCH; i++)
        for (uint32_t j = 0; j < k_batch_ns[i]; j++)
            if (memcmp(a + (size_t)j * w->rows, b + ((size_t)i * nmax + j) * w->rows, w->rows * 4))
                fail_msg("%s%s prologue %d residual %d: column %u of n = %u differs from n = 1",
                         hs_type_name(w->t), q8 ? " x8" : "", (int)pro, residual, j, k_batch_ns[i]);
    double *ref = malloc((size_t)nmax * w->rows * sizeof *ref);
    (q8 ? ref_matmul_q8 : ref_matmul)(w->w, w->rows, w->cols, x, nmax, pro, g, 1e-5f, residual ? res : NULL,
                                      ref);
    assert_true(ref_nmse(a, ref, (size_t)nmax * w->rows) < (q8 ? 1e-6 : 1e-9));
    free(ref);
    free(a);
    free(b);
    hs_vk_buffer *bufs[] = {bx, bg, bres, y1, yn, xs};
    for (int i = 0; i < 6; i++)
        hs_vk_buffer_destroy(bufs[i]);
    free(x);
    free(g);
    free(res);
}

static void test_batch_invariance(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 16);
    for (size_t t = 0; t < REF_N_WEIGHT_TYPES; t++) {
        tw w = tw_make(env, &r, ref_weight_types[t], 37, ref_is_k_quant(ref_weight_types[t]) ? 512 : 160);
        check_invariance(env, &r, &w, HS_MATMUL_PLAIN, false, false);
        check_invariance(env, &r, &w, HS_MATMUL_RMSNORM, false, false);
        check_invariance(env, &r, &w, HS_MATMUL_SWIGLU, false, false);
        check_invariance(env, &r, &w, HS_MATMUL_PLAIN, true, false);
        check_invariance(env, &r, &w, HS_MATMUL_RMSNORM, true, false);
        if (ref_weight_types[t] == HS_TYPE_Q4_1) {
            check_invariance(env, &r, &w, HS_MATMUL_PLAIN, true, true);
            check_invariance(env, &r, &w, HS_MATMUL_RMSNORM, false, true);
            check_invariance(env, &r, &w, HS_MATMUL_SWIGLU, true, true);
        }
        tw_free(&w);
    }
    /* 8-bit activations of rows so long that fewer columns than the tuning's x8cols fit one uniform window
     * (4096: 10 KiB per column; 8192: 20 KiB, fewer than cols): the tiles narrow to what fits, or to cols. */
    const uint32_t wide[] = {4096, 8192};
    for (int i = 0; i < 2; i++) {
        tw w = tw_make(env, &r, HS_TYPE_Q4_1, 37, wide[i]);
        check_invariance(env, &r, &w, HS_MATMUL_PLAIN, false, true);
        tw_free(&w);
    }
}

/* The tile width of a batch: n spread evenly over the fewest tiles of at most
 * cmax, and cmax itself for spreads wider than 8 (worked out by hand). */
static void test_tile_cols(void **state) {
    (void)state;
    static const uint32_t c4[][2] = {{0, 1}, {1, 1}, {3, 3}, {4, 4}, {5, 3}, {7, 4}, {8, 4}, {9, 3}, {17, 4}};
    for (size_t i = 0; i < sizeof c4 / sizeof c4[0]; i++) assert_int_equal(hs_matmul_tile_cols(c4[i][0], 4), c4[i][1]);
    static const uint32_t c16[][2] = {{1, 1}, {5, 5}, {8, 8}, {9, 16}, {16, 16}, {17, 16}, {37, 16}, {512, 16}};
    for (size_t i = 0; i < sizeof c16 / sizeof c16[0]; i++)
        assert_int_equal(hs_matmul_tile_cols(c16[i][0], 16), c16[i][1]);
    static const uint32_t c9[][2] = {{7, 7}, {9, 9}, {10, 5}, {13, 7}, {19, 7}, {26, 9}};
    for (size_t i = 0; i < sizeof c9 / sizeof c9[0]; i++) assert_int_equal(hs_matmul_tile_cols(c9[i][0], 9), c9[i][1]);
    assert_int_equal(hs_matmul_tile_cols(3, 0), 1);
}

/* ---- argument checks ---- */

static void test_matmul_args(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 17);
    hs_weight *w = NULL;
    uint8_t data[18 * 4] = {0};
    const uint32_t one = 1;
    const void *dp = data;
    assert_int_equal(hs_weight_create(env->ops, HS_TYPE_Q4_0, 1, 48, data, &w), HS_ERR_INVALID_ARG);
    assert_null(w);
    assert_int_equal(hs_weight_create(env->ops, (hs_type)7, 1, 32, data, &w), HS_ERR_UNSUPPORTED_TYPE);
    assert_int_equal(hs_weight_create(env->ops, HS_TYPE_Q4_0, 0, 32, data, &w), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_weight_create(env->ops, HS_TYPE_Q4_0, 1, 32, NULL, &w), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_weight_create_stacked(env->ops, HS_TYPE_Q4_0, 32, 0, &one, &dp, &w), HS_ERR_INVALID_ARG);
    hs_weight_destroy(NULL);

    tw t = tw_make(env, &r, HS_TYPE_Q4_0, 4, 64);
    hs_vk_buffer *x = hs_test_buffer(env, NULL, 2 * 64 * 4), *y = hs_test_buffer(env, NULL, 2 * 4 * 4);
    hs_vk_seq *s = hs_test_seq_begin(env);
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 0, hs_test_bind(y, 0), NULL), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 3, hs_test_bind(y, 0), NULL), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 2), 1, hs_test_bind(y, 0), NULL), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 1, hs_test_bind(x, 128), NULL), HS_ERR_INVALID_ARG);
    hs_matmul_opts o = {.prologue = HS_MATMUL_SWIGLU};
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 2, hs_test_bind(y, 0), &o), HS_ERR_OUT_OF_RANGE);
    o = (hs_matmul_opts){.prologue = HS_MATMUL_RMSNORM, .norm = hs_test_bind(y, 0)};
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &o), HS_ERR_OUT_OF_RANGE);
    o = (hs_matmul_opts){.residual = true, .res = hs_test_bind(y, 4)};
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &o), HS_ERR_INVALID_ARG);
    o = (hs_matmul_opts){.prologue = (hs_matmul_prologue)9};
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &o), HS_ERR_INVALID_ARG);
    o = (hs_matmul_opts){.y_stride = 3}; /* less than the 4 rows */
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &o), HS_ERR_INVALID_ARG);
    o = (hs_matmul_opts){.y_stride = 7}; /* 2 columns need 7 + 4 floats; y has 8 */
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 2, hs_test_bind(y, 0), &o), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_vk_seq_dispatch_count(s), 0);
    /* 8-bit activations: q4_1 needs a 16-byte aligned scratch; other types ignore act_q8 */
    tw t1 = tw_make(env, &r, HS_TYPE_Q4_1, 4, 64);
    hs_vk_buffer *xs = hs_test_buffer(env, NULL, 2 * 64 * 4);
    o = (hs_matmul_opts){.act_q8 = true};
    assert_int_equal(hs_op_matmul(env->ops, s, t1.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &o),
                     HS_ERR_INVALID_ARG);
    o.scratch = hs_test_bind(xs, 4);
    assert_int_equal(hs_op_matmul(env->ops, s, t1.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &o),
                     HS_ERR_INVALID_ARG);
    assert_int_equal(hs_vk_seq_dispatch_count(s), 0);
    assert_false(hs_matmul_act_q8(t.dev, &o));
    assert_true(hs_matmul_act_q8(t1.dev, &o));
    assert_false(hs_matmul_splits(
        env->ops, t1.dev, 64,
        &(hs_matmul_opts){.prologue = HS_MATMUL_RMSNORM, .scratch = hs_test_bind(xs, 0), .act_q8 = true}));
    /* x_q8 (x already 8-bit): only with act_q8 on a q4_1 weight, no SwiGLU prologue */
    hs_matmul_opts xq = {.act_q8 = true, .x_q8 = true, .prologue = HS_MATMUL_SWIGLU};
    assert_int_equal(hs_op_matmul(env->ops, s, t1.dev, hs_test_bind(xs, 0), 1, hs_test_bind(y, 0), &xq),
                     HS_ERR_INVALID_ARG);
    xq = (hs_matmul_opts){.x_q8 = true};
    assert_int_equal(hs_op_matmul(env->ops, s, t1.dev, hs_test_bind(xs, 0), 1, hs_test_bind(y, 0), &xq),
                     HS_ERR_INVALID_ARG);
    xq.act_q8 = true;
    assert_int_equal(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(xs, 0), 1, hs_test_bind(y, 0), &xq),
                     HS_ERR_INVALID_ARG);
    /* q8_out: needs q8_norm, rows in whole 32-row blocks, y_stride = rows, 16-byte alignment, no overlap */
    tw t32 = tw_make(env, &r, HS_TYPE_Q4_1, 32, 64);
    hs_vk_buffer *y32 = hs_test_buffer(env, NULL, 2 * 32 * 4), *xo = hs_test_buffer(env, NULL, 2 * 80 + 16);
    hs_matmul_opts qo = {.act_q8 = true, .scratch = hs_test_bind(xs, 0), .q8_out = hs_test_bind(xo, 0)};
    assert_int_equal(hs_op_matmul(env->ops, s, t32.dev, hs_test_bind(x, 0), 1, hs_test_bind(y32, 0), &qo),
                     HS_ERR_INVALID_ARG); /* no q8_norm */
    qo.q8_norm = hs_test_bind(x, 0);
    assert_int_equal(hs_op_matmul(env->ops, s, t1.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &qo),
                     HS_ERR_INVALID_ARG); /* 4 rows */
    qo.y_stride = 40;
    assert_int_equal(hs_op_matmul(env->ops, s, t32.dev, hs_test_bind(x, 0), 1, hs_test_bind(y32, 0), &qo),
                     HS_ERR_INVALID_ARG);
    qo.y_stride = 0;
    qo.q8_out = hs_test_bind(y32, 64);
    assert_int_equal(hs_op_matmul(env->ops, s, t32.dev, hs_test_bind(x, 0), 1, hs_test_bind(y32, 0), &qo),
                     HS_ERR_INVALID_ARG); /* overlaps y */
    qo.q8_out = hs_test_bind(xs, 128);
    assert_int_equal(hs_op_matmul(env->ops, s, t32.dev, hs_test_bind(x, 0), 1, hs_test_bind(y32, 0), &qo),
                     HS_ERR_INVALID_ARG); /* overlaps the scratch */
    qo.q8_out = hs_test_bind(xo, 4);
    assert_int_equal(hs_op_matmul(env->ops, s, t32.dev, hs_test_bind(x, 0), 1, hs_test_bind(y32, 0), &qo),
                     HS_ERR_INVALID_ARG); /* misaligned */
    assert_int_equal(
        hs_op_q8_norm(env->ops, s, hs_test_bind(x, 0), 1, 48, hs_test_bind(x, 0), hs_test_bind(xo, 0)),
        HS_ERR_INVALID_ARG); /* cols % 32 */
    assert_int_equal(
        hs_op_q8_norm(env->ops, s, hs_test_bind(x, 0), 0, 64, hs_test_bind(x, 0), hs_test_bind(xo, 0)),
        HS_ERR_INVALID_ARG);
    assert_int_equal(
        hs_op_q8_norm(env->ops, s, hs_test_bind(x, 0), 1, 64, hs_test_bind(x, 4), hs_test_bind(xo, 0)),
        HS_ERR_INVALID_ARG); /* misaligned gain */
    assert_int_equal(
        hs_op_q8_norm(env->ops, s, hs_test_bind(x, 0), 1, 64, hs_test_bind(x, 0), hs_test_bind(x, 128)),
        HS_ERR_INVALID_ARG); /* overlaps x */
    /* swiglu_q8: a [gate | up] weight of 2 x 32k rows, no residual, aligned, not overlapping */
    hs_matmul_opts so = {.act_q8 = true, .scratch = hs_test_bind(xs, 0), .swiglu_q8 = hs_test_bind(xo, 0)};
    assert_int_equal(hs_op_matmul(env->ops, s, t32.dev, hs_test_bind(x, 0), 1, hs_test_bind(y32, 0), &so),
                     HS_ERR_INVALID_ARG); /* 32 rows: not 2 x 32 */
    tw t64 = tw_make(env, &r, HS_TYPE_Q4_1, 64, 64);
    hs_vk_buffer *y64 = hs_test_buffer(env, NULL, 2 * 64 * 4);
    so.residual = true;
    so.res = hs_test_bind(y64, 0);
    assert_int_equal(hs_op_matmul(env->ops, s, t64.dev, hs_test_bind(x, 0), 1, hs_test_bind(y64, 0), &so),
                     HS_ERR_INVALID_ARG); /* residual */
    so.residual = false;
    so.swiglu_q8 = hs_test_bind(xo, 4);
    assert_int_equal(hs_op_matmul(env->ops, s, t64.dev, hs_test_bind(x, 0), 1, hs_test_bind(y64, 0), &so),
                     HS_ERR_INVALID_ARG); /* misaligned */
    so.swiglu_q8 = hs_test_bind(y64, 128);
    assert_int_equal(hs_op_matmul(env->ops, s, t64.dev, hs_test_bind(x, 0), 1, hs_test_bind(y64, 0), &so),
                     HS_ERR_INVALID_ARG); /* overlaps y */
    assert_int_equal(hs_vk_seq_dispatch_count(s), 0);
    HS_CHECK(hs_op_matmul(env->ops, s, t.dev, hs_test_bind(x, 0), 1, hs_test_bind(y, 0), &o));
    hs_test_seq_run(s);
    hs_vk_buffer_destroy(x);
    hs_vk_buffer_destroy(y);
    hs_vk_buffer_destroy(xs);
    hs_vk_buffer_destroy(y32);
    hs_vk_buffer_destroy(y64);
    hs_vk_buffer_destroy(xo);
    tw_free(&t64);
    tw_free(&t);
    tw_free(&t1);
    tw_free(&t32);
}

/* ---- 8-bit activations (act_q8, q4_1) ---- */

/* Products on 8-bit activations against the double reference of the same
 * rounding (ref_matmul_q8): NMSE below 1e-6 (device f32 rounding gives
 * ~1e-13; a tie rounded the other way ~1e-7 per element; a wrong pairing of
 * weights and activations ~1), and above 1e-6 against the unrounded reference
 * (8-bit rounding gives ~1e-5): the integers were used. */
static void check_q8(hs_test_env *env, hs_rng *r, const tw *w, uint32_t n, hs_matmul_prologue pro,
                     bool residual) {
    const uint32_t stride = pro == HS_MATMUL_SWIGLU ? 2 * w->cols : w->cols;
    float *x = hs_test_rand_array(r, (size_t)n * stride, -1.0f, 1.0f);
    float *g = hs_test_rand_array(r, w->cols, 0.5f, 1.5f);
    float *res = hs_test_rand_array(r, (size_t)n * w->rows, -1.0f, 1.0f);
    hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)n * stride * 4),
                 *bg = hs_test_buffer(env, g, w->cols * 4);
    hs_vk_buffer *by = hs_test_buffer(env, res, (size_t)n * w->rows * 4);
    hs_vk_buffer *xs = hs_test_buffer(env, NULL, (size_t)n * w->cols * 4);
    hs_vk_seq *s = hs_test_seq_begin(env);
    hs_matmul_opts o = {.prologue = pro,
                        .norm = hs_test_bind(bg, 0),
                        .eps = 1e-5f,
                        .residual = residual,
                        .res = hs_test_bind(by, 0),
                        .scratch = hs_test_bind(xs, 0),
                        .act_q8 = true};
    HS_CHECK(hs_op_matmul(env->ops, s, w->dev, hs_test_bind(bx, 0), n, hs_test_bind(by, 0), &o));
    hs_test_seq_run(s);
    const size_t cnt = (size_t)n * w->rows;
    float *y = hs_test_download(by, cnt * 4);
    double *ref = malloc(cnt * sizeof *ref), *exact = malloc(cnt * sizeof *exact);
    ref_matmul_q8(w->w, w->rows, w->cols, x, n, pro, g, 1e-5f, residual ? res : NULL, ref);
    ref_matmul(w->w, w->rows, w->cols, x, n, pro, g, 1e-5f, residual ? res : NULL, exact);
    const double e = ref_nmse(y, ref, cnt), e0 = ref_nmse(y, exact, cnt);
    if (!(e < 1e-6) || !(e0 > 1e-6))
        fail_msg("q4_1 x8 rows %u cols %u n %u prologue %d residual %d: nmse %g (8-bit reference), %g (f32)",
                 w->rows, w->cols, n, (int)pro, residual, e, e0);
    free(y);
    free(ref);
    free(exact);
    hs_vk_buffer_destroy(bx);
    hs_vk_buffer_destroy(bg);
    hs_vk_buffer_destroy(by);
    hs_vk_buffer_destroy(xs);
    free(x);
    free(g);
    free(res);
}

static void test_matmul_q8(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 21);
    const uint32_t rows[] = {1, 37, 257}, cols[] = {32, 96, 160}, ns[] = {1, 3, 8};
    for (int i = 0; i < 3; i++) {
        tw w = tw_make(env, &r, HS_TYPE_Q4_1, rows[i], cols[i]);
        for (int k = 0; k < 3; k++) {
            check_q8(env, &r, &w, ns[k], HS_MATMUL_PLAIN, k == 1);
            check_q8(env, &r, &w, ns[k], HS_MATMUL_RMSNORM, k == 2);
            check_q8(env, &r, &w, ns[k], HS_MATMUL_SWIGLU, k == 0);
        }
        tw_free(&w);
    }
}

/* ---- RMSNorm deferred into the product (x8n) ---- */

/* A residual product P (q4_1, pr x pc, 8-bit activations) writing x8n of its
 * output h with gain g (q8_out), an RMSNorm product Q (q4_1, qr x pr, [gate |
 * up] of qr / 2 rows each) reading it (x_q8 with HS_MATMUL_RMSNORM), and D
 * (q4_1, 40 x qr / 2) on SwiGLU of Q's output: a layer's wo -> gate/up -> down. */
#define Q8N_DR 40
typedef struct q8n_case {
    uint32_t pr, pc, qr, n;
    void *pgguf, *qgguf, *dgguf;
    float *pw, *qw; /* dequantized */
    float *x, *h0, *g;
} q8n_case;

typedef struct q8n_out {
    float *h, *y, *da, *db;
    uint8_t *xo, *xp; /* x8n of h from P's epilogue, and from hs_op_q8_norm(h) */
    uint8_t *xa, *xb; /* x8 of silu(gate) * up from Q (swiglu_q8), and from D's SwiGLU pass on y */
    uint32_t chunks;  /* row chunks of P and Q, the larger */
} q8n_out;

static q8n_case q8n_make(uint64_t seed, uint32_t pr, uint32_t pc, uint32_t qr, uint32_t n) {
    hs_rng r;
    hs_rng_seed(&r, seed);
    q8n_case c = {.pr = pr, .pc = pc, .qr = qr, .n = n};
    c.pgguf = ref_random_weight(&r, HS_TYPE_Q4_1, pr, pc);
    c.qgguf = ref_random_weight(&r, HS_TYPE_Q4_1, qr, pr);
    c.dgguf = ref_random_weight(&r, HS_TYPE_Q4_1, Q8N_DR, qr / 2);
    assert_true(c.pgguf && c.qgguf && c.dgguf);
    c.pw = ref_dequantize(HS_TYPE_Q4_1, c.pgguf, pr, pc);
    c.qw = ref_dequantize(HS_TYPE_Q4_1, c.qgguf, qr, pr);
    c.x = hs_test_rand_array(&r, (size_t)n * pc, -1.0f, 1.0f);
    c.h0 = hs_test_rand_array(&r, (size_t)n * pr, -2.0f, 2.0f);
    c.g = hs_test_rand_array(&r, pr, 0.5f, 1.5f);
    return c;
}

static void q8n_free_case(q8n_case *c) {
    void *p[] = {c->pgguf, c->qgguf, c->dgguf, c->pw, c->qw, c->x, c->h0, c->g};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

static void q8n_free_out(q8n_out *o) {
    void *p[] = {o->h, o->y, o->da, o->db, o->xo, o->xp, o->xa, o->xb};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

/* The chain on ops for columns j0 .. j0 + n - 1 of the case, as one batch. */
static q8n_out q8n_run(hs_test_env *env, hs_ops *ops, const q8n_case *c, uint32_t j0, uint32_t n) {
    hs_weight *P = NULL, *Q = NULL, *D = NULL;
    const uint32_t ff = c->qr / 2;
    HS_CHECK(hs_weight_create(ops, HS_TYPE_Q4_1, c->pr, c->pc, c->pgguf, &P));
    HS_CHECK(hs_weight_create(ops, HS_TYPE_Q4_1, c->qr, c->pr, c->qgguf, &Q));
    HS_CHECK(hs_weight_create(ops, HS_TYPE_Q4_1, Q8N_DR, ff, c->dgguf, &D));
    const size_t xn_bytes = (size_t)n * (c->pr / 32) * 80, xf_bytes = (size_t)n * (ff / 32) * 80;
    hs_vk_buffer *bx = hs_test_buffer(env, c->x + (size_t)j0 * c->pc, (size_t)n * c->pc * 4);
    hs_vk_buffer *bh = hs_test_buffer(env, c->h0 + (size_t)j0 * c->pr, (size_t)n * c->pr * 4);
    hs_vk_buffer *bg = hs_test_buffer(env, c->g, c->pr * 4),
                 *xs = hs_test_buffer(env, NULL, (size_t)n * c->pc * 4);
    hs_vk_buffer *xo = hs_test_buffer(env, NULL, xn_bytes), *xp = hs_test_buffer(env, NULL, xn_bytes);
    hs_vk_buffer *by = hs_test_buffer(env, NULL, (size_t)n * c->qr * 4),
                 *by2 = hs_test_buffer(env, NULL, (size_t)n * c->qr * 4);
    hs_vk_buffer *xa = hs_test_buffer(env, NULL, xf_bytes),
                 *xb = hs_test_buffer(env, NULL, (size_t)n * ff * 4);
    hs_vk_buffer *da = hs_test_buffer(env, NULL, (size_t)n * Q8N_DR * 4),
                 *db = hs_test_buffer(env, NULL, (size_t)n * Q8N_DR * 4);
    hs_vk_seq *s = hs_test_seq_begin(env);
    /* NaN first: x8n and x8 must be written whole */
    HS_CHECK(hs_vk_seq_fill(s, xo, 0, xn_bytes, 0x7fc00000u));
    HS_CHECK(hs_vk_seq_fill(s, xa, 0, xf_bytes, 0x7fc00000u));
    const hs_matmul_opts po = {.residual = true,
                               .res = hs_test_bind(bh, 0),
                               .scratch = hs_test_bind(xs, 0),
                               .act_q8 = true,
                               .q8_out = hs_test_bind(xo, 0),
                               .q8_norm = hs_test_bind(bg, 0)};
    HS_CHECK(hs_op_matmul(ops, s, P, hs_test_bind(bx, 0), n, hs_test_bind(bh, 0), &po));
    HS_CHECK(hs_op_q8_norm(ops, s, hs_test_bind(bh, 0), n, c->pr, hs_test_bind(bg, 0), hs_test_bind(xp, 0)));
    const hs_matmul_opts qo = {.prologue = HS_MATMUL_RMSNORM, .eps = 1e-5f, .act_q8 = true, .x_q8 = true};
    HS_CHECK(hs_op_matmul(ops, s, Q, hs_test_bind(xo, 0), n, hs_test_bind(by, 0), &qo));
    /* Q again, writing SwiGLU's 8-bit form instead of y; D on it, and D with its own SwiGLU pass on y */
    hs_matmul_opts qs = qo;
    qs.swiglu_q8 = hs_test_bind(xa, 0);
    HS_CHECK(hs_op_matmul(ops, s, Q, hs_test_bind(xo, 0), n, hs_test_bind(by2, 0), &qs));
    const hs_matmul_opts dox = {.act_q8 = true, .x_q8 = true};
    HS_CHECK(hs_op_matmul(ops, s, D, hs_test_bind(xa, 0), n, hs_test_bind(da, 0), &dox));
    const hs_matmul_opts dop = {.prologue = HS_MATMUL_SWIGLU, .act_q8 = true, .scratch = hs_test_bind(xb, 0)};
    HS_CHECK(hs_op_matmul(ops, s, D, hs_test_bind(by, 0), n, hs_test_bind(db, 0), &dop));
    hs_test_seq_run(s);
    q8n_out o = {.h = hs_test_download(bh, (size_t)n * c->pr * 4),
                 .y = hs_test_download(by, (size_t)n * c->qr * 4),
                 .xo = hs_test_download(xo, xn_bytes),
                 .xp = hs_test_download(xp, xn_bytes),
                 .xa = hs_test_download(xa, xf_bytes),
                 .xb = hs_test_download(xb, xf_bytes),
                 .da = hs_test_download(da, (size_t)n * Q8N_DR * 4),
                 .db = hs_test_download(db, (size_t)n * Q8N_DR * 4),
                 .chunks =
                     hs_weight_chunks(P) > hs_weight_chunks(Q) ? hs_weight_chunks(P) : hs_weight_chunks(Q)};
    hs_vk_buffer *bufs[] = {bx, bh, bg, xs, xo, xp, by, by2, xa, xb, da, db};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        hs_vk_buffer_destroy(bufs[i]);
    hs_weight_destroy(P);
    hs_weight_destroy(Q);
    hs_weight_destroy(D);
    return o;
}

/* The two ways to each 8-bit input give the same bytes, and D the same result. */
static void q8n_check_pairs(const q8n_case *c, const q8n_out *o, uint32_t n) {
    if (memcmp(o->xo, o->xp, (size_t)n * (c->pr / 32) * 80))
        fail_msg("x8n %u x %u: the epilogue's bytes differ from hs_op_q8_norm's", c->pr, c->pc);
    if (memcmp(o->xa, o->xb, (size_t)n * (c->qr / 64) * 80) || memcmp(o->da, o->db, (size_t)n * Q8N_DR * 4))
        fail_msg("swiglu_q8 %u x %u: differs from the SwiGLU pass on y", c->qr, c->pr);
}

/* The epilogue's x8n equals hs_op_q8_norm's byte for byte; Q on it follows
 * the double reference of the same rounding (NMSE < 1e-6) and not the
 * unrounded RMSNorm product (> 1e-6: the integers and the deferred scale were
 * used); every column alone and in smaller batches gives bitwise the batch's
 * h, x8n and y. */
static void test_matmul_q8n(void **state) {
    hs_test_env *env = *state;
    static const uint32_t shapes[][3] = {{32, 64, 64}, {96, 160, 128}, {576, 64, 192}};
    for (int i = 0; i < 3; i++) {
        q8n_case c = q8n_make(40 + i, shapes[i][0], shapes[i][1], shapes[i][2], 8);
        q8n_out all = q8n_run(env, env->ops, &c, 0, c.n);
        const size_t blk = (size_t)(c.pr / 32) * 80, fblk = (size_t)(c.qr / 64) * 80;
        q8n_check_pairs(&c, &all, c.n);
        double *ref = malloc((size_t)c.n * c.qr * sizeof *ref),
               *exact = malloc((size_t)c.n * c.qr * sizeof *exact);
        double *href = malloc((size_t)c.n * c.pr * sizeof *href);
        ref_matmul_q8(c.pw, c.pr, c.pc, c.x, c.n, HS_MATMUL_PLAIN, NULL, 0, c.h0, href);
        assert_true(ref_nmse(all.h, href, (size_t)c.n * c.pr) < 1e-6);
        ref_matmul_q8n(c.qw, c.qr, c.pr, all.h, c.n, c.g, 1e-5f, ref);
        ref_matmul(c.qw, c.qr, c.pr, all.h, c.n, HS_MATMUL_RMSNORM, c.g, 1e-5f, NULL, exact);
        const double e = ref_nmse(all.y, ref, (size_t)c.n * c.qr),
                     e0 = ref_nmse(all.y, exact, (size_t)c.n * c.qr);
        if (!(e < 1e-6) || !(e0 > 1e-6))
            fail_msg("x8n %u x %u -> %u: nmse %g (8-bit reference), %g (f32)", c.pr, c.pc, c.qr, e, e0);
        static const uint32_t parts[][2] = {{0, 1}, {1, 1}, {2, 3}, {5, 1}, {7, 1}, {4, 4}};
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            const uint32_t j0 = parts[k][0], n = parts[k][1];
            q8n_out some = q8n_run(env, env->ops, &c, j0, n);
            if (memcmp(some.h, all.h + (size_t)j0 * c.pr, (size_t)n * c.pr * 4) ||
                memcmp(some.xo, all.xo + j0 * blk, n * blk) ||
                memcmp(some.y, all.y + (size_t)j0 * c.qr, (size_t)n * c.qr * 4) ||
                memcmp(some.xa, all.xa + j0 * fblk, n * fblk) ||
                memcmp(some.da, all.da + (size_t)j0 * Q8N_DR, (size_t)n * Q8N_DR * 4))
                fail_msg("x8n %u x %u -> %u: columns %u..%u alone differ from the batch of %u", c.pr, c.pc,
                         c.qr, j0, j0 + n - 1, c.n);
            q8n_free_out(&some);
        }
        free(ref);
        free(exact);
        free(href);
        q8n_free_out(&all);
        q8n_free_case(&c);
    }
}

/* ---- split weights (second group: maxStorageBufferRange = 64 KiB) ---- */

/* Results of the split group's shapes computed in the first group, with the
 * same seeds: the split weights must reproduce them bitwise. */
#define N_SPLIT 6
static const struct {
    hs_type t;
    uint32_t rows, cols;
    bool q8; /* on 8-bit activations */
} k_split[N_SPLIT] = {{HS_TYPE_Q4_0, 1000, 256, false},
                      {HS_TYPE_F32, 300, 128, false}, /* 64 rows of 128 fit the range: groups of 16 lanes x 4 rows */
                      {HS_TYPE_Q6_K, 600, 512, false},
                      {HS_TYPE_Q8_0, 700, 192, false},
                      /* 5 columns of 4096 outputs (80 KiB) pass the range: the batch is split too */
                      {HS_TYPE_Q8_0, 4096, 64, false},
                      {HS_TYPE_Q4_1, 1000, 256, true}};
static float *g_split_ref[N_SPLIT];
#define SPLIT_N 5
/* The x8n chain at sizes whose weights split under 64 KiB (80 KiB and 96 KiB),
 * over 64 columns: Q's [gate | up] outputs (80 KiB) pass the range too, so
 * its batch is split before the SwiGLU pass that a split weight falls back to. */
#define Q8N_SPLIT_N 64
static q8n_out g_q8n_ref;
static q8n_out q8n_split_run(hs_test_env *env) {
    q8n_case c = q8n_make(60, 512, 256, 320, Q8N_SPLIT_N);
    q8n_out o = q8n_run(env, env->ops, &c, 0, c.n);
    q8n_check_pairs(&c, &o, c.n);
    q8n_free_case(&c);
    return o;
}
static void q8n_match_ref(const q8n_out *o) {
    if (!g_q8n_ref.y) fail_msg("the x8n reference did not run");
    assert_memory_equal(o->y, g_q8n_ref.y, (size_t)Q8N_SPLIT_N * 320 * 4);
    assert_memory_equal(o->xo, g_q8n_ref.xo, (size_t)Q8N_SPLIT_N * (512 / 32) * 80);
    assert_memory_equal(o->xa, g_q8n_ref.xa, (size_t)Q8N_SPLIT_N * (160 / 32) * 80);
    assert_memory_equal(o->da, g_q8n_ref.da, (size_t)Q8N_SPLIT_N * Q8N_DR * 4);
}

static float *split_products(hs_test_env *env, int i, uint32_t *chunks) {
    hs_rng r;
    hs_rng_seed(&r, 100 + i);
    tw w = tw_make(env, &r, k_split[i].t, k_split[i].rows, k_split[i].cols);
    *chunks = hs_weight_chunks(w.dev);
    const uint32_t rows = w.rows, cols = w.cols;
    float *x = hs_test_rand_array(&r, (size_t)SPLIT_N * cols, -1, 1), *g = hs_test_rand_array(&r, cols, 0.5f, 1.5f);
    hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)SPLIT_N * cols * 4), *bg = hs_test_buffer(env, g, cols * 4);
    /* columns 0..4 as a batch with RMSNorm + residual (in place), then column 2 alone */
    float *y0 = hs_test_rand_array(&r, (size_t)SPLIT_N * rows, -1, 1);
    hs_vk_buffer *by = hs_test_buffer(env, y0, (size_t)SPLIT_N * rows * 4), *b1 = hs_test_buffer(env, y0, rows * 4 * 3);
    hs_vk_buffer *xs = hs_test_buffer(env, NULL, (size_t)SPLIT_N * cols * 4);
    hs_vk_seq *s = hs_test_seq_begin(env);
    hs_matmul_opts o = {.prologue = HS_MATMUL_RMSNORM,
                        .norm = hs_test_bind(bg, 0),
                        .eps = 1e-5f,
                        .residual = true,
                        .res = hs_test_bind(by, 0),
                        .act_q8 = k_split[i].q8};
    if (k_split[i].q8) o.scratch = hs_test_bind(xs, 0);
    HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(bx, 0), SPLIT_N, hs_test_bind(by, 0), &o));
    o.res = hs_test_bind(b1, (uint64_t)rows * 4 * 2);
    HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(bx, (uint64_t)cols * 4 * 2), 1, hs_test_bind(b1, (uint64_t)rows * 4 * 2), &o));
    hs_test_seq_run(s);
    float *y = hs_test_download(by, (size_t)SPLIT_N * rows * 4), *y1 = hs_test_download(b1, rows * 4 * 3);
    assert_memory_equal(y + 2 * rows, y1 + 2 * rows, rows * 4);
    double *ref = malloc((size_t)SPLIT_N * rows * sizeof *ref);
    (k_split[i].q8 ? ref_matmul_q8 : ref_matmul)(w.w, rows, cols, x, SPLIT_N, HS_MATMUL_RMSNORM, g, 1e-5f, y0,
                                                 ref);
    assert_true(ref_nmse(y, ref, (size_t)SPLIT_N * rows) < (k_split[i].q8 ? 1e-6 : 1e-9));
    free(ref);
    hs_vk_buffer_destroy(xs);
    free(y1);
    free(x);
    free(g);
    free(y0);
    hs_vk_buffer_destroy(bx);
    hs_vk_buffer_destroy(bg);
    hs_vk_buffer_destroy(by);
    hs_vk_buffer_destroy(b1);
    tw_free(&w);
    return y;
}

static void test_split_reference(void **state) {
    hs_test_env *env = *state;
    for (int i = 0; i < N_SPLIT; i++) {
        uint32_t chunks;
        free(g_split_ref[i]);
        g_split_ref[i] = split_products(env, i, &chunks);
        assert_int_equal(chunks, 1);
    }
    q8n_free_out(&g_q8n_ref);
    g_q8n_ref = q8n_split_run(env);
    assert_int_equal(g_q8n_ref.chunks, 1);
}

static void test_split_weights(void **state) {
    hs_test_env *env = *state;
    assert_true(hs_ops_caps(env->ops)->max_storage_buffer_range <= 65536);
    for (int i = 0; i < N_SPLIT; i++) {
        uint32_t chunks;
        float *y = split_products(env, i, &chunks);
        assert_true(chunks > 1);
        if (!g_split_ref[i]) fail_msg("the unsplit reference did not run");
        assert_memory_equal(y, g_split_ref[i], (size_t)SPLIT_N * k_split[i].rows * 4);
        free(y);
    }
    q8n_out o = q8n_split_run(env);
    assert_true(o.chunks > 1);
    q8n_match_ref(&o);
    q8n_free_out(&o);
}

/* Third group, subgroup operations off: the portable kernels give bitwise the
 * results of the subgroup kernels of the first group. */
static int setup_portable(void **state) { return hs_test_setup_env(state, 0, "HS_VK_DISABLE_SUBGROUP_OPS", "1"); }

static void test_portable_matches(void **state) {
    hs_test_env *env = *state;
    assert_int_equal(hs_ops_subgroup(env->ops), 1);
    for (int i = 0; i < N_SPLIT; i++) {
        uint32_t chunks;
        float *y = split_products(env, i, &chunks);
        if (!g_split_ref[i]) fail_msg("the subgroup reference did not run");
        assert_memory_equal(y, g_split_ref[i], (size_t)SPLIT_N * k_split[i].rows * 4);
        free(y);
        free(g_split_ref[i]);
        g_split_ref[i] = NULL;
    }
    q8n_out o = q8n_split_run(env);
    q8n_match_ref(&o);
    q8n_free_out(&o);
    q8n_free_out(&g_q8n_ref);
    memset(&g_q8n_ref, 0, sizeof g_q8n_ref);
}

/* A strided output (y_stride > rows, in place with the residual) gets bitwise
 * the contiguous product in its slice of each column and leaves the other
 * floats as they were. */
static void test_matmul_strided(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 16);
    const uint32_t rows = 19, n = 3, ys = 26, off = 5, total = off + n * ys;
    for (size_t t = 0; t < REF_N_WEIGHT_TYPES; t++) {
        const uint32_t cols = ref_is_k_quant(ref_weight_types[t]) ? 256 : 64;
        tw w = tw_make(env, &r, ref_weight_types[t], rows, cols);
        float *x = hs_test_rand_array(&r, (size_t)n * cols, -1, 1), *g = hs_test_rand_array(&r, cols, 0.5f, 1.5f);
        float *init = hs_test_rand_array(&r, total, -1, 1), res[3 * 19];
        for (uint32_t j = 0; j < n; j++) memcpy(res + j * rows, init + off + j * ys, rows * 4);
        hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)n * cols * 4), *bg = hs_test_buffer(env, g, cols * 4);
        hs_vk_buffer *ya = hs_test_buffer(env, res, sizeof res), *yb = hs_test_buffer(env, init, total * 4);
        hs_vk_seq *s = hs_test_seq_begin(env);
        hs_matmul_opts oa = {.prologue = HS_MATMUL_RMSNORM, .norm = hs_test_bind(bg, 0), .eps = 1e-5f,
                             .residual = true, .res = hs_test_bind(ya, 0)};
        hs_matmul_opts ob = oa;
        ob.res = hs_test_bind(yb, off * 4);
        ob.y_stride = ys;
        HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(bx, 0), n, hs_test_bind(ya, 0), &oa));
        HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(bx, 0), n, hs_test_bind(yb, off * 4), &ob));
        hs_test_seq_run(s);
        float *a = hs_test_download(ya, sizeof res), *b = hs_test_download(yb, total * 4);
        for (uint32_t i = 0; i < total; i++) {
            const uint32_t j = i < off ? 0 : (i - off) / ys, k = i < off ? 0 : (i - off) % ys;
            if (i >= off && k < rows)
                assert_memory_equal(&b[i], &a[j * rows + k], 4);
            else
                assert_memory_equal(&b[i], &init[i], 4);
        }
        free(a);
        free(b);
        free(x);
        free(g);
        free(init);
        hs_vk_buffer *bufs[] = {bx, bg, ya, yb};
        for (int i = 0; i < 4; i++) hs_vk_buffer_destroy(bufs[i]);
        tw_free(&w);
    }
}

/* An hs_ops on the test's device under HS_TUNING = tuning. */
static hs_ops *ops_tuned(hs_test_env *env, const char *tuning) {
    hs_ops *ops = NULL;
    setenv("HS_TUNING", tuning, 1);
    hs_status st = hs_ops_create(env->vk, &ops);
    unsetenv("HS_TUNING");
    HS_CHECK(st);
    return ops;
}

/* Tuning (HS_TUNING: rows per invocation, columns per workgroup, the split
 * prologue) changes the shape of the work, never a result: products under
 * other tunings are bitwise those under the device's own. */
static void test_tuning_independent(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 18);
    /* Few pipelines: each new shape is an LLVM compile on lavapipe. */
    /* x8cols=16: the wide 8-bit tile wherever the device's own row takes narrower ones (lavapipe on AMD) */
    static const char *tunings[] = {"rows=1,cols=1", "rows=2,cols=3,x8cols=5", "split=0", "split=4,x8cols=4",
                                    "texel=0,ubo=0", "x8cols=16"};
    static const hs_type types[] = {HS_TYPE_F16, HS_TYPE_Q4_1, HS_TYPE_Q6_K};
    static const uint32_t ns[] = {1, 3, 9};
    const uint32_t rows = 75, nmax = 9;
    /* q4_1 twice: on f32 and on 8-bit activations */
    for (size_t t = 0; t <= sizeof types / sizeof types[0]; t++) {
        const bool q8 = t == sizeof types / sizeof types[0];
        const hs_type type = q8 ? HS_TYPE_Q4_1 : types[t];
        const uint32_t cols = ref_is_k_quant(type) ? 512 : 96;
        tw w = tw_make(env, &r, type, rows, cols);
        float *x = hs_test_rand_array(&r, (size_t)nmax * cols, -1, 1), *g = hs_test_rand_array(&r, cols, 0.5f, 1.5f);
        hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)nmax * cols * 4), *bg = hs_test_buffer(env, g, cols * 4);
        hs_vk_buffer *xs = hs_test_buffer(env, NULL, (size_t)nmax * cols * 4);
        /* with a scratch buffer: the tuning's split_n decides fused or split */
        const hs_matmul_opts o = {.prologue = HS_MATMUL_RMSNORM,
                                  .norm = hs_test_bind(bg, 0),
                                  .eps = 1e-5f,
                                  .scratch = hs_test_bind(xs, 0),
                                  .act_q8 = q8};
        float *want[3];
        for (int i = 0; i < 3; i++) {
            hs_vk_buffer *y = hs_test_buffer(env, NULL, (size_t)ns[i] * rows * 4);
            hs_vk_seq *s = hs_test_seq_begin(env);
            HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(bx, 0), ns[i], hs_test_bind(y, 0), &o));
            hs_test_seq_run(s);
            want[i] = hs_test_download(y, (size_t)ns[i] * rows * 4);
            hs_vk_buffer_destroy(y);
        }
        for (size_t u = 0; u < sizeof tunings / sizeof tunings[0]; u++) {
            hs_ops *ops = ops_tuned(env, tunings[u]);
            hs_weight *w2 = NULL;
            HS_CHECK(hs_weight_create(ops, type, rows, cols, w.gguf, &w2));
            for (int i = 0; i < 3; i++) {
                hs_vk_buffer *y = hs_test_buffer(env, NULL, (size_t)ns[i] * rows * 4);
                hs_vk_seq *s = hs_test_seq_begin(env);
                HS_CHECK(hs_op_matmul(ops, s, w2, hs_test_bind(bx, 0), ns[i], hs_test_bind(y, 0), &o));
                hs_test_seq_run(s);
                float *got = hs_test_download(y, (size_t)ns[i] * rows * 4);
                if (memcmp(got, want[i], (size_t)ns[i] * rows * 4) != 0)
                    fail_msg("%s%s n %u: HS_TUNING=%s changed the result", hs_type_name(type),
                             q8 ? " x8" : "", ns[i], tunings[u]);
                free(got);
                hs_vk_buffer_destroy(y);
            }
            hs_weight_destroy(w2);
            hs_ops_destroy(ops);
        }
        for (int i = 0; i < 3; i++) free(want[i]);
        free(x);
        free(g);
        hs_vk_buffer_destroy(bx);
        hs_vk_buffer_destroy(bg);
        hs_vk_buffer_destroy(xs);
        tw_free(&w);
    }
    /* The x8n chain: rows=1 makes row groups of fewer than 32 rows, so x8n and SwiGLU's 8-bit form come from
     * the passes after the products instead of their epilogues, with the same bits. */
    q8n_case c = q8n_make(19, 96, 96, 128, nmax);
    q8n_out want = q8n_run(env, env->ops, &c, 0, c.n);
    for (size_t u = 0; u < sizeof tunings / sizeof tunings[0]; u++) {
        hs_ops *ops = ops_tuned(env, tunings[u]);
        q8n_out got = q8n_run(env, ops, &c, 0, c.n);
        q8n_check_pairs(&c, &got, c.n);
        if (memcmp(got.xo, want.xo, (size_t)c.n * (c.pr / 32) * 80) ||
            memcmp(got.y, want.y, (size_t)c.n * c.qr * 4) ||
            memcmp(got.xa, want.xa, (size_t)c.n * (c.qr / 64) * 80) ||
            memcmp(got.da, want.da, (size_t)c.n * Q8N_DR * 4))
            fail_msg("x8n chain: HS_TUNING=%s changed the result", tunings[u]);
        q8n_free_out(&got);
        hs_ops_destroy(ops);
    }
    q8n_free_out(&want);
    q8n_free_case(&c);
}

/* Activations through uniform buffers (tuning ubo=1): windows of whole
 * tiles (products) or columns (split prologues), one dispatch each, at an x
 * offset that is not a multiple of the window's alignment. The results are
 * bitwise those of storage-buffer x, and a column's result is the same in
 * every batch. */
static void test_uniform_windows(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 23);
    const uint32_t rows = 40, cols = 2048, nmax = 9, lead = 4; /* x starts 16 bytes in */
    static const uint32_t ns[] = {1, 5, 9};
    static const hs_matmul_prologue pros[] = {HS_MATMUL_PLAIN, HS_MATMUL_RMSNORM, HS_MATMUL_SWIGLU};
    tw w = tw_make(env, &r, HS_TYPE_Q4_1, rows, cols);
    float *x = hs_test_rand_array(&r, (size_t)(nmax * 2 * cols + lead), -1, 1);
    float *g = hs_test_rand_array(&r, cols, 0.5f, 1.5f);
    hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)(nmax * 2 * cols + lead) * 4);
    hs_vk_buffer *bg = hs_test_buffer(env, g, cols * 4),
                 *xs = hs_test_buffer(env, NULL, (size_t)nmax * cols * 4);
    const hs_tuning saved = *hs_ops_tuning(env->ops);
    const hs_vk_caps *c = hs_ops_caps(env->ops);
    for (size_t pi = 0; pi < sizeof pros / sizeof pros[0]; pi++) {
        const hs_matmul_opts o = {.prologue = pros[pi],
                                  .norm = hs_test_bind(bg, 0),
                                  .eps = 1e-5f,
                                  .scratch = pros[pi] ? hs_test_bind(xs, 0) : (hs_vk_binding){0}};
        float *got[2][3];
        for (uint32_t u = 0; u < 2; u++) {
            hs_tuning t = saved;
            t.uniform_x = u;
            t.split_n = 1;
            HS_CHECK(hs_ops_set_tuning(env->ops, &t));
            for (int i = 0; i < 3; i++) {
                hs_vk_buffer *y = hs_test_buffer(env, NULL, (size_t)ns[i] * rows * 4);
                hs_vk_seq *s = hs_test_seq_begin(env);
                HS_CHECK(hs_op_matmul(env->ops, s, w.dev, hs_test_bind(bx, lead * 4), ns[i],
                                      hs_test_bind(y, 0), &o));
                /* with ubo=1, on a device whose uniform buffers hold 64 KiB: tiles
                 * of cw columns of 2048 floats spread evenly (at most the tuning's
                 * columns each), as many whole tiles per _ux product as fit in a
                 * window less its alignment slack (one of 4 columns, two of 3) */
                const uint32_t cmax = t.matmul_cols_per_wg, nt = (ns[i] + cmax - 1) / cmax;
                const uint32_t cw = (ns[i] + nt - 1) / nt, tiles = (ns[i] + cw - 1) / cw;
                const uint64_t ua = c->min_uniform_offset_align ? c->min_uniform_offset_align : 1;
                const uint32_t per = (uint32_t)((65536 - (ua - 1)) / ((uint64_t)cw * cols * 4));
                const bool want_ux = u && c->max_uniform_range >= 65536 && cw <= 4;
                const uint32_t nd = hs_vk_seq_dispatch_count(s);
                uint32_t n_mm = 0;
                for (uint32_t k = 0; k < nd; k++) {
                    const char *name = hs_vk_pipeline_name(hs_vk_seq_dispatch_pipeline(s, k));
                    n_mm += strncmp(name, "matmul_pro", 10) != 0;
                    if ((strstr(name, "_ux") != NULL) != want_ux)
                        fail_msg("prologue %d n %u ubo %u: dispatch %u ran %s", (int)pros[pi], ns[i], u, k,
                                 name);
                }
                if (want_ux && (per == 0 || n_mm != (tiles + per - 1) / per))
                    fail_msg("n %u: %u products for %u tiles of %u columns, %u per window", ns[i], n_mm, tiles,
                             cw, per);
                hs_test_seq_run(s);
                got[u][i] = hs_test_download(y, (size_t)ns[i] * rows * 4);
                hs_vk_buffer_destroy(y);
            }
        }
        HS_CHECK(hs_ops_set_tuning(env->ops, &saved));
        for (int i = 0; i < 3; i++) {
            if (memcmp(got[0][i], got[1][i], (size_t)ns[i] * rows * 4) != 0)
                fail_msg("prologue %d n %u: uniform-buffer x changed the result", (int)pros[pi], ns[i]);
            for (uint32_t j = 0; j < ns[i]; j++) {
                const float *ref = j < ns[0] ? got[1][0] : j < ns[1] ? got[1][1] : got[1][2];
                if (memcmp(got[1][i] + (size_t)j * rows, ref + (size_t)j * rows, rows * 4) != 0)
                    fail_msg("prologue %d n %u: column %u differs from the same column in a smaller batch",
                             (int)pros[pi], ns[i], j);
            }
        }
        /* and against the reference */
        double *ref = malloc((size_t)nmax * rows * sizeof *ref);
        ref_matmul(w.w, rows, cols, x + lead, nmax, pros[pi], g, 1e-5f, NULL, ref);
        const double e = ref_nmse(got[1][2], ref, (size_t)nmax * rows);
        if (!(e < 1e-9)) fail_msg("prologue %d: nmse %g against the reference", (int)pros[pi], e);
        free(ref);
        for (int u = 0; u < 2; u++)
            for (int i = 0; i < 3; i++)
                free(got[u][i]);
    }
    free(x);
    free(g);
    hs_vk_buffer_destroy(bx);
    hs_vk_buffer_destroy(bg);
    hs_vk_buffer_destroy(xs);
    tw_free(&w);
}

/* ---- the Q/K/V product with RoPE + KV write (hs_matmul_opts.rope_kv) ---- */

#define RK_NCTX 24u
typedef struct rk_out {
    float *q, *k, *v;
    uint32_t dispatches;
} rk_out;

static void rk_free(rk_out *o) {
    free(o->q);
    free(o->k);
    free(o->v);
}

/* The cache of rk_run as floats: f32 as is, f16 widened (exact, so equal halves give equal floats). */
static float *rk_cache_download(hs_vk_buffer *b, size_t elems, hs_type kvt) {
    if (kvt == HS_TYPE_F32) return hs_test_download(b, elems * 4);
    uint16_t *h = hs_test_download(b, elems * 2);
    float *f = malloc(elems * sizeof *f);
    for (size_t i = 0; i < elems; i++) f[i] = hs_test_f16_to_f32(h[i]);
    free(h);
    return f;
}

/* hs_op_matmul of columns j0 .. j0 + n - 1 of x with RMSNorm on 8-bit activations and rope_kv into q
 * (column j at row j of q) and caches of type kvt (f32 or f16) prefilled with `fill` (rounded to
 * halves for f16); positions pos[j], cache rows rows[j]. The caches come back as floats. */
static rk_out rk_run(hs_test_env *env, hs_ops *ops, const tw *w, const float *x, const float *g,
                     const int32_t *pos, const uint32_t *rows, const float *fill, uint32_t n_all, uint32_t j0,
                     uint32_t n, uint32_t n_head, uint32_t n_kv, uint32_t hd, const hs_rope_params *rp0,
                     hs_type kvt) {
    const uint32_t cols = w->cols, q_dim = n_head * hd, kv_dim = n_kv * hd;
    const size_t elems = (size_t)RK_NCTX * kv_dim, cache = elems * (kvt == HS_TYPE_F16 ? 2 : 4);
    void *fill_t = (void *)fill;
    if (kvt == HS_TYPE_F16) {
        uint16_t *h = malloc(elems * sizeof *h);
        for (size_t i = 0; i < elems; i++) h[i] = hs_test_f32_to_f16(fill[i]);
        fill_t = h;
    }
    hs_vk_buffer *bx = hs_test_buffer(env, x, (size_t)n_all * cols * 4), *bg = hs_test_buffer(env, g, cols * 4);
    hs_vk_buffer *bp = hs_test_buffer(env, pos, n_all * 4), *br = hs_test_buffer(env, rows, n_all * 4);
    hs_vk_buffer *bq = hs_test_buffer(env, NULL, (size_t)n_all * q_dim * 4);
    hs_vk_buffer *bk = hs_test_buffer(env, fill_t, cache), *bv = hs_test_buffer(env, fill_t, cache);
    if (fill_t != fill) free(fill_t);
    hs_vk_buffer *by = hs_test_buffer(env, NULL, (size_t)n_all * w->rows * 4);
    hs_vk_buffer *xs = hs_test_buffer(env, NULL, (size_t)n_all * cols * 4);
    float *freqs = malloc(rp0->n_rot / 2 * sizeof *freqs);
    hs_rope_freqs(rp0, freqs);
    hs_vk_buffer *bf = hs_test_buffer(env, freqs, rp0->n_rot / 2 * 4);
    const hs_vk_binding fb = hs_test_bind(bf, 0), pb = hs_test_bind(bp, (uint64_t)j0 * 4),
                        rb = hs_test_bind(br, (uint64_t)j0 * 4), qb = hs_test_bind(bq, (uint64_t)j0 * q_dim * 4);
    hs_rope_params rp = *rp0;
    rp.freqs = &fb;
    const hs_kv_layer kv = {.k = hs_test_bind(bk, 0), .v = hs_test_bind(bv, 0), .type = kvt,
                            .n_ctx = RK_NCTX, .n_kv_head = n_kv, .head_dim = hd};
    const hs_matmul_rope_kv rk = {.pos = &pb, .rows = &rb, .q_out = &qb, .kv = &kv, .n_head = n_head, .rp = &rp};
    const hs_matmul_opts o = {.prologue = HS_MATMUL_RMSNORM, .norm = hs_test_bind(bg, 0), .eps = 1e-5f,
                              .scratch = hs_test_bind(xs, 0), .act_q8 = true, .rope_kv = &rk};
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_matmul(ops, s, w->dev, hs_test_bind(bx, (uint64_t)j0 * cols * 4), n,
                          hs_test_bind(by, (uint64_t)j0 * w->rows * 4), &o));
    rk_out r = {.dispatches = hs_vk_seq_dispatch_count(s)};
    hs_test_seq_run(s);
    r.q = hs_test_download(bq, (size_t)n_all * q_dim * 4);
    r.k = rk_cache_download(bk, elems, kvt);
    r.v = rk_cache_download(bv, elems, kvt);
    hs_vk_buffer *bufs[] = {bx, bg, bp, br, bq, bk, bv, by, xs, bf};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) hs_vk_buffer_destroy(bufs[i]);
    free(freqs);
    return r;
}

/* The product that rotates Q and K and writes the cache in its epilogue (one dispatch after the
 * 8-bit pass) is bitwise the product followed by hs_op_rope_kv (HS_TUNING ropepass=1: three
 * dispatches), for a batch and for its columns alone, into an f32 and into an f16 cache; it follows
 * the 8-bit reference product + RoPE (to half precision in an f16 cache), writes only rows[j] < n_ctx
 * of the caches, and refuses shapes it cannot take. */
static void test_matmul_rope_kv(void **state) {
    hs_test_env *env = *state;
    static const struct {
        uint32_t n_head, n_kv, hd, n_rot, cols, n;
    } cases[] = {{3, 1, 64, 64, 128, 8}, {4, 2, 32, 16, 64, 5}, {2, 1, 96, 96, 96, 1}};
    hs_ops *pass_ops = ops_tuned(env, "ropepass=1");
    for (size_t cti = 0; cti < 2 * sizeof cases / sizeof cases[0]; cti++) {
        const size_t ci = cti / 2;
        const hs_type kvt = cti % 2 ? HS_TYPE_F16 : HS_TYPE_F32;
        const char *tn = hs_type_name(kvt);
        const uint32_t nh = cases[ci].n_head, nkv = cases[ci].n_kv, hd = cases[ci].hd, n = cases[ci].n;
        const uint32_t q_dim = nh * hd, kv_dim = nkv * hd, rows_w = q_dim + 2 * kv_dim;
        hs_rng r;
        hs_rng_seed(&r, 70 + ci);
        tw w = tw_make(env, &r, HS_TYPE_Q4_1, rows_w, cases[ci].cols);
        float *x = hs_test_rand_array(&r, (size_t)n * w.cols, -1, 1), *g = hs_test_rand_array(&r, w.cols, 0.5f, 1.5f);
        float *fill = hs_test_rand_array(&r, (size_t)RK_NCTX * kv_dim, 50, 60);
        if (kvt == HS_TYPE_F16) /* what the cache holds before the write */
            for (size_t i = 0; i < (size_t)RK_NCTX * kv_dim; i++)
                fill[i] = hs_test_f16_to_f32(hs_test_f32_to_f16(fill[i]));
        int32_t pos[8];
        uint32_t rows[8];
        for (uint32_t j = 0; j < n; j++) {
            pos[j] = (int32_t)(hs_rng_u32(&r) % 5000);
            rows[j] = (j * 7 + 3) % RK_NCTX; /* distinct */
        }
        if (n > 2) rows[n - 2] = RK_NCTX + 5; /* skipped */
        const hs_rope_params rp = {.n_rot = cases[ci].n_rot, .mode = HS_ROPE_NORMAL, .freq_base = 10000.0f,
                                   .freq_scale = 1.0f};
        rk_out fused = rk_run(env, env->ops, &w, x, g, pos, rows, fill, n, 0, n, nh, nkv, hd, &rp, kvt);
        rk_out pass = rk_run(env, pass_ops, &w, x, g, pos, rows, fill, n, 0, n, nh, nkv, hd, &rp, kvt);
        if (fused.dispatches != 2 || pass.dispatches != 3)
            fail_msg("rope_kv %u/%u/%u %s: %u dispatches fused (want 2), %u as a pass (want 3)", nh, nkv, hd,
                     tn, fused.dispatches, pass.dispatches);
        const size_t cache = (size_t)RK_NCTX * kv_dim * 4;
        if (memcmp(fused.q, pass.q, (size_t)n * q_dim * 4) || memcmp(fused.k, pass.k, cache) ||
            memcmp(fused.v, pass.v, cache))
            fail_msg("rope_kv %u/%u/%u %s, n = %u: the fused epilogue differs from the pass", nh, nkv, hd, tn, n);
        /* against the 8-bit reference product and the C RoPE */
        double *yd = malloc((size_t)n * rows_w * sizeof *yd);
        ref_matmul_q8(w.w, rows_w, w.cols, x, n, HS_MATMUL_RMSNORM, g, 1e-5f, NULL, yd);
        float *yf = malloc((size_t)n * rows_w * 4), *rq = malloc((size_t)n * q_dim * 4);
        float *rk = malloc(cache), *rv = malloc(cache);
        for (size_t i = 0; i < (size_t)n * rows_w; i++) yf[i] = (float)yd[i];
        memcpy(rk, fill, cache);
        memcpy(rv, fill, cache);
        ref_rope_kv(yf, pos, rows, rq, rk, rv, n, nh, nkv, hd, RK_NCTX, &rp);
        const double eq = hs_nmse(fused.q, rq, (size_t)n * q_dim), ek = hs_nmse(fused.k, rk, cache / 4),
                     ev = hs_nmse(fused.v, rv, cache / 4);
        /* halves: relative error up to 2^-11 per element, nmse about 1e-7 */
        const double tol_kv = kvt == HS_TYPE_F16 ? 1e-6 : 1e-9;
        if (!(eq < 1e-6) || !(ek < tol_kv) || !(ev < tol_kv))
            fail_msg("rope_kv %u/%u/%u %s: nmse q %g, k %g, v %g against the reference", nh, nkv, hd, tn, eq, ek,
                     ev);
        for (uint32_t row = 0; row < RK_NCTX; row++) {
            bool written = false;
            for (uint32_t j = 0; j < n; j++) written = written || rows[j] == row;
            if (!written &&
                (memcmp(fused.k + (size_t)row * kv_dim, fill + (size_t)row * kv_dim, kv_dim * 4) ||
                 memcmp(fused.v + (size_t)row * kv_dim, fill + (size_t)row * kv_dim, kv_dim * 4)))
                fail_msg("rope_kv %s: cache row %u, which no column names, was written", tn, row);
        }
        /* each column alone: its q row and cache row as in the batch */
        for (uint32_t j = 0; j < n; j++) {
            rk_out one = rk_run(env, env->ops, &w, x, g, pos, rows, fill, n, j, 1, nh, nkv, hd, &rp, kvt);
            assert_int_equal(one.dispatches, 2);
            if (memcmp(one.q + (size_t)j * q_dim, fused.q + (size_t)j * q_dim, q_dim * 4) ||
                (rows[j] < RK_NCTX &&
                 (memcmp(one.k + (size_t)rows[j] * kv_dim, fused.k + (size_t)rows[j] * kv_dim, kv_dim * 4) ||
                  memcmp(one.v + (size_t)rows[j] * kv_dim, fused.v + (size_t)rows[j] * kv_dim, kv_dim * 4))))
                fail_msg("rope_kv %u/%u/%u %s: column %u alone differs from the batch of %u", nh, nkv, hd, tn, j, n);
            rk_free(&one);
        }
        free(yd);
        free(yf);
        free(rq);
        free(rk);
        free(rv);
        rk_free(&fused);
        rk_free(&pass);
        free(x);
        free(g);
        free(fill);
        tw_free(&w);
    }
    hs_ops_destroy(pass_ops);
}

/* rope_kv's shape rules: rows must be (n_head + 2 n_kv) head_dim, no residual. */
static void test_matmul_rope_kv_args(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 77);
    tw w = tw_make(env, &r, HS_TYPE_Q4_1, 320, 64);
    hs_vk_buffer *b = hs_test_buffer(env, NULL, 1 << 16), *c = hs_test_buffer(env, NULL, 1 << 16);
    const hs_vk_binding any = hs_test_bind(b, 0), f = hs_test_bind(b, 4096);
    const hs_rope_params rp = {.n_rot = 64, .mode = HS_ROPE_NORMAL, .freq_base = 1e4f, .freq_scale = 1.0f,
                               .freqs = &f};
    hs_kv_layer kv = {.k = hs_test_bind(c, 0), .v = hs_test_bind(c, 32768), .type = HS_TYPE_F32, .n_ctx = 16,
                      .n_kv_head = 1, .head_dim = 64};
    hs_matmul_rope_kv rk = {.pos = &any, .rows = &any, .q_out = &any, .kv = &kv, .n_head = 2, .rp = &rp};
    hs_matmul_opts o = {.act_q8 = true, .scratch = hs_test_bind(c, 0), .rope_kv = &rk};
    hs_vk_seq *s = hs_test_seq_begin(env);
    /* 2 + 2 x 1 heads of 64 = 256 rows, not 320 */
    assert_int_equal(hs_op_matmul(env->ops, s, w.dev, any, 1, any, &o), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "rope_kv needs rows"));
    rk.n_head = 3;
    o.residual = true;
    o.res = any;
    assert_int_equal(hs_op_matmul(env->ops, s, w.dev, any, 1, any, &o), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "no residual"));
    o.residual = false;
    kv.head_dim = 63;
    rk.n_head = 4; /* (4 + 2) x 63 = 378 */
    assert_int_equal(hs_op_matmul(env->ops, s, w.dev, any, 1, any, &o), HS_ERR_INVALID_ARG);
    hs_vk_seq_destroy(s);
    hs_vk_buffer_destroy(b);
    hs_vk_buffer_destroy(c);
    tw_free(&w);
}

int main(void) {
    const struct CMUnitTest host[] = {
        cmocka_unit_test(test_f16),          cmocka_unit_test(test_dequant_f32_f16), cmocka_unit_test(test_dequant_q4_0),
        cmocka_unit_test(test_dequant_q4_1), cmocka_unit_test(test_dequant_q8_0),    cmocka_unit_test(test_dequant_q4_K),
        cmocka_unit_test(test_dequant_q6_K), cmocka_unit_test(test_dequant_args),    cmocka_unit_test(test_quantize),
        cmocka_unit_test(test_tile_cols),
    };
    const struct CMUnitTest device[] = {
        cmocka_unit_test(test_matmul_args),      cmocka_unit_test(test_matmul_shapes),
        cmocka_unit_test(test_matmul_q8),        cmocka_unit_test(test_matmul_q8n),
        cmocka_unit_test(test_matmul_odd_cols),  cmocka_unit_test(test_matmul_prologues),
        cmocka_unit_test(test_matmul_offsets),   cmocka_unit_test(test_matmul_stacked),
        cmocka_unit_test(test_matmul_strided),   cmocka_unit_test(test_tuning_independent),
        cmocka_unit_test(test_batch_invariance), cmocka_unit_test(test_split_reference),
        cmocka_unit_test(test_uniform_windows),  cmocka_unit_test(test_matmul_rope_kv),
        cmocka_unit_test(test_matmul_rope_kv_args),
    };
    const struct CMUnitTest split[] = {
        cmocka_unit_test(test_split_weights),
    };
    const struct CMUnitTest portable[] = {
        cmocka_unit_test(test_portable_matches),
    };
    int fails = hs_test_run_group("quant", host, NULL, NULL);
    fails += hs_test_run_group("matmul", device, setup, teardown);
    fails += hs_test_run_group("matmul_split", split, setup_small_range, teardown);
    fails += hs_test_run_group("matmul_portable", portable, setup_portable, teardown);
    return fails;
}
