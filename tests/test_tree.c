/* Tree policies (host/tree) on synthetic Top-K results: no device needed.
 * Expected trees are computed here by brute force over the candidates, not
 * with the code under test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tree.h"

#define K 4u

/* A deterministic Top-K for a node: K distinct tokens with decreasing
 * probabilities that depend on the node (so paths get different scores). */
static hs_topk_result fake_topk(uint32_t node, uint32_t k) {
    hs_topk_result r = {.k = k};
    float sum = 0;
    for (uint32_t j = 0; j < k; j++) {
        r.ids[j] = (node * 31u + j * 7u + 3u) % 500u;
        r.probs[j] = (float)(1.0 / (j + 1.5 + (node % 5) * 0.37));
        sum += r.probs[j];
    }
    for (uint32_t j = 0; j < k; j++)
        r.probs[j] /= sum * 1.25f; /* tail 0.2 */
    r.tail = 0.2f;
    r.entropy = 0.1f + (float)(node % 7) / 10.0f;
    return r;
}

/* Grows a tree the way host/spec does, with fake Top-Ks; returns the
 * number of levels drafted and the expanded nodes per level. */
static uint32_t grow(hs_tree *t, const hs_tree_policy *p, uint32_t k, uint32_t expanded[][64],
                     uint32_t *widths) {
    hs_tree_reset(t, 7);
    hs_topk_result r = fake_topk(0, k);
    HS_CHECK(hs_tree_add_children(t, 0, &r));
    uint32_t sel[256], levels = 0;
    int32_t slot = 1;
    for (uint32_t level = 1;; level++) {
        uint32_t w = p->expand(p, t, level, sel, 64);
        if (!w) break;
        for (uint32_t i = 0; i < w; i++) {
            assert_int_equal(t->nodes[sel[i]].depth, level);
            assert_true(t->nodes[sel[i]].slot < 0);
            expanded[levels][i] = sel[i];
            t->nodes[sel[i]].slot = slot++;
            r = fake_topk(sel[i], k);
            HS_CHECK(hs_tree_add_children(t, sel[i], &r));
        }
        widths[levels++] = w;
    }
    return levels;
}

static void check_node_values(const hs_tree *t) {
    for (uint32_t v = 1; v < t->n; v++) {
        const hs_tree_node *x = &t->nodes[v], *p = &t->nodes[x->parent];
        assert_int_equal(x->depth, p->depth + 1);
        assert_float_equal(x->logq, logf(x->q), 1e-6);
        assert_float_equal(x->path_logp, p->path_logp + x->logq, 1e-5);
        assert_float_equal(x->path_ent, p->path_ent + p->entropy, 1e-5);
        assert_float_equal(x->parent_ent, p->entropy, 0);
    }
}

static void test_chain(void **state) {
    (void)state;
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 256));
    hs_tree_policy p = hs_tree_chain(5);
    uint32_t ex[32][64], w[32];
    uint32_t levels = grow(&t, &p, K, ex, w);
    assert_int_equal(levels, 4); /* depth 5: 4 drafts after the root's Top-K */
    for (uint32_t l = 0; l < levels; l++) {
        assert_int_equal(w[l], 1);
        assert_int_equal(t.nodes[ex[l][0]].rank, 0);
    }
    check_node_values(&t);
    uint32_t sel[64];
    uint32_t n = p.select(&p, &t, sel, 64);
    assert_int_equal(n, 5);
    int32_t tokens[64], parents[64];
    uint32_t nodes[64];
    HS_CHECK(hs_tree_verify_list(&t, sel, n, tokens, parents, nodes));
    for (uint32_t i = 0; i <= n; i++) {
        assert_int_equal(parents[i], (int32_t)i - 1);
        assert_int_equal(t.nodes[nodes[i]].depth, i);
        assert_int_equal(tokens[i], t.nodes[nodes[i]].token);
    }
    assert_int_equal(hs_tree_policy_max_verify(&p), 5);
    assert_int_equal(hs_tree_policy_max_drafted(&p), 4);
    /* The cap bounds the selection and keeps it closed under ancestors. */
    n = p.select(&p, &t, sel, 2);
    assert_int_equal(n, 2);
    HS_CHECK(hs_tree_verify_list(&t, sel, n, tokens, parents, nodes));
    hs_tree_free(&t);
}

