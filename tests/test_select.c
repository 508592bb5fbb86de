/* test_select: argmax and Top-K (runtime/op_select) against the plain-C
 * references of tests/ref_select.c: odd vocabulary sizes, ties, peaked and
 * flat distributions, masked logits, batch invariance (bitwise), argument
 * checks, and the split into several dispatches when the logits pass
 * maxStorageBufferRange (second group, with HS_VK_MAX_BUFFER_RANGE). */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "op_select.h"
#include "ref_select.h"
#include "testutil.h"

static int setup(void **state) { return hs_test_setup(state); }
static int teardown(void **state) { return hs_test_teardown(state); }

/* Buffer range of the split group: a few rows of the test sizes per dispatch. */
#define SPLIT_RANGE 65536

static int setup_split(void **state) { return hs_test_setup_range(state, SPLIT_RANGE); }

/* Canary around the logits: larger than any test value, so a kernel that
 * reads outside its row picks it. */
#define CANARY 1e30f

/* Random values of roughly normal shape, mean 0 and standard deviation sd. */
static void fill_normal(hs_rng *r, float *x, size_t n, float sd) {
    for (size_t i = 0; i < n; i++) {
        float s = 0;
        for (int j = 0; j < 4; j++)
            s += hs_rng_uniform(r);
        x[i] = (s - 2.0f) * 1.7320508f * sd;
    }
}

/* Device buffer of pad canaries followed by n floats of x. */
static hs_vk_buffer *logits_buffer(hs_test_env *env, const float *x, size_t n, uint32_t pad) {
    float *h = malloc((pad + n) * sizeof *h);
    assert_non_null(h);
    for (uint32_t i = 0; i < pad; i++)
        h[i] = CANARY;
    memcpy(h + pad, x, n * sizeof *h);
    hs_vk_buffer *b = hs_test_buffer(env, h, (pad + n) * sizeof *h);
    free(h);
    return b;
}

/* Runs argmax over x [n][vocab] placed pad floats into its buffer. */
static uint32_t *run_argmax(hs_test_env *env, const float *x, uint32_t n, uint32_t vocab, uint32_t pad) {
    hs_vk_buffer *in = logits_buffer(env, x, (size_t)n * vocab, pad);
    hs_vk_buffer *out = hs_test_buffer(env, NULL, (size_t)n * 4);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    hs_vk_binding bx = {in, (uint64_t)pad * 4, 0}, bo = {out, 0, 0};
    HS_CHECK(hs_op_argmax(env->ops, seq, &bx, n, vocab, &bo));
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    uint32_t *r = hs_test_download(out, (size_t)n * 4);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(in);
    hs_vk_buffer_destroy(out);
    return r;
}

/* Runs Top-K over x [n][vocab] placed pad floats into its buffer; returns the
 * downloaded records and, if dispatches is not NULL, the dispatch count. */
static void *run_topk_ex(hs_test_env *env, const float *x, uint32_t n, uint32_t vocab, uint32_t k, float t,
                         uint32_t pad, uint32_t *dispatches) {
    hs_vk_buffer *in = logits_buffer(env, x, (size_t)n * vocab, pad);
    size_t out_bytes = hs_topk_out_bytes(n, k);
    hs_vk_buffer *out = hs_test_buffer(env, NULL, out_bytes);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    hs_vk_binding bx = {in, (uint64_t)pad * 4, 0}, bo = {out, 0, 0};
    HS_CHECK(hs_op_topk(env->ops, seq, &bx, n, vocab, k, t, &bo));
    HS_CHECK(hs_vk_seq_end(seq));
    HS_CHECK(hs_vk_seq_submit(seq));
    if (dispatches) *dispatches = hs_vk_seq_dispatch_count(seq);
    void *r = hs_test_download(out, out_bytes);
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(in);
    hs_vk_buffer_destroy(out);
    return r;
}

static void *run_topk(hs_test_env *env, const float *x, uint32_t n, uint32_t vocab, uint32_t k, float t) {
    return run_topk_ex(env, x, n, vocab, k, t, 0, NULL);
}

/* Whether one row of vocab logits, pad floats into its buffer, fits the
 * device's maxStorageBufferRange with the alignment slack of its offset (the
 * ops never split a row; see op_select.h). */
