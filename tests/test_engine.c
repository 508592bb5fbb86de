/* Tests of host/engine, the generation loop, on stories260K: greedy output
 * against the independently computed golden ids, streaming, stop reasons,
 * repeatable sampling, and clear errors for prompts that do not fit. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "tok_gguf.h"
#include "testutil.h"

typedef struct engine_env {
    hs_test_env base;
    hs_gguf *g;
    hs_tok *tok;
    hs_llama *m;
} engine_env;

static int setup(void **state) {
    if (hs_test_setup(state)) return -1;
    engine_env *e = calloc(1, sizeof *e);
    e->base = *(hs_test_env *)*state;
    free(*state);
    *state = e;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    hs_llama_options opt = {.n_ctx = 512, .max_batch = 64};
    if (hs_gguf_open(path, &e->g) != HS_OK || hs_tok_from_gguf(e->g, &e->tok) != HS_OK ||
        hs_llama_load(e->base.ops, e->g, &opt, &e->m) != HS_OK) {
        fprintf(stderr, "setup: %s\n", hs_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    engine_env *e = *state;
    hs_llama_destroy(e->m);
    hs_tok_destroy(e->tok);
    hs_gguf_close(e->g);
    hs_test_env *base = malloc(sizeof *base);
    *base = e->base;
    free(e);
    *state = base;
    return hs_test_teardown(state);
}

typedef struct stream {
    int32_t ids[256];
    uint32_t n, stop_after; /* 0: never stop */
} stream;

static bool on_token(void *user, int32_t id) {
    stream *s = user;
    if (s->n < 256) s->ids[s->n] = id;
    s->n++;
    return !(s->stop_after && s->n >= s->stop_after);
}

static void test_greedy_matches_golden(void **state) {
    engine_env *e = *state;
    for (int line = 0; line <= 3; line += 3) {
        int32_t prompt[16], ref[512];
        int np = hs_test_golden_ids(line, "prompt_tokens(with BOS)", prompt, 16);
        int ng = hs_test_golden_ids(line + 1, "greedy_generated_ids", ref, 512);
        assert_true(np >= 1 && ng > 100);
        /* The golden run does not stop at EOS; the engine must, and keep
         * nothing after it. */
        int until = 0;
        while (until < ng && !hs_engine_is_end(e->tok, ref[until])) until++;
        stream s = {0};
        hs_gen_params p = hs_gen_default_params();
        p.n_predict = (uint32_t)ng;
        p.on_token = on_token;
        p.user = &s;
        hs_gen_result r;
        HS_CHECK(hs_engine_generate(e->m, e->tok, prompt, (size_t)np, &p, &r));
        assert_int_equal(r.n_gen, until);
        assert_int_equal(r.stop, until < ng ? HS_GEN_STOP_END : HS_GEN_STOP_LIMIT);
        for (uint32_t i = 0; i < r.n_gen; i++)
            if (r.ids[i] != ref[i]) fail_msg("prompt line %d, token %u: got %d, golden %d", line, i, r.ids[i], ref[i]);
        /* The stream saw exactly the kept tokens, in order. */
        assert_int_equal(s.n, r.n_gen);
        assert_memory_equal(s.ids, r.ids, sizeof(int32_t) * (r.n_gen < 256 ? r.n_gen : 256));
        assert_int_equal(r.n_prompt, np);
        hs_gen_result_free(&r);
    }
}