static void test_static(void **state) {
    (void)state;
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 256));
    hs_tree_policy p;
    HS_CHECK(hs_tree_static_parse("3,2,1", &p));
    uint32_t ex[32][64], w[32];
    uint32_t levels = grow(&t, &p, K, ex, w);
    assert_int_equal(levels, 2);
    assert_int_equal(w[0], 3);
    assert_int_equal(w[1], 6);
    uint32_t sel[64];
    uint32_t n = p.select(&p, &t, sel, 64);
    assert_int_equal(n, 3 + 6 + 6);
    assert_int_equal(hs_tree_policy_max_verify(&p), 15);
    assert_int_equal(hs_tree_policy_max_drafted(&p), 9);
    /* Every selected node: rank below its level's branch count. */
    const uint32_t b[3] = {3, 2, 1};
    for (uint32_t i = 0; i < n; i++)
        assert_true(t.nodes[sel[i]].rank < b[t.nodes[sel[i]].depth - 1]);
    int32_t tokens[64], parents[64];
    uint32_t nodes[64];
    HS_CHECK(hs_tree_verify_list(&t, sel, n, tokens, parents, nodes));
    for (uint32_t i = 1; i <= n; i++) {
        assert_true(parents[i] >= 0 && parents[i] < (int32_t)i);
        assert_int_equal(t.nodes[nodes[i]].parent, (int32_t)nodes[parents[i]]);
    }
    hs_tree_policy bad;
    assert_int_equal(hs_tree_static_parse("3,,1", &bad), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_tree_static_parse("0", &bad), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_tree_static_parse("", &bad), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_tree_static_parse("2,x", &bad), HS_ERR_INVALID_ARG);
    hs_tree_free(&t);
}

/* Brute force: the indices of the candidates with the m best scores among
 * those passing filter (ties: shallower, then lower index). */
static int cmp_desc(const void *a, const void *b) {
    const double x = ((const double *)a)[0], y = ((const double *)b)[0];
    return x > y ? -1 : x < y ? 1 : 0;
}

static void test_eagle2(void **state) {
    (void)state;
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 1024));
    const uint32_t top_k = 3, depth = 4, total = 12;
    hs_tree_policy p = hs_tree_eagle2(top_k, depth, total);
    uint32_t ex[32][64], w[32];
    uint32_t levels = grow(&t, &p, K, ex, w);
    assert_int_equal(levels, depth);
    check_node_values(&t);
    /* Each level expands the top_k best-scoring candidates of that depth. */
    for (uint32_t l = 0; l < levels; l++) {
        assert_int_equal(w[l], top_k);
        float worst_in = INFINITY, best_out = -INFINITY;
        for (uint32_t i = 0; i < w[l]; i++)
            if (t.nodes[ex[l][i]].path_logp < worst_in) worst_in = t.nodes[ex[l][i]].path_logp;
        for (uint32_t v = 1; v < t.n; v++) {
            if (t.nodes[v].depth != l + 1) continue;
            bool in = false;
            for (uint32_t i = 0; i < w[l]; i++)
                in = in || ex[l][i] == v;
            if (!in && t.nodes[v].path_logp > best_out) best_out = t.nodes[v].path_logp;
        }
        assert_true(worst_in >= best_out);
    }
    /* The verified set: the total best scores of all candidates. */
    uint32_t sel[64];
    uint32_t n = p.select(&p, &t, sel, 64);
    assert_int_equal(n, total);
    double(*sc)[2] = malloc(sizeof *sc * t.n);
    for (uint32_t v = 1; v < t.n; v++) {
        sc[v - 1][0] = t.nodes[v].path_logp;
        sc[v - 1][1] = v;
    }
    qsort(sc, t.n - 1, sizeof *sc, cmp_desc);
    const double cut = sc[total - 1][0];
    for (uint32_t i = 0; i < n; i++)
        assert_true(t.nodes[sel[i]].path_logp >= cut);
    free(sc);
    int32_t tokens[64], parents[64];
    uint32_t nodes[64];
    HS_CHECK(hs_tree_verify_list(&t, sel, n, tokens, parents, nodes));
    assert_int_equal(hs_tree_policy_max_verify(&p), total);
    assert_int_equal(hs_tree_policy_max_drafted(&p), top_k * depth);
    hs_tree_free(&t);
}