static bool row_fits(hs_test_env *env, uint32_t vocab, uint32_t pad) {
    const hs_vk_caps *c = hs_ops_caps(env->ops);
    uint64_t slack = (uint64_t)pad * 4 % c->min_storage_offset_align;
    return (uint64_t)vocab * 4 + slack <= c->max_storage_buffer_range;
}

/* A row that does not fit one binding: both ops refuse it with a message
 * naming the limit, record nothing, and leave nothing behind. */
static void expect_row_refused(hs_test_env *env, uint32_t vocab, uint32_t pad) {
    hs_vk_buffer *in = hs_test_buffer(env, NULL, ((size_t)vocab + pad) * 4);
    hs_vk_buffer *out = hs_test_buffer(env, NULL, hs_topk_out_bytes(1, 4));
    hs_vk_seq *seq = hs_test_seq_begin(env);
    hs_vk_binding bx = {in, (uint64_t)pad * 4, 0}, bo = {out, 0, 0};
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 1, vocab, 4, 1.0f, &bo), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "exceeds maxStorageBufferRange"));
    assert_int_equal(hs_op_argmax(env->ops, seq, &bx, 1, vocab, &bo), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "exceeds maxStorageBufferRange"));
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 0);
    hs_test_seq_run(seq);
    hs_vk_buffer_destroy(in);
    hs_vk_buffer_destroy(out);
}

static void check_argmax(const uint32_t *got, const float *x, uint32_t n, uint32_t vocab, const char *what) {
    uint32_t *ref = malloc(n * sizeof *ref);
    assert_non_null(ref);
    hs_ref_argmax(x, n, vocab, ref);
    for (uint32_t r = 0; r < n; r++)
        if (got[r] != ref[r])
            fail_msg("%s: vocab %u row %u: argmax %u, reference %u (values %g vs %g)", what, vocab, r, got[r],
                     ref[r], got[r] < vocab ? (double)x[(size_t)r * vocab + got[r]] : NAN,
                     (double)x[(size_t)r * vocab + ref[r]]);
    free(ref);
}

/* Tolerances: the device sums in f32 (per-invocation sequences of up to
 * vocab / 8 terms); the reference in double. */
#define TOL_REL  1e-4
#define PROB_ABS 1e-8

static int near(double got, double ref, double rel, double abs_tol) {
    return fabs(got - ref) <= abs_tol + rel * fabs(ref);
}

/* Compares every field of the Top-K records with the reference. */
static void check_topk_tol(const void *rec, const float *x, uint32_t n, uint32_t vocab, uint32_t k, float t,
                           double rel, const char *what) {
    hs_ref_topk *ref = malloc(n * sizeof *ref);
    assert_non_null(ref);
    hs_ref_topk_rows(x, n, vocab, k, t, ref);
    for (uint32_t r = 0; r < n; r++) {
        hs_topk_result g;
        hs_topk_unpack(rec, k, r, &g);
        const hs_ref_topk *e = &ref[r];
        double mass = g.tail;
        for (uint32_t j = 0; j < k; j++) {
            if (g.ids[j] != e->ids[j])
                fail_msg("%s: vocab %u k %u T %g row %u: id[%u] = %u, reference %u", what, vocab, k,
                         (double)t, r, j, g.ids[j], e->ids[j]);
            if (!near(g.probs[j], e->probs[j], rel, PROB_ABS))
                fail_msg("%s: vocab %u k %u row %u: prob[%u] = %.9g, reference %.9g", what, vocab, k, r, j,
                         (double)g.probs[j], e->probs[j]);
            if (j > 0 && g.probs[j] > g.probs[j - 1])
                fail_msg("%s: row %u: probs not sorted at %u", what, r, j);
            mass += g.probs[j];
        }
        if (!near(g.tail, e->tail, rel, 1e-30))
            fail_msg("%s: vocab %u k %u T %g row %u: tail %.9g, reference %.9g", what, vocab, k, (double)t, r,
                     (double)g.tail, e->tail);
        if (!near(g.entropy, e->entropy, 0, rel))
            fail_msg("%s: vocab %u k %u T %g row %u: entropy %.9g, reference %.9g", what, vocab, k, (double)t,
                     r, (double)g.entropy, e->entropy);
        if (!(g.entropy >= 0.0f && g.entropy <= 1.0f))
            fail_msg("%s: row %u: entropy %g outside [0, 1]", what, r, (double)g.entropy);
        if ((double)g.max_logit != e->max_logit)
            fail_msg("%s: row %u: max %.9g, reference %.9g", what, r, (double)g.max_logit, e->max_logit);
        if (!near(g.lse, e->lse, 1e-6, rel))
            fail_msg("%s: vocab %u k %u T %g row %u: lse %.9g, reference %.9g", what, vocab, k, (double)t, r,
                     (double)g.lse, e->lse);
        if (fabs(mass - 1.0) > 10 * rel) fail_msg("%s: row %u: probs + tail = %.9g", what, r, mass);
        /* log q of the first id recovered from max and lse */
        double lq = hs_topk_log_prob(&g, x[(size_t)r * vocab + g.ids[0]], t);
        if (!near(lq, log(e->probs[0]), 0, 1e-5 + rel))
            fail_msg("%s: row %u: log q[0] %.9g, reference %.9g", what, r, lq, log(e->probs[0]));
    }
    free(ref);
}

