/* Tests of the row and element-wise ops (runtime/op_elem.h) against the plain-C
 * references in ref_elem.c: RMSNorm, softmax (up to vocabulary rows), add, mul,
 * scale, GELU, SiLU, SwiGLU, GeGLU. Odd sizes, unaligned offsets, in-place use,
 * batch invariance (bitwise), argument checks, and a second group with a tiny
 * maxStorageBufferRange (HS_VK_MAX_BUFFER_RANGE) that forces split dispatches
 * (including RoPE + KV write; RoPE itself is tested in test_rope.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_elem.h"
#include "ref_elem.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

/* A context whose maxStorageBufferRange is 4 KiB, so every op below has to
 * split its tensors into several dispatches. */
static int setup_small_range(void **state) { return hs_test_setup_range(state, 4096); }

/* Largest |a - b| / (|b| + floor) over the arrays. */
static double max_rel(const float *a, const float *b, size_t n, double floor) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + floor);
        if (!(d <= m)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* ---- rmsnorm ---- */

static void check_rmsnorm(hs_test_env *env, hs_rng *r, uint32_t n, uint32_t dim, bool weight) {
    size_t cnt = (size_t)n * dim;
    float *x = hs_test_rand_array(r, cnt, -2.0f, 2.0f);
    float *w = hs_test_rand_array(r, dim, 0.5f, 1.5f);
    float *ref = malloc(cnt * sizeof *ref);
    const float eps = 1e-5f;
    ref_rmsnorm(x, weight ? w : NULL, ref, n, dim, eps);

    hs_vk_buffer *bx = hs_test_buffer(env, x, cnt * 4), *bw = hs_test_buffer(env, w, dim * 4);
    hs_vk_buffer *by = hs_test_buffer(env, NULL, cnt * 4);
    hs_vk_binding X = hs_test_bind(bx, 0), W = hs_test_bind(bw, 0), Y = hs_test_bind(by, 0);
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_rmsnorm(env->ops, s, &X, weight ? &W : NULL, &Y, n, dim, eps));
    assert_int_equal(hs_vk_seq_dispatch_count(s), 1);
    hs_test_seq_run(s);
    float *y = hs_test_download(by, cnt * 4);
    double e = max_rel(y, ref, cnt, 1e-3);
    if (e > 2e-6) fail_msg("rmsnorm n=%u dim=%u w=%d: max rel error %g", n, dim, weight, e);

    /* In place: y aliases x. */
    s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_rmsnorm(env->ops, s, &X, weight ? &W : NULL, &X, n, dim, eps));
    hs_test_seq_run(s);
    float *yi = hs_test_download(bx, cnt * 4);
    assert_memory_equal(yi, y, cnt * 4);

    free(x), free(w), free(ref), free(y), free(yi);
    hs_vk_buffer_destroy(bx), hs_vk_buffer_destroy(bw), hs_vk_buffer_destroy(by);
}

static void test_rmsnorm(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 1);
    const uint32_t dims[] = {1, 7, 64, 257, 576, 2049};
    const uint32_t ns[] = {1, 2, 33};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            check_rmsnorm(env, &r, ns[k], dims[d], (d + k) % 2);
    check_rmsnorm(env, &r, 5, 576, true);
    check_rmsnorm(env, &r, 5, 576, false);
}

/* ---- softmax ---- */

