/* HeteroSpec's policy, calibration fitting, replay and files (host/
 * heterospec, host/hx_calib) on synthetic Top-K results and recorded node
 * data: no device needed. Expected values are computed here from the
 * definitions (DESIGN.md section 4), not with the code under test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "heterospec.h"
#include "hx_calib.h"
#include "stb_ds.h"
#include "testutil.h"

/* A Top-K of k tokens: the first with probability top, the rest sharing
 * half of what is left (tail the other half), all with the given entropy. */
static hs_topk_result topk(uint32_t k, float top, float entropy, uint32_t salt) {
    hs_topk_result r = {.k = k, .entropy = entropy};
    r.ids[0] = 100 + salt % 50;
    r.probs[0] = top;
    for (uint32_t j = 1; j < k; j++) {
        r.ids[j] = 200 + (salt * 7 + j) % 300;
        r.probs[j] = (1 - top) / 2 / (float)(k - 1);
    }
    r.tail = (1 - top) / 2;
    return r;
}

/* Two strata on the parent's entropy (edge 0.5): low entropy accepts a
 * node with its draft probability and a child of an accepted node with
 * probability look_lo; high entropy with a third of it and look_hi. */
static hs_hx_model two_strata(float look_lo, float look_hi) {
    hs_hx_model m;
    hs_hx_model_default(&m);
    m.feature = HS_HX_PARENT_ENT;
    m.n_strata = 2;
    m.s[0] = (hs_hx_stratum){.lo = -INFINITY,
                             .hi = 0.5f,
                             .n_map = 2,
                             .map_q = {0, 1},
                             .map_p = {0, 1},
                             .rate = 0.5f,
                             .look = look_lo,
                             .depth_cap = 8};
    m.s[1] = (hs_hx_stratum){.lo = 0.5f,
                             .hi = INFINITY,
                             .n_map = 2,
                             .map_q = {0, 1},
                             .map_p = {0, 1.0f / 3},
                             .rate = 0.1f,
                             .look = look_hi,
                             .depth_cap = 8};
    m.max_depth = 8;
    m.max_width = 4;
    m.max_verify = 64;
    return m;
}

/* A cost model: verify(N) = 1 + slope (N - 1), a draft level 0.05 + 0.01 w,
 * consume 0.05 (units of one plain step). */
static void set_cost(hs_hx_model *m, double slope) {
    m->cost.n_verify = HS_HX_MAX_N;
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        m->cost.t_verify[n] = 1 + slope * (n - 1);
    m->cost.n_draft = HS_HX_MAX_WIDTH;
    for (uint32_t w = 1; w <= HS_HX_MAX_WIDTH; w++)
        m->cost.t_draft[w] = 0.05 + 0.01 * w;
    m->cost.t_consume = 0.05;
}

/* Grows a tree the way host/spec does: every drafted node gets Top-K tk;
 * returns the verified candidates' count and their deepest depth. */
static void grow(const hs_tree_policy *p, const hs_topk_result *tk, hs_tree *t, uint32_t *n_sel,
                 uint32_t *deepest) {
    uint32_t sel[512];
    hs_tree_reset(t, 7);
    HS_CHECK(hs_tree_add_children(t, 0, tk));
    for (uint32_t level = 1; level < HS_TREE_MAX_DEPTH; level++) {
        const uint32_t w = p->expand(p, t, level, sel, 64);
        if (w == 0) break;
        for (uint32_t i = 0; i < w; i++) {
            assert_int_equal(t->nodes[sel[i]].depth, level);
            t->nodes[sel[i]].slot = (int32_t)(1 + i);
            HS_CHECK(hs_tree_add_children(t, sel[i], tk));
        }
    }
    *n_sel = p->select(p, t, sel, 127);
    *deepest = 0;
    for (uint32_t i = 0; i < *n_sel; i++)
        if (t->nodes[sel[i]].depth > *deepest) *deepest = t->nodes[sel[i]].depth;
}

/* V(v) is the product of the maps along the path. */
static void test_values(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.8f, 0.2f);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    hs_tree_reset(&t, 7);
    const hs_topk_result a = topk(3, 0.6f, 0.2f, 1), b = topk(3, 0.3f, 0.9f, 2);
    HS_CHECK(hs_tree_add_children(&t, 0, &a)); /* nodes 1..3, parent entropy 0.2: low stratum */
    HS_CHECK(hs_tree_add_children(&t, 1, &b)); /* nodes 4..6 under node 1, parent entropy 0.9: high */
    float V[7];
    hs_hx_values(&m, &t, V);
    assert_float_equal(V[0], 1.0f, 1e-6);
    assert_float_equal(V[1], 0.6f, 1e-6);               /* f_lo(0.6) = 0.6 */
    assert_float_equal(V[2], 0.1f, 1e-6);               /* (1 - 0.6) / 2 / 2 */
    assert_float_equal(V[4], 0.6f * 0.3f / 3.0f, 1e-6); /* f_hi(0.3) = 0.1 */
    assert_float_equal(V[5], 0.6f * (0.7f / 2 / 2) / 3.0f, 1e-6);
    /* The map is flat outside its knots and linear between them. */
    const hs_hx_stratum s = {.n_map = 3, .map_q = {0.2f, 0.4f, 0.8f}, .map_p = {0.1f, 0.3f, 0.5f}};
    assert_float_equal(hs_hx_accept(&s, 0.1f), 0.1f, 1e-6);
    assert_float_equal(hs_hx_accept(&s, 0.3f), 0.2f, 1e-6);
    assert_float_equal(hs_hx_accept(&s, 0.6f), 0.4f, 1e-6);
    assert_float_equal(hs_hx_accept(&s, 0.9f), 0.5f, 1e-6);
    hs_tree_free(&t);
}

/* A low-entropy stratum grows a deeper chain than a high-entropy one. */
static void test_low_entropy_grows_deeper(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.9f, 0.15f);
    set_cost(&m, 0.02);
    const hs_tree_policy p = hs_heterospec_policy(&m);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 4096));
    uint32_t n_lo, d_lo, n_hi, d_hi;
    const hs_topk_result lo = topk(4, 0.9f, 0.2f, 3), hi = topk(4, 0.9f, 0.8f, 3);
    grow(&p, &lo, &t, &n_lo, &d_lo);
    grow(&p, &hi, &t, &n_hi, &d_hi);
    fprintf(stderr, "low entropy: %u nodes, depth %u; high entropy: %u nodes, depth %u\n", n_lo, d_lo, n_hi,
            d_hi);
    assert_true(d_lo >= 4);
    assert_true(d_lo > d_hi);
    /* High entropy: the root's best child has V = 0.9 / 3 = 0.3; drafting it
     * would add a child of expected value 0.3 * 0.15 for one draft step (0.06)
     * and one more verified node (0.02): E[tau] / T goes from 1.3 / 1.07 to
     * 1.345 / 1.15, down, so the tree stops at depth 1. */
    assert_int_equal(d_hi, 1);
    assert_int_equal(n_hi, 1);
    /* A depth cap of the stratum stops the chain there. */
    m.s[0].depth_cap = 2;
    grow(&p, &lo, &t, &n_lo, &d_lo);
    assert_true(d_lo <= 2);
    hs_tree_free(&t);
}

/* A steeper verification cost gives a smaller tree; a prohibitive one none
 * at all (the round is a plain step). */
static void test_steeper_cost_smaller_tree(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.7f, 0.3f);
    const hs_tree_policy p = hs_heterospec_policy(&m);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 4096));
    const hs_topk_result tk = topk(4, 0.7f, 0.3f, 5);
    const double slopes[] = {0.0, 0.01, 0.1, 0.5, 5.0};
    uint32_t last = UINT32_MAX;
    for (size_t i = 0; i < sizeof slopes / sizeof slopes[0]; i++) {
        set_cost(&m, slopes[i]);
        uint32_t n, d;
        grow(&p, &tk, &t, &n, &d);
        fprintf(stderr, "slope %.2f: %u nodes verified, depth %u\n", slopes[i], n, d);
        assert_true(n <= last);
        last = n;
        if (i == 0) assert_true(n >= 8);
    }
    assert_int_equal(last, 0);
    hs_tree_free(&t);
}

/* The output head of each accepted node (t_head) is paid per expected
 * accepted token: a dearer head gives a smaller tree, and one dearer than a
 * plain step with everything the round spends besides makes no tree pay
 * (E[tau] / (T(N + 1) + (E[tau] - 1) t_head) < 1 / T(1)); a dearer
 * t_after_head, paid once a round, gives a larger one. */
static void test_dearer_head_smaller_tree(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.7f, 0.3f);
    const hs_tree_policy p = hs_heterospec_policy(&m);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 4096));
    const hs_topk_result tk = topk(4, 0.7f, 0.3f, 5);
    set_cost(&m, 0.01);
    const double heads[] = {0.0, 0.1, 0.3, 0.6, 10.0};
    uint32_t last = UINT32_MAX, first = 0;
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++) {
        m.cost.t_head = heads[i];
        uint32_t n, d;
        grow(&p, &tk, &t, &n, &d);
        fprintf(stderr, "t_head %.2f: %u nodes verified, depth %u\n", heads[i], n, d);
        assert_true(n <= last);
        if (i == 0) first = n;
        last = n;
    }
    assert_true(first >= 8);
    assert_true(last == 0);
    /* t_after_head is a fixed cost of every round with the head, like its
     * consume: the dearer it is, the more nodes a round verifies to spread it. */
    m.cost.t_head = 0;
    set_cost(&m, 0.2);
    uint32_t n0, n1, d;
    grow(&p, &tk, &t, &n0, &d);
    m.cost.t_after_head = 2.0;
    grow(&p, &tk, &t, &n1, &d);
    fprintf(stderr, "t_after_head 0: %u nodes, 2: %u nodes\n", n0, n1);
    assert_true(n1 > n0);
    hs_tree_free(&t);
}

/* With verification measured at two contexts (256 rows: slope 0.01 per
 * node; 1024 rows: 0.5), the cost at c rows is interpolated linearly, and a
 * longer context gives a smaller tree: large at 256, none at 1024. */
static void test_longer_context_smaller_tree(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.7f, 0.3f);
    set_cost(&m, 0.01);
    m.cost.ctx0 = 256;
    m.cost.ctx1 = 1024;
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        m.cost.t_verify_long[n] = 1.2 + 0.5 * (n - 1);
    /* t(n, c) = t0 + (t1 - t0) (c - 256) / 768 from c = 256 on, t0 below, at least t0 / 4 */
    assert_float_equal(hs_hx_t_verify_at(&m.cost, 3, 256), 1.02, 1e-12);
    assert_float_equal(hs_hx_t_verify_at(&m.cost, 3, 1024), 2.2, 1e-12);
    assert_float_equal(hs_hx_t_verify_at(&m.cost, 3, 640), (1.02 + 2.2) / 2, 1e-12);
    assert_float_equal(hs_hx_t_verify_at(&m.cost, 3, 1792), 2.2 + (2.2 - 1.02), 1e-12);
    assert_float_equal(hs_hx_t_verify_at(&m.cost, 3, 0), 1.02, 1e-12);
    m.cost.t_verify_long[2] = 0.1; /* a long table below the short one (noise): the floor */
    assert_float_equal(hs_hx_t_verify_at(&m.cost, 2, 4096), 0.25 * 1.01, 1e-12);
    m.cost.t_verify_long[2] = 1.7;
    const hs_tree_policy p = hs_heterospec_policy(&m);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 4096));
    const hs_topk_result tk = topk(4, 0.7f, 0.3f, 5);
    const uint32_t ctxs[] = {0, 256, 512, 768, 1024, 4096};
    uint32_t last = UINT32_MAX;
    for (size_t i = 0; i < sizeof ctxs / sizeof ctxs[0]; i++) {
        t.ctx = ctxs[i];
        uint32_t n, d;
        grow(&p, &tk, &t, &n, &d);
        assert_int_equal(t.ctx, ctxs[i]); /* reset keeps it */
        fprintf(stderr, "context %u: %u nodes verified, depth %u\n", ctxs[i], n, d);
        assert_true(n <= last);
        last = n;
        if (ctxs[i] == 256) assert_true(n >= 8);
    }
    assert_int_equal(last, 0);
    hs_tree_free(&t);
}

/* select keeps the prefix of highest E[tau] / T, checked against every
 * prefix of the candidates sorted by V (computed here by brute force). */
static void test_select_is_best_prefix(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.6f, 0.3f);
    set_cost(&m, 0.08);
    const hs_tree_policy p = hs_heterospec_policy(&m);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 256));
    hs_tree_reset(&t, 7);
    const hs_topk_result a = topk(6, 0.5f, 0.3f, 1), b = topk(6, 0.6f, 0.7f, 2);
    HS_CHECK(hs_tree_add_children(&t, 0, &a));
    t.nodes[1].slot = 1;
    t.nodes[2].slot = 2;
    HS_CHECK(hs_tree_add_children(&t, 1, &b));
    HS_CHECK(hs_tree_add_children(&t, 2, &a));
    float V[256];
    hs_hx_values(&m, &t, V);
    /* Brute force: sorted values, every prefix length. */
    float v[256];
    uint32_t n = 0;
    for (uint32_t i = 1; i < t.n; i++)
        v[n++] = V[i];
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j] > v[j - 1]; j--) {
            const float x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    const double spent = m.cost.t_consume + m.cost.t_draft[2];
    double best = 1 / (spent + m.cost.t_verify[1]), e = 1;
    uint32_t best_n = 0;
    for (uint32_t k = 1; k <= n; k++) {
        e += v[k - 1];
        const double r = e / (spent + m.cost.t_verify[k + 1]);
        if (r > best) {
            best = r;
            best_n = k;
        }
    }
    uint32_t sel[256];
    const uint32_t got = p.select(&p, &t, sel, 127);
    assert_int_equal(got, best_n);
    assert_true(best_n > 0 && best_n < n);
    /* Closed under ancestors. */
    uint8_t in[256] = {1};
    for (uint32_t i = 0; i < got; i++)
        in[sel[i]] = 1;
    for (uint32_t i = 0; i < got; i++)
        assert_true(in[t.nodes[sel[i]].parent]);
    hs_tree_free(&t);
}