static void check_topk(const void *rec, const float *x, uint32_t n, uint32_t vocab, uint32_t k, float t,
                       const char *what) {
    check_topk_tol(rec, x, n, vocab, k, t, TOL_REL, what);
}

/* ---- argmax ---- */

static void test_argmax_sizes(void **state) {
    hs_test_env *env = *state;
    static const uint32_t vocabs[] = {1, 7, 33, 512, 49152, 262144};
    hs_rng rng;
    hs_rng_seed(&rng, 11);
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        uint32_t vocab = vocabs[v], n = vocab >= 49152 ? 2 : 5;
        if (!row_fits(env, vocab, 0)) { /* a device range pretended small (HS_VK_MAX_BUFFER_RANGE) */
            expect_row_refused(env, vocab, 0);
            continue;
        }
        float *x = hs_test_rand_array(&rng, (size_t)n * vocab, -10.0f, 10.0f);
        uint32_t *got = run_argmax(env, x, n, vocab, 0);
        check_argmax(got, x, n, vocab, "random");
        free(got);
        free(x);
    }
}

static void test_argmax_ties(void **state) {
    hs_test_env *env = *state;
    hs_rng rng;
    hs_rng_seed(&rng, 12);
    /* vec4 path (1000) and scalar path (1001) */
    for (uint32_t vocab = 1000; vocab <= 1001; vocab++) {
        const uint32_t n = 7;
        float *x = hs_test_rand_array(&rng, (size_t)n * vocab, -5.0f, 5.0f);
        float *row;
        row = x; /* constant row: index 0 */
        for (uint32_t i = 0; i < vocab; i++)
            row[i] = 0.25f;
        row = x + vocab; /* max at 3, 500 and the last index */
        row[3] = row[500] = row[vocab - 1] = 9.0f;
        row = x + 2 * vocab; /* max in neighbouring elements of one chunk */
        row[6] = row[5] = 9.0f;
        row = x + 3 * vocab; /* same max at the start of many chunks (other invocations) */
        for (uint32_t i = 40; i < vocab; i += 4)
            row[i] = 7.5f;
        row = x + 4 * vocab; /* the lowest finite value everywhere */
        for (uint32_t i = 0; i < vocab; i++)
            row[i] = -FLT_MAX;
        row = x + 5 * vocab; /* a single maximum at the very end */
        row[vocab - 1] = 100.0f;
        row = x + 6 * vocab; /* descending: index 0 */
        for (uint32_t i = 0; i < vocab; i++)
            row[i] = -(float)i;
        uint32_t *got = run_argmax(env, x, n, vocab, 0);
        check_argmax(got, x, n, vocab, "ties");
        assert_int_equal(got[0], 0);
        assert_int_equal(got[1], 3);
        assert_int_equal(got[2], 5);
        assert_int_equal(got[3], 40);
        assert_int_equal(got[4], 0);
        assert_int_equal(got[5], vocab - 1);
        free(got);
        free(x);
    }
}

/* Many rows (many workgroups) and logits at offsets that are not aligned to
 * the device's storage alignment (the op aligns down and shifts). */
static void test_argmax_batch_offsets(void **state) {
    hs_test_env *env = *state;
    hs_rng rng;
    hs_rng_seed(&rng, 13);
    const uint32_t n = 300, vocab = 36;
    float *x = hs_test_rand_array(&rng, (size_t)n * vocab, -3.0f, 3.0f);
    for (uint32_t pad = 0; pad < 6; pad++) {
        uint32_t *got = run_argmax(env, x, n, vocab, pad);
        check_argmax(got, x, n, vocab, "offset");
        free(got);
    }
    free(x);
}