static void test_stop_reasons(void **state) {
    engine_env *e = *state;
    const int32_t prompt[5] = {1, 403, 407, 261, 378};
    hs_gen_params p = hs_gen_default_params();
    hs_gen_result r;
    /* Token limit: n_predict tokens and one target pass fewer. */
    p.n_predict = 7;
    HS_CHECK(hs_engine_generate(e->m, e->tok, prompt, 5, &p, &r));
    assert_int_equal(r.n_gen, 7);
    assert_int_equal(r.stop, HS_GEN_STOP_LIMIT);
    assert_int_equal(r.target_passes, 6);
    hs_gen_result_free(&r);
    /* The caller stops the stream. */
    stream s = {.stop_after = 3};
    p.n_predict = 50;
    p.on_token = on_token;
    p.user = &s;
    HS_CHECK(hs_engine_generate(e->m, e->tok, prompt, 5, &p, &r));
    assert_int_equal(r.n_gen, 3);
    assert_int_equal(r.stop, HS_GEN_STOP_CALLER);
    hs_gen_result_free(&r);
    /* The end token: greedy from BOS ends a story well within 500 tokens.
     * The end token is not kept, and it is what the model predicts after the
     * kept tokens (checked by evaluating them directly). */
    p = hs_gen_default_params();
    p.n_predict = 500;
    const int32_t bos = 1;
    HS_CHECK(hs_engine_generate(e->m, e->tok, &bos, 1, &p, &r));
    assert_int_equal(r.stop, HS_GEN_STOP_END);
    assert_true(r.n_gen > 10 && r.n_gen < 500);
    assert_int_equal(r.target_passes, r.n_gen);
    for (uint32_t i = 0; i < r.n_gen; i++) assert_false(hs_engine_is_end(e->tok, r.ids[i]));
    const uint32_t *amax = NULL;
    hs_llama_reset(e->m);
    HS_CHECK(hs_llama_eval(e->m, &bos, 1, NULL, true, true, NULL, NULL));
    for (uint32_t done = 0; done < r.n_gen; done += 64) {
        uint32_t n = r.n_gen - done < 64 ? r.n_gen - done : 64;
        HS_CHECK(hs_llama_eval(e->m, r.ids + done, n, NULL, true, true, NULL, &amax));
    }
    assert_true(hs_engine_is_end(e->tok, (int32_t)amax[0]));
    hs_gen_result_free(&r);
    /* Zero tokens asked: nothing generated, no pass after the prompt. */
    p = hs_gen_default_params();
    p.n_predict = 0;
    HS_CHECK(hs_engine_generate(e->m, e->tok, prompt, 5, &p, &r));
    assert_int_equal(r.n_gen, 0);
    assert_int_equal(r.target_passes, 0);
    hs_gen_result_free(&r);
}

/* Sampling: the same seed gives the same tokens; another seed other tokens
 * (stories260K at temperature 1 branches within a few tokens). */
static void test_sampling_repeatable(void **state) {
    engine_env *e = *state;
    const int32_t prompt[1] = {1};
    hs_gen_params p = hs_gen_default_params();
    p.n_predict = 40;
    p.sp.temperature = 1.0f;
    hs_gen_result a, b, c;
    p.sp.seed = 11;
    HS_CHECK(hs_engine_generate(e->m, e->tok, prompt, 1, &p, &a));
    HS_CHECK(hs_engine_generate(e->m, e->tok, prompt, 1, &p, &b));
    p.sp.seed = 12;
    HS_CHECK(hs_engine_generate(e->m, e->tok, prompt, 1, &p, &c));
    assert_int_equal(a.n_gen, b.n_gen);
    assert_memory_equal(a.ids, b.ids, sizeof(int32_t) * a.n_gen);
    assert_true(a.n_gen != c.n_gen || memcmp(a.ids, c.ids, sizeof(int32_t) * a.n_gen) != 0);
    hs_gen_result_free(&a);
    hs_gen_result_free(&b);
    hs_gen_result_free(&c);
}

static void test_bad_input(void **state) {
    engine_env *e = *state;
    const int32_t prompt[1] = {1};
    hs_gen_params p = hs_gen_default_params();
    hs_gen_result r;
    assert_int_equal(hs_engine_generate(e->m, e->tok, prompt, 0, &p, &r), HS_ERR_INVALID_ARG);
    assert_null(r.ids);
    p.n_predict = 512; /* 1 + 512 > n_ctx 512 */
    assert_int_equal(hs_engine_generate(e->m, e->tok, prompt, 1, &p, &r), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "exceed the context of 512"));
    assert_null(r.ids);
    p.n_predict = 511;
    p.sp.temperature = 1.0f;
    p.sp.top_p = 2.0f;
    assert_int_equal(hs_engine_generate(e->m, e->tok, prompt, 1, &p, &r), HS_ERR_INVALID_ARG);
    assert_null(r.ids);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_matches_golden),
        cmocka_unit_test(test_stop_reasons),
        cmocka_unit_test(test_sampling_repeatable),
        cmocka_unit_test(test_bad_input),
    };
    return hs_test_run_group("engine", tests, setup, teardown);
}