/* Deterministic uniform numbers in [0, 1). */
static double lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) / 9007199254740992.0;
}

/* Records whose acceptance follows a known rule: parent entropy below 0.4
 * accepts with probability q, above with q / 3. The fit must find the edge,
 * pick the parent entropy, and recover both maps. */
static void test_fit_recovers_strata(void **state) {
    (void)state;
    uint64_t seed = 42;
    hs_hx_record *r = NULL;
    for (int i = 0; i < 40000; i++) {
        hs_hx_record x = {.q = (float)lcg(&seed), .parent_ent = (float)lcg(&seed), .depth = 1 + i % 4};
        x.path_ent = x.parent_ent + (float)lcg(&seed) * (x.depth - 1);
        const double p = x.parent_ent < 0.4f ? x.q : x.q / 3;
        x.accepted = lcg(&seed) < p;
        x.children_tried = x.accepted;
        x.child_accepted = x.accepted && lcg(&seed) < (x.parent_ent < 0.4f ? 0.7 : 0.2);
        stbds_arrput(r, x);
    }
    hs_hx_model m;
    hs_hx_model_default(&m);
    hs_hx_fit_options fo = {.n_strata = 2, .feature = -1};
    HS_CHECK(hs_hx_fit(r, (uint32_t)stbds_arrlen(r), &fo, &m));
    fprintf(stderr, "fit: feature %s, edge %.3f, f(0.6) %.3f / %.3f, look %.3f / %.3f\n",
            hs_hx_feature_name(m.feature), m.s[0].hi, hs_hx_accept(&m.s[0], 0.6f),
            hs_hx_accept(&m.s[1], 0.6f), m.s[0].look, m.s[1].look);
    assert_int_equal(m.feature, HS_HX_PARENT_ENT);
    assert_int_equal(m.n_strata, 2);
    assert_float_equal(m.s[0].hi, 0.4f, 0.03);
    assert_float_equal(m.s[1].lo, m.s[0].hi, 0);
    assert_float_equal(hs_hx_accept(&m.s[0], 0.6f), 0.6f, 0.06);
    assert_float_equal(hs_hx_accept(&m.s[1], 0.6f), 0.2f, 0.06);
    assert_float_equal(m.s[0].look, 0.7f, 0.04);
    assert_float_equal(m.s[1].look, 0.2f, 0.04);
    for (uint32_t b = 0; b < m.n_strata; b++)
        for (uint32_t i = 1; i < m.s[b].n_map; i++) {
            assert_true(m.s[b].map_q[i] > m.s[b].map_q[i - 1]);
            assert_true(m.s[b].map_p[i] >= m.s[b].map_p[i - 1]);
        }
    /* Too few records is an error, not a guess. */
    assert_int_equal(hs_hx_fit(r, 10, &fo, &m), HS_ERR_INVALID_ARG);
    stbds_arrfree(r);
}

/* The JSON round trip keeps every field; bad files are refused by name. */
static void test_json(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.8f, 0.2f), back;
    set_cost(&m, 0.03);
    m.cost.t_after_head = 0.004;
    m.cost.t_head = 0.003;
    m.cost.t_heads[2] = 0.0035;
    m.cost.t_heads[4] = 0.005;
    m.cost.t_heads[8] = 0.009;
    m.heads = 2;
    m.eager = 5;
    m.cost.n_verify_all = HS_TREE_EAGER_MAX;
    for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++) {
        m.cost.t_verify_all[n] = m.cost.t_verify[n] + 0.01 * (n - 1);
        m.cost.t_verify_long[n] = 2 * m.cost.t_verify[n];
        m.cost.t_verify_all_long[n] = 2 * m.cost.t_verify_all[n] + 0.001;
    }
    for (uint32_t n = HS_TREE_EAGER_MAX + 1; n <= HS_HX_MAX_N; n++)
        m.cost.t_verify_long[n] = 2 * m.cost.t_verify[n];
    m.cost.ctx0 = 256;
    m.cost.ctx1 = 1024;
    m.s[0].n_map = 3;
    m.s[0].map_q[2] = 1.0f;
    m.s[0].map_q[1] = 0.5f;
    m.s[0].map_p[1] = 0.4f;
    m.s[0].map_p[2] = 0.9f;
    m.s[1].prune = 0.05f;
    m.s[1].depth_cap = 3;
    /* Two equal knots whose float cJSON prints inexactly (15 digits) must still read as non-decreasing. */
    m.s[1].n_map = 3;
    m.s[1].map_q[0] = 0.0015f;
    m.s[1].map_q[1] = 0.0031f;
    m.s[1].map_q[2] = 1.0f;
    m.s[1].map_p[0] = m.s[1].map_p[1] = 0.0037128713447600603f;
    m.s[1].map_p[2] = 0.3f;
    cJSON *o = hs_hx_model_to_json(&m);
    char *text = cJSON_PrintUnformatted(o);
    cJSON *p = cJSON_Parse(text);
    hs_hx_model_default(&back);
    HS_CHECK(hs_hx_model_from_json(p, &back));
    assert_int_equal(back.feature, m.feature);
    assert_int_equal(back.n_strata, 2);
    assert_int_equal(back.max_depth, m.max_depth);
    assert_int_equal(back.max_verify, m.max_verify);
    for (uint32_t b = 0; b < 2; b++) {
        assert_true(back.s[b].lo == m.s[b].lo && back.s[b].hi == m.s[b].hi);
        assert_int_equal(back.s[b].n_map, m.s[b].n_map);
        for (uint32_t i = 0; i < m.s[b].n_map; i++) { /* 15 printed digits: within a float's rounding */
            assert_float_equal(back.s[b].map_q[i], m.s[b].map_q[i], 1e-7 * m.s[b].map_q[i]);
            assert_float_equal(back.s[b].map_p[i], m.s[b].map_p[i], 1e-7 * m.s[b].map_p[i]);
        }
        assert_float_equal(back.s[b].look, m.s[b].look, 0);
        assert_float_equal(back.s[b].prune, m.s[b].prune, 0);
        assert_int_equal(back.s[b].depth_cap, m.s[b].depth_cap);
    }
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        assert_float_equal(back.cost.t_verify[n], m.cost.t_verify[n], 1e-12);
    assert_float_equal(back.cost.t_consume, m.cost.t_consume, 1e-12);
    assert_float_equal(back.cost.t_after_head, 0.004, 1e-12);
    assert_int_equal(back.heads, 2);
    assert_int_equal(back.eager, 5);
    assert_int_equal(back.cost.n_verify_all, HS_TREE_EAGER_MAX);
    for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++)
        for (uint32_t ctx = 100; ctx <= 2000; ctx += 300)
            assert_float_equal(hs_hx_t_verify_all_at(&back.cost, n, ctx),
                               hs_hx_t_verify_all_at(&m.cost, n, ctx), 1e-12);
    /* Interpolated in the context as t_verify is: at 640 rows halfway between the two tables. */
    assert_float_equal(hs_hx_t_verify_all_at(&back.cost, 3, 640),
                       0.5 * (m.cost.t_verify_all[3] + m.cost.t_verify_all_long[3]), 1e-12);
    assert_true(hs_hx_eager(&back.cost, 5, 5) && !hs_hx_eager(&back.cost, 5, 6));
    assert_false(hs_hx_eager(&back.cost, 5, 1));
    {
        /* verify_all_s without its long table (where the cost has two contexts) is refused; a file without
         * either prices no eager list; eager beyond the target's exact buckets is refused. */
        cJSON *p2 = cJSON_Duplicate(p, 1);
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(p2, "cost"), "verify_all_long_s");
        assert_int_equal(hs_hx_model_from_json(p2, &back), HS_ERR_FORMAT);
        assert_non_null(strstr(hs_last_error(), "verify_all_long_s"));
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(p2, "cost"), "verify_all_s");
        HS_CHECK(hs_hx_model_from_json(p2, &back));
        assert_int_equal(back.cost.n_verify_all, 0);
        assert_false(hs_hx_eager(&back.cost, 5, 3));
        cJSON_SetNumberValue(cJSON_GetObjectItem(p2, "eager"), HS_TREE_EAGER_MAX + 1);
        assert_int_equal(hs_hx_model_from_json(p2, &back), HS_ERR_FORMAT);
        assert_non_null(strstr(hs_last_error(), "eager"));
        cJSON_Delete(p2);
        /* Fields newer than the first files: absent, they read as those files meant (no heads in the pass,
         * never eager, no cost after the head), over what the model held before; present, they are
         * checked like the others. */
        cJSON *p3 = cJSON_Duplicate(p, 1);
        cJSON_DeleteItemFromObject(p3, "heads");
        cJSON_DeleteItemFromObject(p3, "eager");
        cJSON_DeleteItemFromObject(cJSON_GetObjectItem(p3, "cost"), "t_after_head_s");
        HS_CHECK(hs_hx_model_from_json(p, &back));
        assert_int_equal(back.heads, 2);
        HS_CHECK(hs_hx_model_from_json(p3, &back));
        assert_int_equal(back.heads, 0);
        assert_int_equal(back.eager, 0);
        assert_float_equal(back.cost.t_after_head, 0, 0);
        cJSON_SetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p3, "cost"), "t_head_s"), -1);
        assert_int_equal(hs_hx_model_from_json(p3, &back), HS_ERR_FORMAT);
        assert_non_null(strstr(hs_last_error(), "t_head_s"));
        cJSON_Delete(p3);
        HS_CHECK(hs_hx_model_from_json(p, &back));
    }
    for (uint32_t k = 1; k <= HS_HX_MAX_HEADS; k *= 2)
        assert_float_equal(hs_hx_t_heads(&back.cost, k), hs_hx_t_heads(&m.cost, k), 1e-12);
    assert_float_equal(hs_hx_t_heads(&back.cost, 4), 0.005, 1e-12);
    /* heads_s out of order is refused, and a file without it prices k heads at k t_head. */
    cJSON *hs = cJSON_GetObjectItem(cJSON_GetObjectItem(p, "cost"), "heads_s");
    cJSON_SetNumberValue(cJSON_GetArrayItem(cJSON_GetArrayItem(hs, 1), 0), 8);
    assert_int_equal(hs_hx_model_from_json(p, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "heads_s"));
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(p, "cost"), "heads_s");
    HS_CHECK(hs_hx_model_from_json(p, &back));
    assert_float_equal(hs_hx_t_heads(&back.cost, 4), 4 * 0.003, 1e-12);
    /* A map that falls is refused. */
    cJSON *knot = cJSON_GetArrayItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(p, "strata"), 0), "map"), 2);
    cJSON_SetNumberValue(cJSON_GetArrayItem(knot, 1), 0.1);
    assert_int_equal(hs_hx_model_from_json(p, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "map knot 2"));
    cJSON_Delete(p);
    /* Another kind of file is refused. */
    cJSON *q = cJSON_Parse("{\"kind\": \"bench\"}");
    assert_int_equal(hs_hx_model_from_json(q, &back), HS_ERR_FORMAT);
    cJSON_Delete(q);
    free(text);
    cJSON_Delete(o);
}

/* A recorded round: records are the nodes whose parent spells the truth,
 * and a replayed chain accepts exactly the truth's prefix it drafted. */
