/* The committed stories260K head (models/heads/stories260K) on the device
 * against golden.json beside it: Top-K ids and probabilities computed by the
 * trainer's own NumPy implementation (tools/hs_train/golden.py, from the
 * exported f16 weights and the target's taps), independently of the C code.
 * The target evaluates golden.tokens but the last, the head consumes those
 * rows (row j: taps of position j, token j + 1) and gives the root's Top-K,
 * then drafts a greedy chain (each node's token is its parent's top-1) and
 * every node's Top-K is compared. The ids must match exactly where the
 * golden probabilities are apart, and each probability within PROB_TOL. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "eagle3.h"
#include "hs_cli.h"
#include "llama.h"
#include "testutil.h"

#define PROB_TOL   2e-4
#define MAX_TOKENS 64
#define MAX_CHAIN  16

/* ints of a JSON array into out (at most max); the count. */
static int json_ints(const cJSON *a, int32_t *out, int max) {
    int n = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, a) {
        assert_true(cJSON_IsNumber(v) && n < max);
        out[n++] = (int32_t)v->valuedouble;
    }
    return n;
}

/* One node's Top-K against its golden record {top_ids, top_probs}. */
static void check_node(const hs_topk_result *got, const cJSON *want, const char *what) {
    const cJSON *ids = cJSON_GetObjectItem(want, "top_ids"), *probs = cJSON_GetObjectItem(want, "top_probs");
    assert_non_null(ids);
    assert_non_null(probs);
    const int k = cJSON_GetArraySize(ids);
    assert_int_equal(cJSON_GetArraySize(probs), k);
    assert_true(k >= 2 && (uint32_t)k == got->k);
    for (int i = 0; i < k; i++) {
        const double p = cJSON_GetArrayItem(probs, i)->valuedouble;
        const int32_t id = (int32_t)cJSON_GetArrayItem(ids, i)->valuedouble;
        if (fabs(got->probs[i] - p) > PROB_TOL)
            fail_msg("%s: probability %d is %.6f, golden %.6f", what, i, got->probs[i], p);
        /* Two golden probabilities within the tolerance may come in either order. */
        const bool tie = (i > 0 && cJSON_GetArrayItem(probs, i - 1)->valuedouble - p < PROB_TOL) ||
                         (i + 1 < k && p - cJSON_GetArrayItem(probs, i + 1)->valuedouble < PROB_TOL);
        if (!tie && (int32_t)got->ids[i] != id)
            fail_msg("%s: id %d is %u, golden %d", what, i, got->ids[i], id);
    }
    printf("golden: %s: top-1 %u p %.5f (golden %.5f)\n", what, got->ids[0], got->probs[0],
           cJSON_GetArrayItem(probs, 0)->valuedouble);
}

static void test_golden(void **state) {
    hs_test_env *env = *state;
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/models/heads/stories260K", HS_SOURCE_DIR);
    snprintf(path, sizeof path, "%s/golden.json", dir);
    char *text = NULL;
    HS_CHECK(hs_cli_read_text(path, &text));
    cJSON *g = cJSON_Parse(text);
    free(text);
    assert_non_null(g);
    int32_t tokens[MAX_TOKENS], layers[HS_LLAMA_TAPS];
    const int nt = json_ints(cJSON_GetObjectItem(g, "tokens"), tokens, MAX_TOKENS);
    assert_int_equal(json_ints(cJSON_GetObjectItem(g, "tap_layers"), layers, HS_LLAMA_TAPS), HS_LLAMA_TAPS);
    const int rows = (int)cJSON_GetObjectItem(g, "consumed_rows")->valuedouble;
    const cJSON *chain = cJSON_GetObjectItem(g, "chain");
    const int depth = cJSON_GetArraySize(chain);
    assert_true(rows >= 1 && rows + 1 == nt && depth >= 1 && depth <= MAX_CHAIN);
    const int k = cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "root"), "top_ids"));

    hs_gguf *tg = NULL, *hg = NULL;
    hs_llama *t = NULL;
    hs_eagle3 *h = NULL;
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    HS_CHECK(hs_gguf_open(path, &tg));
    hs_llama_options to = {.n_ctx = 128,
                           .max_batch = 32,
                           .taps = true,
                           .custom_taps = true,
                           .tap_layers = {(uint32_t)layers[0], (uint32_t)layers[1], (uint32_t)layers[2]}};
    HS_CHECK(hs_llama_load(env->ops, tg, &to, &t));
    snprintf(path, sizeof path, "%s/head.gguf", dir);
    HS_CHECK(hs_gguf_open(path, &hg));
    const hs_eagle3_options ho = {
        .max_nodes = MAX_CHAIN, .top_k = (uint32_t)k, .weights = HS_EAGLE3_WEIGHTS_FILE};
    HS_CHECK(hs_eagle3_load(env->ops, hg, t, &ho, &h));

    /* The target's taps of positions 0 .. rows-1; row j pairs them with token j + 1. */
    HS_CHECK(hs_llama_eval(t, tokens, (uint32_t)rows, NULL, true, true, NULL, NULL));
    uint32_t slots[MAX_TOKENS];
    for (int j = 0; j < rows; j++)
        slots[j] = (uint32_t)j;
    const hs_topk_result *root = NULL;
    HS_CHECK(hs_eagle3_consume(h, slots, tokens + 1, (uint32_t)rows, &root));
    hs_topk_result prev = *root;
    check_node(&prev, cJSON_GetObjectItem(g, "root"), "root");
    for (int d = 1; d <= depth; d++) {
        const cJSON *node = cJSON_GetArrayItem(chain, d - 1);
        const int32_t tok = (int32_t)prev.ids[0];
        assert_int_equal(tok, (int32_t)cJSON_GetObjectItem(node, "token")->valuedouble);
        const uint32_t parent = (uint32_t)(d - 1);
        const hs_topk_result *got = NULL;
        HS_CHECK(hs_eagle3_draft(h, &parent, &tok, 1, &got));
        char what[32];
        snprintf(what, sizeof what, "depth %d", d);
        prev = *got;
        check_node(&prev, node, what);
    }
    hs_eagle3_destroy(h);
    hs_llama_destroy(t);
    hs_gguf_close(hg);
    hs_gguf_close(tg);
    cJSON_Delete(g);
}

static int setup(void **state) { return hs_test_setup_env(state, 0, NULL, NULL); }

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_golden)};
    return hs_test_run_group("head_golden", tests, setup, hs_test_teardown);
}