static void check_softmax(hs_test_env *env, hs_rng *r, uint32_t n, uint32_t dim, float scale, float range) {
    size_t cnt = (size_t)n * dim;
    float *x = hs_test_rand_array(r, cnt, -range, range);
    float *ref = malloc(cnt * sizeof *ref);
    ref_softmax(x, ref, n, dim, scale);
    hs_vk_buffer *bx = hs_test_buffer(env, x, cnt * 4), *by = hs_test_buffer(env, NULL, cnt * 4);
    hs_vk_binding X = hs_test_bind(bx, 0), Y = hs_test_bind(by, 0);
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_softmax(env->ops, s, &X, &Y, n, dim, scale));
    assert_int_equal(hs_vk_seq_dispatch_count(s), 1);
    hs_test_seq_run(s);
    float *y = hs_test_download(by, cnt * 4);
    double nmse = hs_nmse(y, ref, cnt);
    double e = max_rel(y, ref, cnt, 1e-30);
    if (nmse > 1e-11 || e > 1e-5)
        fail_msg("softmax n=%u dim=%u scale=%g: nmse %g, max rel error %g", n, dim, (double)scale, nmse, e);
    for (uint32_t row = 0; row < n; row++) {
        double sum = 0;
        for (uint32_t i = 0; i < dim; i++)
            sum += y[(size_t)row * dim + i];
        assert_true(fabs(sum - 1.0) < 1e-4);
    }

    /* In place: y aliases x. */
    s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_softmax(env->ops, s, &X, &X, n, dim, scale));
    hs_test_seq_run(s);
    float *yi = hs_test_download(bx, cnt * 4);
    assert_memory_equal(yi, y, cnt * 4);
    free(x), free(ref), free(y), free(yi);
    hs_vk_buffer_destroy(bx), hs_vk_buffer_destroy(by);
}

static void test_softmax(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 2);
    const uint32_t dims[] = {1, 7, 64, 257, 2049};
    const uint32_t ns[] = {1, 3, 33};
    const float scales[] = {1.0f, 0.125f, -0.5f};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            check_softmax(env, &r, ns[k], dims[d], scales[(d + k) % 3], 8.0f);
}

/* A row that cannot fit one binding (the ops never split a row) is refused
 * with a message naming the limit, and nothing is recorded. */
static void expect_row_refused(hs_test_env *env, uint32_t dim, uint64_t offset) {
    hs_vk_buffer *b = hs_test_buffer(env, NULL, (size_t)dim * 4 + offset);
    hs_vk_binding X = hs_test_bind(b, offset);
    hs_vk_seq *s = hs_test_seq_begin(env);
    assert_int_equal(hs_op_softmax(env->ops, s, &X, &X, 1, dim, 1.0f), HS_ERR_VK_UNSUPPORTED);
    assert_non_null(strstr(hs_last_error(), "maxStorageBufferRange"));
    assert_int_equal(hs_op_rmsnorm(env->ops, s, &X, NULL, &X, 1, dim, 1e-6f), HS_ERR_VK_UNSUPPORTED);
    assert_int_equal(hs_vk_seq_dispatch_count(s), 0);
    hs_test_seq_run(s);
    hs_vk_buffer_destroy(b);
}

/* Vocabulary-size rows: SmolLM2's 49152 and gemma3's 262144 (1 MiB: exactly
 * the range HS_VK_MAX_BUFFER_RANGE=1048576 pretends, which must still fit). */
static void test_softmax_vocab(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 3);
    const uint64_t range = hs_ops_caps(env->ops)->max_storage_buffer_range;
    check_softmax(env, &r, 3, 49152, 1.0f, 20.0f);
    if (262144 * 4 <= range)
        check_softmax(env, &r, 1, 262144, 0.7f, 30.0f);
    else
        expect_row_refused(env, 262144, 0);
}

/* Rows so long that one invocation per 8 lanes would loop more than 65535
 * times, where llvmpipe silently stops loops: the ops widen the workgroup. */
static void test_long_rows(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 9);
    const uint32_t dim = (1u << 20) + 3;
    if ((uint64_t)dim * 4 > hs_vk_ctx_caps(env->vk)->max_storage_buffer_range) {
        /* A row cannot be split across bindings: the device limit (forced by
         * HS_VK_MAX_BUFFER_RANGE) must give a clear error, not a wrong result. */
        expect_row_refused(env, dim, 0);
        return;
    }
    check_softmax(env, &r, 1, dim, 1.0f, 10.0f);
    check_rmsnorm(env, &r, 1, dim, true);
}

/* ---- batch invariance ---- */

typedef enum { INV_RMSNORM, INV_SOFTMAX } inv_op;

static void record_row_op(hs_test_env *env, hs_vk_seq *s, inv_op op, const hs_vk_binding *x,
                          const hs_vk_binding *w, const hs_vk_binding *y, uint32_t n, uint32_t dim) {
    if (op == INV_RMSNORM)
        HS_CHECK(hs_op_rmsnorm(env->ops, s, x, w, y, n, dim, 1e-6f));
    else
        HS_CHECK(hs_op_softmax(env->ops, s, x, y, n, dim, 0.3f));
}