static void test_records_and_replay(void **state) {
    (void)state;
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 256));
    hs_tree_reset(&t, 7);
    /* Root's children 100 (top), 201, 202; node 1 (100) expanded with 101,
     * 203, 204; node 4 (101) expanded with 102, ... */
    hs_topk_result a = topk(3, 0.8f, 0.2f, 0), b = topk(3, 0.7f, 0.3f, 1), c = topk(3, 0.6f, 0.4f, 2);
    HS_CHECK(hs_tree_add_children(&t, 0, &a));
    t.nodes[1].slot = 1;
    HS_CHECK(hs_tree_add_children(&t, 1, &b));
    t.nodes[4].slot = 2;
    HS_CHECK(hs_tree_add_children(&t, 4, &c));
    hs_hx_round r;
    HS_CHECK(hs_hx_round_copy(&t, NULL, 0, 0, &r));
    /* Generation after the root at output index 2: 100, 101, then 999 (not drafted). */
    const int32_t ids[] = {5, 6, 7, 100, 101, 999, 3};
    hs_hx_round_set_truth(&r, ids, 7, 2);
    assert_int_equal(r.truth[0], 100);
    assert_int_equal(r.truth[3], 3);
    assert_int_equal(r.truth[4], -1);
    hs_hx_record *rec = NULL;
    HS_CHECK(hs_hx_round_records(&r, &rec));
    /* Children of the root (3), of node 1 (3), of node 4 (3): all parents on the truth. */
    assert_int_equal(stbds_arrlen(rec), 9);
    uint32_t acc = 0;
    for (ptrdiff_t i = 0; i < stbds_arrlen(rec); i++)
        acc += rec[i].accepted;
    assert_int_equal(acc, 2);
    assert_true(rec[0].accepted && rec[0].children_tried && rec[0].child_accepted && rec[0].depth == 1);
    assert_true(rec[3].accepted && rec[3].children_tried && !rec[3].child_accepted && rec[3].depth == 2);
    assert_false(rec[1].accepted);
    /* Replays: a chain of 3 accepts 100 and 101 and adds the bonus (3
     * tokens), priced consume + 2 draft levels + verify(4); a chain of 1
     * drafts no level and decides 2 tokens. */
    hs_hx_cost cost = {.n_verify = 4, .n_draft = 1, .t_consume = 0.5};
    for (uint32_t n = 1; n <= 4; n++)
        cost.t_verify[n] = 10 + n;
    cost.t_draft[1] = 2;
    const hs_tree_policy c3 = hs_tree_chain(3), c1 = hs_tree_chain(1);
    hs_hx_replay_result res;
    HS_CHECK(hs_hx_replay(&c3, &cost, &r, 1, &res));
    assert_float_equal(res.tokens, 3, 0);
    assert_float_equal(res.time_s, 0.5 + 2 + 2 + 14, 1e-9);
    assert_float_equal(res.verified, 4, 0);
    assert_float_equal(res.unknown, 0, 0);
    HS_CHECK(hs_hx_replay(&c1, &cost, &r, 1, &res));
    assert_float_equal(res.tokens, 2, 0);
    assert_float_equal(res.time_s, 0.5 + 12, 1e-9);
    /* Each accepted draft's output head (2 of them) costs t_head on top. */
    cost.t_head = 0.25;
    HS_CHECK(hs_hx_replay(&c3, &cost, &r, 1, &res));
    assert_float_equal(res.time_s, 0.5 + 2 + 2 + 14 + 2 * 0.25, 1e-9);
    /* With the heads of a chain at once (the default: from entry 1 the chain 1 .. 3, a product of two
     * rows covering both accepted nodes) it is t_heads[2]; one at a time, two products again. */
    cost.t_heads[2] = 0.3;
    HS_CHECK(hs_hx_replay(&c3, &cost, &r, 1, &res));
    assert_float_equal(res.time_s, 0.5 + 2 + 2 + 14 + 0.3, 1e-9);
    hs_tree_policy c3one = c3;
    c3one.heads = 1;
    HS_CHECK(hs_hx_replay(&c3one, &cost, &r, 1, &res));
    assert_float_equal(res.time_s, 0.5 + 2 + 2 + 14 + 2 * 0.25, 1e-9);
    /* Eager lists (every head in the pass, hs_tree_policy.eager): the chain of 3's list of 4 entries pays
     * t_verify_all(4) and no heads after it; a list longer than eager, or a cost without the pass
     * measured, is priced as before. */
    cost.n_verify_all = 4;
    for (uint32_t n = 1; n <= 4; n++)
        cost.t_verify_all[n] = 10 + 1.5 * n;
    hs_tree_policy c3e = c3;
    c3e.eager = 4;
    HS_CHECK(hs_hx_replay(&c3e, &cost, &r, 1, &res));
    assert_float_equal(res.time_s, 0.5 + 2 + 2 + 16, 1e-9);
    assert_float_equal(res.tokens, 3, 0);
    c3e.eager = 3;
    HS_CHECK(hs_hx_replay(&c3e, &cost, &r, 1, &res));
    assert_float_equal(res.time_s, 0.5 + 2 + 2 + 14 + 0.3, 1e-9);
    c3e.eager = 4;
    cost.n_verify_all = 3;
    HS_CHECK(hs_hx_replay(&c3e, &cost, &r, 1, &res));
    assert_float_equal(res.time_s, 0.5 + 2 + 2 + 14 + 0.3, 1e-9);
    cost.n_verify_all = 0;
    cost.t_heads[2] = 0;
    cost.t_head = 0;
    /* The target's pass after the head's work costs t_after_head more, once a round with the head. */
    cost.t_after_head = 0.125;
    HS_CHECK(hs_hx_replay(&c3, &cost, &r, 1, &res));
    assert_float_equal(res.time_s, 0.5 + 0.125 + 2 + 2 + 14, 1e-9);
    cost.t_after_head = 0;
    /* The replay walks the text: the same round recorded at contexts 10, 12 and 14 of one
     * generation; the chain of 3 decides 3 tokens at 10 (the next root at 13), so the round at
     * 12 is already decided and skipped, the one at 14 replayed; a chain of 1 (2 tokens, the
     * next root at 12) replays all three. Rounds at one context are all replayed (above). */
    hs_hx_round walk[3] = {r, r, r};
    walk[0].ctx = 10;
    walk[1].ctx = 12;
    walk[2].ctx = 14;
    walk[0].first = true;
    HS_CHECK(hs_hx_replay(&c3, &cost, walk, 3, &res));
    assert_float_equal(res.rounds, 2, 0);
    assert_float_equal(res.skipped, 1, 0);
    assert_float_equal(res.tokens, 6, 0);
    HS_CHECK(hs_hx_replay(&c1, &cost, walk, 3, &res));
    assert_float_equal(res.rounds, 3, 0);
    assert_float_equal(res.skipped, 0, 0);
    walk[1].first = walk[2].first = true; /* each a new generation: nothing to skip */
    HS_CHECK(hs_hx_replay(&c3, &cost, walk, 3, &res));
    assert_float_equal(res.rounds, 3, 0);
    /* A chain of 4 wants node 7's children, which the recording never drafted. */
    const hs_tree_policy c4 = hs_tree_chain(4);
    HS_CHECK(hs_hx_replay(&c4, &cost, &r, 1, &res));
    assert_float_equal(res.unknown, 1, 0);
    assert_float_equal(res.tokens, 3, 0);
    stbds_arrfree(rec);
    hs_hx_round_free(&r);
    hs_tree_free(&t);
}

/* Chain bounds: T(n) = 1 + 0.3 (n - 1), an accepted node's head 0.1, consume
 * 0.05, a draft level of one node 0.06, a plain step T(1) = 1; the values
 * below are (1 + e) / T worked out by hand for e = a + ... + a^d. */
static void test_chain_bound(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.9f, 0.1f);
    set_cost(&m, 0.3);
    m.cost.t_head = 0.1;
    uint32_t d = 99;
    /* Free drafts, all accepted: 5 / (1 + 1.2 + 0.4) at d = 4, rising with d. */
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, false, 4, &d), 5 / 2.6, 1e-9);
    assert_int_equal(d, 4);
    /* Half accepted: d = 1 gives 1.5 / (1.3 + 0.05), d = 2 only 1.75 / (1.6 + 0.075). */
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 0.5, false, 4, &d), 1.5 / 1.35, 1e-9);
    assert_int_equal(d, 1);
    /* Nothing accepted: plain decoding through rounds of the root alone (d = 0). */
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 0.0, false, 4, &d), 1.0, 1e-9);
    assert_int_equal(d, 0);
    /* The head's: consume 0.05 and 3 levels of 0.06 at d = 4; d = 0 pays the consume alone. */
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, true, 4, &d), 5 / 2.83, 1e-9);
    assert_int_equal(d, 4);
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, true, 1, &d), 2 / 1.45, 1e-9);
    assert_int_equal(d, 1);
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 0.0, true, 4, &d), 1 / 1.05, 1e-9);
    m.cost.t_after_head = 0.02; /* with the head only */
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, true, 4, &d), 5 / 2.85, 1e-9);
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, false, 4, &d), 5 / 2.6, 1e-9);
    m.cost.t_after_head = 0;
    /* The least a: 2x is out of reach with chains up to 4 (5 / 2.6 = 1.92), 1.5x is not. */
    assert_true(hs_hx_chain_needs(&m.cost, 0, 2.0, false, 4) > 1);
    assert_true(hs_hx_chain_needs(&m.cost, 0, 2.0, false, 16) <= 1);
    const double a = hs_hx_chain_needs(&m.cost, 0, 1.5, false, 4);
    assert_true(a > 0.5 && a < 1);
    assert_true(hs_hx_chain_bound(&m.cost, 0, a, false, 4, NULL) >= 1.5);
    assert_true(hs_hx_chain_bound(&m.cost, 0, a - 2e-4, false, 4, NULL) < 1.5);
    assert_true(hs_hx_chain_needs(&m.cost, 0, 1.5, true, 4) > a);
    /* Every head in the pass where measured and cheaper: T_all(n) = T(n) + 0.05 (n - 1), so at d = 4
     * with all accepted 1 + 1.2 + 0.2 instead of 1 + 1.2 + 0.4; where it is dearer (0.2 a column), the
     * bound stays; with lists of up to 4 measured, d = 4 is priced as before and d = 3 with every head
     * in the pass wins: 4 / (1 + 0.9 + 0.15). */
    m.cost.n_verify_all = HS_TREE_EAGER_MAX;
    for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++)
        m.cost.t_verify_all[n] = m.cost.t_verify[n] + 0.05 * (n - 1);
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, false, 4, &d), 5 / 2.4, 1e-9);
    assert_int_equal(d, 4);
    for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++)
        m.cost.t_verify_all[n] = m.cost.t_verify[n] + 0.2 * (n - 1);
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, false, 4, &d), 5 / 2.6, 1e-9);
    for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++)
        m.cost.t_verify_all[n] = m.cost.t_verify[n] + 0.05 * (n - 1);
    m.cost.n_verify_all = 4;
    assert_float_equal(hs_hx_chain_bound(&m.cost, 0, 1.0, false, 4, &d), 4 / 2.05, 1e-9);
    assert_int_equal(d, 3);
}

/* A recorded chain of 4 levels, every node with Top-K topk(3, top, ent);
 * the truth follows the top ids (100, 100, ...) or never matches (999). */
static void chain_round(float top, float ent, bool follows, hs_hx_round *r) {
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    hs_tree_reset(&t, 7);
    const hs_topk_result tk = topk(3, top, ent, 0);
    HS_CHECK(hs_tree_add_children(&t, 0, &tk));
    uint32_t v = t.nodes[0].first_child;
    for (int32_t d = 1; d <= 3; d++) {
        t.nodes[v].slot = d;
        HS_CHECK(hs_tree_add_children(&t, v, &tk));
        v = t.nodes[v].first_child;
    }
    HS_CHECK(hs_hx_round_copy(&t, NULL, 0, 0, r));
    for (int i = 0; i < 5; i++)
        r->truth[i] = follows ? (int32_t)tk.ids[0] : 999;
    hs_tree_free(&t);
}

/* The rounds and model of the rest and floor tests: a hard round (top 0.3,
 * never accepted), an easy one (top 0.9, always accepted), costs where a
 * consume is dear and a cache-only consume cheap. */
static hs_hx_model hard_easy(hs_hx_round *hard, hs_hx_round *easy) {
    chain_round(0.3f, 0.9f, false, hard);
    chain_round(0.9f, 0.1f, true, easy);
    hs_hx_model m = two_strata(0.9f, 0.1f);
    set_cost(&m, 0.3);
    m.cost.t_consume = 0.2;
    m.cost.t_consume_cache = 0.05;
    return m;
}

/* The EAGLE-2 grid's floor on path probability: where unlikely drafts (top
 * 0.3) are never accepted and likely ones (0.9) always, the search picks a
 * floor between the two, which replays faster than the same tree without
 * it, and does not rest (an easy round follows every hard one); on rounds
 * that never pay it verifies nothing and rests the longest it tries. */
static void test_search_eagle2_floor(void **state) {
    (void)state;
    hs_hx_round hard, easy;
    hs_hx_model m = hard_easy(&hard, &easy);
    hs_hx_round rounds[12];
    for (int i = 0; i < 12; i++)
        rounds[i] = i % 3 ? easy : hard;
    hs_hx_eagle2_setting e;
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 12, NULL, &e, NULL));
    assert_true(e.policy.p_min > 0.3f && e.policy.p_min <= 0.9f);
    assert_int_equal(e.policy.rest, 0);
    assert_true(e.replay.tokens > 12 + 8); /* the easy rounds accepted drafts */
    hs_tree_policy p = e.policy;
    p.p_min = 0;
    hs_hx_replay_result r;
    HS_CHECK(hs_hx_replay(&p, &m.cost, rounds, 12, &r));
    assert_true(hs_hx_replay_tps(&r) < hs_hx_replay_tps(&e.replay));
    p.p_min = e.policy.p_min;
    HS_CHECK(hs_hx_replay(&p, &m.cost, rounds, 12, &r));
    assert_float_equal(hs_hx_replay_tps(&r), hs_hx_replay_tps(&e.replay), 1e-9);
    for (int i = 0; i < 12; i++)
        rounds[i] = hard;
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 12, NULL, &e, NULL));
    assert_true(e.policy.p_min > 0.3f);
    assert_int_equal(e.policy.rest, 8);
    assert_float_equal(e.replay.tokens, 12, 0);
    assert_float_equal(e.replay.verified, e.replay.rounds, 0); /* the root alone, every round */
    hs_hx_round_free(&hard);
    hs_hx_round_free(&easy);
}

/* The EAGLE-2 grid with groups (calibrate's question sets): group 0 is
 * easy rounds (every level of the chain accepted), group 1 rounds whose first
 * draft alone is accepted, both with the same draft probabilities. Over all
 * rounds the fastest setting drafts deep for group 0 and is slower than
 * plain decoding on group 1; asked for every group, the search keeps a
 * shallower one faster than plain decoding on both, the slowest group and
 * its speedup are the ones replayed group by group here, and the groups'
 * replays add up to the whole one's. With want 0 every setting qualifies,
 * and the choice is the fastest over all again; with a want no setting
 * reaches, the fastest whose every group beats plain decoding; where no
 * setting beats plain decoding on group 1 (hard rounds alone), the fastest
 * over all. Each grouped search also returns the fastest over all, as the
 * search without groups finds it, also where that rests and the grouped
 * choice starts its rest pass elsewhere. */
