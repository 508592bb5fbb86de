/* End-to-end tests of the llama graph on stories260K: logits against the
 * independent numpy implementation (golden_logits_*.txt), greedy generation
 * against golden_greedy.txt, and the exactness contract at model level (tree
 * verification gives bitwise the logits of plain decoding). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "gguf_writer.h"
#include "llama.h"
#include "model_util.h"
#include "testutil.h"

typedef struct model_env {
    hs_test_env base;
    hs_gguf *g;
    hs_llama *m;
} model_env;

/* Buffer range of the split group: token_embd (128 KiB) becomes several row
 * chunks and one layer's KV cache (512 rows of 128 bytes) 2 windows. 32 KiB
 * where the largest row group (subgroup x 4 rows of ffn_down's 172 f32
 * columns, 768 bytes a row on the device: 32 rows, 24 KiB, at 8 lanes) fits
 * it, else more (52 KiB at 16 lanes, llvmpipe's 512-bit vectors); set by
 * setup_split. */
static unsigned long g_split_range = 32768;

/* The KV cache type of the group's model (setup_kv16). */
static hs_type g_kv_type = HS_TYPE_F32;

/* The model on a context with maxStorageBufferRange forced to range (0: as
 * is) and one more switch name=value (NULL: none). */
static int setup_model(void **state, unsigned long range, const char *name, const char *value) {
    if (hs_test_setup_env(state, range, name, value)) return -1;
    model_env *e = calloc(1, sizeof *e);
    e->base = *(hs_test_env *)*state;
    free(*state);
    *state = e;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    hs_llama_options opt = {.n_ctx = 512, .max_batch = 64, .kv_type = g_kv_type};
    if (hs_gguf_open(path, &e->g) != HS_OK || hs_llama_load(e->base.ops, e->g, &opt, &e->m) != HS_OK) {
        fprintf(stderr, "setup: %s\n", hs_last_error());
        return -1;
    }
    return 0;
}

static int setup(void **state) { return setup_model(state, 0, NULL, NULL); }
/* The same model over an f16 KV cache (g_kv_type). */
static int setup_kv16(void **state) {
    g_kv_type = HS_TYPE_F16;
    const int r = setup_model(state, 0, NULL, NULL);
    g_kv_type = HS_TYPE_F32;
    return r;
}
static int setup_split(void **state) {
    g_split_range = hs_test_split_range(32768, 768);
    return g_split_range ? setup_model(state, g_split_range, NULL, NULL) : -1;
}

static int teardown(void **state) {
    model_env *e = *state;
    hs_llama_destroy(e->m);
    hs_gguf_close(e->g);
    hs_test_env *base = malloc(sizeof *base);
    *base = e->base;
    free(e);
    *state = base;
    return hs_test_teardown(state);
}

static void read_floats(const char *name, float *out, int n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/%s", hs_test_shared_dir(), name);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    for (int i = 0; i < n; i++) assert_int_equal(fscanf(f, "%f", &out[i]), 1);
    fclose(f);
}

static void test_config(void **state) {
    model_env *e = *state;
    const hs_llama_config *c = hs_llama_cfg(e->m);
    assert_int_equal(c->dim, 64);
    assert_int_equal(c->n_layer, 5);
    assert_int_equal(c->n_head, 8);
    assert_int_equal(c->n_kv_head, 4);
    assert_int_equal(c->n_vocab, 512);
    assert_true(c->tied_output == false);
}

static void check_logits(model_env *e, const int32_t *prompt, uint32_t n, const char *golden) {
    float ref[512];
    read_floats(golden, ref, 512);
    hs_llama_reset(e->m);
    const float *logits = NULL;
    HS_CHECK(hs_llama_eval(e->m, prompt, n, NULL, true, true, &logits, NULL));
    double d = hs_max_abs_diff(logits, ref, 512);
    /* fp32 implementations agree to ~1e-5 (shared/models/stories260K/README.md). */
    if (d > 1e-4) fail_msg("%s: max abs logit diff %g", golden, d);
}

static void test_logits_bos(void **state) {
    int32_t p[1] = {1};
    check_logits(*state, p, 1, "golden_logits_bos.txt");
}

static void test_logits_once_upon_a_time(void **state) {
    int32_t p[5] = {1, 403, 407, 261, 378};
    check_logits(*state, p, 5, "golden_logits_once_upon_a_time.txt");
}

static void greedy(model_env *e, int prompt_line) {
    int32_t prompt[16], golden[512];
    int np = hs_test_golden_ids(prompt_line, "prompt_tokens(with BOS)", prompt, 16);
    int ng = hs_test_golden_ids(prompt_line + 1, "greedy_generated_ids", golden, 512);
    assert_true(np >= 1 && ng > 100);
    hs_llama_reset(e->m);
    const uint32_t *amax = NULL;
    HS_CHECK(hs_llama_eval(e->m, prompt, (uint32_t)np, NULL, true, true, NULL, &amax));
    for (int i = 0; i < ng; i++) {
        int32_t next = (int32_t)amax[0];
        if (next != golden[i]) fail_msg("token %d: got %d, golden %d", i, next, golden[i]);
        if (i + 1 < ng) HS_CHECK(hs_llama_eval(e->m, &next, 1, NULL, true, true, NULL, &amax));
    }
}

static void test_greedy_empty_prompt(void **state) { greedy(*state, 0); }
static void test_greedy_once_upon_a_time(void **state) { greedy(*state, 3); }

/* A tree holding the greedy path (nodes 0, 2, 3) and two side branches gives
 * those nodes bitwise the logits plain decoding gives, and a prompt processed
 * as one batch gives its last logits bitwise as processed token by token. */