/* Row j computed alone, and inside sub-batches of several sizes starting at
 * other rows, must be bitwise equal to row j of the full batch. The sub-batch
 * inputs are the same buffer at byte offsets that are not 16-byte aligned for
 * odd dims, so the window/offset path is covered too. */
static void check_invariance(hs_test_env *env, hs_rng *r, inv_op op, uint32_t n, uint32_t dim) {
    size_t cnt = (size_t)n * dim;
    float *x = hs_test_rand_array(r, cnt, -6.0f, 6.0f);
    float *w = hs_test_rand_array(r, dim, -1.0f, 1.0f);
    hs_vk_buffer *bx = hs_test_buffer(env, x, cnt * 4), *bw = hs_test_buffer(env, w, dim * 4);
    hs_vk_buffer *by = hs_test_buffer(env, NULL, cnt * 4), *bz = hs_test_buffer(env, NULL, cnt * 4);
    hs_vk_binding X = hs_test_bind(bx, 0), W = hs_test_bind(bw, 0), Y = hs_test_bind(by, 0);
    hs_vk_seq *s = hs_test_seq_begin(env);
    record_row_op(env, s, op, &X, &W, &Y, n, dim);
    hs_test_seq_run(s);
    float *full = hs_test_download(by, cnt * 4);

    /* The same batch 4 bytes further into a buffer: for dims that are a
     * multiple of 4 this is the scalar path instead of the vec4 one, which must
     * give the same bits. */
    hs_vk_buffer *bx4 = hs_test_buffer(env, NULL, cnt * 4 + 4), *by4 = hs_test_buffer(env, NULL, cnt * 4 + 4);
    HS_CHECK(hs_vk_buffer_upload(bx4, 4, x, cnt * 4));
    hs_vk_binding X4 = hs_test_bind(bx4, 4), Y4 = hs_test_bind(by4, 4);
    s = hs_test_seq_begin(env);
    record_row_op(env, s, op, &X4, &W, &Y4, n, dim);
    hs_test_seq_run(s);
    float *shifted = malloc(cnt * 4);
    HS_CHECK(hs_vk_buffer_download(by4, 4, shifted, cnt * 4));
    if (memcmp(shifted, full, cnt * 4))
        fail_msg("%s dim=%u: the batch at an offset of 4 bytes differs",
                 op == INV_RMSNORM ? "rmsnorm" : "softmax", dim);
    free(shifted);
    hs_vk_buffer_destroy(bx4), hs_vk_buffer_destroy(by4);

    const uint32_t starts[] = {0, 1, 5, n - 1, n / 2};
    const uint32_t lens[] = {1, 2, 3, 7, n};
    for (size_t a = 0; a < sizeof starts / sizeof starts[0]; a++)
        for (size_t b = 0; b < sizeof lens / sizeof lens[0]; b++) {
            uint32_t j0 = starts[a] % n, m = lens[b];
            if (j0 + m > n) m = n - j0;
            HS_CHECK(hs_vk_buffer_fill(bz, 0, cnt * 4, 0));
            hs_vk_binding Xs = hs_test_bind(bx, (uint64_t)j0 * dim * 4), Zs = hs_test_bind(bz, (uint64_t)j0 * dim * 4);
            s = hs_test_seq_begin(env);
            record_row_op(env, s, op, &Xs, &W, &Zs, m, dim);
            hs_test_seq_run(s);
            float *part = hs_test_download(bz, cnt * 4);
            if (memcmp(part + (size_t)j0 * dim, full + (size_t)j0 * dim, (size_t)m * dim * 4))
                fail_msg("%s dim=%u: rows %u..%u computed as a batch of %u differ from the batch of %u",
                         op == INV_RMSNORM ? "rmsnorm" : "softmax", dim, j0, j0 + m - 1, m, n);
            free(part);
        }
    free(x), free(w), free(full);
    hs_vk_buffer_destroy(bx), hs_vk_buffer_destroy(bw), hs_vk_buffer_destroy(by), hs_vk_buffer_destroy(bz);
}