static void test_search_eagle2_groups(void **state) {
    (void)state;
    hs_hx_round hard, easy, first;
    hs_hx_model m = hard_easy(&hard, &easy);
    first = easy;
    for (int i = 1; i < 5; i++)
        first.truth[i] = 999; /* the first draft accepted, then a miss */
    hs_hx_round rounds[24];
    for (int i = 0; i < 24; i++)
        rounds[i] = i < 12 ? easy : first;
    rounds[0].first = rounds[12].first = true;
    const uint32_t ends[2] = {12, 24};
    hs_hx_eagle2_setting all, each, other, fastest;
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, NULL, &all, NULL));
    hs_hx_groups g = {.ends = ends, .n = 2, .want = 1.03};
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, &g, &each, &fastest));
    /* The same replays also give what the search without groups finds. */
    assert_true(fastest.policy.depth == all.policy.depth && fastest.policy.rest == all.policy.rest);
    assert_float_equal(hs_hx_replay_tps(&fastest.replay), hs_hx_replay_tps(&all.replay), 1e-9);
    hs_hx_replay_result r0, r1, whole;
    HS_CHECK(hs_hx_replay(&all.policy, &m.cost, rounds + 12, 12, &r1));
    assert_true(hs_hx_replay_speedup(&r1) < 1);
    HS_CHECK(hs_hx_replay(&each.policy, &m.cost, rounds, 12, &r0));
    HS_CHECK(hs_hx_replay(&each.policy, &m.cost, rounds + 12, 12, &r1));
    HS_CHECK(hs_hx_replay(&each.policy, &m.cost, rounds, 24, &whole));
    assert_true(each.policy.depth < all.policy.depth);
    assert_int_equal(each.worst_group, 1);
    assert_float_equal(each.worst, hs_hx_replay_speedup(&r1), 1e-12);
    assert_true(each.worst > 1 && hs_hx_replay_speedup(&r0) > each.worst);
    assert_float_equal(each.replay.tokens, r0.tokens + r1.tokens, 1e-9);
    assert_float_equal(each.replay.time_s, r0.time_s + r1.time_s, 1e-9);
    assert_float_equal(each.replay.time_s, whole.time_s, 1e-9);
    assert_float_equal(each.replay.tokens, whole.tokens, 1e-9);
    assert_true(hs_hx_replay_tps(&each.replay) < hs_hx_replay_tps(&all.replay));
    g.want = 0;
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, &g, &other, NULL));
    /* (the groups' sums may break an exact tie of the whole replay the other way) */
    assert_float_equal(hs_hx_replay_tps(&other.replay), hs_hx_replay_tps(&all.replay), 1e-9);
    g.want = 5;
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, &g, &other, NULL));
    assert_true(other.worst > 1);
    assert_true(hs_hx_replay_tps(&other.replay) >= hs_hx_replay_tps(&each.replay));
    /* Group 0 repeating hard, hard, first-only, first-only: over all rounds the fastest drafts a deeper
     * chain and rests after a floored round, the grouped search a shallower one; its fastest is the
     * other's, rest included (the rest pass from the fastest grid setting as well). */
    const hs_hx_round *cycle[4] = {&hard, &hard, &first, &first};
    for (int i = 0; i < 24; i++)
        rounds[i] = i < 12 ? *cycle[i % 4] : easy;
    rounds[0].first = rounds[12].first = true;
    g.want = 1.03;
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, NULL, &all, NULL));
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, &g, &other, &fastest));
    assert_true(all.policy.rest > 0 && other.policy.depth < all.policy.depth);
    assert_true(fastest.policy.depth == all.policy.depth && fastest.policy.rest == all.policy.rest);
    assert_float_equal(hs_hx_replay_tps(&fastest.replay), hs_hx_replay_tps(&all.replay), 1e-9);
    /* Hard rounds alone in group 1: no setting beats plain decoding there. */
    for (int i = 12; i < 24; i++)
        rounds[i] = hard;
    rounds[12].first = true;
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, NULL, &all, NULL));
    HS_CHECK(hs_hx_search_eagle2(&m.cost, rounds, 24, &g, &other, &fastest));
    assert_true(other.worst < 1);
    assert_float_equal(hs_hx_replay_tps(&fastest.replay), hs_hx_replay_tps(&all.replay), 1e-9);
    assert_float_equal(hs_hx_replay_tps(&other.replay), hs_hx_replay_tps(&all.replay), 1e-9);
    /* Groups that do not end at the last round, or do not start a generation. */
    const uint32_t short_ends[2] = {12, 20}, odd_ends[2] = {10, 24};
    g = (hs_hx_groups){.ends = short_ends, .n = 2, .want = 1.03};
    assert_int_equal(hs_hx_search_eagle2(&m.cost, rounds, 24, &g, &other, NULL), HS_ERR_INVALID_ARG);
    g.ends = odd_ends;
    assert_int_equal(hs_hx_search_eagle2(&m.cost, rounds, 24, &g, &other, NULL), HS_ERR_INVALID_ARG);
    hs_hx_round_free(&hard);
    hs_hx_round_free(&easy);
}

/* Rest: replay prices a round that selects nothing, then p.rest plain rounds
 * of one token at t_consume_cache + t_verify(1); the search rests the longest
 * on rounds that never pay and not at all when good rounds follow bad ones. */
static void test_rest(void **state) {
    (void)state;
    hs_hx_round hard, easy;
    hs_hx_model m = hard_easy(&hard, &easy);
    hs_hx_round rounds[40];
    for (int i = 0; i < 40; i++)
        rounds[i] = hard;
    hs_tree_policy p = hs_heterospec_policy(&m);
    assert_int_equal(p.rest, 0);
    hs_hx_replay_result res;
    HS_CHECK(hs_hx_replay(&p, &m.cost, rounds, 5, &res));
    assert_float_equal(res.verified, 5, 0); /* the hard round selects nothing */
    assert_float_equal(res.time_s, 5 * (0.2 + 1), 1e-9);
    p.rest = 2;
    HS_CHECK(hs_hx_replay(&p, &m.cost, rounds, 5, &res));
    /* rounds 0 and 3 decide, 1, 2 and 4 rest */
    assert_float_equal(res.tokens, 5, 0);
    assert_float_equal(res.rest_rounds, 3, 0);
    assert_float_equal(res.time_s, 2 * (0.2 + 1) + 3 * (0.05 + 1), 1e-9);
    assert_float_equal(res.plain_s, 5 * 1.0, 1e-9); /* 5 tokens, a plain step (t_verify(1)) each */
    assert_float_equal(hs_hx_replay_speedup(&res), 5.0 / res.time_s, 1e-12);
    /* A rest round's pass follows the cache-only consume: t_after_head too. */
    hs_hx_cost ca = m.cost;
    ca.t_after_head = 0.01;
    HS_CHECK(hs_hx_replay(&p, &ca, rounds, 5, &res));
    assert_float_equal(res.time_s, 2 * (0.2 + 0.01 + 1) + 3 * (0.05 + 0.01 + 1), 1e-9);
    /* Unknown cache-only cost: priced as a full consume. */
    hs_hx_cost c0 = m.cost;
    c0.t_consume_cache = 0;
    HS_CHECK(hs_hx_replay(&p, &c0, rounds, 5, &res));
    assert_float_equal(res.time_s, 5 * (0.2 + 1), 1e-9);
    /* Search: all hard -> the longest rest; hard, easy, easy, ... -> none. */
    HS_CHECK(hs_hx_search(&m, rounds, 40, &res));
    assert_int_equal(m.rest, 16);
    m = two_strata(0.9f, 0.1f);
    set_cost(&m, 0.3);
    m.cost.t_consume = 0.2;
    m.cost.t_consume_cache = 0.05;
    for (int i = 0; i < 12; i++)
        rounds[i] = i % 3 ? easy : hard;
    HS_CHECK(hs_hx_search(&m, rounds, 12, &res));
    assert_int_equal(m.rest, 0);
    assert_true(res.tokens > 12 + 8); /* the easy rounds accepted drafts */
    /* The rest and the cache-only cost round-trip through JSON; a rest past
     * the maximum is refused. */
    m.rest = 3;
    m.cost.ctx0 = 300;
    m.cost.ctx1 = 1000;
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        m.cost.t_verify_long[n] = 2 + 0.1 * n;
    cJSON *o = hs_hx_model_to_json(&m);
    hs_hx_model back;
    hs_hx_model_default(&back);
    HS_CHECK(hs_hx_model_from_json(o, &back));
    assert_int_equal(back.rest, 3);
    assert_float_equal(back.cost.t_consume_cache, 0.05, 1e-12);
    assert_int_equal(back.cost.ctx0, 300);
    assert_int_equal(back.cost.ctx1, 1000);
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        assert_float_equal(back.cost.t_verify_long[n], 2 + 0.1 * n, 1e-12);
    /* A long context not past the short one is refused. */
    cJSON_SetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "cost"), "ctx_long"), 300);
    assert_int_equal(hs_hx_model_from_json(o, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "ctx_long"));
    cJSON_SetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "cost"), "ctx_long"), 1000);
    cJSON_SetNumberValue(cJSON_GetObjectItem(o, "rest"), HS_HX_MAX_REST + 1);
    assert_int_equal(hs_hx_model_from_json(o, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "\"rest\""));
    cJSON_Delete(o);
    hs_hx_round_free(&hard);
    hs_hx_round_free(&easy);
}

/* Whether speculation pays: the tuned policy's replay against plain decoding
 * of the same tokens. Rounds whose drafts are never accepted only add the
 * head's consume, so they do not pay; rounds of a sure head do. The decision
 * round-trips through JSON as "plain", absent in older files (speculate), and
 * a "plain" that is not a boolean is refused by name. */
static void test_plain_decision(void **state) {
    (void)state;
    hs_hx_round hard, easy;
    chain_round(0.3f, 0.9f, false, &hard);
    chain_round(0.9f, 0.1f, true, &easy);
    hs_hx_round rounds[12];
    hs_hx_replay_result res;
    hs_hx_model m = two_strata(0.9f, 0.1f);
    set_cost(&m, 0.3);
    m.cost.t_consume = 0.2;
    for (int i = 0; i < 12; i++)
        rounds[i] = hard;
    HS_CHECK(hs_hx_search(&m, rounds, 12, &res));
    assert_true(hs_hx_replay_speedup(&res) < 1.0);
    assert_false(hs_hx_speculation_pays(&res));
    for (int i = 0; i < 12; i++)
        rounds[i] = easy;
    m = two_strata(0.9f, 0.1f);
    set_cost(&m, 0.3);
    m.cost.t_consume = 0.2;
    HS_CHECK(hs_hx_search(&m, rounds, 12, &res));
    assert_true(hs_hx_replay_speedup(&res) > 1.0);
    assert_true(hs_hx_speculation_pays(&res));
    /* A replay of nothing does not pay. */
    const hs_hx_replay_result none = {0};
    assert_false(hs_hx_speculation_pays(&none));
    /* JSON */
    m.plain = true;
    cJSON *o = hs_hx_model_to_json(&m);
    hs_hx_model back;
    hs_hx_model_default(&back);
    assert_false(back.plain);
    HS_CHECK(hs_hx_model_from_json(o, &back));
    assert_true(back.plain);
    cJSON_DeleteItemFromObject(o, "plain");
    hs_hx_model_default(&back);
    HS_CHECK(hs_hx_model_from_json(o, &back));
    assert_false(back.plain);
    cJSON_AddNumberToObject(o, "plain", 1);
    assert_int_equal(hs_hx_model_from_json(o, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "\"plain\""));
    cJSON_Delete(o);
    hs_hx_round_free(&hard);
    hs_hx_round_free(&easy);
}

/* ---- context lookup ---- */

/* A lookup table: f = hi for matches of 4+ tokens, lo for 1, mid between;
 * with the head's proposal too, `both`. */
static void set_lookup(hs_hx_model *m, float lo, float hi, float both) {
    for (uint32_t mb = 0; mb < HS_HX_LK_MATCH; mb++)
        for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++) {
            m->lookup.accept[mb][pb][HS_HX_LK_ONLY] = m->lookup.accept[mb][pb][HS_HX_LK_ANY] =
                mb == 0 ? lo : mb == HS_HX_LK_MATCH - 1 ? hi : 0.5f * (lo + hi);
            m->lookup.accept[mb][pb][HS_HX_LK_HEAD] = both;
        }
    m->lookup.max_len = 8;
    m->lookup.min_match = 1;
    m->lookup.nodraft = 0;
}

/* Lookup nodes take the table's f (by match and place), a node both sources
 * propose the larger of the two; select verifies a sure chain and not an
 * unsure one; the chain's length bounds what spec merges. */
static void test_lookup_values_and_select(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.8f, 0.2f);
    set_cost(&m, 0.2);
    set_lookup(&m, 0.1f, 0.9f, 0.95f);
    hs_tree_policy p = hs_heterospec_policy(&m);
    assert_int_equal(p.lookup, 8);
    assert_int_equal(p.lookup_min, 1);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    for (int sure = 0; sure < 2; sure++) {
        hs_tree_reset(&t, 7);
        const hs_topk_result a = topk(3, 0.3f, 0.9f, 1); /* an unsure head: children of V 0.1 and below */
        HS_CHECK(hs_tree_add_children(&t, 0, &a));       /* nodes 1..3; node 1 is token 101 */
        const int32_t chain[] = {101, 501, 502, 503, 504, 505};
        HS_CHECK(hs_tree_add_lookup(&t, chain, 6, sure ? 6 : 1));
        float V[16];
        hs_hx_values(&m, &t, V);
        const float f = sure ? 0.9f : 0.1f;
        assert_float_equal(V[1], 0.95f, 1e-6); /* both: max(f_hi(0.3) = 0.1, 0.95) */
        assert_float_equal(V[2], (0.7f / 2 / 2) / 3.0f, 1e-6);
        float want = 0.95f;
        for (uint32_t v = 4; v < 9; v++) {
            want *= f;
            assert_float_equal(V[v], want, 1e-6);
        }
        uint32_t sel[64];
        const uint32_t n = p.select(&p, &t, sel, 64);
        uint32_t lk = 0;
        for (uint32_t i = 0; i < n; i++)
            lk += t.nodes[sel[i]].src == HS_NODE_LOOKUP;
        /* Sure: each further node adds 0.95 * 0.9^k tokens for 0.2 of a step while that pays. */
        if (sure)
            assert_true(lk >= 4);
        else
            assert_int_equal(lk, 0);
    }
    hs_tree_free(&t);
}

