/* Tests of hs_op_gather_rows (runtime/op_elem.h) against a plain-C loop:
 * gathers by source index (invalid ids give zeros), scatters by destination
 * index (invalid ids are skipped, other rows untouched), both at once, odd
 * column counts, strides and offsets (scalar path) and aligned ones (vec4
 * path), bitwise; replay with new ids; argument checks; and a group with a
 * tiny maxStorageBufferRange, where the source is bound in windows of rows
 * and unindexed sides in chunks. */
#include <stdlib.h>
#include <string.h>

#include "op_elem.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }
/* 4 KiB bindings: a 50-row source of 40-float rows needs 2 windows. */
static int setup_small_range(void **state) { return hs_test_setup_range(state, 4096); }

/* One case: shapes, byte offsets of the tensors in their buffers, and the
 * index lists (NULL: row = entry). */
typedef struct gcase {
    uint32_t src_rows, src_stride, dst_rows, dst_stride, cols, n;
    uint32_t src_off, dst_off; /* bytes */
    const uint32_t *sids, *dids;
} gcase;

/* The reference: dst is the destination's initial contents, updated. */
static void ref_gather(const gcase *k, const float *src, float *dst) {
    for (uint32_t i = 0; i < k->n; i++) {
        const uint32_t s = k->sids ? k->sids[i] : i, d = k->dids ? k->dids[i] : i;
        if (d >= k->dst_rows) continue;
        for (uint32_t c = 0; c < k->cols; c++)
            dst[(size_t)d * k->dst_stride + c] = s < k->src_rows ? src[(size_t)s * k->src_stride + c] : 0.0f;
    }
}

/* Runs a case on the device and compares bitwise; returns the dispatches. */
static uint32_t run_case(hs_test_env *env, hs_rng *r, const gcase *k) {
    const size_t sn = (size_t)k->src_rows * k->src_stride, dn = (size_t)k->dst_rows * k->dst_stride;
    float *src = hs_test_rand_array(r, sn, -4, 4), *dst0 = hs_test_rand_array(r, dn, -4, 4);
    float *ref = malloc(dn * 4);
    memcpy(ref, dst0, dn * 4);
    ref_gather(k, src, ref);
    uint8_t *tmp = calloc(1, dn * 4 + sn * 4 + 64);
    memcpy(tmp + k->src_off, src, sn * 4);
    hs_vk_buffer *bs = hs_test_buffer(env, tmp, sn * 4 + k->src_off);
    memset(tmp, 0, k->dst_off);
    memcpy(tmp + k->dst_off, dst0, dn * 4);
    hs_vk_buffer *bd = hs_test_buffer(env, tmp, dn * 4 + k->dst_off);
    free(tmp);
    /* Both id lists in one buffer, the second at an odd word. */
    uint32_t ids[2 * 64 + 1] = {0};
    assert_true(k->n <= 64);
    if (k->sids) memcpy(ids, k->sids, k->n * 4);
    if (k->dids) memcpy(ids + k->n + 1, k->dids, k->n * 4);
    hs_vk_buffer *bi = hs_test_buffer(env, ids, sizeof ids);
    hs_vk_binding si = {bi, 0, 0}, di = {bi, (k->n + 1) * 4ull, 0};
    hs_gather_rows g = {.src = {bs, k->src_off, 0},
                        .src_rows = k->src_rows,
                        .src_stride = k->src_stride,
                        .dst = {bd, k->dst_off, 0},
                        .dst_rows = k->dst_rows,
                        .dst_stride = k->dst_stride,
                        .cols = k->cols,
                        .src_ids = k->sids ? &si : NULL,
                        .dst_ids = k->dids ? &di : NULL};
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_gather_rows(env->ops, s, &g, k->n));
    const uint32_t dispatches = hs_vk_seq_dispatch_count(s);
    hs_test_seq_run(s);
    float *got = malloc(dn * 4);
    HS_CHECK(hs_vk_buffer_download(bd, k->dst_off, got, dn * 4));
    for (size_t e = 0; e < dn; e++)
        if (memcmp(&got[e], &ref[e], 4))
            fail_msg("gather %u entries, cols %u, strides %u/%u: dst[%zu][%zu] = %g, expected %g", k->n,
                     k->cols, k->src_stride, k->dst_stride, e / k->dst_stride, e % k->dst_stride, got[e],
                     ref[e]);
    free(src), free(dst0), free(ref), free(got);
    hs_vk_buffer_destroy(bs), hs_vk_buffer_destroy(bd), hs_vk_buffer_destroy(bi);
    return dispatches;
}