static void test_batch_invariance(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 4);
    const uint32_t dims[] = {1, 7, 64, 257, 576, 2049};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        check_invariance(env, &r, INV_RMSNORM, 33, dims[d]);
        check_invariance(env, &r, INV_SOFTMAX, 33, dims[d]);
    }
    check_invariance(env, &r, INV_SOFTMAX, 9, 49152);
}

/* ---- element-wise ---- */

typedef enum { E_ADD, E_MUL, E_SCALE, E_GELU, E_SILU } flat_op;

static hs_status record_flat(hs_test_env *env, hs_vk_seq *s, flat_op op, const hs_vk_binding *a,
                             const hs_vk_binding *b, const hs_vk_binding *y, uint64_t count) {
    switch (op) {
    case E_ADD: return hs_op_add(env->ops, s, a, b, y, count);
    case E_MUL: return hs_op_mul(env->ops, s, a, b, y, count);
    case E_SCALE: return hs_op_scale(env->ops, s, a, y, count, -1.75f);
    case E_GELU: return hs_op_gelu(env->ops, s, a, y, count);
    case E_SILU: return hs_op_silu(env->ops, s, a, y, count);
    }
    return HS_ERR_INVALID_ARG;
}

static float flat_ref(flat_op op, float a, float b) {
    switch (op) {
    case E_ADD: return a + b;
    case E_MUL: return a * b;
    case E_SCALE: return -1.75f * a;
    case E_GELU: return ref_gelu(a);
    case E_SILU: return ref_silu(a);
    }
    return NAN;
}

/* Operands live at byte offsets a_off/b_off/y_off of their buffers. add, mul
 * and scale are single IEEE operations: the device must match bitwise. */
static void check_flat(hs_test_env *env, hs_rng *r, flat_op op, uint64_t count, uint64_t a_off,
                       uint64_t b_off, uint64_t y_off, bool in_place) {
    float *a = hs_test_rand_array(r, count + a_off / 4, -8.0f, 8.0f);
    float *b = hs_test_rand_array(r, count + b_off / 4, -8.0f, 8.0f);
    /* Saturating ends of the activations: no NaN, no overflow. */
    const float ext[] = {-1000.0f, 1000.0f, -90.0f, 90.0f, 0.0f, -0.0f, 1e-30f};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0] && i < count; i++)
        a[a_off / 4 + i * 7 % count] = ext[i];
    float *ref = malloc(count * sizeof *ref);
    for (uint64_t i = 0; i < count; i++)
        ref[i] = flat_ref(op, a[a_off / 4 + i], b[b_off / 4 + i]);

    hs_vk_buffer *ba = hs_test_buffer(env, a, (count + a_off / 4) * 4);
    hs_vk_buffer *bb = hs_test_buffer(env, b, (count + b_off / 4) * 4);
    hs_vk_buffer *by = in_place ? ba : hs_test_buffer(env, NULL, (count + y_off / 4) * 4);
    if (in_place) y_off = a_off;
    hs_vk_binding A = hs_test_bind(ba, a_off), B = hs_test_bind(bb, b_off), Y = hs_test_bind(by, y_off);
    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(record_flat(env, s, op, &A, &B, &Y, count));
    hs_test_seq_run(s);
    float *y = malloc(count * 4);
    HS_CHECK(hs_vk_buffer_download(by, y_off, y, count * 4));
    if (op == E_ADD || op == E_MUL || op == E_SCALE) {
        for (uint64_t i = 0; i < count; i++)
            if (memcmp(&y[i], &ref[i], 4))
                fail_msg("op %d count %llu: element %llu is %.9g, expected %.9g", op,
                         (unsigned long long)count, (unsigned long long)i, (double)y[i], (double)ref[i]);
    } else {
        double e = hs_max_abs_diff(y, ref, count), rel = max_rel(y, ref, count, 1.0);
        if (rel > 2e-6)
            fail_msg("op %d count %llu: max abs diff %g, rel %g", op, (unsigned long long)count, e, rel);
    }
    free(a), free(b), free(ref), free(y);
    hs_vk_buffer_destroy(ba), hs_vk_buffer_destroy(bb);
    if (!in_place) hs_vk_buffer_destroy(by);
}