/* The expected time of the output heads of a chain's first L nodes (values
 * V[0 .. L)), as the walk computes them `heads` at once: from node j, the
 * largest power of two k at most heads and L - j, costing th[k] if node j
 * is accepted. */
static double chain_heads(const float *V, uint32_t L, uint32_t heads, const double *th) {
    double t = 0;
    for (uint32_t j = 0; j < L;) {
        uint32_t k = 1;
        while (2 * k <= heads && 2 * k <= L - j) k *= 2;
        t += V[j] * th[k];
        j += k;
    }
    return t;
}

/* select prices the output heads of a chain of consecutive nodes (a lookup
 * chain) as the walk computes them, several in one product (t_heads): its
 * choice is the best prefix under that expectation (brute force here), so
 * with heads 1 the chain is cut sooner than where heads 4 shares products. */
static void test_select_prices_heads(void **state) {
    (void)state;
    const double th[9] = {0, 0.3, 0.32, 0, 0.36, 0, 0, 0, 0.45};
    const float fs[] = {0.7f, 0.75f, 0.8f, 0.85f};
    const double slopes[] = {0.05, 0.1, 0.15};
    const uint32_t hs[] = {1, 2, 4, 8};
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    uint32_t longer = 0, shorter = 0;
    for (size_t a = 0; a < sizeof fs / sizeof fs[0]; a++)
        for (size_t b = 0; b < sizeof slopes / sizeof slopes[0]; b++) {
            uint32_t got[4];
            for (size_t c = 0; c < sizeof hs / sizeof hs[0]; c++) {
                hs_hx_model m = two_strata(0.8f, 0.2f);
                set_cost(&m, slopes[b]);
                set_lookup(&m, 0.1f, fs[a], 0.95f);
                m.cost.t_head = th[1];
                m.cost.t_heads[2] = th[2];
                m.cost.t_heads[4] = th[4];
                m.cost.t_heads[8] = th[8];
                m.heads = hs[c];
                const hs_tree_policy p = hs_heterospec_policy(&m);
                hs_tree_reset(&t, 7);
                const int32_t chain[] = {501, 502, 503, 504, 505, 506, 507, 508};
                HS_CHECK(hs_tree_add_lookup(&t, chain, 8, 6));
                assert_int_equal(t.n, 9);
                float V[16];
                hs_hx_values(&m, &t, V);
                const double spent = m.cost.t_consume + m.cost.t_after_head;
                double best = 1 / (spent + m.cost.t_verify[1]), e = 1;
                uint32_t best_n = 0;
                for (uint32_t L = 1; L <= 8; L++) {
                    e += V[L];
                    const double r = e / (spent + m.cost.t_verify[L + 1] + chain_heads(V + 1, L, hs[c], th));
                    if (r > best) {
                        best = r;
                        best_n = L;
                    }
                }
                uint32_t sel[64];
                got[c] = p.select(&p, &t, sel, 64);
                fprintf(stderr, "f %.2f slope %.2f heads %u: %u nodes\n", fs[a], slopes[b], hs[c], got[c]);
                assert_int_equal(got[c], best_n);
                for (uint32_t i = 0; i < got[c]; i++)
                    assert_int_equal(sel[i], i + 1);
            }
            longer += got[2] > got[0];
            shorter += got[2] < got[0];
        }
    /* Both happen: sharing products pays for more nodes, and a node that
     * would start a new product can cost more than it adds. */
    assert_true(longer >= 3);
    assert_true(shorter >= 1);
    hs_tree_free(&t);
}

/* select with eager (every head of a list of up to m.eager entries in the
 * pass): a prefix whose list eager covers costs the lesser of t_verify_all
 * and t_verify plus its expected heads after the pass, a longer one the
 * latter; the choice is the best prefix under that (brute force here), and
 * the round runs eager where that prices lower for the chosen chain. */
static void test_select_prices_eager(void **state) {
    (void)state;
    const float fs[] = {0.5f, 0.7f, 0.85f};
    const double col[] = {0.05, 0.15, 0.4}; /* a head column in the pass */
    const uint32_t eagers[] = {0, 3, 5, 8};
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    uint32_t changed = 0, eager_rounds = 0, lazy_rounds = 0;
    for (size_t a = 0; a < sizeof fs / sizeof fs[0]; a++)
        for (size_t b = 0; b < sizeof col / sizeof col[0]; b++) {
            uint32_t got[4];
            for (size_t c = 0; c < sizeof eagers / sizeof eagers[0]; c++) {
                hs_hx_model m = two_strata(0.8f, 0.2f);
                set_cost(&m, 0.1);
                set_lookup(&m, 0.1f, fs[a], 0.95f);
                m.cost.t_head = 0.3;
                m.heads = 1;
                m.cost.n_verify_all = HS_TREE_EAGER_MAX;
                for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++)
                    m.cost.t_verify_all[n] = m.cost.t_verify[n] + col[b] * (n - 1);
                m.eager = eagers[c];
                const hs_tree_policy p = hs_heterospec_policy(&m);
                assert_int_equal(p.eager, eagers[c]);
                hs_tree_reset(&t, 7);
                const int32_t chain[] = {501, 502, 503, 504, 505, 506, 507, 508};
                HS_CHECK(hs_tree_add_lookup(&t, chain, 8, 6));
                float V[16];
                hs_hx_values(&m, &t, V);
                const double spent = m.cost.t_consume + m.cost.t_after_head;
                double best = 1 / (spent + m.cost.t_verify[1]), e = 1, heads = 0;
                uint32_t best_n = 0;
                for (uint32_t L = 1; L <= 8; L++) {
                    e += V[L];
                    heads += V[L] * m.cost.t_head;
                    double pass = m.cost.t_verify[L + 1] + heads;
                    if (L + 1 <= eagers[c] && L < HS_TREE_EAGER_MAX && m.cost.t_verify_all[L + 1] < pass)
                        pass = m.cost.t_verify_all[L + 1];
                    const double r = e / (spent + pass);
                    if (r > best) {
                        best = r;
                        best_n = L;
                    }
                }
                uint32_t sel[64];
                got[c] = p.select(&p, &t, sel, 64);
                /* The round runs eager exactly where that prices lower for the chosen chain. */
                double heads_n = 0;
                for (uint32_t i = 1; i <= got[c]; i++)
                    heads_n += V[i] * m.cost.t_head;
                const bool want_eager =
                    got[c] && got[c] + 1 <= eagers[c] &&
                    m.cost.t_verify_all[got[c] + 1] < m.cost.t_verify[got[c] + 1] + heads_n;
                const bool eager = hs_tree_eager(&p, &t, sel, got[c]);
                fprintf(stderr, "f %.2f column %.2f eager %u: %u nodes%s\n", fs[a], col[b], eagers[c], got[c],
                        eager ? ", every head in the pass" : "");
                assert_int_equal(got[c], best_n);
                assert_int_equal(eager, want_eager);
                eager_rounds += eager;
                lazy_rounds += got[c] && !eager;
            }
            changed += got[3] != got[0] || got[1] != got[0];
        }
    /* The cheaper pass moves the best prefix (a shorter chain can now beat a longer one, or the reverse). */
    assert_true(changed >= 2);
    assert_true(eager_rounds >= 4 && lazy_rounds >= 2);
    hs_tree_free(&t);
}

/* A recorded round whose lookup chain spells the truth while the head's
 * tree does not: the replay with lookup decides more tokens than without,
 * drafts no level when the match reaches nodraft, and the lookup records say
 * which chain nodes were accepted and whether the head proposed them. */
static void test_lookup_replay_and_records(void **state) {
    (void)state;
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    hs_tree_reset(&t, 7);
    const hs_topk_result a = topk(3, 0.3f, 0.9f, 1); /* node 1 is token 101 */
    HS_CHECK(hs_tree_add_children(&t, 0, &a));
    t.nodes[1].slot = 1;
    const hs_topk_result b = topk(3, 0.3f, 0.9f, 2); /* node 1's children: 102, ... */
    HS_CHECK(hs_tree_add_children(&t, 1, &b));
    const int32_t chain[] = {101, 601, 602, 603, 604, 605};
    hs_hx_round r;
    HS_CHECK(hs_hx_round_copy(&t, chain, 6, 5, &r));
    assert_int_equal(r.n_lookup, 6);
    const int32_t ids[] = {7, 101, 601, 602, 603, 999, 1, 2, 3};
    hs_hx_round_set_truth(&r, ids, 9, 0);
    hs_hx_lookup_record *lr = NULL;
    HS_CHECK(hs_hx_round_lookup_records(&r, &lr));
    assert_int_equal(stbds_arrlen(lr), 5); /* 101, 601, 602, 603 accepted, 604 not */
    for (int i = 0; i < 5; i++) {
        assert_int_equal(lr[i].pos, i);
        assert_int_equal(lr[i].match, 5);
        assert_int_equal(lr[i].accepted, i < 4);
        assert_int_equal(lr[i].head, i == 0);
    }
    /* The head's records leave the lookup alone. */
    hs_hx_record *hr = NULL;
    HS_CHECK(hs_hx_round_records(&r, &hr));
    assert_int_equal(stbds_arrlen(hr), 6);
    hs_hx_model m = two_strata(0.8f, 0.2f);
    set_cost(&m, 0.1);
    set_lookup(&m, 0.1f, 0.9f, 0.95f);
    hs_tree_policy on = hs_heterospec_policy(&m), off = on;
    off.lookup = 0;
    hs_hx_replay_result ron, roff;
    HS_CHECK(hs_hx_replay(&on, &m.cost, &r, 1, &ron));
    HS_CHECK(hs_hx_replay(&off, &m.cost, &r, 1, &roff));
    assert_float_equal(ron.tokens, 5, 0); /* 101 601 602 603 and the bonus */
    assert_true(roff.tokens <= 2);
    /* A chain shorter than the match wants, or a match below lookup_min, merges less or nothing. */
    on.lookup = 2;
    HS_CHECK(hs_hx_replay(&on, &m.cost, &r, 1, &ron));
    assert_float_equal(ron.tokens, 3, 0);
    on.lookup = 8;
    on.lookup_min = 6;
    HS_CHECK(hs_hx_replay(&on, &m.cost, &r, 1, &ron));
    assert_float_equal(ron.tokens, roff.tokens, 0);
    /* nodraft: no draft level is priced. */
    on.lookup_min = 1;
    m.s[1].look = 1.0f; /* make drafting the root's children worth it */
    m.s[1].map_p[1] = 1.0f;
    for (uint32_t w = 1; w <= HS_HX_MAX_WIDTH; w++)
        m.cost.t_draft[w] = 0.001;
    HS_CHECK(hs_hx_replay(&on, &m.cost, &r, 1, &ron));
    assert_true(ron.time_s > m.cost.t_consume + hs_hx_t_verify(&m.cost, 1)); /* it drafted a level */
    on.lookup_nodraft = 5;
    hs_hx_replay_result rnd;
    HS_CHECK(hs_hx_replay(&on, &m.cost, &r, 1, &rnd));
    assert_true(ron.time_s > rnd.time_s);
    assert_float_equal(rnd.tokens, 5, 0);
    /* The root and the chain of 6, no draft level. */
    assert_float_equal(rnd.time_s, m.cost.t_consume + hs_hx_t_verify(&m.cost, 7), 1e-9);
    stbds_arrfree(lr);
    stbds_arrfree(hr);
    hs_hx_round_free(&r);
    hs_tree_free(&t);
}

/* The fitted table follows each cell's rate where it has records, its row's
 * where it has none; the calibration JSON keeps it; a bad table is refused. */
static void test_lookup_fit_and_json(void **state) {
    (void)state;
    hs_hx_lookup_record *r = NULL;
    uint64_t s = 7;
    for (int i = 0; i < 4000; i++) {
        const uint32_t match = 1 + (uint32_t)(lcg(&s) * 6), pos = (uint32_t)(lcg(&s) * 3);
        /* True rate: 0.3 for one-token matches, 0.85 for 4+, 0.6 between; the head's agreement adds 0.1. */
        const bool head = lcg(&s) < 0.3;
        const double rate = (match == 1 ? 0.3 : match >= 4 ? 0.85 : 0.6) + (head ? 0.1 : 0);
        const hs_hx_lookup_record x = {.match = match, .pos = pos, .head = head, .accepted = lcg(&s) < rate};
        stbds_arrput(r, x);
    }
    hs_hx_model m;
    hs_hx_model_default(&m);
    hs_hx_fit_lookup(r, (uint32_t)stbds_arrlen(r), &m.lookup);
    assert_int_equal(m.lookup.records, 4000);
    assert_float_equal(m.lookup.accept[0][0][0], 0.3f, 0.06);
    assert_float_equal(m.lookup.accept[3][1][0], 0.85f, 0.05);
    assert_float_equal(m.lookup.accept[3][1][1], 0.95f, 0.05);
    assert_float_equal(m.lookup.accept[1][2][0], 0.6f, 0.07);
    /* No record at place 3+: the row's rate. */
    assert_float_equal(m.lookup.accept[3][3][0], 0.85f, 0.05);
    m.lookup.max_len = 12;
    m.lookup.min_match = 3;
    m.lookup.nodraft = 4;
    cJSON *o = hs_hx_model_to_json(&m);
    char *text = cJSON_PrintUnformatted(o);
    cJSON *p = cJSON_Parse(text);
    hs_hx_model back;
    hs_hx_model_default(&back);
    HS_CHECK(hs_hx_model_from_json(p, &back));
    assert_int_equal(back.lookup.max_len, 12);
    assert_int_equal(back.lookup.min_match, 3);
    assert_int_equal(back.lookup.nodraft, 4);
    for (uint32_t mb = 0; mb < HS_HX_LK_MATCH; mb++)
        for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
            for (uint32_t h = 0; h < HS_HX_LK_COLS; h++)
                assert_float_equal(back.lookup.accept[mb][pb][h], m.lookup.accept[mb][pb][h], 1e-6);
    /* A file from before the third column (pairs): the headless value is the first column, as it was. */
    cJSON *pairs = cJSON_Duplicate(p, true);
    cJSON *acc = cJSON_GetObjectItem(cJSON_GetObjectItem(pairs, "lookup"), "accept");
    for (int mb = 0; mb < HS_HX_LK_MATCH; mb++)
        for (int pb = 0; pb < HS_HX_LK_POS; pb++)
            cJSON_DeleteItemFromArray(cJSON_GetArrayItem(cJSON_GetArrayItem(acc, mb), pb), HS_HX_LK_ANY);
    HS_CHECK(hs_hx_model_from_json(pairs, &back));
    assert_float_equal(back.lookup.accept[3][1][HS_HX_LK_ANY], m.lookup.accept[3][1][HS_HX_LK_ONLY], 1e-6);
    assert_float_equal(back.lookup.accept[3][1][HS_HX_LK_HEAD], m.lookup.accept[3][1][HS_HX_LK_HEAD], 1e-6);
    cJSON_Delete(pairs);
    cJSON *row = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "lookup"), "accept"), 2);
    cJSON_DeleteItemFromArray(row, 0);
    assert_int_equal(hs_hx_model_from_json(p, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "lookup.accept"));
    cJSON_Delete(p);
    free(text);
    cJSON_Delete(o);
    stbds_arrfree(r);
}