static const uint32_t k_sids[8] = {3, 0, 9, 3, 1000, 7, 2, 5};        /* 1000: zeros */
static const uint32_t k_dids[8] = {6, 0, 2, 99, 4, 1, UINT32_MAX, 3}; /* 99, max: skipped */

static void test_gather(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 1);
    /* One dispatch each, unless the small-range group splits them. */
    const bool one = hs_ops_caps(env->ops)->max_storage_buffer_range >= 65536;
    /* Gather (source ids, one a zero row), scalar path: odd columns, strides, offsets. */
    gcase a = {10, 9, 8, 11, 7, 8, 4, 12, k_sids, NULL};
    if (run_case(env, &r, &a) != 1 && one) fail_msg("case a took more than one dispatch");
    /* The same, vec4 path: a tap-feature-like row of 3 x 64 floats. */
    gcase b = {10, 192, 8, 192, 192, 8, 0, 16, k_sids, NULL};
    if (run_case(env, &r, &b) != 1 && one) fail_msg("case b took more than one dispatch");
    /* Scatter (destination ids, two skipped; untouched rows keep their values). */
    gcase c = {8, 64, 7, 64, 64, 8, 32, 0, NULL, k_dids};
    if (run_case(env, &r, &c) != 1 && one) fail_msg("case c took more than one dispatch");
    /* Both indexed, a slice of wider rows (cols < strides). */
    gcase d = {10, 128, 7, 130, 64, 8, 256, 8, k_sids, k_dids};
    if (run_case(env, &r, &d) != 1 && one) fail_msg("case d took more than one dispatch");
    /* Neither: a plain row copy. */
    gcase e = {5, 3, 5, 3, 3, 5, 4, 4, NULL, NULL};
    if (run_case(env, &r, &e) != 1 && one) fail_msg("case e took more than one dispatch");
}

/* A recorded gather replays with the ids a host-visible buffer holds. */
static void test_gather_replay(void **state) {
    hs_test_env *env = *state;
    float src[6][4], got[2][4];
    for (int i = 0; i < 24; i++)
        src[i / 4][i % 4] = (float)i;
    hs_vk_buffer *bs = hs_test_buffer(env, src, sizeof src), *bd = hs_test_buffer(env, NULL, sizeof got);
    hs_vk_buffer *bi = NULL;
    HS_CHECK(hs_vk_buffer_create(env->vk, 256, HS_MEM_HOST, &bi));
    hs_vk_binding ids = {bi, 0, 8};
    hs_gather_rows g = {.src = {bs, 0, 0},
                        .src_rows = 6,
                        .src_stride = 4,
                        .dst = {bd, 0, 0},
                        .dst_rows = 2,
                        .dst_stride = 4,
                        .cols = 4,
                        .src_ids = &ids};
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_gather_rows(env->ops, s, &g, 2));
    HS_CHECK(hs_vk_seq_end(s));
    uint32_t *m = hs_vk_buffer_map(bi);
    const uint32_t picks[3][2] = {{5, 0}, {2, 2}, {1, 4}};
    for (int k = 0; k < 3; k++) {
        m[0] = picks[k][0], m[1] = picks[k][1];
        HS_CHECK(hs_vk_buffer_flush(bi, 0, 8));
        HS_CHECK(hs_vk_seq_submit(s));
        HS_CHECK(hs_vk_buffer_download(bd, 0, got, sizeof got));
        assert_memory_equal(got[0], src[picks[k][0]], 16);
        assert_memory_equal(got[1], src[picks[k][1]], 16);
    }
    hs_vk_seq_destroy(s);
    hs_vk_buffer_destroy(bs), hs_vk_buffer_destroy(bd), hs_vk_buffer_destroy(bi);
}