static void test_eltwise(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 5);
    const uint64_t counts[] = {1, 7, 64, 257, 4099, 1000003};
    for (int op = E_ADD; op <= E_SILU; op++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            check_flat(env, &r, (flat_op)op, counts[k], 0, 0, 0, false);
            check_flat(env, &r, (flat_op)op, counts[k], 4, 12, 20, false); /* unaligned offsets */
            check_flat(env, &r, (flat_op)op, counts[k], 8, 4, 0, true);    /* y aliases a */
        }
}

/* A count needing far more invocations than one workgroup row holds (the
 * grid-stride loop). */
static void test_eltwise_large(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 6);
    const hs_vk_caps *c = hs_ops_caps(env->ops);
    uint64_t count = (uint64_t)c->max_wg_count[0] * 64 * 4 + 777;
    if (count * 4 > c->max_storage_buffer_range - 256) count = (c->max_storage_buffer_range - 256) / 4;
    check_flat(env, &r, E_SCALE, count, 0, 0, 4, false);
}

static void check_gated(hs_test_env *env, hs_rng *r, bool geglu, uint32_t n, uint32_t ff) {
    size_t cin = (size_t)n * 2 * ff, cout = (size_t)n * ff;
    float *gu = hs_test_rand_array(r, cin, -6.0f, 6.0f);
    float *ref = malloc(cout * sizeof *ref);
    if (geglu)
        ref_geglu(gu, ref, n, ff);
    else
        ref_swiglu(gu, ref, n, ff);
    hs_vk_buffer *bg = hs_test_buffer(env, gu, cin * 4), *by = hs_test_buffer(env, NULL, cout * 4 + 4);
    hs_vk_binding G = hs_test_bind(bg, 0), Y = hs_test_bind(by, 4);
    hs_vk_seq *s = hs_test_seq_begin(env);
    if (geglu)
        HS_CHECK(hs_op_geglu(env->ops, s, &G, &Y, n, ff));
    else
        HS_CHECK(hs_op_swiglu(env->ops, s, &G, &Y, n, ff));
    assert_int_equal(hs_vk_seq_dispatch_count(s), 1);
    hs_test_seq_run(s);
    float *y = malloc(cout * 4);
    HS_CHECK(hs_vk_buffer_download(by, 4, y, cout * 4));
    double rel = max_rel(y, ref, cout, 1.0);
    if (rel > 3e-6) fail_msg("%s n=%u ff=%u: max rel error %g", geglu ? "geglu" : "swiglu", n, ff, rel);
    free(gu), free(ref), free(y);
    hs_vk_buffer_destroy(bg), hs_vk_buffer_destroy(by);
}

static void test_gated(void **state) {
    hs_test_env *env = *state;
    hs_rng r;
    hs_rng_seed(&r, 7);
    const uint32_t ffs[] = {1, 7, 257, 1536};
    const uint32_t ns[] = {1, 3, 33};
    for (size_t f = 0; f < sizeof ffs / sizeof ffs[0]; f++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            check_gated(env, &r, false, ns[k], ffs[f]);
            check_gated(env, &r, true, ns[k], ffs[f]);
        }
}

/* ---- argument checks ---- */