/* Recorded beside a generous head tree, the lookup's tokens that tree also
 * proposed are right far more often than the ones it left out. The policy
 * without the head drafts both kinds alike: its values come from every
 * record (column "any"), not from the left-out ones. */
static void test_lookup_headless_column(void **state) {
    (void)state;
    hs_hx_lookup_record *r = NULL;
    for (int i = 0; i < 200; i++) {
        const bool head = i % 2 == 0;
        /* The head's: 90 of 100 accepted; the others: 10 of 100. */
        const hs_hx_lookup_record x = {.match = 2, .pos = 0, .head = head, .accepted = (i / 2) % 10 < (head ? 9 : 1)};
        stbds_arrput(r, x);
        const hs_hx_lookup_record y = {.match = 0, .pos = 0, .conf = 3, .head = head, .accepted = x.accepted};
        stbds_arrput(r, y);
    }
    hs_hx_model m;
    hs_hx_model_default(&m);
    hs_hx_fit_lookup(r, (uint32_t)stbds_arrlen(r), &m.lookup);
    assert_float_equal(m.lookup.accept[1][0][HS_HX_LK_ONLY], 0.1f, 0.03);
    assert_float_equal(m.lookup.accept[1][0][HS_HX_LK_HEAD], 0.9f, 0.03);
    assert_float_equal(m.lookup.accept[1][0][HS_HX_LK_ANY], 0.5f, 0.03);
    assert_float_equal(m.lookup.store_accept[3][0][HS_HX_LK_ANY], 0.5f, 0.03);
    /* A lookup node and a store node, neither proposed by the head. */
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 16));
    hs_tree_reset(&t, 7);
    const int32_t lk[] = {50}, st[] = {60};
    const uint8_t conf[] = {3};
    HS_CHECK(hs_tree_add_lookup(&t, lk, 1, 2));
    HS_CHECK(hs_tree_add_store(&t, st, conf, 1));
    float V[3];
    m.headless = false;
    hs_hx_values(&m, &t, V);
    assert_float_equal(V[1], m.lookup.accept[1][0][HS_HX_LK_ONLY], 1e-6);
    assert_float_equal(V[2], m.lookup.store_accept[3][0][HS_HX_LK_ONLY], 1e-6);
    m.headless = true;
    hs_hx_values(&m, &t, V);
    assert_float_equal(V[1], m.lookup.accept[1][0][HS_HX_LK_ANY], 1e-6);
    assert_float_equal(V[2], m.lookup.store_accept[3][0][HS_HX_LK_ANY], 1e-6);
    hs_tree_free(&t);
    stbds_arrfree(r);
}

/* Acceptance feedback: observe's sums and gain computed here from the
 * definition (decayed predicted and actual acceptances of the head's decided
 * candidates), the gain's effect on values and decisions, and replays where
 * a head that the maps trust keeps failing: feedback stops verifying its
 * drafts, a round marked first starts it afresh, and the search turns it on. */
static void test_feedback(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.9f, 0.1f);
    m.fb_prior = 2;
    m.fb_decay = 0.5f;
    const hs_tree_policy p = hs_heterospec_policy(&m);
    assert_non_null(p.observe);
    hs_hx_model off = m;
    off.fb_prior = 0;
    assert_null(hs_heterospec_policy(&off).observe);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    assert_float_equal(t.fb.gain[HS_FB_HEAD], 1, 0);
    assert_float_equal(t.fb.gain[HS_FB_LOOKUP], 1, 0);
    hs_tree_reset(&t, 7);
    /* Root entropy 0.2 (stratum 0: f = q): children 100 (q 0.8), 201, 202 (q 0.05 each). */
    const hs_topk_result a = topk(3, 0.8f, 0.2f, 0);
    HS_CHECK(hs_tree_add_children(&t, 0, &a));
    t.nodes[1].slot = 1;
    HS_CHECK(hs_tree_add_children(&t, 1, &a)); /* nodes 4..6 under node 1 */
    const int32_t lk[] = {555};
    HS_CHECK(hs_tree_add_lookup(&t, lk, 1, 4)); /* node 7: a lookup-only child of the root */
    assert_int_equal(t.n, 8);
    assert_int_equal(t.nodes[7].src, HS_NODE_LOOKUP);
    const double lk_f = hs_hx_lookup_accept(&m.lookup, &t.nodes[7], false);
    assert_true(lk_f > 0.1 && lk_f < 0.99);
    /* List: root, 1, 2, 4, 7; path root -> 1. Decided: 1, 2, 7 (parent root) and 4
     * (parent 1): the head predicted 0.8 + 0.05 + 0.8 and got 1, the lookup lk_f and 0. */
    const uint32_t nodes1[] = {0, 1, 2, 4, 7}, path1[] = {0, 1};
    const int32_t par1[] = {-1, 0, 0, 1, 0};
    p.observe(&p, &t, nodes1, par1, 5, path1, 2);
    double pred = 0.8 + 0.05 + 0.8, acc = 1, lpred = lk_f, lacc = 0;
    assert_float_equal(t.fb.pred[HS_FB_HEAD], pred, 1e-6);
    assert_float_equal(t.fb.acc[HS_FB_HEAD], acc, 1e-12);
    assert_float_equal(t.fb.gain[HS_FB_HEAD], (acc + 2) / (pred + 2), 1e-6);
    assert_float_equal(t.fb.pred[HS_FB_LOOKUP], lpred, 1e-6);
    assert_float_equal(t.fb.acc[HS_FB_LOOKUP], 0, 0);
    assert_float_equal(t.fb.gain[HS_FB_LOOKUP], 2 / (lpred + 2), 1e-6);
    /* List: root, 1, 4 (under 1: undecided); path root alone. */
    const uint32_t nodes2[] = {0, 1, 4}, path2[] = {0};
    const int32_t par2[] = {-1, 0, 1};
    p.observe(&p, &t, nodes2, par2, 3, path2, 1);
    pred = pred * 0.5 + 0.8;
    acc = acc * 0.5;
    lpred *= 0.5;
    assert_float_equal(t.fb.pred[HS_FB_HEAD], pred, 1e-6);
    assert_float_equal(t.fb.gain[HS_FB_HEAD], (acc + 2) / (pred + 2), 1e-6);
    assert_float_equal(t.fb.pred[HS_FB_LOOKUP], lpred, 1e-6);
    /* List: root, 7; the lookup-only node accepted. */
    const uint32_t nodes3[] = {0, 7}, path3[] = {0, 1};
    const int32_t par3[] = {-1, 0};
    p.observe(&p, &t, nodes3, par3, 2, path3, 2);
    pred *= 0.5;
    acc *= 0.5;
    lpred = lpred * 0.5 + lk_f;
    lacc = lacc * 0.5 + 1;
    assert_float_equal(t.fb.pred[HS_FB_HEAD], pred, 1e-6);
    assert_float_equal(t.fb.acc[HS_FB_HEAD], acc, 1e-12);
    assert_float_equal(t.fb.pred[HS_FB_LOOKUP], lpred, 1e-6);
    assert_float_equal(t.fb.acc[HS_FB_LOOKUP], lacc, 1e-12);
    assert_float_equal(t.fb.gain[HS_FB_LOOKUP], (lacc + 2) / (lpred + 2), 1e-6);
    /* Rounds that verify nothing only decay the sums: the gains return to 1. */
    for (int i = 0; i < 40; i++)
        p.observe(&p, &t, nodes3, par3, 1, path1, 1);
    assert_float_equal(t.fb.gain[HS_FB_HEAD], 1, 1e-6);
    assert_float_equal(t.fb.gain[HS_FB_LOOKUP], 1, 1e-6);
    /* A head far better than its maps: the gain stops at HS_HX_FB_MAX_GAIN. */
    t.fb = (hs_tree_feedback){.pred = {0.01, 0}, .acc = {30, 0}, .gain = {1, 1}};
    p.observe(&p, &t, nodes1, par1, 5, path1, 2);
    assert_float_equal(t.fb.gain[HS_FB_HEAD], HS_HX_FB_MAX_GAIN, 0);
    /* Values: each source's f scaled by its gain (at most 0.999). */
    float V[8];
    t.fb.gain[HS_FB_HEAD] = 0.5f;
    t.fb.gain[HS_FB_LOOKUP] = 1;
    hs_hx_values(&m, &t, V);
    assert_float_equal(V[1], 0.4, 1e-6);
    assert_float_equal(V[4], 0.4 * 0.4, 1e-6);
    assert_float_equal(V[7], lk_f, 1e-6);
    t.fb.gain[HS_FB_HEAD] = 4;
    t.fb.gain[HS_FB_LOOKUP] = 0.5f;
    hs_hx_values(&m, &t, V);
    assert_float_equal(V[1], 0.999, 1e-6);
    assert_float_equal(V[7], lk_f * 0.5, 1e-6);
    hs_tree_feedback_reset(&t);
    assert_float_equal(t.fb.gain[HS_FB_HEAD], 1, 0);
    assert_float_equal(t.fb.gain[HS_FB_LOOKUP], 1, 0);
    assert_float_equal(t.fb.pred[HS_FB_HEAD], 0, 0);
    /* Decisions: a lower gain verifies fewer nodes, a higher one no fewer. */
    hs_hx_model g = two_strata(0.9f, 0.1f);
    set_cost(&g, 0.05);
    g.lookup.max_len = 0;
    const hs_tree_policy pg = hs_heterospec_policy(&g);
    const hs_topk_result mid = topk(4, 0.6f, 0.2f, 3);
    uint32_t n_sel[3], deepest[3];
    const float gains[3] = {0.25f, 1, 2};
    for (int i = 0; i < 3; i++) {
        hs_tree u;
        HS_CHECK(hs_tree_init(&u, 1024));
        u.fb.gain[HS_FB_HEAD] = gains[i];
        grow(&pg, &mid, &u, &n_sel[i], &deepest[i]);
        hs_tree_free(&u);
    }
    assert_true(n_sel[0] < n_sel[1]);
    assert_true(n_sel[1] <= n_sel[2]);
    assert_true(deepest[0] < deepest[2]);
    /* Replays: the maps trust the head (q 0.9 at low entropy) but its drafts never match. */
    hs_hx_round hard;
    chain_round(0.9f, 0.1f, false, &hard);
    hs_hx_round rounds[30];
    for (int i = 0; i < 30; i++)
        rounds[i] = hard;
    hs_hx_model h = two_strata(0.9f, 0.1f);
    set_cost(&h, 0.1);
    h.lookup.max_len = 0;
    h.fb_prior = 0;
    hs_tree_policy ph = hs_heterospec_policy(&h);
    hs_hx_replay_result r_off, r_on, r_first;
    HS_CHECK(hs_hx_replay(&ph, &h.cost, rounds, 30, &r_off));
    assert_float_equal(r_off.tokens, 30, 0);
    assert_true(r_off.verified > 2 * 30); /* every round verifies the head's chain */
    h.fb_prior = 1;
    h.fb_decay = 0.95f;
    ph = hs_heterospec_policy(&h);
    HS_CHECK(hs_hx_replay(&ph, &h.cost, rounds, 30, &r_on));
    assert_float_equal(r_on.tokens, 30, 0);
    assert_true(r_on.verified < r_off.verified / 2);
    assert_true(r_on.time_s < r_off.time_s);
    for (int i = 0; i < 30; i++)
        rounds[i].first = true; /* every round a new generation: nothing to learn from */
    HS_CHECK(hs_hx_replay(&ph, &h.cost, rounds, 30, &r_first));
    assert_float_equal(r_first.verified, r_off.verified, 0);
    assert_float_equal(r_first.time_s, r_off.time_s, 1e-9);
    /* Two generations whose drafts look alike, the head right all through
     * the first and wrong all through the second: no static setting serves
     * both, so the search turns the feedback on. */
    hs_hx_round easy;
    chain_round(0.9f, 0.1f, true, &easy);
    for (int i = 0; i < 30; i++) {
        rounds[i] = i < 15 ? easy : hard;
        rounds[i].first = i == 0 || i == 15;
    }
    h.fb_prior = 0;
    HS_CHECK(hs_hx_search(&h, rounds, 30, &r_on));
    assert_true(h.fb_prior > 0);
    hs_hx_round_free(&easy);
    /* The feedback's settings round-trip through JSON; a decay above 1 is refused by name. */
    cJSON *o = hs_hx_model_to_json(&h);
    hs_hx_model back;
    hs_hx_model_default(&back);
    back.fb_prior = 0;
    HS_CHECK(hs_hx_model_from_json(o, &back));
    assert_float_equal(back.fb_prior, h.fb_prior, 1e-6);
    assert_float_equal(back.fb_decay, h.fb_decay, 1e-6);
    cJSON_SetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "feedback"), "decay"), 1.5);
    assert_int_equal(hs_hx_model_from_json(o, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "\"decay\""));
    cJSON_Delete(o);
    hs_hx_round_free(&hard);
    hs_tree_free(&t);
}