static void test_gather_bad_args(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *b = hs_test_buffer(env, NULL, 1024);
    hs_vk_binding ids = {b, 0, 0};
    hs_gather_rows g = {.src = {b, 0, 0},
                        .src_rows = 4,
                        .src_stride = 8,
                        .dst = {b, 512, 0},
                        .dst_rows = 4,
                        .dst_stride = 8,
                        .cols = 8,
                        .src_ids = &ids};
    hs_vk_seq *s = hs_test_seq_begin(env);
    hs_gather_rows x = g;
    x.cols = 9; /* wider than the strides */
    assert_int_equal(hs_op_gather_rows(env->ops, s, &x, 2), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "9 columns"));
    x = g;
    x.src_ids = NULL; /* 5 entries need 5 source rows */
    assert_int_equal(hs_op_gather_rows(env->ops, s, &x, 5), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "source rows"));
    x = g;
    x.src_rows = 40; /* 40 rows of 32 bytes are not in the buffer */
    assert_int_equal(hs_op_gather_rows(env->ops, s, &x, 2), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_op_gather_rows(env->ops, s, NULL, 2), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_vk_seq_dispatch_count(s), 0);
    HS_CHECK(hs_vk_seq_end(s));
    hs_vk_seq_destroy(s);
    hs_vk_buffer_destroy(b);
}

/* Small range: a source of 50 rows x 160 bytes in 4 KiB windows (one dispatch
 * each, for each chunk of entries the unindexed 40 x 160-byte destination is
 * cut into; the zero rows written once), unindexed sides in chunks; an indexed
 * destination past the range is refused. */
static void test_gather_split(void **state) {
    hs_test_env *env = *state;
    assert_true(hs_ops_caps(env->ops)->max_storage_buffer_range <= 4096);
    hs_rng r;
    hs_rng_seed(&r, 2);
    uint32_t sids[40], dids[40];
    for (uint32_t i = 0; i < 40; i++)
        sids[i] = (i * 37u) % 53u; /* 50..52: zeros */
    for (uint32_t i = 0; i < 40; i++)
        dids[i] = (i * 7u) % 41u; /* 40: skipped */
    gcase a = {50, 40, 40, 40, 40, 40, 16, 4, sids, NULL};
    const uint32_t da = run_case(env, &r, &a);
    if (da != 4) fail_msg("2 windows of the source x 2 chunks of entries took %u dispatches", da);
    gcase b = {50, 40, 41, 12, 9, 40, 4, 0, sids, dids}; /* the destination, 41 x 48 bytes, fits */
    run_case(env, &r, &b);
    gcase c = {40, 40, 40, 40, 40, 40, 0, 0, NULL, NULL};
    assert_true(run_case(env, &r, &c) >= 2);
    /* An indexed destination larger than a binding. */
    hs_vk_buffer *big = hs_test_buffer(env, NULL, 8192), *bi = hs_test_buffer(env, dids, sizeof dids);
    hs_vk_binding di = {bi, 0, 0};
    hs_gather_rows g = {.src = {big, 0, 0},
                        .src_rows = 1,
                        .src_stride = 16,
                        .dst = {big, 64, 0},
                        .dst_rows = 100,
                        .dst_stride = 16,
                        .cols = 16,
                        .dst_ids = &di};
    hs_vk_seq *s = hs_test_seq_begin(env);
    assert_int_equal(hs_op_gather_rows(env->ops, s, &g, 1), HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "indexed destination"));
    HS_CHECK(hs_vk_seq_end(s));
    hs_vk_seq_destroy(s);
    hs_vk_buffer_destroy(big), hs_vk_buffer_destroy(bi);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_gather_replay),
        cmocka_unit_test(test_gather_bad_args),
    };
    const struct CMUnitTest split_tests[] = {cmocka_unit_test(test_gather_split),
                                             cmocka_unit_test(test_gather)};
    int fails = hs_test_run_group("gather", tests, setup, teardown);
    fails += hs_test_run_group("gather_small_range", split_tests, setup_small_range, teardown);
    return fails;
}