static void test_argmax_invalid(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *in = hs_test_buffer(env, NULL, 64 * 4);
    hs_vk_buffer *out = hs_test_buffer(env, NULL, 4 * 4);
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    hs_vk_binding bx = {in, 0, 0}, bo = {out, 0, 0}, none = {NULL, 0, 0};
    assert_int_equal(hs_op_argmax(env->ops, seq, &bx, 0, 16, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_argmax(env->ops, seq, &bx, 4, 0, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_argmax(env->ops, seq, &none, 4, 16, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_argmax(env->ops, seq, &bx, 4, 17, &bo), HS_ERR_OUT_OF_RANGE); /* 68 floats */
    assert_int_equal(hs_op_argmax(env->ops, seq, &bx, 5, 8, &bo), HS_ERR_OUT_OF_RANGE);  /* 5 outputs */
    hs_vk_binding odd = {in, 2, 0};
    assert_int_equal(hs_op_argmax(env->ops, seq, &odd, 1, 8, &bo), HS_ERR_INVALID_ARG);
    hs_vk_binding short_range = {in, 0, 32 * 4};
    assert_int_equal(hs_op_argmax(env->ops, seq, &short_range, 4, 16, &bo), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 0);
    HS_CHECK(hs_vk_seq_end(seq));
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(in);
    hs_vk_buffer_destroy(out);
}

/* ---- Top-K ---- */

static void test_topk_random(void **state) {
    hs_test_env *env = *state;
    static const uint32_t ks[] = {1, 4, 10, 32};
    static const float temps[] = {1.0f, 0.7f};
    static const uint32_t vocabs[] = {33, 512, 1001, 49152};
    hs_rng rng;
    hs_rng_seed(&rng, 21);
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        uint32_t vocab = vocabs[v], n = vocab > 4096 ? 2 : 5;
        float *x = malloc((size_t)n * vocab * sizeof *x);
        assert_non_null(x);
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t ti = 0; ti < sizeof temps / sizeof temps[0]; ti++) {
                fill_normal(&rng, x, (size_t)n * vocab, 3.0f);
                void *rec = run_topk(env, x, n, vocab, ks[ki], temps[ti]);
                check_topk(rec, x, n, vocab, ks[ki], temps[ti], "random");
                free(rec);
            }
        free(x);
    }
}

/* Vocabularies at or barely above k, and the largest vocabulary. */
static void test_topk_small_and_big(void **state) {
    hs_test_env *env = *state;
    hs_rng rng;
    hs_rng_seed(&rng, 22);
    static const struct {
        uint32_t vocab, k;
    } cases[] = {{1, 1}, {7, 1}, {7, 4}, {7, 7}, {32, 32}, {33, 32}, {262144, 32}, {262144, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t vocab = cases[c].vocab, k = cases[c].k, n = vocab > 4096 ? 1 : 3;
        if (!row_fits(env, vocab, 0)) {
            expect_row_refused(env, vocab, 0);
            continue;
        }
        float *x = malloc((size_t)n * vocab * sizeof *x);
        assert_non_null(x);
        fill_normal(&rng, x, (size_t)n * vocab, 2.0f);
        void *rec = run_topk(env, x, n, vocab, k, 0.7f);
        check_topk(rec, x, n, vocab, k, 0.7f, "small/big");
        if (vocab == 1) {
            hs_topk_result g;
            hs_topk_unpack(rec, k, 0, &g);
            assert_int_equal(g.ids[0], 0);
            assert_true(g.probs[0] == 1.0f && g.tail == 0.0f && g.entropy == 0.0f);
        }
        free(rec);
        free(x);
    }
}

/* Few distinct values: ties everywhere, inside chunks and across invocations
 * and subgroups; the lower id must come first. Plus sorted rows (every
 * element enters the private lists, or none after the first k). */
static void test_topk_ties_sorted(void **state) {
    hs_test_env *env = *state;
    hs_rng rng;
    hs_rng_seed(&rng, 23);
    for (uint32_t vocab = 4100; vocab <= 4101; vocab++) {
        const uint32_t n = 4;
        float *x = malloc((size_t)n * vocab * sizeof *x);
        assert_non_null(x);
        for (size_t i = 0; i < (size_t)2 * vocab; i++)
            x[i] = floorf(hs_rng_uniform(&rng) * 5.0f) * 0.5f;
        for (uint32_t i = 0; i < vocab; i++)
            x[2 * vocab + i] = (float)i * 1e-3f; /* ascending */
        for (uint32_t i = 0; i < vocab; i++)
            x[3 * vocab + i] = -(float)i * 1e-3f; /* descending */
        static const uint32_t ks[] = {1, 10, 32};
        for (size_t ki = 0; ki < 3; ki++) {
            void *rec = run_topk(env, x, n, vocab, ks[ki], 1.0f);
            check_topk(rec, x, n, vocab, ks[ki], 1.0f, "ties/sorted");
            /* tied rows: the top ids are the lowest ids holding the top value */
            hs_topk_result g;
            hs_topk_unpack(rec, ks[ki], 0, &g);
            for (uint32_t j = 1; j < ks[ki]; j++)
                if (g.probs[j] == g.probs[j - 1]) assert_true(g.ids[j] > g.ids[j - 1]);
            hs_topk_unpack(rec, ks[ki], 2, &g);
            assert_int_equal(g.ids[0], vocab - 1);
            hs_topk_unpack(rec, ks[ki], 3, &g);
            assert_int_equal(g.ids[ks[ki] - 1], ks[ki] - 1);
            free(rec);
        }
        free(x);
    }
}

/* Worst cases for the number of loop trips (llvmpipe ends the loops of an
 * invocation after 65535 trips, silently): long ascending rows make every
 * element a candidate of the Top-K list; odd sizes take the scalar loads. */
static void test_long_rows_worst_case(void **state) {
    hs_test_env *env = *state;
    static const uint32_t vocabs[] = {49152, 262144, 262147};
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        const uint32_t vocab = vocabs[v], n = 2;
        if (!row_fits(env, vocab, 0)) {
            expect_row_refused(env, vocab, 0);
            continue;
        }
        float *x = malloc((size_t)n * vocab * sizeof *x);
        assert_non_null(x);
        for (uint32_t i = 0; i < vocab; i++)
            x[i] = (float)i * 1e-4f; /* ascending */
        for (uint32_t i = 0; i < vocab; i++)
            x[vocab + i] = (float)(i % 4096) * 1e-3f; /* saw tooth */
        uint32_t *am = run_argmax(env, x, n, vocab, 0);
        check_argmax(am, x, n, vocab, "worst case");
        assert_int_equal(am[0], vocab - 1);
        free(am);
        static const uint32_t ks[] = {4, 32};
        for (size_t ki = 0; ki < 2; ki++) {
            void *rec = run_topk(env, x, n, vocab, ks[ki], 1.0f);
            check_topk(rec, x, n, vocab, ks[ki], 1.0f, "worst case");
            free(rec);
        }
        free(x);
    }
}

/* Peaked rows: entropy near 0, and a tail mass far below f32 epsilon that
 * must still be accurate (it is summed, not computed as 1 - sum). */
static void test_topk_peaked(void **state) {
    hs_test_env *env = *state;
    hs_rng rng;
    hs_rng_seed(&rng, 24);
    const uint32_t vocab = 5000, n = 3;
    float *x = hs_test_rand_array(&rng, (size_t)n * vocab, -2.0f, 2.0f);
    x[1234] = 30.0f;       /* one dominant id */
    x[vocab + 17] = 25.0f; /* two dominant ids */
    x[vocab + 4000] = 24.0f;
    x[2 * vocab + 4999] = 12.0f; /* mildly peaked, at the end */
    static const uint32_t ks[] = {1, 4, 10};
    static const float temps[] = {1.0f, 0.7f};
    for (size_t ki = 0; ki < 3; ki++)
        for (size_t ti = 0; ti < 2; ti++) {
            void *rec = run_topk(env, x, n, vocab, ks[ki], temps[ti]);
            check_topk(rec, x, n, vocab, ks[ki], temps[ti], "peaked");
            hs_topk_result g;
            hs_topk_unpack(rec, ks[ki], 0, &g);
            assert_int_equal(g.ids[0], 1234);
            assert_true(g.entropy < 1e-6f);
            assert_true(g.tail > 0.0f && g.tail < 1e-6f);
            free(rec);
        }
    free(x);
}

/* Flat rows: all logits equal. Every exp is exactly 1, so the f32 sums are
 * exact and a lost or twice-counted element shows far above the tolerance.
 * vocab = k + 1 gives the maximum entropy 1. */
static void test_topk_flat(void **state) {
    hs_test_env *env = *state;
    static const struct {
        uint32_t vocab, k;
    } cases[] = {{2, 1}, {5, 4}, {11, 10}, {33, 32}, {49152, 10}, {262144, 32}, {1001, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint32_t vocab = cases[c].vocab, k = cases[c].k;
        if (!row_fits(env, vocab, 0)) {
            expect_row_refused(env, vocab, 0);
            continue;
        }
        float *x = malloc((size_t)vocab * sizeof *x);
        assert_non_null(x);
        for (uint32_t i = 0; i < vocab; i++)
            x[i] = 1.5f;
        void *rec = run_topk(env, x, 1, vocab, k, 0.7f);
        check_topk_tol(rec, x, 1, vocab, k, 0.7f, 2e-6, "flat");
        hs_topk_result g;
        hs_topk_unpack(rec, k, 0, &g);
        for (uint32_t j = 0; j < k; j++)
            assert_int_equal(g.ids[j], j);
        if (vocab == k + 1) assert_true(g.entropy > 1.0f - 1e-6f);
        free(rec);
        free(x);
    }
    /* Nearly flat: small noise keeps the entropy near 1. */
    hs_rng rng;
    hs_rng_seed(&rng, 25);
    float x[11];
    hs_rng_fill(&rng, x, 11, -0.01f, 0.01f);
    void *rec = run_topk(env, x, 1, 11, 10, 1.0f);
    check_topk(rec, x, 1, 11, 10, 1.0f, "nearly flat");
    hs_topk_result g;
    hs_topk_unpack(rec, 10, 0, &g);
    assert_true(g.entropy > 0.999f);
    free(rec);
}

/* Masked logits (-1e30, as a sampler's mask): never chosen before a live id,
 * q = 0 exactly when k exceeds the live ids, entropy stays finite. */
static void test_topk_masked(void **state) {
    hs_test_env *env = *state;
    hs_rng rng;
    hs_rng_seed(&rng, 26);
    const uint32_t vocab = 777, n = 2;
    float *x = malloc((size_t)n * vocab * sizeof *x);
    assert_non_null(x);
    fill_normal(&rng, x, (size_t)n * vocab, 2.0f);
    for (uint32_t i = 0; i < vocab; i++)
        if (i % 100 != 7) x[i] = -1e30f; /* 8 live ids in row 0 */
    for (uint32_t i = 0; i < vocab; i += 2)
        x[vocab + i] = -1e30f;
    for (uint32_t k = 4; k <= 32; k += 28) {
        void *rec = run_topk(env, x, n, vocab, k, 0.7f);
        check_topk(rec, x, n, vocab, k, 0.7f, "masked");
        hs_topk_result g;
        hs_topk_unpack(rec, k, 0, &g);
        for (uint32_t j = 0; j < k; j++) {
            if (j < 8)
                assert_true(g.ids[j] % 100 == 7);
            else
                assert_true(g.probs[j] == 0.0f);
        }
        assert_true(isfinite(g.entropy));
        free(rec);
    }
    free(x);
}

/* A row gives bitwise the same record alone, in batches of any size, and at
 * any offset (which switches between the vec4 and the scalar load path). */
static void test_topk_batch_invariance(void **state) {
    hs_test_env *env = *state;
    hs_rng rng;
    hs_rng_seed(&rng, 27);
    for (uint32_t vocab = 2000; vocab <= 2001; vocab++) {
        const uint32_t n = 9, k = 10;
        const uint32_t words = hs_topk_record_words(k);
        float *x = malloc((size_t)n * vocab * sizeof *x);
        assert_non_null(x);
        fill_normal(&rng, x, (size_t)n * vocab, 3.0f);
        x[3 * vocab + 5] = x[3 * vocab + 9] = 20.0f; /* a tie in one row */
        uint32_t *all = run_topk(env, x, n, vocab, k, 0.7f);
        check_topk(all, x, n, vocab, k, 0.7f, "batch");
        for (uint32_t r = 0; r < n; r++) {
            for (uint32_t pad = 0; pad < 4; pad++) {
                uint32_t *one = run_topk_ex(env, x + (size_t)r * vocab, 1, vocab, k, 0.7f, pad, NULL);
                if (memcmp(one, all + (size_t)r * words, words * 4) != 0)
                    fail_msg("vocab %u row %u pad %u: record alone differs from the batch", vocab, r, pad);
                free(one);
            }
        }
        /* the last three rows as a batch of three */
        uint32_t *tail3 = run_topk_ex(env, x + (size_t)(n - 3) * vocab, 3, vocab, k, 0.7f, 1, NULL);
        assert_memory_equal(tail3, all + (size_t)(n - 3) * words, 3 * words * 4);
        free(tail3);
        /* and a replay of the same input gives the same bits */
        uint32_t *again = run_topk(env, x, n, vocab, k, 0.7f);
        assert_memory_equal(again, all, (size_t)n * words * 4);
        free(again);
        free(all);
        free(x);
    }
}

static void test_topk_invalid(void **state) {
    hs_test_env *env = *state;
    hs_vk_buffer *in = hs_test_buffer(env, NULL, 64 * 4);
    hs_vk_buffer *out = hs_test_buffer(env, NULL, hs_topk_out_bytes(2, 32));
    hs_vk_seq *seq = NULL;
    HS_CHECK(hs_vk_seq_create(env->vk, &seq));
    HS_CHECK(hs_vk_seq_begin(seq));
    hs_vk_binding bx = {in, 0, 0}, bo = {out, 0, 0};
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 7, 8, 1.0f, &bo), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "larger than the vocabulary"));
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 32, 33, 1.0f, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 32, 0, 1.0f, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 0, 32, 4, 1.0f, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 0, 1, 1.0f, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 32, 4, 0.0f, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 32, 4, -1.0f, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 32, 4, NAN, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 32, 4, INFINITY, &bo), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 33, 4, 1.0f, &bo), HS_ERR_OUT_OF_RANGE);
    hs_vk_binding small_out = {out, 0, hs_topk_out_bytes(2, 4) - 4};
    assert_int_equal(hs_op_topk(env->ops, seq, &bx, 2, 32, 4, 1.0f, &small_out), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_vk_seq_dispatch_count(seq), 0);
    HS_CHECK(hs_vk_seq_end(seq));
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(in);
    hs_vk_buffer_destroy(out);
}

