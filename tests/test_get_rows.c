/* Tests of the embedding gather (hs_op_get_rows, runtime/op_matmul.h): every
 * weight type and odd table shapes, rows bitwise equal to hs_dequantize_row,
 * zero rows for ids past the table, replay of a recorded sequence with new
 * ids, unaligned output offsets, and (second group, maxStorageBufferRange =
 * 64 KiB) tables split into row chunks. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_quant.h"
#include "op_matmul.h"
#include "ref_matmul.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

static int setup_small_range(void **state) { return hs_test_setup_range(state, 65536); }

/* Gathers n rows (ids from the rng, every third one invalid) with the output
 * at byte offset out_off, replays the sequence with other ids, and checks
 * both results bitwise. Returns the number of chunks of the table. */
static uint32_t check_gather(hs_test_env *env, hs_rng *r, hs_type t, uint32_t rows, uint32_t cols, uint32_t n,
                             uint32_t out_off) {
    void *gguf = ref_random_weight(r, t, rows, cols);
    assert_non_null(gguf);
    float *w = ref_dequantize(t, gguf, rows, cols);
    assert_non_null(w);
    hs_weight *tab = NULL;
    HS_CHECK(hs_weight_create(env->ops, t, rows, cols, gguf, &tab));
    const uint32_t chunks = hs_weight_chunks(tab);

    uint32_t *ids = malloc(n * sizeof *ids);
    hs_vk_buffer *bi = hs_test_buffer(env, NULL, n * 4);
    hs_vk_buffer *bo = hs_test_buffer(env, NULL, out_off + (size_t)n * cols * 4);
    hs_vk_seq *s = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &s));
    HS_CHECK(hs_vk_seq_begin(s));
    HS_CHECK(hs_op_get_rows(env->ops, s, tab, hs_test_bind(bi, 0), n, hs_test_bind(bo, out_off)));
    HS_CHECK(hs_vk_seq_end(s));
    float *nan = malloc((size_t)n * cols * 4);
    for (size_t i = 0; i < (size_t)n * cols; i++) nan[i] = NAN;
    for (int round = 0; round < 2; round++) {
        for (uint32_t j = 0; j < n; j++) {
            const uint32_t pick = hs_rng_u32(r);
            ids[j] = j % 3 == 2 ? rows + pick % 4 : pick % rows;
            if (j == 0) ids[j] = rows - 1;
            if (j == 1 && n > 2) ids[j] = UINT32_MAX;
        }
        HS_CHECK(hs_vk_buffer_upload(bi, 0, ids, n * 4));
        HS_CHECK(hs_vk_buffer_upload(bo, out_off, nan, (size_t)n * cols * 4)); /* every row must be written */
        HS_CHECK(hs_vk_seq_submit(s));
        float *out = hs_test_download(bo, out_off + (size_t)n * cols * 4);
        const float *o = out + out_off / 4;
        for (uint32_t j = 0; j < n; j++) {
            if (ids[j] < rows) {
                if (memcmp(o + (size_t)j * cols, w + (size_t)ids[j] * cols, cols * 4))
                    fail_msg("%s %ux%u: token %u (row %u) differs", hs_type_name(t), rows, cols, j, ids[j]);
            } else {
                for (uint32_t k = 0; k < cols; k++)
                    if (o[(size_t)j * cols + k] != 0.0f)
                        fail_msg("%s: token %u (invalid id %u) is not zero", hs_type_name(t), j, ids[j]);
            }
        }
        free(out);
    }
    hs_vk_seq_destroy(s);
    hs_vk_buffer_destroy(bi);
    hs_vk_buffer_destroy(bo);
    hs_weight_destroy(tab);
    free(nan);
    free(ids);
    free(w);
    free(gguf);
    return chunks;
}

static void test_get_rows_types(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 21);
    const uint32_t rows[] = {1, 7, 33, 257};
    const uint32_t cols[] = {32, 96, 256, 768, 2816}, kcols[] = {256, 512, 768};
    for (size_t t = 0; t < REF_N_WEIGHT_TYPES; t++) {
        const uint32_t *cl = ref_is_k_quant(ref_weight_types[t]) ? kcols : cols;
        const size_t ncl = ref_is_k_quant(ref_weight_types[t]) ? 3 : 5;
        for (size_t ri = 0; ri < 4; ri++)
            for (size_t ci = 0; ci < ncl; ci++)
                check_gather(env, &r, ref_weight_types[t], rows[ri], cl[ci], 1 + (ri * 5 + ci) % 9, 0);
    }
}

static void test_get_rows_odd(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 22);
    check_gather(env, &r, HS_TYPE_F32, 512, 172, 40, 4); /* stories260K's shapes */
    check_gather(env, &r, HS_TYPE_F16, 9, 10, 5, 12);
    check_gather(env, &r, HS_TYPE_Q4_1, 100, 576, 33, 8);
    check_gather(env, &r, HS_TYPE_Q8_0, 50, 96, 3, 4); /* 1.5 device blocks */
}

static void test_get_rows_args(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 23);
    void *gguf = ref_random_weight(&r, HS_TYPE_Q4_0, 4, 64);
    hs_weight *tab = NULL;
    HS_CHECK(hs_weight_create(env->ops, HS_TYPE_Q4_0, 4, 64, gguf, &tab));
    hs_vk_buffer *bi = hs_test_buffer(env, NULL, 16), *bo = hs_test_buffer(env, NULL, 2 * 64 * 4);
    hs_vk_seq *s = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &s));
    HS_CHECK(hs_vk_seq_begin(s));
    assert_int_equal(hs_op_get_rows(env->ops, s, tab, hs_test_bind(bi, 0), 0, hs_test_bind(bo, 0)), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_get_rows(env->ops, s, tab, hs_test_bind(bi, 0), 3, hs_test_bind(bo, 0)), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_op_get_rows(env->ops, s, tab, hs_test_bind(bi, 0), 5, hs_test_bind(bo, 0)), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_op_get_rows(env->ops, s, tab, hs_test_bind(bi, 2), 1, hs_test_bind(bo, 0)), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_get_rows(env->ops, s, tab, hs_test_bind(bo, 0), 1, hs_test_bind(bo, 0)), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_get_rows(env->ops, s, NULL, hs_test_bind(bi, 0), 1, hs_test_bind(bo, 0)), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_vk_seq_dispatch_count(s), 0);
    HS_CHECK(hs_vk_seq_end(s));
    hs_vk_seq_destroy(s);
    hs_vk_buffer_destroy(bi);
    hs_vk_buffer_destroy(bo);
    hs_weight_destroy(tab);
    free(gguf);
}

static void test_get_rows_split(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 24);
    assert_true(hs_ops_caps(env->ops)->max_storage_buffer_range <= 65536);
    assert_true(check_gather(env, &r, HS_TYPE_Q4_0, 1000, 256, 12, 0) > 1);
    assert_true(check_gather(env, &r, HS_TYPE_F32, 300, 128, 16, 4) > 1); /* a group of 64 rows fits */
    assert_true(check_gather(env, &r, HS_TYPE_Q6_K, 600, 512, 9, 0) > 1);
    assert_true(check_gather(env, &r, HS_TYPE_F16, 1100, 64, 30, 0) > 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_get_rows_args),
        cmocka_unit_test(test_get_rows_types),
        cmocka_unit_test(test_get_rows_odd),
    };
    const struct CMUnitTest split[] = {
        cmocka_unit_test(test_get_rows_split),
    };
    int fails = hs_test_run_group("get_rows", tests, setup, teardown);
    fails += hs_test_run_group("get_rows_split", split, setup_small_range, teardown);
    return fails;
}