/* A tree of `total` nodes holds no node deeper than total: levels >= total
 * are not drafted, and the selection equals the one from the fully grown
 * tree (the same fake Top-Ks, so the same node indices up to the stop). */
static void test_eagle2_small_total(void **state) {
    (void)state;
    for (uint32_t total = 1; total <= 4; total++) {
        hs_tree small, full;
        HS_CHECK(hs_tree_init(&small, 1024));
        HS_CHECK(hs_tree_init(&full, 1024));
        const hs_tree_policy p = hs_tree_eagle2(3, 4, total), grown = hs_tree_eagle2(3, 4, 64);
        uint32_t ex[32][64], w[32];
        const uint32_t levels = grow(&small, &p, K, ex, w);
        assert_int_equal(levels, total - 1 < 4 ? total - 1 : 4);
        assert_int_equal(grow(&full, &grown, K, ex, w), 4);
        uint32_t a[64], b[64];
        const uint32_t na = p.select(&p, &small, a, 64), nb = p.select(&p, &full, b, 64);
        assert_int_equal(na, total);
        assert_int_equal(nb, total);
        for (uint32_t i = 0; i < na; i++) {
            assert_int_equal(a[i], b[i]);
            assert_int_equal(small.nodes[a[i]].token, full.nodes[b[i]].token);
        }
        hs_tree_free(&small);
        hs_tree_free(&full);
    }
}

/* A node's path from the root as a number (FNV-1a over its tokens), to
 * match nodes of two trees grown differently. */
static uint64_t path_key(const hs_tree *t, uint32_t v) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t x = (int32_t)v; x > 0; x = t->nodes[x].parent)
        h = (h ^ (uint64_t)(uint32_t)t->nodes[x].token) * 1099511628211ull;
    return h;
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* A floor on path probability: only candidates at or above it are drafted
 * and verified, and the verified ones are the `total` best of the candidates
 * above it in the tree grown without a floor (by brute force there: the
 * same candidates pass in both trees, S only falls along a path). A floor
 * above every candidate drafts and verifies nothing. */
static void test_eagle2_p_min(void **state) {
    (void)state;
    const float floors[] = {1e-9f, 0.03f, 0.1f, 0.2f, 0.5f};
    hs_tree t0;
    HS_CHECK(hs_tree_init(&t0, 1024));
    const uint32_t total = 12;
    const hs_tree_policy p0 = hs_tree_eagle2(3, 4, total);
    uint32_t ex[32][64], w[32], sel[64];
    const uint32_t levels0 = grow(&t0, &p0, K, ex, w);
    const uint32_t n0 = p0.select(&p0, &t0, sel, 64);
    uint32_t sizes[sizeof floors / sizeof *floors];
    for (uint32_t f = 0; f < sizeof floors / sizeof *floors; f++) {
        hs_tree t;
        HS_CHECK(hs_tree_init(&t, 1024));
        hs_tree_policy p = p0;
        p.p_min = floors[f];
        const float floor_s = logf(floors[f]);
        const uint32_t levels = grow(&t, &p, K, ex, w);
        assert_true(levels <= levels0);
        for (uint32_t l = 0; l < levels; l++)
            for (uint32_t i = 0; i < w[l]; i++)
                assert_true(t.nodes[ex[l][i]].path_logp >= floor_s);
        const uint32_t n = p.select(&p, &t, sel, 64);
        /* Brute force on the tree without a floor. */
        double(*sc)[2] = malloc(sizeof *sc * t0.n);
        uint32_t m = 0;
        for (uint32_t v = 1; v < t0.n; v++)
            if (t0.nodes[v].path_logp >= floor_s) {
                sc[m][0] = t0.nodes[v].path_logp - 1e-6 * t0.nodes[v].depth; /* ties: shallower first */
                sc[m++][1] = v;
            }
        qsort(sc, m, sizeof *sc, cmp_desc);
        const uint32_t want = m < total ? m : total;
        assert_int_equal(n, want);
        uint64_t got_keys[64], want_keys[64];
        for (uint32_t i = 0; i < n; i++) {
            assert_true(t.nodes[sel[i]].path_logp >= floor_s);
            got_keys[i] = path_key(&t, sel[i]);
            want_keys[i] = path_key(&t0, (uint32_t)sc[i][1]);
        }
        qsort(got_keys, n, sizeof *got_keys, cmp_u64);
        qsort(want_keys, n, sizeof *want_keys, cmp_u64);
        assert_memory_equal(got_keys, want_keys, n * sizeof *got_keys);
        int32_t tokens[64], parents[64];
        uint32_t nodes[64];
        HS_CHECK(hs_tree_verify_list(&t, sel, n, tokens, parents, nodes));
        free(sc);
        sizes[f] = n;
        hs_tree_free(&t);
    }
    /* The floors cover the cases: no effect, a cut inside the tree, nothing passing. */
    assert_int_equal(sizes[0], n0);
    assert_true(sizes[2] > 0 && sizes[2] < n0);
    assert_int_equal(sizes[sizeof floors / sizeof *floors - 1], 0);
    hs_tree_free(&t0);
}