/* Without the head: the policy drafts nothing, replays price no consume and
 * no head nodes (the recorded Top-Ks are left out), the search of its
 * lookup settings, the choice against the policy with the head, and the
 * JSON. Rounds whose head is sure and wrong but whose lookup chain of 2 is
 * right: each replays as one pass of 3 nodes deciding 3 tokens in
 * t_verify(3), computed here from the cost model. */
static void test_headless(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.9f, 0.1f);
    set_cost(&m, 0.1);
    m.fb_prior = 0;
    set_lookup(&m, 0.9f, 0.9f, 0.9f);
    m.lookup.max_len = 2;
    m.lookup.min_match = 1;
    hs_hx_model h = m;
    h.headless = true;
    h.headless_len = 2;
    h.headless_min = 1;
    const hs_tree_policy p = hs_heterospec_policy(&h);
    assert_true(p.headless && p.lookup == 2 && p.lookup_min == 1);
    assert_false(hs_heterospec_policy(&m).headless);
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    hs_tree_reset(&t, 7);
    const hs_topk_result sure = topk(3, 0.9f, 0.1f, 0);
    HS_CHECK(hs_tree_add_children(&t, 0, &sure));
    uint32_t sel[64];
    assert_int_equal(p.expand(&p, &t, 1, sel, 64), 0);
    const hs_tree_policy with = hs_heterospec_policy(&m);
    assert_true(with.expand(&with, &t, 1, sel, 64) > 0);
    /* select prices no consume without the head: a lookup node worth 0.05 does not pay for t_verify(2) =
     * 1.1 alone (1.05 / 1.1 < 1 / 1), but does after a consume of 5 (1.05 / 6.1 > 1 / 6). */
    hs_hx_model hc = h, mc = m;
    set_lookup(&hc, 0.05f, 0.05f, 0.05f);
    set_lookup(&mc, 0.05f, 0.05f, 0.05f);
    hc.cost.t_consume = mc.cost.t_consume = 5;
    hs_tree_reset(&t, 7);
    const int32_t one[] = {300};
    HS_CHECK(hs_tree_add_lookup(&t, one, 1, 4));
    const hs_tree_policy pc = hs_heterospec_policy(&hc), wc = hs_heterospec_policy(&mc);
    assert_int_equal(pc.select(&pc, &t, sel, 64), 0);
    assert_int_equal(wc.select(&wc, &t, sel, 64), 1);
    hs_tree_free(&t);
    /* The recorded rounds: a sure head chain that never matches, a lookup chain that does. */
    hs_hx_round bad[20];
    for (int i = 0; i < 20; i++) {
        chain_round(0.9f, 0.1f, false, &bad[i]);
        bad[i].truth[0] = 300;
        bad[i].truth[1] = 301;
        bad[i].lookup[0] = 300;
        bad[i].lookup[1] = 301;
        bad[i].n_lookup = 2;
        bad[i].lookup_match = 4;
        bad[i].first = i == 0;
    }
    hs_hx_replay_result rh, rw;
    HS_CHECK(hs_hx_replay(&p, &h.cost, bad, 20, &rh));
    assert_float_equal(rh.tokens, 20 * 3, 0);
    assert_float_equal(rh.verified, 20 * 3, 0);
    assert_float_equal(rh.time_s, 20 * hs_hx_t_verify(&h.cost, 3), 1e-9);
    assert_float_equal(rh.unknown, 0, 0);
    HS_CHECK(hs_hx_replay(&with, &m.cost, bad, 20, &rw));
    assert_true(rw.time_s > rh.time_s + 20 * m.cost.t_consume - 1e-9);
    /* The search without the head keeps it headless, finds chains of 2 or more, and is preferred here. */
    hs_hx_model hs;
    hs_hx_replay_result rs;
    HS_CHECK(hs_hx_search_headless(&m, bad, 20, &hs, &rs));
    assert_true(hs.headless);
    assert_true(hs.headless_len >= 2);
    assert_float_equal(rs.tokens, 20 * 3, 0);
    {
        /* ... also from a model whose lookup is off: the chains are the search's own. */
        hs_hx_model m0 = m, h0;
        hs_hx_replay_result r0;
        m0.headless_len = 0;
        HS_CHECK(hs_hx_search_headless(&m0, bad, 20, &h0, &r0));
        assert_true(h0.headless_len >= 2);
        assert_float_equal(r0.tokens, 20 * 3, 0);
    }
    /* It starts from the built-in feedback, not the head policy's (m's is off here), so a head tuned
     * otherwise (feedback 16 / 0.5) leads it to the same policy and the same replay. */
    hs_hx_model dflt, m_fb = m, hs_fb;
    hs_hx_model_default(&dflt);
    assert_true(hs.fb_prior == dflt.fb_prior && hs.fb_decay == dflt.fb_decay);
    m_fb.fb_prior = 16;
    m_fb.fb_decay = 0.5f;
    hs_hx_replay_result rs_fb;
    HS_CHECK(hs_hx_search_headless(&m_fb, bad, 20, &hs_fb, &rs_fb));
    assert_true(hs_fb.fb_prior == hs.fb_prior && hs_fb.fb_decay == hs.fb_decay);
    assert_true(hs_fb.headless_len == hs.headless_len && hs_fb.headless_min == hs.headless_min);
    assert_float_equal(rs_fb.time_s, rs.time_s, 0);
    /* What calibration takes from it: the chains alone into a policy with the head, everything the
     * headless policy tuned when it is chosen, so that the model replays as the search's does. */
    hs_hx_model taken = m_fb;
    taken.lookup.store_len = hs_fb.lookup.store_len + 5;
    hs_hx_take_headless(&taken, &hs_fb, false);
    assert_false(taken.headless);
    assert_true(taken.headless_len == hs_fb.headless_len && taken.headless_min == hs_fb.headless_min);
    assert_true(taken.fb_prior == 16 && taken.lookup.store_len == hs_fb.lookup.store_len + 5);
    hs_hx_take_headless(&taken, &hs_fb, true);
    assert_true(taken.headless && taken.lookup.store_len == hs_fb.lookup.store_len);
    assert_true(taken.fb_prior == hs_fb.fb_prior && taken.fb_decay == hs_fb.fb_decay);
    const hs_tree_policy tp = hs_heterospec_policy(&taken);
    hs_hx_replay_result rt;
    HS_CHECK(hs_hx_replay(&tp, &taken.cost, bad, 20, &rt));
    assert_float_equal(rt.time_s, rs_fb.time_s, 0);
    assert_float_equal(rt.verified, rs_fb.verified, 0);
    HS_CHECK(hs_hx_search(&m, bad, 20, &rw));
    assert_true(hs_hx_prefer_headless(&rw, &rs));
    /* A model an earlier calibration made headless is searched with the head. */
    hs_hx_model again = hs;
    hs_hx_replay_result ra;
    HS_CHECK(hs_hx_search(&again, bad, 20, &ra));
    assert_false(again.headless);
    assert_float_equal(ra.time_s, rw.time_s, 1e-9);
    assert_float_equal(ra.verified, rw.verified, 0);
    /* Rounds where the head is right and the text offers no lookup: the head stays. */
    hs_hx_round good[20];
    hs_hx_model g = two_strata(0.9f, 0.1f);
    set_cost(&g, 0.1);
    for (int i = 0; i < 20; i++) {
        chain_round(0.9f, 0.1f, true, &good[i]);
        good[i].first = i == 0;
    }
    HS_CHECK(hs_hx_search(&g, good, 20, &rw));
    HS_CHECK(hs_hx_search_headless(&g, good, 20, &hs, &rs));
    assert_float_equal(rs.tokens, 20, 0); /* no lookup: plain steps */
    assert_false(hs_hx_prefer_headless(&rw, &rs));
    /* "headless" round-trips through JSON; one that is not a boolean is refused by name. */
    cJSON *o = hs_hx_model_to_json(&h);
    hs_hx_model back;
    hs_hx_model_default(&back);
    h.headless_len = 5;
    h.headless_min = 3;
    cJSON_Delete(o);
    o = hs_hx_model_to_json(&h);
    HS_CHECK(hs_hx_model_from_json(o, &back));
    assert_true(back.headless);
    assert_int_equal(back.headless_len, 5);
    assert_int_equal(back.headless_min, 3);
    const hs_tree_policy pb = hs_heterospec_policy(&back);
    assert_true(pb.headless && pb.lookup == 5 && pb.lookup_min == 3 && pb.lookup_nodraft == 0);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(o, "headless"), "use", cJSON_CreateNumber(1));
    assert_int_equal(hs_hx_model_from_json(o, &back), HS_ERR_FORMAT);
    assert_non_null(strstr(hs_last_error(), "headless.use"));
    cJSON_Delete(o);
    for (int i = 0; i < 20; i++) {
        hs_hx_round_free(&bad[i]);
        hs_hx_round_free(&good[i]);
    }
}

/* The n-gram store's chains (match-0 lookup nodes): valued by their own
 * table, merged by replays only where no lookup chain is, fitted apart from
 * the lookup's records, searched, and kept in the JSON. */
static void test_store(void **state) {
    (void)state;
    hs_hx_model m = two_strata(0.9f, 0.1f);
    set_cost(&m, 0.1);
    m.fb_prior = 0;
    set_lookup(&m, 0.2f, 0.2f, 0.2f);
    for (uint32_t cb = 0; cb < HS_NGRAM_CONF; cb++)
        for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
            for (uint32_t h = 0; h < HS_HX_LK_COLS; h++)
                m.lookup.store_accept[cb][pb][h] = 0.5f + 0.1f * (float)cb + 0.01f * (float)pb + 0.001f * (float)h;
    /* Values: a store node reads store_accept[conf][place][head], a lookup node the lookup's table. */
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    hs_tree_reset(&t, 7);
    const int32_t chain[] = {300, 301, 302};
    const uint8_t conf[] = {3, 1, 0};
    HS_CHECK(hs_tree_add_store(&t, chain, conf, 3));
    assert_int_equal(t.n, 4);
    for (uint32_t i = 0; i < 3; i++) {
        const hs_tree_node *v = &t.nodes[1 + i];
        assert_true(v->src == HS_NODE_LOOKUP && v->match == 0 && v->conf == conf[i] && v->lpos == i);
        assert_float_equal(hs_hx_lookup_accept(&m.lookup, v, false), 0.5f + 0.1f * conf[i] + 0.01f * i, 1e-6);
        assert_float_equal(hs_hx_lookup_accept(&m.lookup, v, true), 0.5f + 0.1f * conf[i] + 0.01f * i + 0.002f,
                           1e-6);
    }
    hs_tree_reset(&t, 7);
    HS_CHECK(hs_tree_add_lookup(&t, chain, 1, 2));
    assert_float_equal(hs_hx_lookup_accept(&m.lookup, &t.nodes[1], false), 0.2f, 1e-6);
    hs_tree_free(&t);
    /* Rounds: a sure head chain that never matches, no lookup chain, a store chain that does. */
    hs_hx_round r[20];
    for (int i = 0; i < 20; i++) {
        chain_round(0.9f, 0.1f, false, &r[i]);
        r[i].truth[0] = 300;
        r[i].truth[1] = 301;
        r[i].truth[2] = 302;
        const int32_t st[] = {300, 301, 302};
        const uint8_t sc[] = {3, 3, 3};
        hs_hx_round_set_store(&r[i], st, sc, 3);
        r[i].first = i == 0;
    }
    hs_hx_model h = m;
    h.headless = true;
    h.headless_len = 2;
    h.headless_min = 1;
    h.lookup.store_len = 2;
    hs_hx_replay_result rr;
    const hs_tree_policy p = hs_heterospec_policy(&h);
    assert_int_equal(p.store_len, 2);
    HS_CHECK(hs_hx_replay(&p, &h.cost, r, 20, &rr));
    assert_float_equal(rr.tokens, 20 * 3, 0); /* two store nodes and the bonus */
    assert_float_equal(rr.verified, 20 * 3, 0);
    h.lookup.store_len = 0;
    const hs_tree_policy p0 = hs_heterospec_policy(&h);
    HS_CHECK(hs_hx_replay(&p0, &h.cost, r, 20, &rr));
    assert_float_equal(rr.tokens, 20, 0);
    /* A lookup chain (wrong) takes the round instead of the store's. */
    hs_hx_round both[20];
    for (int i = 0; i < 20; i++) {
        both[i] = r[i];
        both[i].lookup[0] = 400;
        both[i].lookup[1] = 401;
        both[i].n_lookup = 2;
        both[i].lookup_match = 4;
    }
    h.lookup.store_len = 2;
    set_lookup(&h, 0.9f, 0.9f, 0.9f);
    h.lookup.store_len = 2;
    const hs_tree_policy pb = hs_heterospec_policy(&h);
    HS_CHECK(hs_hx_replay(&pb, &h.cost, both, 20, &rr));
    assert_float_equal(rr.tokens, 20, 0);
    assert_true(rr.verified > 20);
    /* The headless search finds the store's chains (the lookup alone gives nothing here). */
    hs_hx_model hs;
    hs_hx_replay_result rs;
    m.lookup.store_len = 0;
    HS_CHECK(hs_hx_search_headless(&m, r, 20, &hs, &rs));
    assert_true(hs.headless && hs.lookup.store_len >= 2);
    assert_float_equal(rs.tokens, 20 * 4, 0);
    /* Records: the store chain's nodes come with match 0 and their confidence. */
    hs_hx_lookup_record *rec = NULL;
    HS_CHECK(hs_hx_round_lookup_records(&both[0], &rec));
    assert_int_equal(stbds_arrlen(rec), 1 + 3); /* the lookup's first node (a miss), the store's three */
    assert_true(rec[0].match == 4 && !rec[0].accepted);
    for (int i = 1; i < 4; i++)
        assert_true(rec[i].match == 0 && rec[i].conf == 3 && rec[i].accepted && rec[i].pos == (uint32_t)i - 1);
    stbds_arrfree(rec);
    /* The fit keeps the two tables apart. */
    hs_hx_lookup_record fr[60];
    for (int i = 0; i < 20; i++) {
        fr[i] = (hs_hx_lookup_record){.match = 0, .pos = 0, .conf = 3, .accepted = true};
        fr[20 + i] = (hs_hx_lookup_record){.match = 0, .pos = 0, .conf = 0, .accepted = false};
        fr[40 + i] = (hs_hx_lookup_record){.match = 2, .pos = 0, .accepted = i % 2 == 0};
    }
    hs_hx_lookup fl = {0};
    hs_hx_fit_lookup(fr, 60, &fl);
    assert_int_equal(fl.records, 20);
    assert_int_equal(fl.store_records, 40);
    assert_true(fl.store_accept[3][0][0] > 0.75f && fl.store_accept[0][0][0] < 0.25f);
    assert_true(fl.accept[1][0][0] > 0.4f && fl.accept[1][0][0] < 0.6f);
    /* JSON: the store's length and table survive; a malformed table fails. */
    hs_hx_model j = m;
    j.lookup.store_len = 6;
    cJSON *o = hs_hx_model_to_json(&j);
    hs_hx_model back;
    HS_CHECK(hs_hx_model_from_json(o, &back));
    assert_int_equal(back.lookup.store_len, 6);
    assert_memory_equal(back.lookup.store_accept, j.lookup.store_accept, sizeof j.lookup.store_accept);
    cJSON *lk = cJSON_GetObjectItemCaseSensitive(o, "lookup");
    cJSON_DeleteItemFromArray(cJSON_GetObjectItemCaseSensitive(lk, "store_accept"), 0);
    assert_int_equal(hs_hx_model_from_json(o, &back), HS_ERR_FORMAT);
    cJSON_Delete(o);
    for (int i = 0; i < 20; i++)
        hs_hx_round_free(&r[i]);
}