static void test_tree_equals_plain(void **state) {
    model_env *e = *state;
    enum { V = 512, N = 5 };
    /* Two root-level nodes (0 and 1), a chain below 0 (2, 3) and a second
     * child of 0 (4). */
    const int32_t bos = 1, tokens[N] = {403, 99, 407, 261, 300}, parents[N] = {-1, -1, 0, 2, 0};
    const float *logits;
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
    HS_CHECK(hs_llama_eval(e->m, tokens, N, parents, false, false, &logits, NULL));
    static float tree[N][V];
    memcpy(tree, logits, sizeof tree);
    /* Every node gives bitwise the logits of decoding its path one token at a
     * time after the prompt. */
    for (int i = 0; i < N; i++) {
        int32_t path[N];
        int depth = 0;
        for (int32_t j = i; j >= 0; j = parents[j]) path[depth++] = tokens[j];
        hs_llama_reset(e->m);
        HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
        for (int d = depth - 1; d >= 0; d--) HS_CHECK(hs_llama_eval(e->m, &path[d], 1, NULL, true, true, &logits, NULL));
        if (memcmp(logits, tree[i], sizeof tree[i]) != 0) fail_msg("tree node %d differs from its plain decode", i);
    }
    /* Siblings see different contexts: their logits differ. */
    assert_true(memcmp(tree[2], tree[4], sizeof tree[2]) != 0);
    assert_true(memcmp(tree[0], tree[1], sizeof tree[0]) != 0);
    /* A prompt batch gives the last node of the chain too. */
    const int32_t prompt[4] = {1, 403, 407, 261};
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, prompt, 4, NULL, true, true, &logits, NULL));
    assert_memory_equal(logits, tree[3], sizeof tree[3]);
}

/* The output head on demand (hs_llama_eval_tree, hs_llama_head, hs_llama_heads): the root's
 * and every other row's logits and argmax are bitwise those of the all-rows
 * pass, in any order, alone or several rows at once, also after hs_llama_accept and for the rows of a
 * committed prompt batch; rows past the last eval are refused. */
static void test_head_on_demand(void **state) {
    model_env *e = *state;
    enum { V = 512, N = 7 };
    const int32_t bos = 1, tokens[N] = {403, 99, 407, 261, 300, 378, 432}, parents[N] = {-1, -1, 0, 2, 0, 3, 5};
    const float *logits;
    const uint32_t *amax;
    static float all[N][V];
    uint32_t all_amax[N], a;
    hs_llama_reset(e->m);
    assert_int_equal(hs_llama_head(e->m, 0, &logits, &a), HS_ERR_INVALID_ARG); /* no eval yet */
    HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
    HS_CHECK(hs_llama_eval(e->m, tokens, N, parents, false, false, &logits, &amax));
    memcpy(all, logits, sizeof all);
    memcpy(all_amax, amax, sizeof all_amax);
    /* Argmax rows differ somewhere, so a head of the wrong row shows. */
    bool differ = false;
    for (int i = 1; i < N; i++) differ = differ || all_amax[i] != all_amax[0];
    assert_true(differ);
    HS_CHECK(hs_llama_eval_tree(e->m, tokens, N, parents, &logits, &a));
    assert_memory_equal(logits, all[0], sizeof all[0]);
    assert_int_equal(a, all_amax[0]);
    for (int i = N - 1; i >= 0; i--) { /* last row first: no row depends on another's head */
        a = UINT32_MAX;
        HS_CHECK(hs_llama_head(e->m, (uint32_t)i, &logits, &a));
        if (memcmp(logits, all[i], sizeof all[i]) != 0) fail_msg("head of row %d differs from the all-rows pass", i);
        if (a != all_amax[i]) fail_msg("argmax of row %d: %u, all-rows pass %u", i, a, all_amax[i]);
    }
    assert_int_equal(hs_llama_head(e->m, N, &logits, &a), HS_ERR_INVALID_ARG);
    /* Several rows' heads in one product (hs_llama_heads): each bitwise its own. Every logits and argmax
     * row first holds another tree's, and this one is evaluated again (its root's head only). */
    const int32_t other[N] = {300, 378, 432, 403, 99, 407, 261};
    for (uint32_t k = 1; k <= 4; k *= 2)
        for (uint32_t row = 0; row + k <= N; row++) {
            uint32_t ka[4] = {UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX};
            HS_CHECK(hs_llama_eval(e->m, other, N, parents, false, false, &logits, &amax));
            HS_CHECK(hs_llama_eval_tree(e->m, tokens, N, parents, NULL, NULL));
            HS_CHECK(hs_llama_heads(e->m, row, k, &logits, ka));
            for (uint32_t j = 0; j < k; j++) {
                if (memcmp(logits + (size_t)j * V, all[row + j], sizeof all[0]) != 0)
                    fail_msg("heads of rows %u .. %u: row %u differs from the all-rows pass", row, row + k - 1,
                             row + j);
                if (ka[j] != all_amax[row + j]) fail_msg("heads of rows %u ..: argmax of row %u", row, row + j);
            }
        }
    assert_int_equal(hs_llama_heads(e->m, N - 1, 2, &logits, &a), HS_ERR_INVALID_ARG); /* past the eval */
    assert_int_equal(hs_llama_heads(e->m, 0, 3, &logits, &a), HS_ERR_INVALID_ARG);     /* not a power of two */
    /* Accept 0 -> 2 -> 3 (the cache moves, h stays): row 5 still reads its own state. */
    const uint32_t path[3] = {0, 2, 3};
    HS_CHECK(hs_llama_accept(e->m, path, 3));
    HS_CHECK(hs_llama_head(e->m, 5, &logits, &a));
    assert_memory_equal(logits, all[5], sizeof all[5]);
    /* A committed prompt batch: the head of its last row is the eval's logits. */
    const int32_t prompt[4] = {1, 403, 407, 261};
    float last[V];
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, prompt, 4, NULL, true, true, &logits, NULL));
    memcpy(last, logits, sizeof last);
    assert_memory_equal(last, all[3], sizeof last);
    HS_CHECK(hs_llama_head(e->m, 3, &logits, NULL));
    assert_memory_equal(logits, last, sizeof last);
    HS_CHECK(hs_llama_head(e->m, 1, &logits, NULL)); /* bos, 403: node 0 of the tree */
    assert_memory_equal(logits, all[0], sizeof all[0]);
}