/* Other devices run bigger workgroups: several subgroups per row, which
 * takes the kernels' cross-subgroup merge (stage C of topk.comp). The
 * tuning of this context is replaced for the test (hs_ops_set_tuning; run
 * last: a failure leaves it changed). */
static void test_workgroup_sizes(void **state) {
    hs_test_env *env = *state;
    const hs_tuning saved = *hs_ops_tuning(env->ops);
    hs_tuning tuning = saved;
    /* 2, 3, 8 and 16 subgroups (of 8 lanes where subgroup operations are off) */
    const uint32_t unit = hs_ops_subgroup(env->ops) > 8 ? hs_ops_subgroup(env->ops) : 8;
    const uint32_t wgs[] = {2 * unit, 3 * unit, 8 * unit, 16 * unit};
    static const uint32_t vocabs[] = {1, 33, 1001, 49152};
    hs_rng rng;
    hs_rng_seed(&rng, 28);
    for (size_t w = 0; w < sizeof wgs / sizeof wgs[0]; w++) {
        tuning.reduce_wg_size = wgs[w];
        HS_CHECK(hs_ops_set_tuning(env->ops, &tuning));
        for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
            const uint32_t vocab = vocabs[v], n = 4;
            float *x = malloc((size_t)n * vocab * sizeof *x);
            assert_non_null(x);
            fill_normal(&rng, x, (size_t)n * vocab, 3.0f);
            /* row 1: few distinct values (ties across subgroups) */
            for (uint32_t i = 0; i < vocab; i++)
                x[vocab + i] = floorf(hs_rng_uniform(&rng) * 4.0f);
            uint32_t *am = run_argmax(env, x, n, vocab, 0);
            check_argmax(am, x, n, vocab, "workgroup sizes");
            free(am);
            static const uint32_t ks[] = {1, 10, 32};
            for (size_t ki = 0; ki < 3; ki++) {
                const uint32_t k = ks[ki];
                if (k > vocab) continue;
                const uint32_t words = hs_topk_record_words(k);
                uint32_t *all = run_topk(env, x, n, vocab, k, 0.7f);
                check_topk(all, x, n, vocab, k, 0.7f, "workgroup sizes");
                uint32_t *one = run_topk_ex(env, x + (size_t)(n - 1) * vocab, 1, vocab, k, 0.7f, 1, NULL);
                if (memcmp(one, all + (size_t)(n - 1) * words, words * 4) != 0)
                    fail_msg("workgroup %u vocab %u k %u: record alone differs from the batch", wgs[w], vocab,
                             k);
                free(one);
                free(all);
            }
            free(x);
        }
    }
    HS_CHECK(hs_ops_set_tuning(env->ops, &saved));
}