static void test_bad_args(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *b = hs_test_buffer(env, NULL, 1024);
    hs_vk_binding B = hs_test_bind(b, 0), B2 = hs_test_bind(b, 2), Bend = hs_test_bind(b, 1000), Bwin = {b, 0, 256};
    hs_vk_seq *s = hs_test_seq_begin(env);
    /* 16 x 16 floats = 1024 bytes fit, 17 rows do not. */
    HS_CHECK(hs_op_rmsnorm(env->ops, s, &B, NULL, &B, 16, 16, 1e-6f));
    assert_int_equal(hs_op_rmsnorm(env->ops, s, &B, NULL, &B, 17, 16, 1e-6f), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "x needs 1088 bytes"));
    assert_int_equal(hs_op_rmsnorm(env->ops, s, &B, NULL, &B, 1, 0, 1e-6f), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_rmsnorm(env->ops, s, &B2, NULL, &B, 1, 4, 1e-6f), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "multiple of 4"));
    assert_int_equal(hs_op_softmax(env->ops, s, &B, &Bwin, 2, 64, 1.0f), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_op_softmax(env->ops, s, &B, NULL, 2, 64, 1.0f), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_add(env->ops, s, &B, &Bend, &B, 8), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "b needs"));
    assert_int_equal(hs_op_swiglu(env->ops, s, &B, &B, 1, 0), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_swiglu(env->ops, s, &B, &B, 3, 64), HS_ERR_OUT_OF_RANGE);
    /* Empty work records nothing. */
    uint32_t before = hs_vk_seq_dispatch_count(s);
    HS_CHECK(hs_op_softmax(env->ops, s, &B, &B, 0, 64, 1.0f));
    HS_CHECK(hs_op_gelu(env->ops, s, &B, &B, 0));
    assert_int_equal(hs_vk_seq_dispatch_count(s), before);
    hs_test_seq_run(s);
    hs_vk_buffer_destroy(b);
}

/* ---- split dispatches (maxStorageBufferRange = 4 KiB) ---- */