/* ---- split group: weights in row chunks, KV caches in windows ---- */

/* Every logits row of a fixed run: the prompt of golden line 3 as one batch,
 * then its golden continuation and twice the empty prompt's continuation one
 * token at a time (cache rows cross the split group's window boundary at 256), then
 * a tree verification. */
#define SPLIT_TREE 5
static float *g_llama_ref;
static size_t g_llama_ref_rows;

static float *run_fixed(model_env *e, size_t *rows) {
    const uint32_t V = 512;
    int32_t prompt[16], golden[512];
    int np = hs_test_golden_ids(3, "prompt_tokens(with BOS)", prompt, 16);
    int ng = hs_test_golden_ids(4, "greedy_generated_ids", golden, 160);
    for (int k = 0; k < 2; k++) /* twice: past row 256 by a margin */
        ng += hs_test_golden_ids(1, "greedy_generated_ids", golden + ng, 160);
    assert_true(np + ng > 256 + 8 && np + ng + SPLIT_TREE < 512);
    float *out = malloc((size_t)(ng + 1 + SPLIT_TREE) * V * 4);
    assert_non_null(out);
    const float *logits;
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, prompt, (uint32_t)np, NULL, true, true, &logits, NULL));
    memcpy(out, logits, V * 4);
    for (int i = 0; i < ng; i++) {
        HS_CHECK(hs_llama_eval(e->m, &golden[i], 1, NULL, true, true, &logits, NULL));
        memcpy(out + (size_t)(i + 1) * V, logits, V * 4);
    }
    int32_t tokens[SPLIT_TREE] = {403, 99, 407, 261, 300}, parents[SPLIT_TREE] = {-1, -1, 0, 2, 0};
    HS_CHECK(hs_llama_eval(e->m, tokens, SPLIT_TREE, parents, false, false, &logits, NULL));
    memcpy(out + (size_t)(ng + 1) * V, logits, SPLIT_TREE * V * 4);
    *rows = (size_t)ng + 1 + SPLIT_TREE;
    return out;
}

/* First group: the unsplit model's logits, kept for the split group. */
static void test_split_ref(void **state) {
    model_env *e = *state;
    hs_llama_split sp = hs_llama_split_info(e->m);
    assert_int_equal(sp.weight_chunks, 1);
    assert_int_equal(sp.kv_windows, 1);
    free(g_llama_ref);
    g_llama_ref = run_fixed(e, &g_llama_ref_rows);
}

/* Split group: bitwise the same logits. */
static void test_split_logits(void **state) {
    model_env *e = *state;
    assert_true(hs_ops_caps(e->base.ops)->max_storage_buffer_range <= g_split_range);
    hs_llama_split sp = hs_llama_split_info(e->m);
    if (sp.weight_chunks < 2 || sp.kv_windows != 2)
        fail_msg("the model was not split: weights in %u chunks, KV layer in %u windows", sp.weight_chunks,
                 sp.kv_windows);
    size_t rows;
    float *got = run_fixed(e, &rows);
    if (!g_llama_ref) fail_msg("the unsplit reference did not run");
    assert_int_equal(rows, g_llama_ref_rows);
    for (size_t r = 0; r < rows; r++)
        if (memcmp(got + r * 512, g_llama_ref + r * 512, 512 * 4))
            fail_msg("logits row %zu differ from the unsplit model's", r);
    free(got);
    free(g_llama_ref);
    g_llama_ref = NULL;
}

/* A context whose KV layer needs more windows than the kernels bind fails at
 * load with the numbers, and leaves nothing alive (the group teardown counts
 * buffers). */
static void test_split_context_too_long(void **state) {
    model_env *e = *state;
    hs_llama_options opt = {.n_ctx = 2048, .max_batch = 8}; /* 8 windows of 256 rows at 32 KiB, 5 of 416 at 52 KiB */
    hs_llama *m = (hs_llama *)1;
    uint64_t mark = hs_vk_live_mark(e->base.vk);
    assert_int_equal(hs_llama_load(e->base.ops, e->g, &opt, &m), HS_ERR_VK_UNSUPPORTED);
    assert_null(m);
    char want[48]; /* windows of the most 128-byte rows the range holds (8 of 256 at 32 KiB) */
    snprintf(want, sizeof want, "needs %lu windows", (2048 + g_split_range / 128 - 1) / (g_split_range / 128));
    assert_non_null(strstr(hs_last_error(), want));
    hs_vk_live_counts left = hs_vk_live_since(e->base.vk, mark);
    assert_int_equal(left.buffers + left.seqs, 0);
}

/* Trees up to HS_MODEL_EXACT_BUCKETS (8) nodes run in a graph of their own
 * size; larger ones share a power-of-two bucket: one graph for sizes 9..16.
 * A node's logits depend neither on the bucket's inert slots nor on the
 * other nodes (bitwise). */