/* ---- split group: maxStorageBufferRange pretended to be 64 KiB ---- */

static void test_split_dispatches(void **state) {
    hs_test_env *env = *state;
    const hs_vk_caps *c = hs_ops_caps(env->ops);
    assert_true(c->max_storage_buffer_range <= SPLIT_RANGE);
    hs_rng rng;
    hs_rng_seed(&rng, 31);
    const uint32_t n = 40, vocab = 1001, k = 10;
    const uint32_t words = hs_topk_record_words(k);
    float *x = malloc((size_t)n * vocab * sizeof *x);
    assert_non_null(x);
    fill_normal(&rng, x, (size_t)n * vocab, 3.0f);
    uint32_t dispatches = 0;
    uint32_t *all = run_topk_ex(env, x, n, vocab, k, 1.0f, 3, &dispatches);
    assert_true(dispatches >= 3); /* 40 rows of 4004 bytes in 64 KiB bindings */
    check_topk(all, x, n, vocab, k, 1.0f, "split");
    for (uint32_t r = 0; r < n; r += 13) {
        uint32_t *one = run_topk(env, x + (size_t)r * vocab, 1, vocab, k, 1.0f);
        assert_memory_equal(one, all + (size_t)r * words, words * 4);
        free(one);
    }
    free(all);
    uint32_t *am = run_argmax(env, x, n, vocab, 5);
    check_argmax(am, x, n, vocab, "split");
    free(am);
    free(x);

    /* A row of exactly the range fits at an aligned offset (two rows: two
     * dispatches), and is refused 4 bytes further on, where the alignment
     * slack no longer fits; a longer row is refused anywhere. */
    const uint32_t full = SPLIT_RANGE / 4;
    assert_true(row_fits(env, full, 0) && !row_fits(env, full, 1));
    float *y = malloc((size_t)2 * full * sizeof *y);
    assert_non_null(y);
    fill_normal(&rng, y, (size_t)2 * full, 3.0f);
    uint32_t *am2 = run_argmax(env, y, 2, full, 0);
    check_argmax(am2, y, 2, full, "row of the whole range");
    free(am2);
    uint32_t *rec2 = run_topk_ex(env, y, 2, full, k, 1.0f, 0, &dispatches);
    assert_int_equal(dispatches, 2);
    check_topk(rec2, y, 2, full, k, 1.0f, "row of the whole range");
    free(rec2);
    free(y);
    expect_row_refused(env, full, 1);
    expect_row_refused(env, 20000, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_argmax_sizes),
        cmocka_unit_test(test_argmax_ties),
        cmocka_unit_test(test_argmax_batch_offsets),
        cmocka_unit_test(test_argmax_invalid),
        cmocka_unit_test(test_topk_random),
        cmocka_unit_test(test_topk_small_and_big),
        cmocka_unit_test(test_topk_ties_sorted),
        cmocka_unit_test(test_long_rows_worst_case),
        cmocka_unit_test(test_topk_peaked),
        cmocka_unit_test(test_topk_flat),
        cmocka_unit_test(test_topk_masked),
        cmocka_unit_test(test_topk_batch_invariance),
        cmocka_unit_test(test_topk_invalid),
        cmocka_unit_test(test_workgroup_sizes), /* last: changes the tuning */
    };
    const struct CMUnitTest split_tests[] = {
        cmocka_unit_test(test_split_dispatches),
    };
    int failed = hs_test_run_group("select", tests, setup, teardown);
    failed += hs_test_run_group("select_split", split_tests, setup_split, teardown);
    return failed;
}