static void test_split_ranges(void **state) {
    hs_test_env *env = *state;
    assert_true(hs_ops_caps(env->ops)->max_storage_buffer_range <= 4096);
    hs_rng r;
    hs_rng_seed(&r, 8);
    /* Rows of 1 KiB + 4 bytes at unaligned offsets: several rows per dispatch. */
    const uint32_t n = 37, dim = 257;
    size_t cnt = (size_t)n * dim;
    float *x = hs_test_rand_array(&r, cnt + 1, -3.0f, 3.0f), *w = hs_test_rand_array(&r, dim, 0.5f, 1.5f);
    float *ref = malloc(cnt * 4);
    hs_vk_buffer *bx = hs_test_buffer(env, x, (cnt + 1) * 4), *bw = hs_test_buffer(env, w, dim * 4);
    hs_vk_buffer *by = hs_test_buffer(env, NULL, (cnt + 1) * 4);
    hs_vk_binding X = hs_test_bind(bx, 4), W = hs_test_bind(bw, 0), Y = hs_test_bind(by, 4);

    hs_vk_seq *s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_rmsnorm(env->ops, s, &X, &W, &Y, n, dim, 1e-5f));
    assert_true(hs_vk_seq_dispatch_count(s) >= 10);
    hs_test_seq_run(s);
    float *y = malloc(cnt * 4);
    HS_CHECK(hs_vk_buffer_download(by, 4, y, cnt * 4));
    ref_rmsnorm(x + 1, w, ref, n, dim, 1e-5f);
    assert_true(max_rel(y, ref, cnt, 1e-3) < 2e-6);

    s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_softmax(env->ops, s, &X, &Y, n, dim, 0.5f));
    hs_test_seq_run(s);
    HS_CHECK(hs_vk_buffer_download(by, 4, y, cnt * 4));
    ref_softmax(x + 1, ref, n, dim, 0.5f);
    assert_true(hs_nmse(y, ref, cnt) < 1e-11);

    /* Flat add: 9509 elements in chunks of about 1 K. */
    s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_add(env->ops, s, &X, &X, &Y, cnt));
    assert_true(hs_vk_seq_dispatch_count(s) >= 9);
    hs_test_seq_run(s);
    HS_CHECK(hs_vk_buffer_download(by, 4, y, cnt * 4));
    for (size_t i = 0; i < cnt; i++)
        ref[i] = x[i + 1] + x[i + 1];
    assert_memory_equal(y, ref, cnt * 4);

    /* SwiGLU with gate | up rows of 2 KiB. */
    const uint32_t ff = 256, nt = 9;
    s = hs_test_seq_begin(env);
    HS_CHECK(hs_op_swiglu(env->ops, s, &X, &Y, nt, ff));
    hs_test_seq_run(s);
    HS_CHECK(hs_vk_buffer_download(by, 4, y, (size_t)nt * ff * 4));
    ref_swiglu(x + 1, ref, nt, ff);
    assert_true(max_rel(y, ref, (size_t)nt * ff, 1.0) < 3e-6);

    /* RoPE + KV write: 20 tokens of 4 heads x 64 (1 KiB of qkv each). */
    {
        const uint32_t nt = 20, hd = 64, n_ctx = 12;
        hs_rope_params rp = {.n_rot = 64, .mode = HS_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f};
        float fr[32];
        hs_rope_freqs(&rp, fr);
        int32_t pos[20];
        uint32_t rows[20];
        for (uint32_t t = 0; t < nt; t++)
            pos[t] = (int32_t)(t * 37), rows[t] = t < n_ctx ? n_ctx - 1 - t : n_ctx + t;
        hs_vk_buffer *bf = hs_test_buffer(env, fr, sizeof fr), *bp = hs_test_buffer(env, pos, sizeof pos);
        hs_vk_buffer *br = hs_test_buffer(env, rows, sizeof rows),
                     *bq = hs_test_buffer(env, NULL, nt * 2 * hd * 4);
        hs_vk_buffer *bk = hs_test_buffer(env, NULL, n_ctx * hd * 4),
                     *bv = hs_test_buffer(env, NULL, n_ctx * hd * 4);
        hs_vk_binding F = hs_test_bind(bf, 0), P = hs_test_bind(bp, 0), R = hs_test_bind(br, 0), Q = hs_test_bind(bq, 0);
        hs_kv_layer kv = {hs_test_bind(bk, 0), hs_test_bind(bv, 0), HS_TYPE_F32, n_ctx, 1, hd};
        rp.freqs = &F;
        s = hs_test_seq_begin(env);
        HS_CHECK(hs_op_rope_kv(env->ops, s, &X, &P, &R, &Q, &kv, nt, 2, &rp));
        assert_true(hs_vk_seq_dispatch_count(s) >= 5);
        hs_test_seq_run(s);
        float *q = hs_test_download(bq, nt * 2 * hd * 4), *k = hs_test_download(bk, n_ctx * hd * 4);
        float *v = hs_test_download(bv, n_ctx * hd * 4);
        float *qr = malloc(nt * 2 * hd * 4), *kr = calloc(n_ctx * hd, 4), *vr = calloc(n_ctx * hd, 4);
        ref_rope_kv(x + 1, pos, rows, qr, kr, vr, nt, 2, 1, hd, n_ctx, &rp);
        assert_true(hs_max_abs_diff(q, qr, nt * 2 * hd) < 1e-5);
        assert_true(hs_max_abs_diff(k, kr, n_ctx * hd) < 1e-5);
        assert_memory_equal(v, vr, n_ctx * hd * 4);
        free(q), free(k), free(v), free(qr), free(kr), free(vr);
        hs_vk_buffer_destroy(bf), hs_vk_buffer_destroy(bp), hs_vk_buffer_destroy(br),
            hs_vk_buffer_destroy(bq);
        hs_vk_buffer_destroy(bk), hs_vk_buffer_destroy(bv);
    }

    /* A row of exactly the range (1024 floats) fits at an aligned offset; 4
     * bytes further on its alignment slack does not fit, and a longer row
     * fits nowhere: both are refused with a message. */
    check_softmax(env, &r, 1, 1024, 0.5f, 8.0f);
    check_rmsnorm(env, &r, 1, 1024, true);
    expect_row_refused(env, 1024, 4);
    expect_row_refused(env, 2048, 0);

    free(x), free(w), free(ref), free(y);
    hs_vk_buffer_destroy(bx), hs_vk_buffer_destroy(bw), hs_vk_buffer_destroy(by);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),          cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_softmax_vocab),    cmocka_unit_test(test_long_rows),
        cmocka_unit_test(test_batch_invariance), cmocka_unit_test(test_eltwise),
        cmocka_unit_test(test_eltwise_large),    cmocka_unit_test(test_gated),
        cmocka_unit_test(test_bad_args),
    };
    const struct CMUnitTest split_tests[] = {cmocka_unit_test(test_split_ranges)};
    int fails = hs_test_run_group("elem", tests, setup, teardown);
    fails += hs_test_run_group("elem_small_range", split_tests, setup_small_range, teardown);
    return fails;
}