static void test_buckets(void **state) {
    model_env *e = *state;
    enum { V = 512, N = 17 };
    const int32_t bos = 1,
                  tokens[N] = {403, 99, 407, 261, 300, 378, 432, 383, 286, 311, 266, 401, 259, 400, 68, 80, 87},
                  parents[N] = {-1, -1, 0, 2, 0, 3, 5, 6, 7, 1, 9, 10, 4, 12, 13, 8, 15};
    const float *logits;
    static float twelve[12][V];
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
    HS_CHECK(hs_llama_eval(e->m, tokens, 12, parents, false, false, &logits, NULL));
    memcpy(twelve, logits, sizeof twelve);
    uint32_t graphs = hs_llama_graph_count(e->m);
    for (uint32_t n = 9; n <= 16; n++) { /* one bucket of 16 */
        HS_CHECK(hs_llama_eval(e->m, tokens, n, parents, false, false, &logits, NULL));
        for (uint32_t i = 0; i < n && i < 12; i++)
            if (memcmp(logits + (size_t)i * V, twelve[i], sizeof twelve[i]) != 0)
                fail_msg("tree of %u: node %u differs from the tree of 12", n, i);
    }
    assert_int_equal(hs_llama_graph_count(e->m), graphs);
    /* Sizes up to 8: a graph each (earlier tests of the group may have
     * recorded some of them), the same logits, nothing recorded again. */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t n = 5; n <= 8; n++) {
            HS_CHECK(hs_llama_eval(e->m, tokens, n, parents, false, false, &logits, NULL));
            for (uint32_t i = 0; i < n; i++)
                if (memcmp(logits + (size_t)i * V, twelve[i], sizeof twelve[i]) != 0)
                    fail_msg("tree of %u: node %u differs from the tree of 12", n, i);
        }
        if (pass == 0) {
            assert_true(hs_llama_graph_count(e->m) <= graphs + 4);
            graphs = hs_llama_graph_count(e->m);
        }
    }
    assert_int_equal(hs_llama_graph_count(e->m), graphs);
    assert_int_equal(hs_model_tree_bucket(5, 64), 5);
    assert_int_equal(hs_model_tree_bucket(8, 64), 8);
    assert_int_equal(hs_model_tree_bucket(9, 64), 16);
    assert_int_equal(hs_model_tree_bucket(9, 12), 12);
    /* Size 17 needs the next bucket. */
    HS_CHECK(hs_llama_eval(e->m, tokens, N, parents, false, false, &logits, NULL));
    assert_int_equal(hs_llama_graph_count(e->m), graphs + 1);
    for (uint32_t i = 0; i < 12; i++)
        if (memcmp(logits + (size_t)i * V, twelve[i], sizeof twelve[i]) != 0) fail_msg("tree of 17: node %u differs", i);
}

/* hs_llama_prepare_tree records every graph tree verification of up to its
 * size asks for: on a model of its own (the group's has graphs from earlier
 * tests), trees of 1 .. 20 nodes with the head of every row and a kept path
 * that moves cache rows record nothing new after it, nor does preparing again,
 * and a tree of a larger bucket does. */
static void test_prepare_tree(void **state) {
    model_env *e = *state;
    enum { N = 20, LARGER = 33 }; /* buckets 1 .. 8, 16, 32; 64 */
    const int32_t bos = 1;
    int32_t tokens[LARGER], parents[LARGER];
    for (int i = 0; i < LARGER; i++) {
        tokens[i] = 260 + 7 * i;
        parents[i] = i - 1;
    }
    hs_llama *m;
    hs_llama_options opt = {.n_ctx = 128, .max_batch = 64};
    HS_CHECK(hs_llama_load(e->base.ops, e->g, &opt, &m));
    const float *logits;
    uint32_t a;
    HS_CHECK(hs_llama_eval(m, &bos, 1, NULL, true, true, &logits, NULL));
    HS_CHECK(hs_llama_prepare_tree(m, N));
    const uint32_t graphs = hs_llama_graph_count(m);
    HS_CHECK(hs_llama_prepare_tree(m, N));
    assert_int_equal(hs_llama_graph_count(m), graphs);
    for (uint32_t n = 1; n <= N; n++) {
        HS_CHECK(hs_llama_eval_tree(m, tokens, n, parents, &logits, &a));
        for (uint32_t row = 1; row < n; row++) HS_CHECK(hs_llama_head(m, row, &logits, &a));
        if (hs_llama_graph_count(m) != graphs)
            fail_msg("a tree of %u nodes recorded a graph the preparation did not", n);
    }
    /* A kept path that moves cache rows (the compaction) */
    const int32_t fork[3] = {-1, -1, 1};
    const uint32_t path[2] = {1, 2};
    HS_CHECK(hs_llama_eval_tree(m, tokens, 3, fork, &logits, &a));
    HS_CHECK(hs_llama_accept(m, path, 2));
    const uint32_t kept = hs_llama_graph_count(m);
    HS_CHECK(hs_llama_eval_tree(m, tokens, LARGER, parents, &logits, &a));
    const uint32_t after = hs_llama_graph_count(m);
    hs_llama_destroy(m);
    assert_int_equal(kept, graphs);
    assert_int_equal(after, graphs + 1);
}

/* After a tree, hs_llama_accept keeps one path: decoding on from it gives
 * bitwise the logits of decoding that path plainly (and, for the golden
 * prompt, the independently computed golden logits). */
/* The tree test_accept and test_kv16 keep paths of: two root-level nodes, a chain below the first, and a
 * second child of it. */