static void test_verify_list_errors(void **state) {
    (void)state;
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    hs_tree_reset(&t, 1);
    hs_topk_result r = fake_topk(0, K);
    HS_CHECK(hs_tree_add_children(&t, 0, &r));
    r = fake_topk(1, K);
    HS_CHECK(hs_tree_add_children(&t, 1, &r)); /* nodes 5..8 are children of node 1 */
    int32_t tokens[16], parents[16];
    uint32_t nodes[16];
    assert_int_equal(hs_tree_verify_list(&t, (uint32_t[]){5}, 1, tokens, parents, nodes), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_tree_verify_list(&t, (uint32_t[]){0}, 1, tokens, parents, nodes), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_tree_verify_list(&t, (uint32_t[]){1, 1}, 2, tokens, parents, nodes),
                     HS_ERR_INVALID_ARG);
    assert_int_equal(hs_tree_verify_list(&t, (uint32_t[]){99}, 1, tokens, parents, nodes),
                     HS_ERR_INVALID_ARG);
    /* Out of order in the selection is fine: the list is in node order. */
    HS_CHECK(hs_tree_verify_list(&t, (uint32_t[]){6, 1}, 2, tokens, parents, nodes));
    assert_int_equal(nodes[1], 1);
    assert_int_equal(nodes[2], 6);
    assert_int_equal(parents[2], 1);
    /* A full tree refuses more children. */
    hs_tree small;
    HS_CHECK(hs_tree_init(&small, 3));
    hs_tree_reset(&small, 1);
    assert_int_equal(hs_tree_add_children(&small, 0, &r), HS_ERR_OUT_OF_RANGE);
    hs_tree_free(&small);
    hs_tree_free(&t);
}