/* Two timings of the same device cost: the faster of each pair is kept, an
 * entry one of them left unknown takes the other's, and the pairs more than
 * a quarter apart are counted (t_after_head, a difference of two timings,
 * not); timings of different shapes are refused, the cost untouched. */
static void test_cost_keep_faster(void **state) {
    (void)state;
    hs_hx_model a = two_strata(0.8f, 0.2f), b = a;
    set_cost(&a, 0.1);
    set_cost(&b, 0.1);
    a.cost.n_verify_all = b.cost.n_verify_all = 4;
    for (uint32_t n = 1; n <= 4; n++)
        a.cost.t_verify_all[n] = b.cost.t_verify_all[n] = 1 + 0.2 * (n - 1);
    a.cost.t_verify[3] = 5;      /* b's 1.2: apart */
    b.cost.t_draft[4] = 0.01;    /* a's 0.09: apart, 9x */
    a.cost.t_heads[2] = 0.6;     /* against 0.35: apart */
    b.cost.t_heads[2] = 0.35;
    a.cost.t_head = 0.3;         /* against 0.26: not apart */
    b.cost.t_head = 0.26;
    b.cost.t_consume_cache = 0.02; /* a's unknown */
    a.cost.t_plain = 1.0;          /* b's unknown */
    a.cost.t_after_head = 0.01;    /* against 0.05: kept, not counted */
    b.cost.t_after_head = 0.05;
    a.cost.t_verify_all[2] = 1.3; /* against 1.2: not apart */
    for (uint32_t n = 9; n <= 16; n++) { /* a capacity bucket's time over its sizes: apart, counted once */
        a.cost.t_verify[n] = 3.0;
        b.cost.t_verify[n] = 2.0;
    }
    hs_hx_cost c = a.cost, wrong = b.cost;
    wrong.ctx0 = 273;
    wrong.ctx1 = 1024;
    uint32_t n_apart = 99;
    double worst = 0;
    assert_int_equal(hs_hx_cost_keep_faster(&c, &wrong, &n_apart, &worst), HS_ERR_INVALID_ARG);
    assert_memory_equal(&c, &a.cost, sizeof c);
    wrong = b.cost;
    wrong.n_draft = 32;
    assert_int_equal(hs_hx_cost_keep_faster(&c, &wrong, &n_apart, &worst), HS_ERR_INVALID_ARG);
    assert_memory_equal(&c, &a.cost, sizeof c);

    HS_CHECK(hs_hx_cost_keep_faster(&c, &b.cost, &n_apart, &worst));
    assert_int_equal(n_apart, 4);
    assert_float_equal(worst, 9.0, 1e-9);
    assert_float_equal(c.t_verify[3], 1.2, 1e-12);
    for (uint32_t n = 9; n <= 16; n++)
        assert_float_equal(c.t_verify[n], 2.0, 0);
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        if (n != 3 && (n < 9 || n > 16)) assert_float_equal(c.t_verify[n], a.cost.t_verify[n], 0);
    assert_float_equal(c.t_draft[4], 0.01, 0);
    assert_float_equal(c.t_draft[5], 0.1, 1e-12);
    assert_float_equal(c.t_heads[2], 0.35, 0);
    assert_float_equal(c.t_head, 0.26, 0);
    assert_float_equal(c.t_consume_cache, 0.02, 0);
    assert_float_equal(c.t_plain, 1.0, 0);
    assert_float_equal(c.t_after_head, 0.01, 0);
    assert_float_equal(c.t_verify_all[2], 1.2, 1e-12);
    assert_float_equal(c.t_verify_all[4], 1.6, 1e-12);
    assert_float_equal(c.t_consume, 0.05, 0);
    /* The order of the two does not matter. */
    hs_hx_cost d = b.cost;
    HS_CHECK(hs_hx_cost_keep_faster(&d, &a.cost, &n_apart, &worst));
    assert_memory_equal(&c, &d, sizeof c);
    assert_int_equal(n_apart, 4);
}

/* A cost from calibrate's printed tables (ms): verification of N = 1 .. 8,
 * 16, 32, 64, 128 at two contexts (a capacity bucket's time over its sizes),
 * with every head for N = 1 .. 8, draft levels of 1, 2, 4 .. 64. */
static hs_hx_cost printed_cost(double plain, const double heads[4], const double v[12], const double vl[12],
                               const double all[8], const double all_l[8], const double draft[7]) {
    hs_hx_cost c = {.n_verify = HS_HX_MAX_N, .n_draft = 64, .n_verify_all = 8, .ctx0 = 273, .ctx1 = 1024};
    c.t_plain = plain / 1e3;
    c.t_head = heads[0] / 1e3;
    for (uint32_t i = 1, k = 2; k <= 8; i++, k *= 2)
        c.t_heads[k] = heads[i] / 1e3;
    for (uint32_t i = 0, lo = 0; i < 12; i++) {
        const uint32_t hi = i < 8 ? i + 1 : 8u << (i - 7);
        for (uint32_t n = lo + 1; n <= hi; n++) {
            c.t_verify[n] = v[i] / 1e3;
            c.t_verify_long[n] = vl[i] / 1e3;
        }
        lo = hi;
    }
    for (uint32_t n = 1; n <= 8; n++) {
        c.t_verify_all[n] = all[n - 1] / 1e3;
        c.t_verify_all_long[n] = all_l[n - 1] / 1e3;
    }
    for (uint32_t i = 0, lo = 0; i < 7; i++) {
        for (uint32_t w = lo + 1; w <= 1u << i; w++)
            c.t_draft[w] = draft[i] / 1e3;
        lo = 1u << i;
    }
    c.t_consume = 1.1e-3;
    return c;
}

/* Costs that contradict each other: none in a greedy calibration's costs
 * (docs/reports/lavapipe-zen5-2026-12-07-c, calib-greedy.log); in the
 * sampling calibration's of the same run, the one-token passes 18 % apart
 * and four output heads at once 4.6 times two (calib-sample.log); then each
 * kind of contradiction alone, with the slack the check allows just kept. */
static void test_cost_doubts(void **state) {
    (void)state;
    static const double draft[7] = {0.8, 1.0, 1.5, 2.4, 4.5, 8.3, 16.4};
    static const double g_heads[4] = {2.75, 3.82, 6.77, 13.60};
    static const double g_v[12] = {12.0, 14.4, 17.3, 20.0, 22.9, 25.1, 30.9, 30.4, 56.1, 102.6, 212.1, 423.6};
    static const double g_vl[12] = {13.5, 16.0, 22.3, 23.5, 28.2, 29.5, 36.2, 35.1, 62.0, 119.3, 254.3, 497.0};
    static const double g_all[8] = {11.7, 15.4, 20.0, 24.4, 31.5, 33.2, 40.7, 40.4};
    static const double g_all_l[8] = {14.0, 17.8, 24.9, 27.1, 35.2, 37.1, 44.8, 43.1};
    const hs_hx_cost g = printed_cost(12.04, g_heads, g_v, g_vl, g_all, g_all_l, draft);
    char why[200] = "x";
    assert_int_equal(hs_hx_cost_doubts(&g, why, sizeof why), 0);
    assert_string_equal(why, "");

    static const double s_heads[4] = {3.16, 4.35, 19.82, 39.47};
    static const double s_v[12] = {15.0, 17.3, 19.0, 23.5, 28.7, 30.7, 35.2, 35.5, 62.8, 120.5, 221.0, 441.6};
    static const double s_vl[12] = {17.0, 22.0, 24.6, 26.5, 32.4, 34.2, 39.7, 41.9, 72.9, 140.7, 284.7, 600.1};
    static const double s_all[8] = {12.9, 18.2, 22.9, 38.6, 34.0, 33.5, 67.9, 66.7};
    static const double s_all_l[8] = {17.5, 24.2, 29.6, 45.1, 39.3, 45.8, 79.7, 81.9};
    static const double s_draft[7] = {0.8, 1.1, 1.7, 2.8, 5.2, 9.0, 17.3};
    const hs_hx_cost sc = printed_cost(12.68, s_heads, s_v, s_vl, s_all, s_all_l, s_draft);
    assert_int_equal(hs_hx_cost_doubts(&sc, why, sizeof why), 2);
    assert_non_null(strstr(why, "one-token passes of 12.68 ms"));
    assert_int_equal(hs_hx_cost_doubts(&sc, NULL, 0), 2);

    /* Each kind alone, in a cost with none. */
    hs_hx_cost c = g;
    c.t_plain = g.t_verify_all[1] * 1.099; /* 11.7 .. 12.86: within a tenth */
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 0);
    c.t_plain = g.t_verify_all[1] * 1.101;
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 1);
    assert_non_null(strstr(why, "one-token passes"));
    c = g;
    c.t_heads[2] = 2.5 * g.t_head;
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 0);
    c.t_heads[2] = 2.51 * g.t_head;
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 1);
    assert_non_null(strstr(why, "output heads at once of 2"));
    c = g;
    for (uint32_t n = 33; n <= 64; n++)
        c.t_verify[n] = 2.6 * g.t_verify[32];
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 1);
    assert_non_null(strstr(why, "verification of 64"));
    c = g;
    c.t_verify_long[2] = 2.6 * g.t_verify_long[1];
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 1);
    assert_non_null(strstr(why, "longer context"));
    c.ctx1 = 0; /* no long table: not looked at */
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 0);
    c = g;
    c.t_verify_all[8] = 2.6 * g.t_verify_all[4];
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 1);
    assert_non_null(strstr(why, "every head of 8"));
    c = g;
    for (uint32_t w = 17; w <= 32; w++)
        c.t_draft[w] = 2.6 * g.t_draft[16];
    assert_int_equal(hs_hx_cost_doubts(&c, why, sizeof why), 1);
    assert_non_null(strstr(why, "draft level of 32"));
    /* Unknown costs (0) contradict nothing. */
    const hs_hx_cost none = {0};
    assert_int_equal(hs_hx_cost_doubts(&none, why, sizeof why), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_low_entropy_grows_deeper),
        cmocka_unit_test(test_steeper_cost_smaller_tree),
        cmocka_unit_test(test_dearer_head_smaller_tree),
        cmocka_unit_test(test_longer_context_smaller_tree),
        cmocka_unit_test(test_select_is_best_prefix),
        cmocka_unit_test(test_select_prices_heads),
        cmocka_unit_test(test_select_prices_eager),
        cmocka_unit_test(test_fit_recovers_strata),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_records_and_replay),
        cmocka_unit_test(test_rest),
        cmocka_unit_test(test_search_eagle2_floor),
        cmocka_unit_test(test_search_eagle2_groups),
        cmocka_unit_test(test_plain_decision),
        cmocka_unit_test(test_lookup_values_and_select),
        cmocka_unit_test(test_lookup_replay_and_records),
        cmocka_unit_test(test_lookup_fit_and_json),
        cmocka_unit_test(test_lookup_headless_column),
        cmocka_unit_test(test_feedback),
        cmocka_unit_test(test_headless),
        cmocka_unit_test(test_store),
        cmocka_unit_test(test_chain_bound),
        cmocka_unit_test(test_cost_keep_faster),
        cmocka_unit_test(test_cost_doubts),
    };
    return hs_test_run_group("heterospec", tests, NULL, NULL);
}