static const int32_t k_tree_tokens[5] = {403, 99, 407, 261, 300}, k_tree_parents[5] = {-1, -1, 0, 2, 0};

static void accept_paths(model_env *e) {
    enum { V = 512 };
    const int32_t bos = 1, *tokens = k_tree_tokens, *parents = k_tree_parents;
    static const struct {
        uint32_t nodes[3], n;
        int32_t next;
    } paths[] = {{{0, 2, 3}, 3, 378}, {{1}, 1, 261}, {{0, 4}, 2, 267}, {{0}, 1, 407}, {{0}, 0, 403}};
    for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
        const float *logits;
        hs_llama_reset(e->m);
        HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
        HS_CHECK(hs_llama_eval(e->m, tokens, 5, parents, false, false, &logits, NULL));
        HS_CHECK(hs_llama_accept(e->m, paths[k].nodes, paths[k].n));
        assert_int_equal(hs_llama_n_past(e->m), 1 + paths[k].n);
        HS_CHECK(hs_llama_eval(e->m, &paths[k].next, 1, NULL, true, true, &logits, NULL));
        static float got[V];
        memcpy(got, logits, sizeof got);
        int32_t plain[5] = {bos};
        uint32_t np = 1;
        for (uint32_t i = 0; i < paths[k].n; i++) plain[np++] = tokens[paths[k].nodes[i]];
        plain[np++] = paths[k].next;
        hs_llama_reset(e->m);
        HS_CHECK(hs_llama_eval(e->m, plain, np, NULL, true, true, &logits, NULL));
        if (memcmp(got, logits, sizeof got) != 0) fail_msg("path %zu: logits differ from plain decoding", k);
    }
}

static void test_accept(void **state) {
    model_env *e = *state;
    enum { V = 512 };
    const int32_t bos = 1, *tokens = k_tree_tokens, *parents = k_tree_parents;
    accept_paths(e);
    /* The first path rebuilds "Once upon a time": the golden logits. */
    hs_llama_reset(e->m);
    const float *logits;
    HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
    HS_CHECK(hs_llama_eval(e->m, tokens, 5, parents, false, false, &logits, NULL));
    const uint32_t path[3] = {0, 2, 3};
    HS_CHECK(hs_llama_accept(e->m, path, 3));
    const int32_t time = 378;
    HS_CHECK(hs_llama_eval(e->m, &time, 1, NULL, true, true, &logits, NULL));
    float ref[V];
    read_floats("golden_logits_once_upon_a_time.txt", ref, V);
    assert_true(hs_max_abs_diff(logits, ref, V) < 1e-4);

    /* Bad paths: not starting at a root, skipping a node, more nodes than
     * the tree, and accepting when no tree is pending. */
    static const struct {
        uint32_t nodes[3], n;
    } bad[] = {{{2}, 1}, {{0, 3}, 2}, {{0, 2, 2}, 3}, {{1, 2}, 2}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        hs_llama_reset(e->m);
        HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
        HS_CHECK(hs_llama_eval(e->m, tokens, 5, parents, false, false, &logits, NULL));
        assert_int_equal(hs_llama_accept(e->m, bad[k].nodes, bad[k].n), HS_ERR_INVALID_ARG);
        assert_non_null(strstr(hs_last_error(), "hs_llama_accept: node"));
        assert_int_equal(hs_llama_n_past(e->m), 1);
    }
    uint32_t six[6] = {0, 1, 2, 3, 4, 5};
    assert_int_equal(hs_llama_accept(e->m, six, 6), HS_ERR_INVALID_ARG);
    HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, &logits, NULL));
    assert_int_equal(hs_llama_accept(e->m, six, 1), HS_ERR_INVALID_ARG);
}

/* Taps: the hidden states at the inputs of the tap layers. With layer 0
 * tapped, the tap is the token's embedding row of the GGUF (independent of
 * every kernel but the gather); a node's taps inside a tree are bitwise those
 * of decoding its path alone; EAGLE-3's default layers for L = 5 are 2, 2, 2. */