/* The output heads a walk computes at once: powers of two along the chain after an entry. */
static void test_heads_k(void **state) {
    (void)state;
    /* root 0; 1 -> 2 -> 3 -> 4 -> 5 a chain; 6 a second child of 1; 7 -> 8 -> 9 a chain under 6;
     * then 10 .. 18 a chain of 9 under 9 */
    int32_t par[19] = {-1, 0, 1, 2, 3, 4, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
    assert_int_equal(hs_tree_heads_k(par, 19, 1, 1), 1);  /* one at a time */
    assert_int_equal(hs_tree_heads_k(par, 19, 1, 0), 4);  /* the default, 4, of a chain of 5 */
    assert_int_equal(hs_tree_heads_k(par, 19, 1, 8), 4);  /* the chain ends at 5 */
    assert_int_equal(hs_tree_heads_k(par, 19, 2, 8), 4);
    assert_int_equal(hs_tree_heads_k(par, 19, 3, 8), 2);
    assert_int_equal(hs_tree_heads_k(par, 19, 5, 8), 1);  /* 6 is not 5's child */
    assert_int_equal(hs_tree_heads_k(par, 19, 6, 3), 2);  /* 3 rounds down to 2 */
    assert_int_equal(hs_tree_heads_k(par, 19, 7, 8), 8);  /* 7 .. 18 */
    assert_int_equal(hs_tree_heads_k(par, 19, 7, 64), 8); /* at most HS_TREE_HEADS_MAX */
    assert_int_equal(hs_tree_heads_k(par, 12, 7, 8), 4);  /* the list ends at 11 */
    assert_int_equal(hs_tree_heads_k(par, 19, 18, 8), 1); /* the last entry */
}

/* ---- context lookup ---- */

/* The reference lookup, written independently: the match length at every
 * earlier end (capped), the longest (latest on ties) at least min_match long,
 * then the chain by extending a copy of the sequence one token at a time. */
static uint32_t ref_lookup(const int32_t *hist, uint32_t n, uint32_t min_match, uint32_t len, int32_t *out,
                           uint32_t *match) {
    int32_t ext[256];
    uint32_t best = 0, best_e = 0;
    for (uint32_t e = 0; e + 1 < n; e++) {
        uint32_t m = 0;
        while (m < HS_LOOKUP_MAX_MATCH && m <= e && hist[e - m] == hist[n - 1 - m])
            m++;
        if (m >= best && m > 0) {
            best = m;
            best_e = e;
        }
    }
    *match = 0;
    if (best < (min_match ? min_match : 1)) return 0;
    memcpy(ext, hist, sizeof *hist * n);
    for (uint32_t i = 0; i < len; i++) {
        ext[n + i] = ext[best_e + 1 + i];
        out[i] = ext[n + i];
    }
    *match = best;
    return len;
}

static void test_lookup(void **state) {
    (void)state;
    int32_t out[HS_LOOKUP_MAX_LEN], ref[HS_LOOKUP_MAX_LEN];
    uint32_t m, rm;
    /* 5 6 7 5 6: "5 6" ended at 1, then 7 5 6 and the period 7 5 6 again. */
    const int32_t a[] = {5, 6, 7, 5, 6};
    assert_int_equal(hs_lookup(a, 5, 1, 6, out, &m), 6);
    assert_int_equal(m, 2);
    const int32_t want[] = {7, 5, 6, 7, 5, 6};
    assert_memory_equal(out, want, sizeof want);
    assert_int_equal(hs_lookup(a, 5, 3, 6, out, &m), 0); /* shorter than min_match */
    assert_int_equal(m, 0);
    const int32_t b[] = {1, 2, 3};
    assert_int_equal(hs_lookup(b, 3, 1, 4, out, &m), 0);
    /* The latest of equally long matches: 9 1 4 ... 9 1 8 ... 9 1 -> 8. */
    const int32_t c[] = {9, 1, 4, 0, 9, 1, 8, 0, 3, 9, 1};
    assert_int_equal(hs_lookup(c, 11, 1, 2, out, &m), 2);
    assert_int_equal(m, 2);
    assert_int_equal(out[0], 8);
    assert_int_equal(out[1], 0);
    /* Against the reference on random sequences over small alphabets. */
    uint32_t seed = 12345, found = 0;
    for (int trial = 0; trial < 2000; trial++) {
        int32_t h[120];
        const uint32_t n = 2 + trial % 110, alpha = 2 + (uint32_t)trial % 5, min = 1 + (uint32_t)trial % 4,
                       len = 1 + (uint32_t)trial % HS_LOOKUP_MAX_LEN;
        for (uint32_t i = 0; i < n; i++) {
            seed = seed * 1103515245u + 12345u;
            h[i] = (int32_t)((seed >> 16) % alpha);
        }
        const uint32_t got = hs_lookup(h, n, min, len, out, &m), exp = ref_lookup(h, n, min, len, ref, &rm);
        assert_int_equal(got, exp);
        assert_int_equal(m, rm);
        if (got) assert_memory_equal(out, ref, sizeof *out * got);
        found += got > 0;
    }
    assert_true(found > 1000);
}

static void test_add_lookup(void **state) {
    (void)state;
    hs_tree t;
    HS_CHECK(hs_tree_init(&t, 64));
    hs_tree_reset(&t, 7);
    hs_topk_result r = fake_topk(0, K);
    HS_CHECK(hs_tree_add_children(&t, 0, &r)); /* nodes 1..4 */
    r = fake_topk(3, K);
    HS_CHECK(hs_tree_add_children(&t, 3, &r)); /* nodes 5..8, children of 3 */
    const int32_t t3 = t.nodes[3].token, t6 = t.nodes[6].token;
    /* The chain follows the head's nodes 3 and 6, then adds two lookup-only nodes. */
    const int32_t chain[] = {t3, t6, 1001, 1002};
    HS_CHECK(hs_tree_add_lookup(&t, chain, 4, 5));
    assert_int_equal(t.n, 11);
    assert_int_equal(t.nodes[3].src, HS_NODE_HEAD | HS_NODE_LOOKUP);
    assert_int_equal(t.nodes[6].src, HS_NODE_HEAD | HS_NODE_LOOKUP);
    assert_int_equal(t.nodes[6].lpos, 1);
    assert_int_equal(t.nodes[1].src, HS_NODE_HEAD);
    for (uint32_t v = 9; v <= 10; v++) {
        const hs_tree_node *x = &t.nodes[v];
        assert_int_equal(x->src, HS_NODE_LOOKUP);
        assert_int_equal(x->token, chain[v - 7]);
        assert_int_equal(x->parent, v == 9 ? 6 : 9);
        assert_int_equal(x->depth, v - 6);
        assert_int_equal(x->lpos, v - 7);
        assert_int_equal(x->match, 5);
        assert_true(x->q == 0 && x->slot < 0);
    }
    assert_int_equal(t.nodes[3].n_children, K); /* the head's children stay contiguous */
    /* Merging the same chain again adds nothing; a diverging one branches. */
    HS_CHECK(hs_tree_add_lookup(&t, chain, 4, 5));
    assert_int_equal(t.n, 11);
    const int32_t other[] = {t3, 2002};
    HS_CHECK(hs_tree_add_lookup(&t, other, 2, 1));
    assert_int_equal(t.n, 12);
    assert_int_equal(t.nodes[11].parent, 3);
    assert_int_equal(t.nodes[3].match, 1);
    /* EAGLE-2 and static trees never select lookup-only nodes; the list takes them. */
    uint32_t sel[64];
    const hs_tree_policy e2 = hs_tree_eagle2(4, 4, 60), st = hs_tree_static((uint32_t[]){4, 4}, 2);
    uint32_t n = e2.select(&e2, &t, sel, 64);
    assert_int_equal(n, 8);
    for (uint32_t i = 0; i < n; i++)
        assert_true(t.nodes[sel[i]].src & HS_NODE_HEAD);
    n = st.select(&st, &t, sel, 64);
    assert_int_equal(n, 8);
    for (uint32_t i = 0; i < n; i++)
        assert_true(t.nodes[sel[i]].src & HS_NODE_HEAD);
    int32_t tokens[16], parents[16];
    uint32_t nodes[16];
    HS_CHECK(hs_tree_verify_list(&t, (uint32_t[]){3, 6, 9, 10}, 4, tokens, parents, nodes));
    assert_int_equal(tokens[3], 1001);
    assert_int_equal(parents[4], 3);
    /* The lookup policy alone verifies the chain's nodes, head-proposed or not, and drafts nothing. */
    const hs_tree_policy lp = hs_tree_lookup(4, 2);
    assert_int_equal(lp.lookup, 4);
    assert_int_equal(lp.lookup_min, 2);
    assert_int_equal(lp.expand(&lp, &t, 1, sel, 64), 0);
    n = lp.select(&lp, &t, sel, 64);
    assert_int_equal(n, 5); /* 3, 6, 9, 10 and the diverging 11 */
    assert_int_equal(sel[0], 3);
    assert_int_equal(sel[4], 11);
    assert_int_equal(lp.select(&lp, &t, sel, 2), 2);
    /* A full tree refuses the chain. */
    hs_tree small;
    HS_CHECK(hs_tree_init(&small, 2));
    hs_tree_reset(&small, 1);
    assert_int_equal(hs_tree_add_lookup(&small, chain, 4, 2), HS_ERR_OUT_OF_RANGE);
    hs_tree_free(&small);
    hs_tree_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chain),
        cmocka_unit_test(test_static),
        cmocka_unit_test(test_eagle2),
        cmocka_unit_test(test_eagle2_small_total),
        cmocka_unit_test(test_eagle2_p_min),
        cmocka_unit_test(test_verify_list_errors),
        cmocka_unit_test(test_heads_k),
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_add_lookup),
    };
    return hs_test_run_group("tree", tests, NULL, NULL);
}