static void test_taps(void **state) {
    model_env *e = *state;
    const uint32_t dim = 64, T = HS_LLAMA_TAPS;
    hs_llama *m = NULL, *d = NULL;
    hs_llama_options opt = {.n_ctx = 64, .max_batch = 16, .taps = true, .custom_taps = true, .tap_layers = {0, 2, 4}};
    HS_CHECK(hs_llama_load(e->base.ops, e->g, &opt, &m));
    hs_llama_options dopt = {.n_ctx = 64, .max_batch = 16, .taps = true};
    HS_CHECK(hs_llama_load(e->base.ops, e->g, &dopt, &d));
    uint32_t layers[3];
    hs_llama_taps(d, layers);
    assert_int_equal(layers[0], 2);
    assert_int_equal(layers[1], 2);
    assert_int_equal(layers[2], 2);
    assert_null(hs_llama_taps(e->m, NULL).buf);
    assert_int_equal(hs_llama_taps_read(e->m, 0, 1, NULL), HS_ERR_INVALID_ARG);

    const int32_t bos = 1, tokens[5] = {403, 99, 407, 261, 300}, parents[5] = {-1, -1, 0, 2, 0};
    HS_CHECK(hs_llama_eval(m, &bos, 1, NULL, true, true, NULL, NULL));
    HS_CHECK(hs_llama_eval(m, tokens, 5, parents, false, false, NULL, NULL));
    static float tree[5][3][64];
    HS_CHECK(hs_llama_taps_read(m, 0, 5, &tree[0][0][0]));
    const hs_gguf_tensor *emb = hs_gguf_find_tensor(e->g, "token_embd.weight");
    assert_non_null(emb);
    for (uint32_t i = 0; i < 5; i++)
        assert_memory_equal(tree[i][0], (const float *)emb->data + (size_t)tokens[i] * dim, dim * 4);
    for (uint32_t i = 0; i < 5; i++) {
        int32_t path[3];
        uint32_t depth = 0;
        for (int32_t j = (int32_t)i; j >= 0; j = parents[j]) path[depth++] = tokens[j];
        hs_llama_reset(m);
        HS_CHECK(hs_llama_eval(m, &bos, 1, NULL, true, true, NULL, NULL));
        for (uint32_t k = depth; k-- > 0;) HS_CHECK(hs_llama_eval(m, &path[k], 1, NULL, true, true, NULL, NULL));
        float alone[3][64];
        HS_CHECK(hs_llama_taps_read(m, 0, 1, &alone[0][0]));
        if (memcmp(alone, tree[i], sizeof alone) != 0) fail_msg("taps of tree node %u differ from its plain decode", i);
    }
    /* Layers 2 and 4 really are other states than the embedding. */
    assert_true(memcmp(tree[0][0], tree[0][1], dim * 4) != 0);
    assert_true(memcmp(tree[0][1], tree[0][2], dim * 4) != 0);
    /* The default taps of d are the layer-2 taps of m. */
    HS_CHECK(hs_llama_eval(d, &bos, 1, NULL, true, true, NULL, NULL));
    HS_CHECK(hs_llama_eval(d, tokens, 5, parents, false, false, NULL, NULL));
    static float dt[5][3][64];
    HS_CHECK(hs_llama_taps_read(d, 0, 5, &dt[0][0][0]));
    for (uint32_t i = 0; i < 5; i++)
        for (uint32_t t = 0; t < T; t++) assert_memory_equal(dt[i][t], tree[i][1], dim * 4);
    hs_llama_destroy(m);
    hs_llama_destroy(d);
    /* A tap layer past the model is refused at load. */
    opt.tap_layers[2] = 5;
    assert_int_equal(hs_llama_load(e->base.ops, e->g, &opt, &m), HS_ERR_INVALID_ARG);
    assert_null(m);
}

static void test_bad_input(void **state) {
    model_env *e = *state;
    hs_llama_reset(e->m);
    int32_t bad = 512;
    assert_int_equal(hs_llama_eval(e->m, &bad, 1, NULL, true, true, NULL, NULL), HS_ERR_INVALID_ARG);
    int32_t ok[2] = {1, 2}, parents[2] = {-1, 1};
    assert_int_equal(hs_llama_eval(e->m, ok, 2, parents, false, false, NULL, NULL), HS_ERR_INVALID_ARG);
    int32_t *many = calloc(600, sizeof *many);
    assert_int_equal(hs_llama_eval(e->m, many, 600, NULL, true, true, NULL, NULL), HS_ERR_INVALID_ARG);
    free(many);
    /* Filling the context is an error, not a wrap-around. */
    int32_t chunk[64] = {0};
    for (int i = 0; i < 8; i++) HS_CHECK(hs_llama_eval(e->m, chunk, 64, NULL, true, true, NULL, NULL));
    assert_int_equal(hs_llama_eval(e->m, chunk, 1, NULL, true, true, NULL, NULL), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "context full"));
}

/* ---- mixed weight types ---- */

/* Tensors the mixed-type copies change: Q of layer 0 and every V (Q, K, V in
 * up to three parts) and every FFN gate (gate and up in two parts). */
static bool mixed_pick(const char *name) {
    return strcmp(name, "blk.0.attn_q.weight") == 0 || strstr(name, ".attn_v.weight") ||
           strstr(name, ".ffn_gate.weight");
}

static size_t gguf_scalar_size(hs_gguf_type t) {
    switch (t) {
    case HS_GGUF_TYPE_UINT8: case HS_GGUF_TYPE_INT8: case HS_GGUF_TYPE_BOOL: return 1;
    case HS_GGUF_TYPE_UINT16: case HS_GGUF_TYPE_INT16: return 2;
    case HS_GGUF_TYPE_UINT32: case HS_GGUF_TYPE_INT32: case HS_GGUF_TYPE_FLOAT32: return 4;
    default: return 8;
    }
}

/* Writes one scalar value v of type t. */
static void gw_scalar(hs_gw *w, const hs_gguf_value *v) {
    switch (v->type) {
    case HS_GGUF_TYPE_UINT8: case HS_GGUF_TYPE_INT8: hs_gw_u8(w, (uint8_t)v->v.u); break;
    case HS_GGUF_TYPE_BOOL: hs_gw_u8(w, v->v.b); break;
    case HS_GGUF_TYPE_UINT16: case HS_GGUF_TYPE_INT16: hs_gw_u16(w, (uint16_t)v->v.u); break;
    case HS_GGUF_TYPE_UINT32: case HS_GGUF_TYPE_INT32: hs_gw_u32(w, (uint32_t)v->v.u); break;
    case HS_GGUF_TYPE_FLOAT32: hs_gw_f32(w, (float)v->v.f); break;
    case HS_GGUF_TYPE_FLOAT64: hs_gw_f64(w, v->v.f); break;
    case HS_GGUF_TYPE_STRING: hs_gw_strn(w, v->v.s.s, v->v.s.len); break;
    default: hs_gw_u64(w, v->v.u); break;
    }
}

/* Re-encodes stories260K with the mixed_pick tensors rounded to f16: stored
 * as f16 when as_f16, else as f32 holding the very same (rounded) values. */
static void write_mixed(const hs_gguf *g, bool as_f16, hs_gw *w) {
    const uint64_t nt = hs_gguf_n_tensors(g), nkv = hs_gguf_n_kv(g), align = hs_gguf_alignment(g);
    hs_gw_init(w);
    hs_gw_header(w, 3, nt, nkv);
    for (uint64_t i = 0; i < nkv; i++) {
        const hs_gguf_value *v = hs_gguf_kv_at(g, i);
        hs_gw_key(w, v->key, v->type);
        if (v->type != HS_GGUF_TYPE_ARRAY) {
            gw_scalar(w, v);
            continue;
        }
        hs_gw_arr(w, v->v.arr.type, v->v.arr.n);
        if (v->v.arr.type == HS_GGUF_TYPE_STRING) {
            const hs_gguf_str *strs = v->v.arr.data;
            for (uint64_t k = 0; k < v->v.arr.n; k++) hs_gw_strn(w, strs[k].s, strs[k].len);
        } else {
            hs_gw_bytes(w, v->v.arr.data, v->v.arr.n * gguf_scalar_size(v->v.arr.type));
        }
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < nt; i++) {
        const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
        const bool f16 = as_f16 && mixed_pick(t->name);
        uint64_t dims[HS_GGUF_MAX_DIMS];
        for (uint32_t d = 0; d < t->n_dims; d++) dims[d] = (uint64_t)t->ne[d];
        hs_gw_tensor_info(w, t->name, t->n_dims, dims, f16 ? HS_GGML_TYPE_F16 : (uint32_t)t->type, off);
        off += ((f16 ? t->nbytes / 2 : t->nbytes) + align - 1) / align * align;
    }
    hs_gw_pad(w, align);
    for (uint64_t i = 0; i < nt; i++) {
        const hs_gguf_tensor *t = hs_gguf_tensor_at(g, i);
        if (!mixed_pick(t->name)) {
            hs_gw_bytes(w, t->data, t->nbytes);
        } else {
            assert_int_equal(t->type, HS_GGML_TYPE_F32);
            const float *src = t->data;
            for (int64_t k = 0; k < hs_gguf_tensor_nelements(t); k++) {
                uint16_t h = hs_test_f32_to_f16(src[k]);
                if (as_f16) hs_gw_u16(w, h);
                else hs_gw_f32(w, hs_test_f16_to_f32(h));
            }
        }
        hs_gw_pad(w, align);
    }
}

/* A model whose Q/K/V and gate/up matrices differ in type (computed as
 * separate products into slices of one output) gives bitwise the logits of
 * the same weights stored in one type (one stacked product each). */
static void test_mixed_types(void **state) {
    model_env *e = *state;
    hs_gw w[2];
    hs_gguf *g[2] = {NULL, NULL};
    hs_llama *m[2] = {NULL, NULL};
    float *out[2];
    const int32_t prompt[6] = {1, 403, 407, 261, 378, 300};
    hs_llama_options opt = {.n_ctx = 64, .max_batch = 8};
    uint32_t dispatches[2];
    for (int i = 0; i < 2; i++) {
        write_mixed(e->g, i == 1, &w[i]);
        HS_CHECK(hs_gguf_open_memory(w[i].buf, w[i].len, i ? "mixed-f16" : "rounded-f32", &g[i]));
        HS_CHECK(hs_llama_load(e->base.ops, g[i], &opt, &m[i]));
        const float *logits;
        HS_CHECK(hs_llama_eval(m[i], prompt, 6, NULL, false, true, &logits, NULL));
        dispatches[i] = hs_llama_last_dispatches(m[i]);
        out[i] = malloc(6 * 512 * 4);
        memcpy(out[i], logits, 6 * 512 * 4);
    }
    const hs_gguf_tensor *tv = hs_gguf_find_tensor(g[1], "blk.1.attn_v.weight");
    assert_int_equal(tv->type, HS_GGML_TYPE_F16);
    assert_true(hs_llama_weight_bytes(m[1]) < hs_llama_weight_bytes(m[0]));
    /* Extra products: layer 0 has Q | K | V (+2), the other layers QK | V (+1),
     * every layer gate | up (+1). */
    const uint32_t n_layer = hs_llama_cfg(m[0])->n_layer;
    assert_int_equal(dispatches[1] - dispatches[0], 2 + (n_layer - 1) + n_layer);
    assert_memory_equal(out[0], out[1], 6 * 512 * 4);
    /* The rounding changed the model: its logits differ from the original's. */
    const float *orig;
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, prompt, 6, NULL, false, true, &orig, NULL));
    assert_true(memcmp(orig, out[0], 6 * 512 * 4) != 0);
    for (int i = 0; i < 2; i++) {
        free(out[i]);
        hs_llama_destroy(m[i]);
        hs_gguf_close(g[i]);
        hs_gw_free(&w[i]);
    }
}

/* ---- non-coherent memory, emulated ----
 * The default group records stories260K's logits for a 6-token prompt (all
 * rows) and 40 greedy tokens; the second group, whose context has
 * HS_VK_FORCE_NONCOHERENT on (the step buffer and the logits are then read
 * and written through host shadows that only flush and invalidate
 * reconcile), must give them bitwise. */
#define NC_PROMPT 6
#define NC_GREEDY 40
static const int32_t nc_prompt[NC_PROMPT] = {1, 403, 407, 261, 378, 300};
static float g_ref_logits[NC_PROMPT * 512];
static int32_t g_ref_greedy[NC_GREEDY];
static bool g_have_ref;

static void run_reference_prompt(model_env *e, float *logits_out, int32_t *greedy_out) {
    const float *logits;
    const uint32_t *amax;
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, nc_prompt, NC_PROMPT, NULL, false, true, &logits, &amax));
    memcpy(logits_out, logits, sizeof g_ref_logits);
    /* Greedy from the prompt's last row, one token per step. */
    int32_t next = (int32_t)amax[NC_PROMPT - 1];
    for (int i = 0; i < NC_GREEDY; i++) {
        greedy_out[i] = next;
        HS_CHECK(hs_llama_eval(e->m, &next, 1, NULL, true, true, NULL, &amax));
        next = (int32_t)amax[0];
    }
}

static void test_record_reference(void **state) {
    run_reference_prompt(*state, g_ref_logits, g_ref_greedy);
    g_have_ref = true;
}

static int setup_noncoherent(void **state) { return setup_model(state, 0, "HS_VK_FORCE_NONCOHERENT", "1"); }

static void test_noncoherent_bitwise(void **state) {
    model_env *e = *state;
    assert_false(hs_vk_ctx_caps(e->base.vk)->coherent);
    if (!g_have_ref) fail_msg("the reference group did not run");
    static float logits[NC_PROMPT * 512];
    int32_t greedy[NC_GREEDY];
    run_reference_prompt(e, logits, greedy);
    for (int i = 0; i < NC_PROMPT * 512; i++)
        if (memcmp(&logits[i], &g_ref_logits[i], 4) != 0)
            fail_msg("logit %d (row %d): %.9g, without the switch %.9g", i, i / 512, logits[i],
                     g_ref_logits[i]);
    for (int i = 0; i < NC_GREEDY; i++)
        if (greedy[i] != g_ref_greedy[i])
            fail_msg("greedy token %d: %d, without the switch %d", i, greedy[i], g_ref_greedy[i]);
}

/* An f16 KV cache (the group's model): the logits of "Once upon a time" stay near the golden f32 ones
 * but are not bitwise those of the f32 cache (the halves are really used); a kept path of a tree decodes
 * on bitwise as plain decoding (the compaction moves halves); a cache of another type is refused. */
static void test_kv16(void **state) {
    model_env *e = *state;
    enum { V = 512 };
    const int32_t p[5] = {1, 403, 407, 261, 378};
    float ref[V];
    read_floats("golden_logits_once_upon_a_time.txt", ref, V);
    const float *logits = NULL;
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, p, 5, NULL, true, true, &logits, NULL));
    static float kv16[V];
    memcpy(kv16, logits, sizeof kv16);
    const double d = hs_max_abs_diff(kv16, ref, V);
    if (d > 2e-2) fail_msg("f16 cache: max abs logit diff %g from the golden f32 logits", d);
    hs_llama *m32 = NULL;
    hs_llama_options o32 = {.n_ctx = 64, .max_batch = 8};
    HS_CHECK(hs_llama_load(e->base.ops, e->g, &o32, &m32));
    HS_CHECK(hs_llama_eval(m32, p, 5, NULL, true, true, &logits, NULL));
    const bool same = memcmp(kv16, logits, sizeof kv16) == 0;
    hs_llama_destroy(m32);
    if (same) fail_msg("the f16 cache gave bitwise the f32 cache's logits");
    accept_paths(e);
    hs_llama *bad = NULL;
    hs_llama_options oq = {.n_ctx = 64, .max_batch = 8, .kv_type = HS_TYPE_Q8_0};
    assert_int_equal(hs_llama_load(e->base.ops, e->g, &oq, &bad), HS_ERR_INVALID_ARG);
    assert_null(bad);
    assert_non_null(strstr(hs_last_error(), "KV cache type q8_0"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_logits_bos),
        cmocka_unit_test(test_logits_once_upon_a_time),
        cmocka_unit_test(test_greedy_empty_prompt),
        cmocka_unit_test(test_greedy_once_upon_a_time),
        cmocka_unit_test(test_tree_equals_plain),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_head_on_demand),
        cmocka_unit_test(test_prepare_tree),
        cmocka_unit_test(test_accept),
        cmocka_unit_test(test_taps),
        cmocka_unit_test(test_mixed_types),
        cmocka_unit_test(test_record_reference),
        cmocka_unit_test(test_split_ref),
    };
    const struct CMUnitTest noncoherent[] = {
        cmocka_unit_test(test_noncoherent_bitwise),
        cmocka_unit_test(test_logits_once_upon_a_time),
        cmocka_unit_test(test_greedy_once_upon_a_time),
        cmocka_unit_test(test_tree_equals_plain),
    };
    /* The same golden checks with the model split, then bitwise logits. */
    const struct CMUnitTest split_tests[] = {
        cmocka_unit_test(test_logits_once_upon_a_time), cmocka_unit_test(test_greedy_once_upon_a_time),
        cmocka_unit_test(test_tree_equals_plain),       cmocka_unit_test(test_split_logits),
        cmocka_unit_test(test_split_context_too_long), cmocka_unit_test(test_accept),
        cmocka_unit_test(test_buckets),                cmocka_unit_test(test_head_on_demand),
    };
    /* The exactness contract over an f16 KV cache. */
    const struct CMUnitTest kv16_tests[] = {
        cmocka_unit_test(test_kv16),
        cmocka_unit_test(test_tree_equals_plain),
        cmocka_unit_test(test_head_on_demand),
        cmocka_unit_test(test_buckets),
    };
    int fails = hs_test_run_group("llama", tests, setup, teardown);
    fails += hs_test_run_group("llama_kv16", kv16_tests, setup_kv16, teardown);
    fails += hs_test_run_group("llama_noncoherent", noncoherent, setup_noncoherent, teardown);
    fails += hs_test_run_group("llama_split", split_tests, setup_split, teardown);
    free(g_llama_ref);
    return fails;
}
